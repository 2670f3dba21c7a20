// SPDX-License-Identifier: MIT
// Shared by the multi-tensor kernels (adam_multi.comp, sgd_multi.comp):
// bindings 0-4 are windows of the device's memory blocks; a tensor's
// argument is in the window its MultiEntry names (3 bits per argument
// slot: the written ones from 0, the gradient in slot 4). A workgroup's
// tensor, and so its windows, are the same for all its invocations.
ARG_RW(0) ARG_RW(1) ARG_RW(2) ARG_RW(3) ARG_RW(4)
// Flag 8192 (vk_launch.h's kOneWindow): every argument in binding 0.
#define SY_ONE_WINDOW ((SPEC_FLAGS & 8192u) != 0u)
// Flag 16384 (kMultiVec4), with it: every tensor argument starts on a vec4
// of binding 0, so an invocation takes 4 consecutive elements as one vec4
// (else 4 elements WG apart, one at a time).
#define SY_MULTI_VEC4 ((SPEC_FLAGS & 24576u) == 24576u)  // with SY_ONE_WINDOW

float ld(uint w, uint i) {
  if (SY_ONE_WINDOW) return F(0)[i];
  switch (w) {
    case 0u: return F(0)[i];
    case 1u: return F(1)[i];
    case 2u: return F(2)[i];
    case 3u: return F(3)[i];
  }
  return F(4)[i];
}
void st(uint w, uint i, float v) {
  if (SY_ONE_WINDOW) {
    F(0)[i] = v;
    return;
  }
  switch (w) {
    case 0u: F(0)[i] = v; return;
    case 1u: F(1)[i] = v; return;
    case 2u: F(2)[i] = v; return;
    case 3u: F(3)[i] = v; return;
  }
  F(4)[i] = v;
}
uint window(uvec4 e, uint arg) { return (e.z >> (3u * arg)) & 7u; }

