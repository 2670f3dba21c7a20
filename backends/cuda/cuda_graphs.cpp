// SPDX-License-Identifier: MIT
// CUDA graphs (see cuda_device.cpp's header): the key a graph bakes in, and
// a Program's run as a replay, an update of a graph kept, or a capture.
#include <algorithm>
#include <array>
#include <cstring>

#include "cuda_check.h"
#include "cuda_device.h"
#include "cuda_graph_key.h"

namespace switchyard::cuda_impl {

// A launch has one device word: none reads both a random stream's offset
// and a learning rate.
#define SY_ONE_WORD(kernel, Params, nargs, writes, traits)                                       \
  static_assert(((traits) & (kRandomStream | kLearningRate)) != (kRandomStream | kLearningRate), \
                #kernel ": one device word a launch (cuda_device.cpp's dyn_index_)");
SWITCHYARD_KERNELS(SY_ONE_WORD)
#undef SY_ONE_WORD

namespace {
// Per kernel with the trait, the slot of its field `name` of `kind` (-1).
std::array<int, kNumKernels> slots_of(KernelTraits trait, char kind, const char* name) {
  std::array<int, kNumKernels> s{};
  for (int k = 0; k < kNumKernels; ++k) {
    s[size_t(k)] = -1;
    if (!kernel_has(Kernel(k), trait)) continue;
    const ParamLayout& l = param_layout(Kernel(k));
    for (int f = 0; f < l.num_fields; ++f)
      if (l.fields[f].kind == kind && std::strcmp(l.fields[f].name, name) == 0)
        s[size_t(k)] = l.fields[f].slot;
  }
  return s;
}
}  // namespace

int rng_offset_slot(Kernel k) {
  static const auto slots = slots_of(kRandomStream, 'W', "offset");
  return slots[size_t(k)];
}

int lr_slot(Kernel k) {
  static const auto slots = slots_of(kLearningRate, 'F', "lr");
  return slots[size_t(k)];
}

void append_key(std::vector<uint64_t>& key, const Instr& ins, void* const* ptrs) {
  key.push_back(uint64_t(ins.kernel) | uint64_t(ins.nargs) << 8);
  for (int j = 0; j < kMaxKernelArgs; ++j) key.push_back(reinterpret_cast<uintptr_t>(ptrs[j]));
  const int64_t* i = ins.params.int_slots();
  const int skip = rng_offset_slot(ins.kernel);
  for (int j = 0; j < kParamInts; ++j) key.push_back(j == skip ? 0 : uint64_t(i[j]));
  const float* f = ins.params.float_slots();
  const int lr = lr_slot(ins.kernel);
  for (int j = 0; j < kParamFloats; j += 2) {
    uint32_t lo = 0, hi = 0;
    if (j != lr) std::memcpy(&lo, &f[j], 4);
    if (j + 1 != lr) std::memcpy(&hi, &f[j + 1], 4);
    key.push_back(uint64_t(lo) | uint64_t(hi) << 32);
  }
}

uint64_t hash_words(const std::vector<uint64_t>& w, size_t stride) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < w.size(); i += stride) {
    h ^= w[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0x100000001b3ull;
  }
  return h;
}

void CudaDevice::launch_graph(Graph& g) {
  g.last_used = runs_;
  SY_CUDA("execute", cudaGraphLaunch(g.exec, stream_));
  ++counters_.queue_submits;
}

void CudaDevice::run_graph(const Program& p, ProgramGraphs& pg, uint64_t h, uint64_t shape) {
  for (Graph& g : pg.graphs)
    if (g.hash == h && g.key == key_) return launch_graph(g);
  bool repeat = std::find(std::begin(pg.recent), std::end(pg.recent), shape) != std::end(pg.recent);
  pg.recent[pg.next_recent++ % 8] = shape;
  if (!repeat || pg.disabled) {  // first sight of these kernels: run eagerly
    enqueue(p);
    counters_.queue_submits += p.instrs.size();
    return;
  }
  // Seen before: capture it (nothing runs while capturing).
  cudaGraph_t graph = nullptr;
  SY_CUDA("execute", cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  try {
    enqueue(p);
  } catch (const EagerRunNeeded&) {
    // A cuDNN shape met for the first time: its plan is made, and its
    // algorithm first run, by an eager run (cuda_dnn.h); the next run
    // captures. Not a failure.
    (void)cudaStreamEndCapture(stream_, &graph);
    if (graph) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    enqueue(p);
    counters_.queue_submits += p.instrs.size();
    return;
  } catch (...) {
    (void)cudaStreamEndCapture(stream_, &graph);
    if (graph) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    // Run this one eagerly (which reports a real error). Not given up at
    // once: a kernel first loaded inside a capture (lazy loading, on drivers
    // before 12.3) fails it, and the eager run loads it for the next try.
    pg.disabled = ++pg.failures >= 3;
    enqueue(p);
    counters_.queue_submits += p.instrs.size();
    return;
  }
  cudaError_t e = cudaStreamEndCapture(stream_, &graph);
  // A Program keeps up to kMaxGraphs graphs (alternating binding sets then
  // replay without any update); past that, a run with the same kernels as a
  // graph kept updates that graph's parameters in place (the least recently
  // used such graph: the others are likelier to come again as they are).
  Graph* same = nullptr;
  if (pg.graphs.size() >= kMaxGraphs)
    for (Graph& g : pg.graphs)
      if (g.shape == shape && (!same || g.last_used < same->last_used)) same = &g;
  if (e == cudaSuccess && same) {
#if CUDART_VERSION >= 12000
    cudaGraphExecUpdateResultInfo info{};
    cudaError_t u = cudaGraphExecUpdate(same->exec, graph, &info);
#else
    cudaGraphNode_t error_node = nullptr;
    cudaGraphExecUpdateResult result{};
    cudaError_t u = cudaGraphExecUpdate(same->exec, graph, &error_node, &result);
#endif
    if (u == cudaSuccess) {
      (void)cudaGraphDestroy(graph);
      ++counters_.command_updates;
      same->hash = h;
      same->key = key_;
      return launch_graph(*same);
    }
    if (u != cudaErrorGraphExecUpdateFailure) {  // not a refusal: an error of earlier work
      (void)cudaGraphDestroy(graph);
      throw_cuda(u, "execute", "cudaGraphExecUpdate");
    }
    (void)cudaGetLastError();  // refused (the topology differs): instantiate it instead
  }
  Graph g;
  if (e == cudaSuccess) e = cudaGraphInstantiateWithFlags(&g.exec, graph, 0);
  if (graph) (void)cudaGraphDestroy(graph);
  if (e != cudaSuccess) {  // nothing of the capture ran: run it eagerly (3 failures: for good)
    (void)cudaGetLastError();
    pg.disabled = ++pg.failures >= 3;
    enqueue(p);
    counters_.queue_submits += p.instrs.size();
    return;
  }
  ++counters_.command_recordings;
  g.hash = h;
  g.shape = shape;
  g.key = key_;
  if (pg.graphs.size() >= kMaxGraphs) {
    auto lru =
        std::min_element(pg.graphs.begin(), pg.graphs.end(),
                         [](const Graph& a, const Graph& b) { return a.last_used < b.last_used; });
    (void)cudaGraphExecDestroy(lru->exec);
    pg.graphs.erase(lru);
  }
  pg.graphs.push_back(std::move(g));
  launch_graph(pg.graphs.back());
}

}  // namespace switchyard::cuda_impl
