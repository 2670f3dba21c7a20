// See cuda_dispatch.h.
#include "cuda_dispatch.h"

#include "switchyard/error.h"

namespace switchyard::cuda_impl {

void dispatch(const Instr& ins, void* const* a, const GemmFn& gemm, const LaunchEnv& env) {
  const KernelParams& p = ins.params;
  auto f = [&](int j) { return static_cast<float*>(a[j]); };
  auto i32 = [&](int j) { return static_cast<int32_t*>(a[j]); };
  switch (ins.kernel) {
    case Kernel::fill: return launch_fill(p, a[0], env);
    case Kernel::arange: return launch_arange(p, a[0], env);
    case Kernel::rand_uniform:
    case Kernel::rand_normal: return launch_rand(ins.kernel, p, f(0), env);
    case Kernel::cast: return launch_cast(p, a[0], a[1], env);
    case Kernel::transpose: return launch_transpose(p, a[0], a[1], env);
    case Kernel::pad: return launch_pad(p, f(0), f(1), env);
    case Kernel::gemm: return gemm(p, f(0), f(1), f(2), ins.nargs > 3 ? f(3) : nullptr, env);
    case Kernel::binary: return launch_binary(p, f(0), f(1), f(2), env);
    case Kernel::affine: return launch_affine(p, f(0), f(1), env);
    case Kernel::unary: return launch_unary(Unary(p.op), p.i[0], f(0), f(1), env);
    case Kernel::unary_backward: return launch_unary_backward(p, f(0), f(1), f(2), f(3), env);
    case Kernel::reduce_sum: return launch_reduce_sum(p, f(0), f(1), env);
    case Kernel::expand: return launch_expand(p, f(0), f(1), env);
    case Kernel::softmax: return launch_softmax(p, f(0), f(1), env);
    case Kernel::softmax_backward: return launch_softmax_backward(p, f(0), f(1), f(2), env);
    case Kernel::cross_entropy: return launch_cross_entropy(p, f(0), f(1), i32(2), env);
    case Kernel::cross_entropy_backward: return launch_cross_entropy_backward(p, f(0), f(1), i32(2), f(3), env);
    case Kernel::argmax: return launch_argmax(p, i32(0), f(1), env);
    case Kernel::sgd_update:
      // With momentum: p, buf, g; without: p, g.
      return p.i[3] ? launch_sgd_update(p, f(0), f(1), f(2), env) : launch_sgd_update(p, f(0), nullptr, f(1), env);
    case Kernel::adam_update: return launch_adam_update(p, f(0), f(1), f(2), f(3), f(4), env);
    case Kernel::count_: break;
  }
  throw Error(detail::cat("[execute] unknown kernel id ", int(ins.kernel), " on CUDA"));
}

}  // namespace switchyard::cuda_impl
