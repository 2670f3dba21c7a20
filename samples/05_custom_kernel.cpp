// SPDX-License-Identifier: MIT
// Sample 5: a custom kernel. A fused bias + SiLU written once per backend
// (GLSL for Vulkan, CUDA C++ for CUDA, a C++ function for the CPU; see
// bias_silu.h), its gradient checked against finite differences, then used
// inside a model trained on Fashion-MNIST like any built-in op: compiled at
// its first launch (or loaded from the disk cache), recorded into the step's
// single submission, differentiated through its own backward kernel.
//   usage: 05_custom_kernel [DATA_DIR] [EPOCHS] [LIMIT]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bias_silu.h"
#include "switchyard/switchyard.h"

namespace sy = switchyard;

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : sy::data::FashionMNIST::kDefaultDir;
  int epochs = argc > 2 ? std::atoi(argv[2]) : 1;
  int64_t limit = argc > 3 ? std::atoll(argv[3]) : 10000;
  try {
    sy::Device& dev = sy::default_device();
    sy::manual_seed(0);

    // 1. The gradient: the kernel's backward against central differences.
    sy::Tensor x = sy::randn({8, 16}, dev).requires_grad_();
    sy::Tensor b = sy::randn({16}, dev).requires_grad_();
    sy::GradcheckResult check = sy::gradcheck(
        [](const std::vector<sy::Tensor>& in) { return bias_silu::apply(in[0], in[1]); }, {x, b});
    std::printf("gradcheck of bias_silu on %s: %s (max error %.2g)\n", dev.str().c_str(),
                check.ok ? "ok" : "FAILED", check.max_abs_error);
    if (!check.ok) {
      std::fprintf(stderr, "%s", check.report.c_str());
      return 1;
    }

    // 2. The kernel inside a model: Linear (no bias) -> bias + SiLU -> Linear.
    auto model = std::make_shared<sy::nn::Sequential>();
    model->add(std::make_shared<sy::nn::Linear>(784, 256, /*bias=*/false));
    model->add(std::make_shared<bias_silu::BiasSiLU>(256));
    model->add(std::make_shared<sy::nn::Linear>(256, 10));
    model->to(dev);
    sy::optim::Adam opt(model->parameters(), 1e-3f);

    auto train = std::make_shared<sy::data::FashionMNIST>(dir, /*train=*/true, limit);
    auto test = std::make_shared<sy::data::FashionMNIST>(dir, /*train=*/false, 2000);
    sy::data::DataLoader loader(train, {.batch_size = 64, .shuffle = true, .seed = 0});
    for (int epoch = 1; epoch <= epochs; ++epoch) {
      double total = 0;
      int64_t n = 0;
      for (const auto& batch : loader) {
        sy::Tensor xb = batch.data.to(dev), yb = batch.target.to(dev);
        opt.zero_grad();
        sy::Tensor loss = sy::cross_entropy((*model)(xb), yb);
        loss.backward();
        opt.step();
        total += loss.item() * double(xb.size(0));
        n += xb.size(0);
      }
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
    const sy::CustomKernelStats s = sy::custom_kernel_stats();
    std::printf(
        "custom kernels: %llu compiled (%.0f ms), %llu loaded from the disk cache (%s)\n",
        static_cast<unsigned long long>(s.compiles), s.compile_seconds * 1e3,
        static_cast<unsigned long long>(s.disk_hits),
        sy::custom_kernel_cache_dir().empty() ? "off" : sy::custom_kernel_cache_dir().c_str());
    return 0;
  } catch (const sy::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
