// SPDX-License-Identifier: MIT
// Internal: graph nodes, storages, per-device runtime state, tensor impls.
// Nothing here is part of the public API.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "switchyard/backend/device.h"
#include "switchyard/backend/kernels.h"
#include "switchyard/tensor.h"

namespace switchyard::detail {

struct Context;

// Caches device buffers by rounded size so that steady-state training
// allocates nothing from the device. Thread-safe (the DataLoader's worker
// creates host tensors).
class BufferPool {
 public:
  // host: pinned host memory (Device::allocate_host), never poisoned.
  explicit BufferPool(BackendDevice& d, bool host = false);
  ~BufferPool() { empty(); }
  Buffer acquire(size_t bytes);  // returns a buffer of at least `bytes`
  void release(Buffer b);
  void empty();  // give every cached buffer back to the device
  static size_t round(size_t bytes);

 private:
  void poison(Buffer b);
  BackendDevice& dev_;
  bool host_ = false;
  bool poison_ = false;  // SWITCHYARD_POISON=1: fill every handed-out buffer with NaN
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<Buffer>> free_;
};

// One pooled buffer holding a tensor's data. Views share it with an offset.
struct Storage {
  Storage(std::shared_ptr<Context> c, Buffer b, size_t n)
      : ctx(std::move(c)), buffer(b), bytes(n) {}
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  std::shared_ptr<Context> ctx;
  Buffer buffer;
  size_t bytes = 0;                // what was asked for (the buffer may be larger)
  uint64_t version = 0;            // number of executed (or discarded) in-place updates
  uint64_t discarded_through = 0;  // versions skipped by a failed evaluation
  // Pending nodes that read this storage. Before an in-place update runs, the
  // scheduler runs every such reader of the old value that someone still
  // holds, so values computed "before" a step keep their old inputs, as in
  // eager PyTorch. Pruned as it grows.
  std::vector<std::weak_ptr<Node>> readers;
  size_t readers_pruned_at = 16;
  // Pinned host memory (Tensor::pin_memory): a CPU storage whose memory a
  // GPU device lent (from its context's host pool); `buffer` is its host
  // address for the CPU device.
  std::shared_ptr<Context> pin_ctx;
  Buffer pin_buffer;
  void add_reader(const std::shared_ptr<Node>& n);
};

enum class NodeKind : uint8_t {
  leaf,    // has a storage (materialized)
  op,      // kernel producing a new value
  view,    // aliases inputs[0]'s buffer at `offset` with another shape
  update,  // kernel writing in place into leaf inputs (optimizer steps)
};

struct Node : std::enable_shared_from_this<Node> {
  Node() = default;
  ~Node();  // iterative: long unevaluated chains must not overflow the stack
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  NodeKind kind = NodeKind::leaf;
  DType dtype = DType::f32;
  Shape shape;
  Context* ctx = nullptr;
  KernelParams params;
  std::vector<std::shared_ptr<Node>> inputs;
  std::vector<std::shared_ptr<Node>> deps;  // ordering only
  // leaf: where the value lives; view: byte offset into the base.
  std::shared_ptr<Storage> storage;
  size_t offset = 0;
  uint64_t version = 0;  // leaf: the storage version this value is
  // update: inputs [0, written) are written (the targets, then the reads);
  // done once executed.
  uint32_t written = 0;
  bool done = false;
  // Pending consumers, while this node has no storage yet; they move to the
  // storage's reader list when the node is materialized.
  std::vector<std::weak_ptr<Node>> readers;
  // Counted in g_pending_ops while this is an op that has not run.
  bool counted = false;
  // A custom kernel's outputs (switchyard/custom.h): each one's byte offset
  // and size in this node's buffer, its arguments before the inputs.
  std::vector<std::pair<uint64_t, uint64_t>> custom_outputs;
  // Scratch for the scheduler (single-threaded per evaluation).
  uint64_t mark = 0;
  int32_t idx = -1;

  size_t bytes() const { return size_t(numel(shape)) * dtype_size(dtype); }
  // The node whose buffer a view aliases (itself otherwise).
  Node* base() { return kind == NodeKind::view ? inputs[0].get() : this; }
  bool pending() const { return kind == NodeKind::update ? !done : kind != NodeKind::leaf; }
};
using NodePtr = std::shared_ptr<Node>;

// Op nodes alive in the process that have not run yet. Past
// g_max_pending_ops, making another is an error: a graph that nothing ever
// evaluates would grow without bound. Nodes that run or are dropped leave
// the count. Tests lower the limit.
extern std::atomic<int64_t> g_pending_ops;
extern std::atomic<int64_t> g_max_pending_ops;
void uncount(Node& n);  // n ran (it is a leaf now) or is being destroyed

struct Plan;

// Runtime state of one device: its buffer pool, cached plans and the
// in-place updates waiting to run. Storages keep it alive.
struct Context : std::enable_shared_from_this<Context> {
  explicit Context(std::shared_ptr<Device> d);  // d is a BackendDevice
  ~Context();
  std::shared_ptr<BackendDevice> device;
  BufferPool pool;
  BufferPool host_pool;  // pinned host memory lent to CPU tensors
  std::unordered_map<std::string, std::unique_ptr<Plan>> plans;
  std::vector<NodePtr> pending_updates;
  // Values whose computation was asked for (gradients from backward()): they
  // run with the next evaluation on the device, like work queued on a stream.
  std::vector<std::weak_ptr<Node>> pending_values;
  uint64_t next_program_id = 1;
  // Op nodes made since the last evaluation. Gradients queued by backward()
  // are evaluated once kFlushOps have piled up, so backward() in a loop with
  // no read (gradient accumulation) holds bounded memory.
  static constexpr size_t kFlushOps = 4096;
  size_t ops_since_eval = 0;
  // Guards the graph state of this device: the lists above, the plans, and
  // the mutable fields of its nodes and storages (kind, inputs, deps,
  // versions, readers). Every node made on the device and every evaluation
  // holds it, so threads that each drive their own tensors on one device do
  // not race (an evaluation also runs the other threads' queued updates).
  // Recursive: evaluating builds nothing, but materialize -> evaluate and
  // update_inplace -> materialize nest.
  std::recursive_mutex mu;
};
using GraphLock = std::lock_guard<std::recursive_mutex>;

Context& context_of(Device& d);

// Autograd: the backward of one op, written with ops.
struct GradFn {
  const char* name = "";
  std::vector<std::shared_ptr<TensorImpl>> inputs;  // null: no grad needed
  std::function<std::vector<Tensor>(const Tensor& grad_out)> backward;
};

// A tensor handle's shared state. Threads may share tensors (a model's
// parameters, for Hogwild-style training or inference from several threads):
// the node is swapped under a lock (an in-place update gives the tensor a new
// node), the gradient is guarded by grad_mu, and shape and dtype never change,
// so shape() can hand out a reference.
struct TensorImpl {
  explicit TensorImpl(NodePtr n) : shape(n->shape), dtype(n->dtype), node_(std::move(n)) {}
  ~TensorImpl();  // iterative, like ~Node, for long autograd chains
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;
  const Shape shape;
  const DType dtype;
  NodePtr node() const {
    std::lock_guard<std::mutex> lock(node_mu_);
    return node_;
  }
  void set_node(NodePtr n) {
    std::lock_guard<std::mutex> lock(node_mu_);
    node_.swap(n);  // the old node is released outside the lock
  }
  std::atomic<bool> requires_grad{false};
  std::mutex grad_mu;  // guards grad
  std::shared_ptr<TensorImpl> grad;
  // Set once when an op makes the tensor; replaced by a "freed" marker by
  // the backward() that consumed it (only the thread that owns that graph).
  std::shared_ptr<GradFn> grad_fn;

 private:
  // A mutex, not std::atomic<shared_ptr>: libstdc++ 12's version hides its
  // lock from ThreadSanitizer. Held only to copy or swap the pointer.
  mutable std::mutex node_mu_;
  NodePtr node_;
};

// Helpers shared by the runtime's .cpp files.
Tensor wrap(NodePtr n);  // a tensor with no autograd history
// Every shape a tensor gets passes here: dimensions are non-negative and
// the element count and byte size fit (at most kMaxTensorBytes), so no size
// computed later can wrap around. Returns the element count.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 56;
int64_t check_shape(const char* op, const Shape& s, DType t);
NodePtr make_leaf(Context& c, std::shared_ptr<Storage> s, size_t offset, Shape shape, DType t);
// A kernel node; the kernel is the one `p` was made for, on the inputs'
// device (`ctx` when there are none). Throws when the device lacks the kernel.
NodePtr make_node(std::vector<NodePtr> inputs, Shape shape, DType t, const KernelParams& p,
                  Context* ctx = nullptr);
NodePtr make_view(const NodePtr& base, size_t offset, Shape shape);
std::shared_ptr<Storage> new_storage(Context& c, size_t bytes);
// Throws what update_inplace would throw for target t (a slice of a larger
// storage, a value an executed update overwrote), so that an optimizer can
// check every parameter before it queues the first update.
void check_updatable(const char* op, const Tensor& t);
// Record an in-place update of the leaf tensors in `targets` (which are also
// read) with extra read-only `reads`. Argument order: targets then reads.
void update_inplace(const std::vector<Tensor*>& targets, const std::vector<Tensor>& reads,
                    const KernelParams& p);
// Queue a value computed by backward() to run with the device's next
// evaluation (now, when the pending graph has grown past kFlushOps).
void queue_value(const NodePtr& n);
// Run the pending graph of `roots` (all on one device) in one submission.
void evaluate(Context& c, const std::vector<Node*>& roots);
// Reads t's bytes (numel * dtype size) into dst, evaluating it if needed.
void copy_to_host(const Tensor& t, void* dst);
// Copies of tensors that share a device onto `d` (to() for each), with one
// evaluation and one wait on the source for all of them, however many.
std::vector<Tensor> to_device(const std::vector<Tensor>& ts, Device& d);
// A copy of t's value on d in storage of its own (to() returns t itself on
// its own device), with no autograd history.
Tensor copy_to(const Tensor& t, Device& d);
// A materialized (leaf) node for t, evaluating it if needed.
NodePtr materialize(const Tensor& t);
// The tensor's current node. Another thread may give the tensor a new node
// (an optimizer step on a shared parameter) at any time: code that builds on
// the node reads it while holding lock_graph(t), so that no in-place update
// runs between the read and the new node's check of its inputs.
NodePtr node_of(const Tensor& t);
// Holds the graph lock of t's device.
std::unique_lock<std::recursive_mutex> lock_graph(const Tensor& t);
// Throws when a leaf input was overwritten by an executed in-place update.
void check_fresh(const char* op, const Node& in);

}  // namespace switchyard::detail
