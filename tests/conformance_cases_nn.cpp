// SPDX-License-Identifier: MIT
// Conformance cases of the layer kernels (conformance_util.h): swap_axes,
// im2col and col2im, the convolutions (forward, input and weight gradients) over geometries
// with every option (groups, depthwise, bias, a fused ReLU, split weight
// gradients, tiles past 128 rows), max and
// average pooling forward and backward (ties, padding in the divisor or
// not), batch norm's per-channel passes and coefficients, and embedding's gather and its
// ordered scatter-add.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>

#include "conformance_util.h"

using sy::Kernel;

namespace conformance {
namespace {

// Convolution geometries: odd sizes, strides, padding, dilation, groups
// (depthwise too), a kernel as large as the image, 1x1 kernels, the CNN's
// own shapes, and more output channels than one GPU tile holds.
struct ConvGeom {
  std::string name;
  int64_t n, c, h, w, oc, g, k0, k1, s0, s1, p0, p1, d0, d1, oh = 0, ow = 0;
  template <class P>
  P params() const {
    P p{};
    p.batch = n, p.channels = c, p.height = h, p.width = w, p.out_channels = oc, p.groups = g;
    p.kernel[0] = k0, p.kernel[1] = k1, p.stride[0] = s0, p.stride[1] = s1;
    p.padding[0] = p0, p.padding[1] = p1, p.dilation[0] = d0, p.dilation[1] = d1;
    return p;
  }
  // The im2col lowering's params (no channel split: the whole input).
  template <class P>
  P cols_params() const {
    return P{.batch = n,
             .channels = c,
             .height = h,
             .width = w,
             .kernel = {k0, k1},
             .stride = {s0, s1},
             .padding = {p0, p1},
             .dilation = {d0, d1},
             .out_h = oh,
             .out_w = ow};
  }
  // x, weight and y element indices.
  int64_t xi(int64_t s, int64_t ch, int64_t ih, int64_t iw) const {
    return ((s * c + ch) * h + ih) * w + iw;
  }
  int64_t wi(int64_t o, int64_t ci, int64_t kh, int64_t kw) const {
    return ((o * (c / g) + ci) * k0 + kh) * k1 + kw;
  }
  int64_t yi(int64_t s, int64_t o, int64_t y, int64_t x) const {
    return ((s * oc + o) * oh + y) * ow + x;
  }
  // Every (y, x, w) triple of the convolution: f(y index, x index, w index,
  // the flattened (sample, pixel) position), in the order of the sum.
  template <class F>
  void each_tap(F f) const {
    const int64_t cg = c / g, ocg = oc / g;
    for (int64_t s = 0; s < n; ++s)
      for (int64_t o = 0; o < oc; ++o)
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t x = 0; x < ow; ++x)
            for (int64_t ci = 0; ci < cg; ++ci)
              for (int64_t kh = 0; kh < k0; ++kh)
                for (int64_t kw = 0; kw < k1; ++kw) {
                  const int64_t ih = y * s0 - p0 + kh * d0, iw = x * s1 - p1 + kw * d1;
                  if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
                  f(yi(s, o, y, x), xi(s, o / ocg * cg + ci, ih, iw), wi(o, ci, kh, kw),
                    (s * oh + y) * ow + x);
                }
  }
};
std::vector<ConvGeom> conv_geometries() {
  std::vector<ConvGeom> gs = {{"", 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1},
                              {"", 2, 3, 7, 5, 4, 1, 3, 3, 1, 1, 1, 1, 1, 1},
                              {"", 3, 2, 9, 11, 5, 1, 3, 2, 2, 1, 0, 1, 1, 1},
                              {"", 2, 4, 10, 10, 6, 2, 3, 3, 1, 2, 2, 1, 2, 1},
                              {"", 1, 3, 28, 28, 8, 1, 5, 5, 1, 1, 2, 2, 1, 1},
                              {"", 4, 16, 14, 14, 32, 1, 3, 3, 1, 1, 1, 1, 1, 1},
                              {"", 2, 1, 5, 5, 3, 1, 5, 5, 1, 1, 0, 0, 1, 1},
                              {"", 1, 2, 4, 6, 4, 2, 1, 1, 2, 3, 0, 0, 1, 1},
                              {"", 2, 6, 9, 9, 6, 6, 3, 3, 2, 2, 1, 1, 1, 1},
                              {"", 2, 40, 8, 8, 130, 1, 3, 3, 1, 1, 1, 1, 1, 1},
                              // 1,728 positions: a weight gradient asked for in one
                              // sum that CUDA's own kernel still splits (k_conv.cu)
                              {"", 3, 2, 24, 24, 3, 1, 3, 3, 1, 1, 1, 1, 1, 1}};
  for (auto& g : gs) {
    g.oh = (g.h + 2 * g.p0 - g.d0 * (g.k0 - 1) - 1) / g.s0 + 1;
    g.ow = (g.w + 2 * g.p1 - g.d1 * (g.k1 - 1) - 1) / g.s1 + 1;
    g.name = sz({g.n, g.c, g.h, g.w}) + " oc" + std::to_string(g.oc) + " g" + std::to_string(g.g) +
             " k" + sz({g.k0, g.k1}) + " s" + sz({g.s0, g.s1}) + " p" + sz({g.p0, g.p1}) + " d" +
             sz({g.d0, g.d1});
  }
  return gs;
}

struct PoolGeom {
  std::string name;
  int64_t planes, h, w, k0, k1, s0, s1, p0, p1, oh = 0, ow = 0;
  template <class P>
  P params() const {
    P p;
    p.planes = planes, p.height = h, p.width = w, p.out_h = oh, p.out_w = ow;
    p.kernel[0] = k0, p.kernel[1] = k1, p.stride[0] = s0, p.stride[1] = s1;
    p.padding[0] = p0, p.padding[1] = p1;
    return p;
  }
};
std::vector<PoolGeom> pool_geometries() {
  std::vector<PoolGeom> gs = {{"", 1, 1, 1, 1, 1, 1, 1, 0, 0},   {"", 3, 28, 28, 2, 2, 2, 2, 0, 0},
                              {"", 2, 7, 9, 3, 3, 2, 2, 1, 1},   {"", 5, 14, 14, 3, 3, 1, 1, 1, 1},
                              {"", 2, 5, 6, 2, 3, 1, 2, 0, 1},   {"", 1, 17, 17, 4, 4, 3, 3, 2, 2},
                              {"", 8, 13, 11, 3, 2, 3, 1, 1, 0}, {"", 300, 4, 4, 2, 2, 2, 2, 0, 0},
                              {"", 6, 7, 9, 2, 2, 2, 2, 0, 0}};
  for (auto& g : gs) {
    g.oh = (g.h + 2 * g.p0 - g.k0) / g.s0 + 1;
    g.ow = (g.w + 2 * g.p1 - g.k1) / g.s1 + 1;
    g.name = sz({g.planes, g.h, g.w}) + " k" + sz({g.k0, g.k1}) + " s" + sz({g.s0, g.s1}) + " p" +
             sz({g.p0, g.p1});
  }
  return gs;
}

}  // namespace

std::vector<Case> layer_cases(Kernel k) {
  std::vector<Case> cs;
  switch (k) {
    case Kernel::embedding:
    case Kernel::embedding_backward:
      // (n indices, num rows, dim, backward ranges): one row; ranges that do
      // not divide the rows; as many ranges as rows; wide rows; many repeats.
      for (auto [n, num, dim, ranges] : std::vector<std::array<int64_t, 4>>{{1, 1, 1, 1},
                                                                            {5, 3, 4, 1},
                                                                            {50, 7, 33, 3},
                                                                            {200, 1000, 64, 1000},
                                                                            {64, 10, 257, 4},
                                                                            {300, 4, 5, 2}}) {
        std::vector<int32_t> idx(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) idx[size_t(i)] = int32_t((i * 7919 + 13) % num);
        const sy::EmbeddingParams p{.n = n, .num = num, .dim = dim, .ranges = ranges};
        const std::string name = sz({n, num, dim}) + " r" + std::to_string(ranges);
        if (k == Kernel::embedding) {
          auto w = random_vec(size_t(num * dim), 47);
          std::vector<double> e(size_t(n * dim));
          for (int64_t i = 0; i < n; ++i)
            for (int64_t d = 0; d < dim; ++d)
              e[size_t(i * dim + d)] = w[size_t(idx[size_t(i)] * dim + d)];
          cs.push_back(make(name, {outf(e), f32(w), i32(idx)}, p));
        } else {
          auto dy = random_vec(size_t(n * dim), 48);
          std::vector<double> e(size_t(num * dim), 0.0);
          for (int64_t i = 0; i < n; ++i)
            for (int64_t d = 0; d < dim; ++d)
              e[size_t(idx[size_t(i)] * dim + d)] += dy[size_t(i * dim + d)];
          cs.push_back(make(name, {outf(e), f32(dy), i32(idx)},
                            std::bit_cast<sy::EmbeddingBackwardParams>(p)));
        }
      }
      break;
    case Kernel::channel_stats:
    case Kernel::channel_sums:
    case Kernel::channel_affine:
      for (auto [O, C, E] : std::vector<std::array<int64_t, 3>>{
               {1, 1, 1}, {2, 5, 1}, {4, 3, 10}, {17, 3, 17}, {3, 7, 1000}, {64, 32, 196}}) {
        const size_t n = size_t(O * C * E);
        auto a = random_vec(n, 43, -2.f, 3.f), b = random_vec(n, 44);
        auto at = [&](int64_t o, int64_t c, int64_t e) { return size_t((o * C + c) * E + e); };
        const std::string name = sz({O, C, E});
        auto mean = random_vec(size_t(C), 46, -1.f, 2.f);  // channel_sums' centre
        // A ReLU's output for the fused backward (relu_mask): about half
        // positive, the rest zero.
        auto r = random_vec(n, 47);
        for (auto& v : r) v = v > 0.f ? v : 0.f;
        auto masked = [&](size_t i, bool m) { return m && !(r[i] > 0.f) ? 0.0 : double(a[i]); };
        for (bool m : {false, true}) {
          if (k != Kernel::channel_sums && (m || k != Kernel::channel_stats)) break;
          std::vector<double> e(size_t(2 * C), 0.0);
          for (int64_t c = 0; c < C; ++c) {
            double s = 0, t = 0;
            for (int64_t o = 0; o < O; ++o)
              for (int64_t x = 0; x < E; ++x)
                s += masked(at(o, c, x), m),
                    t += masked(at(o, c, x), m) * (double(b[at(o, c, x)]) - mean[size_t(c)]);
            if (k == Kernel::channel_sums) {
              e[size_t(c)] = s, e[size_t(C + c)] = t;
              continue;
            }
            const double mu = s / double(O * E);
            double v = 0;
            for (int64_t o = 0; o < O; ++o)
              for (int64_t x = 0; x < E; ++x) v += std::pow(a[at(o, c, x)] - mu, 2);
            e[size_t(c)] = mu, e[size_t(C + c)] = v / double(O * E);
          }
          if (k == Kernel::channel_stats)
            cs.push_back(make(name, {outf(e), f32(a)},
                              sy::ChannelStatsParams{.outer = O, .channels = C, .inner = E}));
          else if (!m)
            cs.push_back(make(name, {outf(e), f32(a), f32(b), f32(mean)},
                              sy::ChannelSumsParams{.outer = O, .channels = C, .inner = E}));
          else
            cs.push_back(make(
                name + " relu_mask", {outf(e), f32(a), f32(b), f32(mean), f32(r)},
                sy::ChannelSumsParams{.outer = O, .channels = C, .inner = E, .relu_mask = true}));
        }
        if (k != Kernel::channel_affine) continue;
        // Plain and with b, then the fused ReLU (forward) and its mask
        // (backward) on either.
        for (int variant = 0; variant < 4; ++variant) {
          const bool has_b = variant % 2 == 1, relu = variant == 2, mask = variant == 3;
          auto coef = random_vec(size_t((has_b ? 5 : 3) * C), 45);
          auto k_ = [&](int row, int64_t c) { return double(coef[size_t(row * C + c)]); };
          std::vector<double> e(n);
          for (int64_t o = 0; o < O; ++o)
            for (int64_t c = 0; c < C; ++c)
              for (int64_t x = 0; x < E; ++x) {
                double v = (masked(at(o, c, x), mask) - k_(0, c)) * k_(1, c) + k_(2, c);
                if (has_b) v += (b[at(o, c, x)] - k_(3, c)) * k_(4, c);
                e[at(o, c, x)] = relu ? std::max(v, 0.0) : v;
              }
          const sy::ChannelAffineParams q{.outer = O,
                                          .channels = C,
                                          .inner = E,
                                          .has_b = has_b,
                                          .relu = relu,
                                          .relu_mask = mask};
          const std::string tag =
              std::string(has_b ? " +b" : "") + (relu ? " relu" : "") + (mask ? " relu_mask" : "");
          if (mask)
            cs.push_back(make(name + tag, {outf(e), f32(a), f32(b), f32(coef), f32(r)}, q));
          else
            cs.push_back(make(name + tag, {outf(e), f32(a), f32(b), f32(coef)}, q));
        }
      }
      if (k == Kernel::channel_stats) break;
      // The pooled form (a max pooling of P x P windows, stride P, after the
      // batch norm): a is the pooling's gradient, r its maxima and indices;
      // planes whose sides P does not divide, and a window of the whole plane.
      for (auto [O, C, H, W, P] : std::vector<std::array<int64_t, 5>>{
               {1, 1, 2, 2, 2}, {2, 3, 7, 5, 2}, {4, 8, 28, 28, 2}, {3, 2, 9, 7, 3}}) {
        const int64_t E = H * W, OH = H / P, OW = W / P, PE = OH * OW, n = O * C * PE;
        auto dp = random_vec(size_t(n), 71, -2.f, 3.f), b = random_vec(size_t(O * C * E), 72);
        auto mean = random_vec(size_t(C), 74, -1.f, 2.f), ymax = random_vec(size_t(n), 73);
        std::vector<int32_t> packed(size_t(2 * n));
        for (int64_t j = 0; j < n; ++j) {  // a position in each window
          const int64_t oh = j % PE / OW, ow = j % OW;
          const int64_t h = oh * P + (j * 7 + 3) % P, w = ow * P + (j * 5 + 1) % P;
          std::memcpy(&packed[size_t(j)], &ymax[size_t(j)], 4);
          packed[size_t(n + j)] = int32_t(h * W + w);
        }
        const std::string name = sz({O, C, H, W}) + " pool " + std::to_string(P);
        for (bool m : {false, true}) {
          auto keep = [&](int64_t j) { return !m || ymax[size_t(j)] > 0.f; };
          if (k == Kernel::channel_sums) {
            std::vector<double> e(size_t(2 * C), 0.0);
            for (int64_t r = 0; r < O * C; ++r)
              for (int64_t j = r * PE; j < (r + 1) * PE; ++j) {
                const double v = keep(j) ? dp[size_t(j)] : 0.0, c = double(r % C);
                e[size_t(c)] += v;
                e[size_t(C) + size_t(c)] +=
                    v * (double(b[size_t(r * E + packed[size_t(n + j)])]) - mean[size_t(c)]);
              }
            cs.push_back(make(
                name + (m ? " relu_mask" : ""), {outf(e), f32(dp), f32(b), f32(mean), i32(packed)},
                sy::ChannelSumsParams{
                    .outer = O, .channels = C, .inner = E, .relu_mask = m, .pool = P, .width = W}));
            continue;
          }
          for (bool has_b : {false, true}) {
            auto coef = random_vec(size_t((has_b ? 5 : 3) * C), 45);
            std::vector<double> e(size_t(O * C * E));
            for (int64_t r = 0; r < O * C; ++r)
              for (int64_t q = 0; q < E; ++q) {
                const int64_t c = r % C, oh = q / W / P, ow = q % W / P;
                const int64_t j = (r * OH + oh) * OW + ow;
                const bool hit = oh < OH && ow < OW && packed[size_t(n + j)] == q && keep(j);
                auto k_ = [&](int row) { return double(coef[size_t(row * C + c)]); };
                double v = ((hit ? dp[size_t(j)] : 0.0) - k_(0)) * k_(1) + k_(2);
                if (has_b) v += (b[size_t(r * E + q)] - k_(3)) * k_(4);
                e[size_t(r * E + q)] = v;
              }
            cs.push_back(make(name + (has_b ? " +b" : "") + (m ? " relu_mask" : ""),
                              {outf(e), f32(dp), f32(b), f32(coef), i32(packed)},
                              sy::ChannelAffineParams{.outer = O,
                                                      .channels = C,
                                                      .inner = E,
                                                      .has_b = has_b,
                                                      .relu_mask = m,
                                                      .pool = P,
                                                      .width = W}));
          }
        }
      }
      break;
    case Kernel::batch_norm_coef:
    case Kernel::batch_norm_coef_backward:
    case Kernel::batch_norm_running:
      // One channel, a few, more than a workgroup; with and without the
      // weight and bias; training or not; a variance near zero (eps matters).
      for (int64_t C : {int64_t(1), int64_t(7), int64_t(300)}) {
        auto mean = random_vec(size_t(C), 61), var = random_vec(size_t(C), 62);
        for (auto& v : var) v = v * v + (C == 7 ? 1e-6f : 0.5f);
        auto w = random_vec(size_t(C), 63), b = random_vec(size_t(C), 64);
        const float eps = 1e-5f;
        const std::string name = "C=" + std::to_string(C);
        if (k == Kernel::batch_norm_coef) {
          for (int variant = 0; variant < 3; ++variant) {  // w+b, neither, w only
            const bool hw = variant != 1, hb = variant == 0;
            std::vector<double> e(size_t(4 * C));
            for (int64_t c = 0; c < C; ++c) {
              const double inv = 1.0 / std::sqrt(double(var[size_t(c)]) + eps);
              e[size_t(c)] = mean[size_t(c)];
              e[size_t(C + c)] = hw ? inv * w[size_t(c)] : inv;
              e[size_t(2 * C + c)] = hb ? double(b[size_t(c)]) : 0.0;
              e[size_t(3 * C + c)] = inv;
            }
            cs.push_back(make(name + (hw ? " w" : "") + (hb ? " b" : ""),
                              {outf(e), f32(mean), f32(var), f32(w), f32(b)},
                              sy::BatchNormCoefParams{
                                  .channels = C, .has_weight = hw, .has_bias = hb, .eps = eps}));
          }
        } else if (k == Kernel::batch_norm_coef_backward) {
          // coef rows: mean, scale, bias, inv (inv positive, scale any sign).
          auto coef = random_vec(size_t(4 * C), 65), sums = random_vec(size_t(2 * C), 66);
          for (int64_t c = 0; c < C; ++c)
            coef[size_t(3 * C + c)] = std::abs(coef[size_t(3 * C + c)]) + 0.5f;
          const int64_t count = 98;
          for (bool training : {true, false}) {
            std::vector<double> e(size_t(6 * C));
            for (int64_t c = 0; c < C; ++c) {
              const double scale = coef[size_t(C + c)], inv = coef[size_t(3 * C + c)];
              const double dweight = inv * sums[size_t(C + c)];
              e[size_t(c)] = 0.0;
              e[size_t(C + c)] = scale;
              e[size_t(2 * C + c)] = training ? -scale * sums[size_t(c)] / double(count) : 0.0;
              e[size_t(3 * C + c)] = coef[size_t(c)];
              e[size_t(4 * C + c)] = training ? -scale * inv * dweight / double(count) : 0.0;
              e[size_t(5 * C + c)] = dweight;
            }
            cs.push_back(make(name + (training ? " training" : " eval"),
                              {outf(e), f32(coef), f32(sums)},
                              sy::BatchNormCoefBackwardParams{
                                  .channels = C, .count = count, .training = training}));
          }
        } else {
          auto rm = random_vec(size_t(C), 67), rv = random_vec(size_t(C), 68);
          std::vector<float> stats(mean);
          stats.insert(stats.end(), var.begin(), var.end());
          const int64_t count = 50;
          const double m = 0.1;
          std::vector<double> em(static_cast<size_t>(C)), ev(static_cast<size_t>(C));
          for (int64_t c = 0; c < C; ++c) {
            em[size_t(c)] = (1 - m) * rm[size_t(c)] + m * mean[size_t(c)];
            ev[size_t(c)] =
                (1 - m) * rv[size_t(c)] + m * var[size_t(c)] * count / double(count - 1);
          }
          HostArg am = f32(rm), av = f32(rv);
          am.expect = em, av.expect = ev;
          cs.push_back(make(
              name, {am, av, f32(stats)},
              sy::BatchNormRunningParams{.channels = C, .count = count, .momentum = float(m)}));
          // With num_batches_tracked: one i64 (2^32 - 1: the carry to the high word).
          const int64_t before = C == 1   ? (int64_t(1) << 32) - 1
                                 : C == 7 ? 7
                                          : (int64_t(3) << 32) + 5;
          HostArg nb = i64({before});
          nb.expect = {double(before + 1)};
          cs.push_back(
              make(name + " count", {am, av, nb, f32(stats)},
                   sy::BatchNormRunningParams{
                       .channels = C, .count = count, .has_count = true, .momentum = float(m)}));
        }
      }
      break;
    case Kernel::swap_axes:
      for (auto [O, A, B, E] : std::vector<std::array<int64_t, 4>>{
               {1, 1, 1, 1}, {3, 5, 7, 1}, {1, 32, 17, 49}, {4, 255, 3, 2}, {2, 3, 1000, 1}}) {
        auto v = random_vec(size_t(O * A * B * E), 23);
        std::vector<double> e(v.size());
        for (int64_t o = 0; o < O; ++o)
          for (int64_t i = 0; i < A; ++i)
            for (int64_t j = 0; j < B; ++j)
              for (int64_t x = 0; x < E; ++x)
                e[size_t(((o * B + j) * A + i) * E + x)] = v[size_t(((o * A + i) * B + j) * E + x)];
        cs.push_back(make(sz({O, A, B, E}), {outf(e), f32(v)},
                          sy::SwapAxesParams{.outer = O, .a = A, .b = B, .inner = E}));
      }
      break;
    case Kernel::im2col:
    case Kernel::col2im:
      for (const auto& g : conv_geometries()) {
        const int64_t rows = g.c * g.k0 * g.k1, ncols = g.n * g.oh * g.ow;
        const int64_t xn = g.n * g.c * g.h * g.w;
        // Every (cols entry -> x element) pair the convolution reads.
        auto each_tap = [&](auto f) {
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t q = 0; q < ncols; ++q) {
              int64_t c = r / (g.k0 * g.k1), kh = r / g.k1 % g.k0, kw = r % g.k1;
              int64_t n = q / (g.oh * g.ow), oh = q / g.ow % g.oh, ow = q % g.ow;
              int64_t ih = oh * g.s0 - g.p0 + kh * g.d0, iw = ow * g.s1 - g.p1 + kw * g.d1;
              bool in = ih >= 0 && ih < g.h && iw >= 0 && iw < g.w;
              f(r * ncols + q, in ? ((n * g.c + c) * g.h + ih) * g.w + iw : -1);
            }
        };
        if (k == Kernel::im2col) {
          auto x = random_vec(size_t(xn), 29);
          std::vector<double> e(size_t(rows * ncols), 0.0);
          each_tap([&](int64_t ci, int64_t xi) { e[size_t(ci)] = xi < 0 ? 0.0 : x[size_t(xi)]; });
          cs.push_back(make(g.name, {outf(e), f32(x)}, g.cols_params<sy::Im2colParams>()));
        } else {
          auto cols = random_vec(size_t(rows * ncols), 31);
          std::vector<double> e(size_t(xn), 0.0);
          each_tap([&](int64_t ci, int64_t xi) {
            if (xi >= 0) e[size_t(xi)] += cols[size_t(ci)];
          });
          cs.push_back(make(g.name, {outf(e), f32(cols)}, g.cols_params<sy::Col2imParams>()));
        }
      }
      break;
    case Kernel::conv2d:
    case Kernel::conv2d_backward_input:
    case Kernel::conv2d_backward_weight:
      for (const auto& g : conv_geometries()) {
        const int64_t xn = g.n * g.c * g.h * g.w, yn = g.n * g.oc * g.oh * g.ow;
        const int64_t ck = g.c / g.g * g.k0 * g.k1, wn = g.oc * ck;
        auto x = random_vec(size_t(xn), 29), w = random_vec(size_t(wn), 30);
        if (k == Kernel::conv2d) {
          auto bias = random_vec(size_t(g.oc), 32);
          // Plain; with the bias; with the bias and a fused ReLU.
          for (int variant = 0; variant < 3; ++variant) {
            std::vector<double> e(size_t(yn), 0.0);
            g.each_tap([&](int64_t yi, int64_t xi, int64_t wi, int64_t) {
              e[size_t(yi)] += double(x[size_t(xi)]) * w[size_t(wi)];
            });
            auto p = g.params<sy::Conv2dParams>();
            p.has_bias = variant > 0;
            p.act = variant == 2 ? sy::Unary::relu : sy::Unary::none;
            if (p.has_bias)
              for (int64_t i = 0; i < yn; ++i) {
                double v = e[size_t(i)] + bias[size_t(i / (g.oh * g.ow) % g.oc)];
                e[size_t(i)] = variant == 2 ? std::max(v, 0.0) : v;
              }
            const std::string name = g.name + (variant == 0   ? ""
                                               : variant == 1 ? " +bias"
                                                              : " +bias relu");
            if (p.has_bias)
              cs.push_back(make(name, {outf(e), f32(x), f32(w), f32(bias)}, p));
            else
              cs.push_back(make(name, {outf(e), f32(x), f32(w)}, p));
          }
        } else if (k == Kernel::conv2d_backward_input) {
          auto dy = random_vec(size_t(yn), 31);
          std::vector<double> e(size_t(xn), 0.0);
          g.each_tap([&](int64_t yi, int64_t xi, int64_t wi, int64_t) {
            e[size_t(xi)] += double(dy[size_t(yi)]) * w[size_t(wi)];
          });
          cs.push_back(
              make(g.name, {outf(e), f32(dy), f32(w)}, g.params<sy::Conv2dBackwardInputParams>()));
        } else {
          auto dy = random_vec(size_t(yn), 31);
          const int64_t total = g.n * g.oh * g.ow;
          for (int64_t splits : {int64_t(1), int64_t(3)}) {
            const int64_t len = (total + splits - 1) / splits;
            std::vector<double> e(size_t(splits * wn), 0.0);
            g.each_tap([&](int64_t yi, int64_t xi, int64_t wi, int64_t pos) {
              e[size_t(pos / len * wn + wi)] += double(dy[size_t(yi)]) * x[size_t(xi)];
            });
            auto p = g.params<sy::Conv2dBackwardWeightParams>();
            p.splits = splits;
            cs.push_back(
                make(g.name + " splits " + std::to_string(splits), {outf(e), f32(dy), f32(x)}, p));
          }
        }
      }
      break;
    case Kernel::max_pool2d:
    case Kernel::max_pool2d_backward:
    case Kernel::avg_pool2d:
    case Kernel::avg_pool2d_backward:
      for (const auto& g : pool_geometries())
        for (int variant = 0; variant < 4; ++variant) {
          const int64_t xn = g.planes * g.h * g.w, yn = g.planes * g.oh * g.ow;
          // Variant 1: max pooling on a few distinct values (ties: the first
          // maximum wins); average pooling without the padding in the divisor.
          // Variants 2 and 3 (max_pool2d): a batch norm's affine, and its
          // ReLU, fused before the pooling, on values whose transform is
          // exact in float (multiples of 1/64, coefficients of few bits), so
          // every device's rounding or fused multiply-add gives its bits.
          if (variant >= 2 && k != Kernel::max_pool2d) break;
          const bool affine = variant >= 2, relu = variant == 3;
          auto x = random_vec(size_t(xn), 37);
          if (variant == 1)
            for (auto& v : x) v = std::floor((v + 1.f) * 2.f);
          const int64_t C = g.planes % 3 == 0 ? 3 : 1;
          std::vector<float> coef(size_t(3 * C));
          for (int64_t c = 0; c < C; ++c) {
            coef[size_t(c)] = 0.125f * float(c % 3) - 0.25f;                      // k0: the mean
            coef[size_t(C + c)] = std::array<float, 3>{0.5f, 1.5f, -2.f}[c % 3];  // k1: the scale
            coef[size_t(2 * C + c)] = 0.375f - 0.25f * float(c % 2);              // k2: the bias
          }
          std::vector<float> raw;  // what the fused kernel reads (x: what it pools)
          if (affine) {
            for (auto& v : x) v = std::round(v * 64.f) / 64.f;
            raw = x;
            for (int64_t pl = 0; pl < g.planes; ++pl)
              for (int64_t i = 0; i < g.h * g.w; ++i) {
                const int64_t c = pl % C;
                float& v = x[size_t(pl * g.h * g.w + i)];
                v = (v - coef[size_t(c)]) * coef[size_t(C + c)] + coef[size_t(2 * C + c)];
                if (relu) v = std::max(v, 0.f);
              }
          }
          const bool include_pad = variant == 0;
          std::vector<double> ymax(static_cast<size_t>(yn)), yavg(static_cast<size_t>(yn)),
              div(static_cast<size_t>(yn));
          std::vector<int32_t> idx(static_cast<size_t>(yn));
          for (int64_t pl = 0; pl < g.planes; ++pl)
            for (int64_t oh = 0; oh < g.oh; ++oh)
              for (int64_t ow = 0; ow < g.ow; ++ow) {
                const int64_t hs = oh * g.s0 - g.p0, ws = ow * g.s1 - g.p1;
                double best = -INFINITY, sum = 0;
                int64_t at = -1, taps = 0;
                for (int64_t h = std::max<int64_t>(hs, 0); h < std::min(hs + g.k0, g.h); ++h)
                  for (int64_t w = std::max<int64_t>(ws, 0); w < std::min(ws + g.k1, g.w); ++w) {
                    const double v = x[size_t((pl * g.h + h) * g.w + w)];
                    if (at < 0 || v > best) best = v, at = h * g.w + w;
                    sum += v, ++taps;
                  }
                const size_t o = size_t((pl * g.oh + oh) * g.ow + ow);
                ymax[o] = best, idx[o] = int32_t(at);
                div[o] = include_pad ? double((std::min(hs + g.k0, g.h + g.p0) - hs) *
                                              (std::min(ws + g.k1, g.w + g.p1) - ws))
                                     : double(taps);
                yavg[o] = sum / div[o];
              }
          const std::string name =
              g.name + (affine    ? (relu ? " affine relu" : " affine")
                        : variant ? (k == Kernel::max_pool2d || k == Kernel::max_pool2d_backward
                                         ? " ties"
                                         : " exclude_pad")
                                  : "");
          auto dy = random_vec(size_t(yn), 41);
          if (k == Kernel::max_pool2d) {
            // One buffer: the maxima's bits, then the indices.
            std::vector<double> e(size_t(2 * yn));
            for (int64_t j = 0; j < yn; ++j) {
              float f = float(ymax[size_t(j)]);
              int32_t bits;
              std::memcpy(&bits, &f, 4);
              e[size_t(j)] = bits;
              e[size_t(yn + j)] = idx[size_t(j)];
            }
            if (!affine) {
              cs.push_back(
                  make(name, {out(sy::DType::i32, e), f32(x)}, g.params<sy::MaxPool2dParams>()));
              continue;
            }
            auto p = g.params<sy::MaxPool2dParams>();
            p.channels = C, p.affine = true, p.relu = relu;
            cs.push_back(make(name, {out(sy::DType::i32, e), f32(raw), f32(coef)}, p));
          } else if (k == Kernel::max_pool2d_backward) {
            std::vector<double> e(size_t(xn), 0.0);
            for (int64_t j = 0; j < yn; ++j)
              e[size_t(j / (g.oh * g.ow) * g.h * g.w + idx[size_t(j)])] += dy[size_t(j)];
            cs.push_back(
                make(name, {outf(e), f32(dy), i32(idx)}, g.params<sy::MaxPool2dBackwardParams>()));
          } else if (k == Kernel::avg_pool2d) {
            auto p = g.params<sy::AvgPool2dParams>();
            p.count_include_pad = include_pad;
            cs.push_back(make(name, {outf(yavg), f32(x)}, p));
          } else {
            std::vector<double> e(size_t(xn), 0.0);
            for (int64_t pl = 0; pl < g.planes; ++pl)
              for (int64_t oh = 0; oh < g.oh; ++oh)
                for (int64_t ow = 0; ow < g.ow; ++ow) {
                  const int64_t hs = oh * g.s0 - g.p0, ws = ow * g.s1 - g.p1;
                  const size_t o = size_t((pl * g.oh + oh) * g.ow + ow);
                  for (int64_t h = std::max<int64_t>(hs, 0); h < std::min(hs + g.k0, g.h); ++h)
                    for (int64_t w = std::max<int64_t>(ws, 0); w < std::min(ws + g.k1, g.w); ++w)
                      e[size_t((pl * g.h + h) * g.w + w)] += dy[o] / div[o];
                }
            auto p = g.params<sy::AvgPool2dBackwardParams>();
            p.count_include_pad = include_pad;
            cs.push_back(make(name, {outf(e), f32(dy)}, p));
          }
        }
      break;
    default:
      break;
  }
  return cs;
}

}  // namespace conformance
