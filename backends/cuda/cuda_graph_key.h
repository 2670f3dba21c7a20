// SPDX-License-Identifier: MIT
// CUDA graphs' keys (cuda_graphs.cpp): what a captured graph bakes in, as
// words, so a run replays the graph whose key it matches.
#pragma once
#include <cstdint>
#include <vector>

#include "switchyard/backend/program.h"

namespace switchyard::cuda_impl {

constexpr size_t kMaxGraphs = 4;  // per Program

// The int slot of a kRandomStream kernel's Philox `offset` (-1: none): read
// from device memory in a graph, so not part of the key.
int rng_offset_slot(Kernel k);
// The float slot of a kLearningRate kernel's `lr` (-1: none): read from
// device memory in a graph too.
int lr_slot(Kernel k);
// Everything a graph bakes in, as words: kernel, addresses, every parameter
// slot (floats bitwise) but a random stream's offset and a learning rate.
void append_key(std::vector<uint64_t>& key, const Instr& ins, void* const* ptrs);
// Words append_key writes per launch: kernel and nargs, then the rest.
constexpr size_t kKeyWords = 1 + kMaxKernelArgs + kParamInts + kParamFloats / 2;
// Every `stride`-th word of w, from the first, hashed: stride 1 the whole
// key, kKeyWords its kernels alone (a graph's shape).
uint64_t hash_words(const std::vector<uint64_t>& w, size_t stride = 1);

}  // namespace switchyard::cuda_impl
