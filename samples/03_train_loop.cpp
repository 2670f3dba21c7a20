// SPDX-License-Identifier: MIT
// Sample 3: the everyday PyTorch training loop, in C++. Each DataLoader batch
// is moved to the device; the model and optimizer live there.
//   usage: 03_train_loop [DATA_DIR] [EPOCHS] [LIMIT]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "mlp.h"
#include "switchyard/switchyard.h"

namespace sy = switchyard;

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : sy::data::FashionMNIST::kDefaultDir;
  int epochs = argc > 2 ? std::atoi(argv[2]) : 1;
  int64_t limit = argc > 3 ? std::atoll(argv[3]) : 10000;
  try {
    sy::Device& dev = sy::default_device();
    sy::manual_seed(0);

    auto train = std::make_shared<sy::data::FashionMNIST>(dir, /*train=*/true, limit);
    auto test = std::make_shared<sy::data::FashionMNIST>(dir, /*train=*/false, 2000);
    sy::data::DataLoader loader(train, {.batch_size = 64, .shuffle = true, .seed = 0});

    auto model = sy::models::mlp({784, 256, 128, 10});
    model->to(dev);
    sy::optim::Adam opt(model->parameters(), 1e-3f);

    for (int epoch = 1; epoch <= epochs; ++epoch) {
      double total = 0;
      int64_t n = 0;
      for (const auto& batch : loader) {
        sy::Tensor x = batch.data.to(dev), y = batch.target.to(dev);
        opt.zero_grad();
        sy::Tensor loss = sy::cross_entropy((*model)(x), y);
        loss.backward();
        opt.step();
        total += loss.item() * double(x.size(0));  // one submission per step
        n += x.size(0);
      }
      // Evaluation without autograd.
      sy::NoGradGuard no_grad;
      sy::data::DataLoader test_loader(test, {.batch_size = 500, .shuffle = false});
      int64_t correct = 0, seen = 0;
      for (const auto& batch : test_loader) {
        auto pred = sy::argmax((*model)(batch.data.to(dev))).to_vector<int32_t>();
        auto truth = batch.target.to_vector<int32_t>();
        for (size_t i = 0; i < pred.size(); ++i) correct += pred[i] == truth[i];
        seen += int64_t(pred.size());
      }
      std::printf("epoch %d on %s: loss %.4f, test accuracy %.4f\n", epoch, dev.str().c_str(),
                  total / double(n), double(correct) / double(seen));
    }
    return 0;
  } catch (const sy::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
