// SPDX-License-Identifier: MIT
// A row's statistics for the row kernels that read it from argument 1
// (softmax, cross-entropy and its backward): over x = F(1)[x0, x0 + cols),
// its maximum m and the sum s of exp(x - m). row_stats: the whole row in
// one invocation; wg_row_stats: the row strided over the workgroup, every
// invocation must call it and gets the same m and s. Include after
// reduce.glsl.
void row_stats(uint x0, uint cols, out float m, out float s) {
  m = SY_FLT_LOWEST;
  for (uint c = 0u; c < cols; ++c) m = max(m, F(1)[x0 + c]);
  s = 0.0;
  for (uint c = 0u; c < cols; ++c) s += exp(F(1)[x0 + c] - m);
}

void wg_row_stats(uint x0, uint cols, out float m, out float s) {
  m = SY_FLT_LOWEST;
  for (uint c = gl_LocalInvocationID.x; c < cols; c += WG) m = max(m, F(1)[x0 + c]);
  m = wg_max(m);
  s = 0.0;
  for (uint c = gl_LocalInvocationID.x; c < cols; c += WG) s += exp(F(1)[x0 + c] - m);
  s = wg_sum(s);
}
