// SPDX-License-Identifier: MIT
// The optimizers' conformance cases (see conformance_cases.h): SGD with and
// without momentum, Adam and AdamW per tensor and over lists of tensors.
#include <array>
#include <cmath>

#include "conformance_cases.h"
#include "conformance_util.h"

using sy::Kernel;

namespace conformance {
namespace {

const std::vector<int64_t> kSizes = {1, 3, 17, 255, 1000};

// Adam's (or AdamW's) step t in double: the expected w, m and v.
struct AdamRef {
  std::vector<double> w, m, v;
};
constexpr double kLr = 1e-2, kB1 = 0.9, kB2 = 0.999, kEps = 1e-8, kWd = 0.05;
AdamRef adam_reference(const std::vector<float>& w, const std::vector<float>& m,
                       const std::vector<float>& v, const std::vector<float>& g, double t,
                       bool adamw) {
  AdamRef r{std::vector<double>(w.size()), std::vector<double>(w.size()),
            std::vector<double>(w.size())};
  const double bc1 = 1 - std::pow(kB1, t), bc2 = 1 - std::pow(kB2, t);
  for (size_t j = 0; j < w.size(); ++j) {
    double wj = adamw ? w[j] * (1 - kLr * kWd) : w[j];
    double dd = g[j] + (adamw ? 0 : kWd * wj);
    r.m[j] = kB1 * m[j] + (1 - kB1) * dd;
    r.v[j] = kB2 * v[j] + (1 - kB2) * dd * dd;
    r.w[j] = wj - kLr / bc1 * r.m[j] / (std::sqrt(r.v[j]) / std::sqrt(bc2) + kEps);
  }
  return r;
}

// adam_update's or adam_multi's params for the reference's constants.
template <class P>
P adam_params(P p, bool adamw) {
  p.decoupled = adamw;
  p.lr = float(kLr), p.beta1 = float(kB1), p.beta2 = float(kB2);
  p.eps = float(kEps), p.weight_decay = float(kWd);
  return p;
}

}  // namespace

std::vector<Case> optimizer_cases(Kernel k) {
  std::vector<Case> cs;
  switch (k) {
    case Kernel::sgd_multi:
      // Lists of tensors (as adam_multi's), each variant of the per-tensor
      // kernels: plain; momentum's first step, a later step, Nesterov.
      for (int64_t count : {1, 5, 40})
        for (int variant = 0; variant < 4; ++variant) {
          const double lr = 0.1, mom = 0.9, damp = 0.1, wd = 0.01;
          const bool has_buf = variant > 0, first = variant == 1, nest = variant == 3;
          std::vector<HostArg> state, grads;
          for (int64_t t = 0; t < count; ++t) {
            const int64_t n = count == 5 ? std::array<int64_t, 5>{1, 17, 4097, 3, 1000}[size_t(t)]
                                         : 1 + (t * 37) % 300;
            auto w = random_vec(size_t(n), uint32_t(29 + t)),
                 g = random_vec(size_t(n), uint32_t(31 + t)), buf = random_vec(size_t(n), 37);
            std::vector<double> ew(static_cast<size_t>(n)), eb(static_cast<size_t>(n));
            for (size_t j = 0; j < size_t(n); ++j) {
              const double dd = double(g[j]) + wd * w[j];
              const double b = first ? dd : mom * buf[j] + (1 - damp) * dd;
              eb[j] = b;
              ew[j] = w[j] - lr * (!has_buf ? dd : nest ? dd + mom * b : b);
            }
            HostArg pw = f32(w), pb = f32(buf);
            pw.expect = ew, pb.expect = eb;
            state.push_back(pw);
            if (has_buf) state.push_back(pb);
            grads.push_back(f32(g));
          }
          state.insert(state.end(), grads.begin(), grads.end());
          const char* names[] = {"plain ", "first step ", "momentum ", "nesterov "};
          Case c = make(names[variant] + std::to_string(count) + " tensors", state,
                        sy::SgdMultiParams{.tensors = count,
                                           .has_buf = has_buf,
                                           .nesterov = nest,
                                           .first_step = first,
                                           .lr = float(lr),
                                           .momentum = float(mom),
                                           .dampening = float(damp),
                                           .weight_decay = float(wd)});
          c.bound = 1e-12;
          cs.push_back(c);
        }
      break;
    case Kernel::sgd_update:
    case Kernel::sgd_momentum_update:
      for (int64_t n : kSizes)
        for (int variant = k == Kernel::sgd_update ? 0 : 1;
             variant < (k == Kernel::sgd_update ? 1 : 4);
             ++variant) {  // plain; momentum: first step, later step, nesterov
          auto w = random_vec(size_t(n), 29), g = random_vec(size_t(n), 31),
               buf = random_vec(size_t(n), 37);
          const double lr = 0.1, mom = 0.9, damp = 0.1, wd = 0.01;
          bool has_buf = variant > 0, first = variant == 1, nest = variant == 3;
          std::vector<double> ew(static_cast<size_t>(n)), eb(static_cast<size_t>(n));
          for (size_t j = 0; j < size_t(n); ++j) {
            double dd = double(g[j]) + wd * w[j];
            if (!has_buf) {
              ew[j] = w[j] - lr * dd;
              continue;
            }
            double b = first ? dd : mom * buf[j] + (1 - damp) * dd;
            eb[j] = b;
            ew[j] = w[j] - lr * (nest ? dd + mom * b : b);
          }
          HostArg pw = f32(w);
          pw.expect = ew;
          std::vector<HostArg> args = {pw};
          if (has_buf) {
            HostArg pb = f32(buf);
            pb.expect = eb;
            args.push_back(pb);
          }
          args.push_back(f32(g));
          const char* names[] = {"plain ", "first step ", "momentum ", "nesterov "};
          Case c = has_buf
                       ? make(names[variant] + sz({n}), args,
                              sy::SgdMomentumParams{.n = n,
                                                    .nesterov = nest,
                                                    .first_step = first,
                                                    .lr = float(lr),
                                                    .momentum = float(mom),
                                                    .dampening = float(damp),
                                                    .weight_decay = float(wd)})
                       : make(names[variant] + sz({n}), args,
                              sy::SgdParams{.n = n, .lr = float(lr), .weight_decay = float(wd)});
          c.bound = 1e-12;
          cs.push_back(c);
        }
      break;
    case Kernel::adam_update:
      for (int64_t n : kSizes)
        for (int adamw : {0, 1}) {
          auto w = random_vec(size_t(n), 41), m = random_vec(size_t(n), 43),
               g = random_vec(size_t(n), 47);
          auto v = random_vec(size_t(n), 53, 0.f, 1.f);
          const double t = 3;
          const AdamRef r = adam_reference(w, m, v, g, t, adamw == 1);
          HostArg pw = f32(w), pm = f32(m), pv = f32(v);
          pw.expect = r.w, pm.expect = r.m, pv.expect = r.v;
          Case c =
              make((adamw ? "adamw " : "adam ") + sz({n}), {pw, pm, pv, f32(g), f32({float(t)})},
                   adam_params(sy::AdamParams{.n = n}, adamw == 1));
          c.bound = 1e-10;
          cs.push_back(c);
        }
      break;
    case Kernel::adam_multi:
      // Lists of tensors: one, a few of odd sizes (one past a CUDA block's
      // chunk of 4096), and more than one CUDA launch's 24 and one Vulkan
      // launch's 32; each with its own step count, which the launch
      // increments.
      for (int64_t count : {1, 5, 40})
        for (int adamw : {0, 1}) {
          std::vector<HostArg> state, grads;
          for (int64_t t = 0; t < count; ++t) {
            const int64_t n = count == 5 ? std::array<int64_t, 5>{1, 17, 4097, 3, 1000}[size_t(t)]
                                         : 1 + (t * 37) % 300;
            const double steps = double(t % 4);  // the count before this step
            auto w = random_vec(size_t(n), uint32_t(41 + t)), m = random_vec(size_t(n), 43),
                 g = random_vec(size_t(n), uint32_t(47 + t));
            auto v = random_vec(size_t(n), 53, 0.f, 1.f);
            const AdamRef r = adam_reference(w, m, v, g, steps + 1, adamw == 1);
            HostArg pw = f32(w), pm = f32(m), pv = f32(v), ps = f32({float(steps)});
            pw.expect = r.w, pm.expect = r.m, pv.expect = r.v, ps.expect = {steps + 1};
            for (HostArg* h : {&pw, &pm, &pv, &ps}) state.push_back(*h);
            grads.push_back(f32(g));
          }
          state.insert(state.end(), grads.begin(), grads.end());
          Case c =
              make(std::string(adamw ? "adamw " : "adam ") + std::to_string(count) + " tensors",
                   state, adam_params(sy::AdamMultiParams{.tensors = count}, adamw == 1));
          c.bound = 1e-10;
          cs.push_back(c);
        }
      break;
    default:
      break;
  }
  return cs;
}

}  // namespace conformance
