// SPDX-License-Identifier: MIT
// PyTorch's C++ frontend (libtorch) training the same CNN as models/cnn.h,
// for bench/compare_libtorch_cnn.sh: the same layers and initialization
// scheme, Adam 1e-3, one synthetic batch in memory, the loss read back every
// step (as `switchyard bench --ops model` does). Prints one JSON line.
//   torch_cnn [--threads N] [--batch N] [--steps N]
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  int threads = 1, steps = 30;
  int64_t batch = 128;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--batch")) batch = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[i + 1]);
  }
  torch::set_num_threads(threads);
  torch::manual_seed(1);
  namespace nn = torch::nn;
  nn::Sequential m(
      nn::Unflatten(nn::UnflattenOptions(1, {1, 28, 28})),
      nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1).bias(false)), nn::BatchNorm2d(32),
      nn::ReLU(), nn::MaxPool2d(2), nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1).bias(false)),
      nn::BatchNorm2d(64), nn::ReLU(), nn::MaxPool2d(2),
      nn::Conv2d(nn::Conv2dOptions(64, 128, 3).padding(1).bias(false)), nn::BatchNorm2d(128),
      nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(), nn::Dropout(0.25), nn::Linear(1152, 128),
      nn::ReLU(), nn::Dropout(0.25), nn::Linear(128, 10));
  m->train();
  torch::optim::Adam opt(m->parameters(), torch::optim::AdamOptions(1e-3));
  auto x = torch::rand({batch, 784});
  auto y = torch::randint(0, 10, {batch}, torch::kLong);
  auto step = [&] {
    opt.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(m->forward(x), y);
    loss.backward();
    opt.step();
    return loss.item<float>();
  };
  for (int i = 0; i < 3; ++i) step();  // warm-up
  auto t0 = std::chrono::steady_clock::now();
  float last = 0;
  for (int i = 0; i < steps; ++i) last = step();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "{\"impl\":\"libtorch\",\"threads\":%d,\"batch\":%lld,\"steps\":%d,"
      "\"samples_per_s\":%.1f,\"last_loss\":%.4f}\n",
      threads, (long long)batch, steps, double(steps * batch) / s, last);
  return 0;
}
