// The kernel table: every kernel a backend implements, named once. It drives
// dispatch in each backend, the conformance tests and the op benchmarks.
//
// Argument convention: args[0..nout) are written, the rest are read, unless
// the kernel is an in-place update (noted). Shapes and scalars go in
// KernelParams; each entry documents its fields.
#pragma once
#include <cstdint>

namespace switchyard {

// X(name, number of buffer args)
#define SWITCHYARD_KERNELS(X)                                                  \
  /* out = f[0]. i[0]=n elements of dtype i[1] */                              \
  X(fill, 1)                                                                   \
  /* out[k] = f[0] + k*f[1]. i[0]=n, i[1]=dtype */                             \
  X(arange, 1)                                                                 \
  /* out = Philox4x32-10 uniform in [f[0], f[1]). i[0]=n, i[1..2]=seed lo/hi,  \
     i[3]=offset */                                                            \
  X(rand_uniform, 1)                                                           \
  /* out = normal(f[0] mean, f[1] std), Box-Muller on Philox. as rand_uniform*/\
  X(rand_normal, 1)                                                            \
  /* out = in, converting dtype i[1] -> i[2]. i[0]=n */                        \
  X(cast, 2)                                                                   \
  /* out[r,c] = in[c,r]. i[0]=rows of in, i[1]=cols of in. i[2]=elem size */   \
  X(transpose, 2)                                                              \
  /* out = zeros(i[2]) with out[i[0] .. i[0]+i[1]) = in (f32). The backward    \
     of a row slice. */                                                        \
  X(pad, 2)                                                                    \
  /* out = f[0] * op(A) op(B) (+ bias[n]): args out, A, B[, bias].             \
     i[0]=M i[1]=N i[2]=K i[3]=transA i[4]=transB i[5]=has_bias                \
     i[6]=activation applied to the result (Unary code, 0 = none) */           \
  X(gemm, 4)                                                                   \
  /* out = a (op) b with broadcasting over up to 4 dims. op=Binary code.       \
     i[0..3]=out dims, i[4..7]=a strides, i[8..11]=b strides (0 = broadcast) */\
  X(binary, 3)                                                                 \
  /* out = f[0]*in + f[1]. i[0]=n */                                           \
  X(affine, 2)                                                                 \
  /* out = op(in), op=Unary code. i[0]=n */                                    \
  X(unary, 2)                                                                  \
  /* dx = dy * op'(x, y): args dx, dy, x, y. op=Unary code. i[0]=n */          \
  X(unary_backward, 4)                                                         \
  /* out[o,i] = f[0] * sum_l in[o,l,i]. i[0]=outer i[1]=len i[2]=inner */      \
  X(reduce_sum, 2)                                                             \
  /* out[o,l,i] = f[0]*in[o,i]: broadcast along a new middle axis.            \
     i[0]=outer i[1]=len i[2]=inner */                                         \
  X(expand, 2)                                                                 \
  /* row-wise softmax (op=0) or log_softmax (op=1). i[0]=rows i[1]=cols */     \
  X(softmax, 2)                                                                \
  /* dx from dy and the forward output y. op=0 softmax: y*(dy - sum(dy*y));    \
     op=1 log_softmax: dy - exp(y)*sum(dy). args dx, dy, y. i[0]=rows i[1]=cols*/ \
  X(softmax_backward, 3)                                                       \
  /* loss = mean_r (logsumexp(x_r) - x_r[label_r]): args loss[1], x, labels    \
     (i32). i[0]=rows i[1]=cols */                                             \
  X(cross_entropy, 3)                                                          \
  /* dx = (softmax(x) - onehot(label)) * dloss / rows: args dx, x, labels,     \
     dloss[1]. i[0]=rows i[1]=cols */                                          \
  X(cross_entropy_backward, 4)                                                 \
  /* out[r] = argmax_c x[r,c] (i32, first max). i[0]=rows i[1]=cols */         \
  X(argmax, 2)                                                                 \
  /* IN PLACE on p (and buf): SGD with momentum/weight decay. args p, buf, g  \
     when i[3]=1 (momentum), else p, g. f[0]=lr f[1]=momentum f[2]=dampening  \
     f[3]=weight_decay i[0]=n i[1]=nesterov i[2]=first step (buf = g) */       \
  X(sgd_update, 3)                                                             \
  /* IN PLACE on p, m, v: Adam/AdamW. args p, m, v, g, step[1] (f32, already   \
     incremented). f[0]=lr f[1]=beta1 f[2]=beta2 f[3]=eps f[4]=weight_decay    \
     i[0]=n i[1]=decoupled weight decay (AdamW) */                             \
  X(adam_update, 5)

enum class Kernel : uint8_t {
#define SY_KERNEL_ENUM(name, nargs) name,
  SWITCHYARD_KERNELS(SY_KERNEL_ENUM)
#undef SY_KERNEL_ENUM
      count_
};

const char* kernel_name(Kernel k);
int kernel_num_args(Kernel k);

// Codes for the `op` field of unary, unary_backward and gemm's activation.
enum class Unary : int32_t { none = 0, relu, gelu, tanh, sigmoid, exp, log, neg, sqrt, square, abs };
// Codes for the `op` field of binary.
enum class Binary : int32_t { add = 0, sub, mul, div, max, min, eq };

// Scalars and shapes of one kernel launch (see the table for the fields).
struct KernelParams {
  int32_t op = 0;
  int64_t i[12] = {};
  float f[8] = {};
};

}  // namespace switchyard
