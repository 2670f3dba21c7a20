// SPDX-License-Identifier: MIT
// The layer workloads of `switchyard bench` (workload.h).
#include <algorithm>
#include <cstring>
#include <memory>

#include "cnn.h"
#include "switchyard/optim.h"
#include "switchyard/switchyard.h"
#include "workload.h"

namespace switchyard::bench {

namespace {

// vec4 loads and stores in a grid-stride loop, as a user would write it.
constexpr const char* kReluGlsl = R"(
struct Params { uint quads; };
SY_PARAMS(Params)
SY_OUTPUT(0, vec4, y)
SY_INPUT(1, vec4, x)
void main() {
  for (uint i = gl_GlobalInvocationID.x; i < params.quads; i += gl_NumWorkGroups.x * SY_WG_X)
    y[i] = max(x[i], vec4(0.0));
}
)";
constexpr const char* kReluCuda = R"(
struct Params { unsigned quads; };
extern "C" __global__ void custom_relu(float4* y, const float4* x, Params p) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < p.quads; i += gridDim.x * blockDim.x) {
    float4 v = x[i];
    y[i] = make_float4(fmaxf(v.x, 0.f), fmaxf(v.y, 0.f), fmaxf(v.z, 0.f), fmaxf(v.w, 0.f));
  }
}
)";
struct ReluParams {
  uint32_t quads;
};

const CustomKernel& custom_relu() {
  static const CustomKernel k({
      .name = "custom_relu",
      .glsl = kReluGlsl,
      .cuda = kReluCuda,
      .cpu =
          [](const CpuKernelArgs& a) {
            const auto& p = *static_cast<const ReluParams*>(a.params);
            auto* y = static_cast<float*>(a.outputs[0]);
            const auto* x = static_cast<const float*>(a.inputs[0]);
            for (size_t i = 0; i < size_t(p.quads) * 4; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
          },
      .inputs = {{"x"}},
      .outputs = {{"y"}},
      .params_bytes = sizeof(ReluParams),
      .grid_stride = true,
  });
  return k;
}

}  // namespace

Instr custom_relu_launch(BackendDevice& d, int64_t n) {
  custom_relu().compile(d);
  Grid g = Grid::cover(n / 4, custom_relu().spec().workgroup[0]);
  g.x = std::min(g.x, d.grid_stride_workgroups());  // as a launch would (grid_stride)
  CustomParams p{.id = custom_relu().id(), .outputs = 1, .grid = {g.x, g.y, g.z}};
  const ReluParams rp{uint32_t(n / 4)};
  std::memcpy(&p.w0, &rp, sizeof rp);
  Instr i;
  i.kernel = Kernel::custom;
  i.params = p;
  return i;
}

std::vector<Workload> conv_workloads() {
  std::vector<Workload> w;
  // The CNN's (models/cnn.h) three convolutions at batch 128: 3x3, padding 1.
  // Forward, and a training step's forward + backward (input and weight
  // gradients: three times the forward's FLOP; the first layer's input
  // gradient is skipped, as training skips it).
  struct Cv {
    std::string name;
    int64_t N, C, H, OC;
    bool input_grad;
  };
  for (const Cv& c : std::vector<Cv>{{"conv1 128x1x28x28 -> 32", 128, 1, 28, 32, false},
                                     {"conv2 128x32x14x14 -> 64", 128, 32, 14, 64, true},
                                     {"conv3 128x64x7x7 -> 128", 128, 64, 7, 128, true}})
    for (bool backward : {false, true}) {
      const double fwd = 2.0 * double(c.N * c.OC * c.H * c.H * c.C * 9);
      const double work = backward ? fwd * (c.input_grad ? 3 : 2) : fwd;
      w.push_back({"conv", std::string(backward ? "fwd+bwd " : "fwd ") + c.name, "GFLOP/s", 1e-9, 0,
                   [](BackendDevice&) { return true; },
                   [c, backward, work](BackendDevice& d) {
                     manual_seed(2);
                     Tensor x = rand({c.N, c.C, c.H, c.H}, Options(d));
                     Tensor wt = randn({c.OC, c.C, 3, 3}, Options(d)).requires_grad_();
                     if (backward && c.input_grad) x.requires_grad_();
                     Tensor g = rand({c.N, c.OC, c.H, c.H}, Options(d));
                     Prepared p;
                     p.work = work;
                     p.run = [=, &d]() mutable {
                       if (!backward) {
                         NoGradGuard ng;
                         eval({conv2d(x, wt, Tensor(), 1, 1)});
                       } else {
                         wt.zero_grad();
                         if (c.input_grad) x.zero_grad();
                         sum(conv2d(x, wt, Tensor(), 1, 1) * g).backward();
                         std::vector<Tensor> grads{wt.grad()};
                         if (c.input_grad) grads.push_back(x.grad());
                         eval(grads);
                       }
                       synchronize(d);
                     };
                     return p;
                   }});
    }
  return w;
}

std::vector<Workload> cnn_workloads() {
  std::vector<Workload> w;
  // The CNN: FLOP per sample from its convolutions and linear layers, the
  // training step three times the forward's less the first layer's input
  // gradient.
  const double conv1 = 2.0 * 32 * 784 * 9, conv2 = 2.0 * 64 * 196 * 288;
  const double conv3 = 2.0 * 128 * 49 * 576, fc = 2.0 * (1152 * 128 + 128 * 10);
  const double fwd_flop = conv1 + conv2 + conv3 + fc, train_flop = 3 * fwd_flop - conv1;
  constexpr int64_t batch = 128;  // a constant: used in the lambda without capture
  w.push_back({"model", "cnn train step batch 128", "samples/s", 1.0, train_flop,
               [](BackendDevice&) { return true; },
               [](BackendDevice& d) {
                 manual_seed(1);
                 auto model = models::cnn();
                 model->to(d);
                 auto opt = std::make_shared<optim::Adam>(model->parameters(), 1e-3f);
                 Tensor x = rand({batch, 784}, Options(d));
                 Tensor y = randint(0, 10, {batch}, Options(d));
                 Prepared p;
                 p.work = double(batch);
                 p.run = [model, opt, x, y] {
                   opt->zero_grad();
                   Tensor loss = cross_entropy((*model)(x), y);
                   loss.backward();
                   opt->step();
                   (void)loss.item();
                 };
                 return p;
               }});
  return w;
}

}  // namespace switchyard::bench
