// SPDX-License-Identifier: MIT
// The kernel table's run-time side: names, argument facts and parameter
// layouts, generated from the lists in switchyard/backend/kernels.h.
#include "switchyard/backend/kernels.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <vector>

#include "switchyard/error.h"

namespace switchyard {
namespace {

constexpr KernelInfo kInfo[] = {
#define SY_INFO(kernel, Params, nargs, writes, traits) {#kernel, nargs, writes, traits},
    SWITCHYARD_KERNELS(SY_INFO)
#undef SY_INFO
};
static_assert(sizeof(kInfo) / sizeof(kInfo[0]) == size_t(kNumKernels));

#define SY_FIELD_I(T, name) {#name, 'I', 1, #T},
#define SY_FIELD_D(T, name) {#name, 'D', 1, #T},
#define SY_FIELD_W(name) {#name, 'W', 1, "uint64_t"},
#define SY_FIELD_A(T, name, count) {#name, 'A', count, #T},
#define SY_FIELD_F(name) {#name, 'F', 1, "float"},
// Field lists with their slots filled in, in kernel order.
struct Layouts {
  std::vector<std::vector<ParamField>> fields;
  std::vector<ParamLayout> layouts;
  Layouts() {
    auto add = [&](std::initializer_list<ParamField> list) {
      std::vector<ParamField> f(list);
      int ni = 0, nf = 0;
      for (auto& x : f) x.slot = x.kind == 'F' ? nf++ : (ni += x.count) - x.count;
      fields.push_back(std::move(f));
      layouts.push_back({fields.back().data(), int(fields.back().size()), ni, nf});
    };
#define SY_ADD(kernel, ...) \
  add({SY_PARAMS_##kernel(SY_FIELD_I, SY_FIELD_D, SY_FIELD_W, SY_FIELD_A, SY_FIELD_F)});
    fields.reserve(kNumKernels);
    SWITCHYARD_KERNELS(SY_ADD)
#undef SY_ADD
  }
};

void check_kernel(Kernel k) {
  SY_CHECK(size_t(k) < size_t(kNumKernels), "kernel table", "expected a kernel id below ",
           kNumKernels, ", found ", int(k));
}

}  // namespace

const KernelInfo& kernel_info(Kernel k) {
  check_kernel(k);
  return kInfo[size_t(k)];
}

const ParamLayout& param_layout(Kernel k) {
  check_kernel(k);
  static const Layouts all;
  return all.layouts[size_t(k)];
}

bool KernelParams::operator==(const KernelParams& o) const {
  // Floats compared bitwise: a Program recorded with -0.f or a NaN pattern
  // is another Program's parameters.
  return kernel_ == o.kernel_ && std::memcmp(i_, o.i_, sizeof i_) == 0 &&
         std::memcmp(f_, o.f_, sizeof f_) == 0;
}

uint64_t kernel_flops(const KernelParams& p) {
  auto conv = [](const auto& q, uint64_t pixels_of_out) {
    const uint64_t G = uint64_t(std::max<int64_t>(q.groups, 1));
    return 2 * uint64_t(q.batch) * uint64_t(q.out_channels) * pixels_of_out *
           (uint64_t(q.channels) / G) * uint64_t(q.kernel[0]) * uint64_t(q.kernel[1]);
  };
  auto out_pixels = [](const auto& q) {
    return uint64_t(conv_out_size(q.height, q.kernel[0], q.stride[0], q.padding[0], q.dilation[0]) *
                    conv_out_size(q.width, q.kernel[1], q.stride[1], q.padding[1], q.dilation[1]));
  };
  switch (p.kernel()) {
    case Kernel::gemm: {
      const auto g = p.get<GemmParams>();
      return 2 * uint64_t(g.m) * uint64_t(g.n) * uint64_t(g.k) *
             uint64_t(std::max<int64_t>(g.batch, 1));
    }
    case Kernel::conv2d: {
      const auto q = p.get<Conv2dParams>();
      return conv(q, out_pixels(q));
    }
    case Kernel::conv2d_backward_input: {
      const auto q = p.get<Conv2dBackwardInputParams>();
      return conv(q, out_pixels(q));
    }
    case Kernel::conv2d_backward_weight: {
      const auto q = p.get<Conv2dBackwardWeightParams>();
      return conv(q, out_pixels(q));
    }
    default:
      return 0;
  }
}

namespace detail {
void params_mismatch(Kernel have, Kernel want) {
  throw Error(cat("[", kernel_name(want), "] expected parameters of kernel ", kernel_name(want),
                  ", found those of ", kernel_name(have)));
}
}  // namespace detail

MultiLayout multi_layout(const KernelParams& p) {
  switch (p.kernel()) {
    case Kernel::adam_multi:
      return {params<Kernel::adam_multi>(p).tensors, 5, 4};
    case Kernel::sgd_multi: {
      const auto q = params<Kernel::sgd_multi>(p);
      return {q.tensors, q.has_buf ? 3 : 2, q.has_buf ? 2 : 1};
    }
    default:
      throw Error(detail::cat("[", kernel_name(p.kernel()),
                              "] not a multi-tensor kernel (internal error)"));
  }
}

}  // namespace switchyard
