// SPDX-License-Identifier: MIT
// classify: load a model file (switchyard train --save model.safetensors),
// classify the Fashion-MNIST test set on the best device, and time one image
// at a time on every device. Built against an installed Switchyard.
//   usage: classify MODEL.safetensors [DATA_DIR] [LATENCY_IMAGES]
#include <switchyard/switchyard.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

namespace sy = switchyard;

// Test accuracy in batches of 1000, as `switchyard eval` computes it.
static double accuracy(sy::nn::Module& model, const sy::data::Dataset& test, sy::Device& dev) {
  sy::NoGradGuard no_grad;
  sy::data::DataLoader loader(std::shared_ptr<const sy::data::Dataset>(&test, [](auto*) {}),
                              {.batch_size = 1000, .shuffle = false});
  int64_t correct = 0, seen = 0;
  for (const auto& b : loader) {
    auto pred = sy::argmax(model(b.data.to(dev))).to_vector<int32_t>();
    auto truth = b.target.to_vector<int32_t>();
    for (size_t i = 0; i < pred.size(); ++i) correct += pred[i] == truth[i];
    seen += int64_t(pred.size());
  }
  return seen ? double(correct) / double(seen) : 0.0;
}

// Median milliseconds to classify one image (upload, forward, read back).
static double latency_ms(sy::nn::Module& model, const sy::data::Dataset& test, sy::Device& dev,
                         int images) {
  sy::NoGradGuard no_grad;
  std::vector<double> ms;
  for (int i = 0; i < images + 5; ++i) {  // the first 5 warm up
    const int64_t at = int64_t(i) % test.size();
    sy::Tensor host = test.get_batch(std::span<const int64_t>(&at, 1)).data;  // (1, 784)
    auto t0 = std::chrono::steady_clock::now();
    sy::Tensor x = host.to(dev);
    (void)sy::argmax(model(x)).to_vector<int32_t>();
    auto t1 = std::chrono::steady_clock::now();
    if (i >= 5) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::nth_element(ms.begin(), ms.begin() + long(ms.size() / 2), ms.end());
  return ms[ms.size() / 2];
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.safetensors [DATA_DIR] [LATENCY_IMAGES]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const std::string dir = argc > 2 ? argv[2] : sy::data::FashionMNIST::kDefaultDir;
  const int images = argc > 3 ? std::atoi(argv[3]) : 200;
  try {
    std::printf("Switchyard %s (headers %s)\n", sy::version(), SWITCHYARD_VERSION);
    sy::data::FashionMNIST test(dir, /*train=*/false);
    sy::Device& best = sy::default_device();
    auto model = sy::nn::load(path, best);
    model->train(false);
    std::printf("test accuracy on %s: %.4f (%lld images)\n", best.str().c_str(),
                accuracy(*model, test, best), (long long)test.size());
    for (sy::Device* d : sy::devices()) {
      model->to(*d);
      std::printf("latency on %s: %.3f ms per image (median of %d)\n", d->str().c_str(),
                  latency_ms(*model, test, *d, images), images);
    }
    return 0;
  } catch (const sy::Error& e) {
    std::fprintf(stderr, "classify: %s\n", e.what());
    return 1;
  }
}
