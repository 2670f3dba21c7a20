// SPDX-License-Identifier: MIT
// Sample 2: create tensors on a device, move existing ones and a whole model
// with .to(device), and read results back.
#include <cstdio>
#include <iostream>

#include "mlp.h"
#include "switchyard/switchyard.h"

namespace sy = switchyard;

int main() {
  sy::Device& dev = sy::default_device();
  sy::manual_seed(0);

  // Created directly on the device (torch.randn(2, 3, device=dev)).
  sy::Tensor a = sy::randn({2, 3}, dev);
  // Created on the cpu, then moved (t.to(dev)).
  sy::Tensor b = sy::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}).to(dev);
  // Ops run where their inputs live; nothing is computed until it is needed.
  sy::Tensor c = sy::relu(a * b + 1.f);
  std::cout << "c = " << c << "\n";
  std::printf("sum(c) = %.4f\n", sy::sum(c).item());

  // A whole model moves with model.to(dev): parameters keep their identity.
  auto model = sy::models::mlp({3, 8, 2});
  model->to(dev);
  sy::Tensor logits = (*model)(c);
  std::cout << "logits = " << logits << "\n";
  for (auto& [name, p] : model->named_parameters())
    std::printf("  %-10s %-8s on %s\n", name.c_str(), sy::shape_str(p.shape()).c_str(),
                p.device().str().c_str());

  // Back to the host.
  std::vector<float> host = logits.to(sy::cpu()).to_vector<float>();
  std::printf("%zu values back on the host\n", host.size());
  return 0;
}
