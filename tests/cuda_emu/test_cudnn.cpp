// SPDX-License-Identifier: MIT
// The CUDA backend's cuDNN convolutions (cuda_dnn.cpp) on the emulated
// cuDNN (cudnn_emu.cpp): the device takes the path it reports, picks the
// first algorithm its settings allow (workspace, determinism, TF32) by
// cuDNN's heuristics or by timing, and makes a plan and first runs it
// outside any CUDA graph capture, which refuses what timing and cuDNN's
// one-time setup do.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "../helpers.h"
#include "cuda_emu.h"

#if SWITCHYARD_HAVE_CUDNN
namespace {

using sy::Tensor;

bool env_is(const char* name, const char* value) {
  const char* e = std::getenv(name);
  return e && std::string(e) == value;
}
bool own_path() { return env_is("SWITCHYARD_CUDA_CONV", "own"); }
// The NSE bound against a double reference: TF32 (10 mantissa bits) when
// asked for is about 1e-3 relative.
double bound() { return env_is("SWITCHYARD_CUDA_TF32", "1") ? 1e-5 : 1e-10; }

// y = conv(x, w) (NCHW, no bias), in double: the reference.
std::vector<float> conv_ref(const std::vector<float>& x, const std::vector<float>& w,
                            const sy::Conv2dParams& p) {
  const int64_t OH = sy::conv_out_size(p.height, p.kernel[0], p.stride[0], p.padding[0], 1);
  const int64_t OW = sy::conv_out_size(p.width, p.kernel[1], p.stride[1], p.padding[1], 1);
  std::vector<float> y(size_t(p.batch * p.out_channels * OH * OW));
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t k = 0; k < p.out_channels; ++k)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = 0;
          for (int64_t c = 0; c < p.channels; ++c)
            for (int64_t i = 0; i < p.kernel[0]; ++i)
              for (int64_t j = 0; j < p.kernel[1]; ++j) {
                const int64_t h = oh * p.stride[0] - p.padding[0] + i;
                const int64_t v = ow * p.stride[1] - p.padding[1] + j;
                if (h < 0 || h >= p.height || v < 0 || v >= p.width) continue;
                s += double(x[size_t(((n * p.channels + c) * p.height + h) * p.width + v)]) *
                     w[size_t(((k * p.channels + c) * p.kernel[0] + i) * p.kernel[1] + j)];
              }
          y[size_t(((n * p.out_channels + k) * OH + oh) * OW + ow)] = float(s);
        }
  return y;
}

TEST(CudnnEmu, DeviceReportsThePathItTakes) {
  sy::BackendDevice& d = sy::backend_device(cuda_test_device());
  const std::string conv = device_property(d, "convolution");
  if (own_path()) {
    EXPECT_EQ(conv.rfind("own implicit GEMM", 0), 0u) << conv;
    EXPECT_EQ(device_property(d, "conv_weight_gradient"), "");
  } else {
    EXPECT_EQ(conv.rfind("cuDNN 9.", 0), 0u) << conv;
    EXPECT_NE(conv.find("(emulated)"), std::string::npos) << conv;
    EXPECT_EQ(device_property(d, "conv_weight_gradient"), "whole")
        << "cuDNN sums the weight gradient over the batch itself";
  }
}

TEST(CudnnEmu, ATrainingStepRunsTheFastestAlgorithmTheSettingsAllow) {
  sy::BackendDevice& d = sy::backend_device(cuda_test_device());
  int runs[3];
  for (int j = 0; j < 3; ++j) runs[j] = sy_emu::cudnn_runs[j];
  // Forward with the bias and a ReLU after it, both gradients; against the
  // CPU's, which has no cuDNN.
  auto step = [](sy::Device& dev, std::vector<std::vector<float>>* grads) {
    Tensor x = sy::from_vector(random_vec(2 * 3 * 9 * 8, 71), {2, 3, 9, 8}, dev);
    Tensor w = sy::from_vector(random_vec(5 * 3 * 3 * 3, 72), {5, 3, 3, 3}, dev);
    Tensor b = sy::from_vector(random_vec(5, 73), {5}, dev);
    for (Tensor* t : {&x, &w, &b}) t->requires_grad_();
    Tensor y = sy::relu(sy::conv2d(x, w, b, 1, 1));
    Tensor l = sy::sum(y * y);
    l.backward();
    *grads = {y.to_vector<float>(), x.grad().to_vector<float>(), w.grad().to_vector<float>(),
              b.grad().to_vector<float>()};
  };
  std::vector<std::vector<float>> got, want;
  step(d, &got);
  step(sy::backend_device("cpu"), &want);
  for (size_t i = 0; i < want.size(); ++i) {
    std::vector<double> ref(want[i].begin(), want[i].end());
    EXPECT_LT(nse(got[i], ref), bound()) << "output " << i;
  }
  if (own_path()) {
    for (int j = 0; j < 3; ++j) EXPECT_EQ(sy_emu::cudnn_runs[j], runs[j]) << "direction " << j;
    return;
  }
  for (int j = 0; j < 3; ++j) EXPECT_GT(sy_emu::cudnn_runs[j], runs[j]) << "direction " << j;
  const bool tf32 = env_is("SWITCHYARD_CUDA_TF32", "1");
  // The emulated algorithms, fastest first (cudnn_emu.cpp): forward 6 (more
  // workspace than the device's), 7 (TF32), 1; backward data 5 (workspace),
  // 0 (nondeterministic), 1; backward filter 3 (nondeterministic), 5 (TF32), 1.
  const bool any = env_is("SWITCHYARD_CUDNN_DETERMINISTIC", "0");
  // (The emulation ranks the same in its heuristics and its timing.)
  EXPECT_EQ(sy_emu::cudnn_last_algo[0], tf32 ? 7 : 1);
  EXPECT_EQ(sy_emu::cudnn_last_algo[1], any ? 0 : 1);
  EXPECT_EQ(sy_emu::cudnn_last_algo[2], any ? 3 : tf32 ? 5 : 1);
}

TEST(CudnnEmu, PlansAreMadeAndFirstRunOutsideGraphCaptures) {
  sy::BackendDevice& d = sy::backend_device(cuda_test_device());
  // One Program id, the same kernel at five heights, each run twice: the
  // first run of a new height comes when the Program's kernels are known,
  // so it would be a capture (a graph's shape is its kernels). Its plan is
  // made, and its algorithm first run, by an eager run instead (the
  // emulated cuDNN fails an algorithm's first run on a shape inside a
  // capture); the second run is captured. Five such eager runs: none counts
  // as a failed capture (three would leave the Program eager for good).
  auto geometry = [](int64_t h) {
    return sy::Conv2dParams{.batch = 2,
                            .channels = 3,
                            .height = h,
                            .width = 6,
                            .out_channels = 4,
                            .groups = 1,
                            .kernel = {3, 3},
                            .stride = {1, 1},
                            .padding = {1, 1},
                            .dilation = {1, 1}};
  };
  const int timed = sy_emu::cudnn_timed_queries, guessed = sy_emu::cudnn_heuristic_queries;
  const uint64_t made = d.counters().command_recordings + d.counters().command_updates;
  for (int64_t h : {5, 7, 9, 11, 13}) {
    const sy::Conv2dParams p = geometry(h);
    const uint64_t xn = uint64_t(2 * 3 * h * 6), wn = 4 * 3 * 9, yn = uint64_t(2 * 4 * h * 6);
    const auto xv = random_vec(size_t(xn), 81), wv = random_vec(size_t(wn), 82);
    const auto want = conv_ref(xv, wv, p);
    const std::vector<double> ref(want.begin(), want.end());
    sy::Buffer x = d.allocate(xn * 4), w = d.allocate(wn * 4), y = d.allocate(yn * 4);
    d.upload(x, 0, xv.data(), xn * 4);
    d.upload(w, 0, wv.data(), wn * 4);
    sy::Program prog = one_launch(0x5eed0c0d, sy::Kernel::conv2d, p, {yn * 4, xn * 4, wn * 4});
    sy::Binding b[3] = {{y, 0}, {x, 0}, {w, 0}};
    for (int run = 0; run < 2; ++run) {
      d.execute(prog, b);
      std::vector<float> got(yn);
      d.download(y, 0, got.data(), yn * 4);
      d.synchronize();
      EXPECT_LT(nse(got, ref), bound()) << "height " << h << ", run " << run;
    }
    for (sy::Buffer t : {x, w, y}) d.release(t);
  }
  const int queries = sy_emu::cudnn_timed_queries + sy_emu::cudnn_heuristic_queries;
  if (own_path()) {
    EXPECT_EQ(queries, timed + guessed);
    return;
  }
  EXPECT_EQ(queries, timed + guessed + 5) << "one plan a height";
  // Heuristics unless timing is asked for (the same choice every run).
  const bool benchmark = env_is("SWITCHYARD_CUDNN_BENCHMARK", "1");
  EXPECT_EQ(sy_emu::cudnn_timed_queries, timed + (benchmark ? 5 : 0));
  if (env_is("SWITCHYARD_CUDA_GRAPHS", "0")) return;  // every run eager
  // (the first run of height 5 is eager anyway: the Program's first.)
  EXPECT_EQ(d.counters().command_recordings + d.counters().command_updates, made + 5)
      << "each height's second run is captured (a new graph or an update)";
}

}  // namespace
#endif  // SWITCHYARD_HAVE_CUDNN
