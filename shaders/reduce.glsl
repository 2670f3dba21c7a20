// SPDX-License-Identifier: MIT
// Workgroup reductions: subgroup arithmetic when built with SY_SUBGROUP (the
// backend picks that build when the device supports it), shared memory
// otherwise. Every invocation of the workgroup must call them.
shared float red_buf[WG];

float wg_sum(float v) {
#ifdef SY_SUBGROUP
  v = subgroupAdd(v);
  if (gl_NumSubgroups == 1u) return v;
  if (subgroupElect()) red_buf[gl_SubgroupID] = v;
  barrier();
  float s = 0.0;
  for (uint k = 0u; k < gl_NumSubgroups; ++k) s += red_buf[k];
  barrier();
  return s;
#else
  uint t = gl_LocalInvocationID.x;
  red_buf[t] = v;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1u) {
    if (t < s) red_buf[t] += red_buf[t + s];
    barrier();
  }
  float r = red_buf[0];
  barrier();
  return r;
#endif
}

float wg_max(float v) {
#ifdef SY_SUBGROUP
  v = subgroupMax(v);
  if (gl_NumSubgroups == 1u) return v;
  if (subgroupElect()) red_buf[gl_SubgroupID] = v;
  barrier();
  float m = red_buf[0];
  for (uint k = 1u; k < gl_NumSubgroups; ++k) m = max(m, red_buf[k]);
  barrier();
  return m;
#else
  uint t = gl_LocalInvocationID.x;
  red_buf[t] = v;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1u) {
    if (t < s) red_buf[t] = max(red_buf[t], red_buf[t + s]);
    barrier();
  }
  float r = red_buf[0];
  barrier();
  return r;
#endif
}
