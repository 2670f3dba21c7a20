// SPDX-License-Identifier: MIT
// The Scheduler: turns the pending graph behind some tensors into a Program,
// assigns buffers by lifetime, caches the plan by graph signature and hands
// it to the device in one submission.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <span>

#include "graph.h"
#include "switchyard/error.h"
#include "switchyard/profile.h"

namespace switchyard::detail {

struct Plan {
  Program program;
  std::vector<int32_t> persist_nodes;  // order index of each persisted value
  std::vector<size_t> persist_bytes;
  std::vector<size_t> temp_bytes;
  std::vector<int32_t> instr_node;  // order index behind each instruction
};

namespace {

uint64_t next_mark() {
  static std::atomic<uint64_t> m{1};
  return m++;
}

template <class T>
void put(std::string& key, T v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// The integer parameters that shape a Program (sizes, modes, flags): part of
// the plan key. Floats, RNG words and other per-run values are not, so a step
// with a new learning rate or seed replays the same Program.
void put_static_params(std::string& key, const KernelParams& p) {
  const ParamLayout& l = param_layout(p.kernel());
  for (const ParamField& f : std::span(l.fields, size_t(l.num_fields)))
    if (f.kind == 'I' || f.kind == 'A')
      for (int j = 0; j < f.count; ++j) put(key, p.int_slots()[f.slot + j]);
}

// Gives buffers back to the pool even when execution throws.
struct TempGuard {
  BufferPool& pool;
  std::vector<Buffer> bufs;
  ~TempGuard() {
    for (auto& b : bufs) pool.release(b);
  }
};

class Evaluation {
 public:
  explicit Evaluation(Context& c) : ctx_(c), mark_(next_mark()) {}

  void prepare(const std::vector<Node*>& roots) {
    for (Node* r : roots) collect(r);
    for (auto& u : ctx_.pending_updates) collect(u.get());
    collect_old_readers();
    for (auto& w : ctx_.pending_values) {
      // Only values someone still holds (a dropped gradient is not computed).
      NodePtr v = w.lock();
      if (v && v.use_count() > 1 && v->pending()) {
        collect(v.get());
        hold(std::move(v));
      }
    }
    ctx_.pending_values.clear();
    order_nodes();
  }

  // After a failed prepare(): mark this run's updates done without running
  // them, keeping the version invariant (and saying so if the old value is read).
  void discard_updates() {
    std::vector<NodePtr> keep;
    for (Node* n : set_) {
      if (n->kind != NodeKind::update || n->done) continue;
      for (size_t i = 0; i < n->inputs.size(); ++i) {
        if (i >= n->written) continue;
        Storage& st = *n->inputs[i]->storage;
        st.version++;
        st.discarded_through = st.version;
      }
      n->done = true;
      for (auto& in : n->inputs) keep.push_back(std::move(in));
      n->inputs.clear();
    }
    std::erase_if(ctx_.pending_updates, [](const NodePtr& u) { return u->done; });
  }

  void run() {
    if (order_.empty()) return;
    Plan* plan;
    {
      profile::Span span(profile::Track::planning, "plan", ctx_.device.get());
      compute_persistence();
      std::string key = signature();
      auto it = ctx_.plans.find(key);
      if (it == ctx_.plans.end()) {
        if (ctx_.plans.size() >= 64) ctx_.plans.clear();  // bounded cache
        profile::Span build(profile::Track::planning, "build plan", ctx_.device.get());
        it = ctx_.plans.emplace(std::move(key), build_plan()).first;
      }
      plan = it->second.get();
    }
    execute(*plan);
  }

 private:
  // Pass 1: the set of nodes to run or read, stopping at materialized values.
  void collect(Node* root) {
    std::vector<Node*> stack{root};
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      if (n->mark == mark_) continue;
      if (n->kind == NodeKind::update && n->done) continue;
      n->mark = mark_;
      set_.push_back(n);
      SY_CHECK(n->ctx == &ctx_, "scheduler",
               "expected all tensors to be on the same device, found ", n->ctx->device->str(),
               " and ", ctx_.device->str());
      if (n->kind == NodeKind::leaf) {
        SY_CHECK(n->storage, "scheduler", "a value was read after it was freed (internal error)");
        check_fresh("scheduler", *n);
      }
      for (auto& d : n->deps) stack.push_back(d.get());
      if (n->kind != NodeKind::leaf)
        for (auto& i : n->inputs) stack.push_back(i.get());
    }
  }

  // Whether r reads the storage of leaf `target` at target's version (through
  // a view or directly).
  static bool reads_version(const Node& r, const Node& target) {
    for (auto& in : r.inputs) {
      const Node* b = in->kind == NodeKind::view ? in->inputs[0].get() : in.get();
      if (b->kind == NodeKind::leaf && b->storage == target.storage && b->version == target.version)
        return true;
    }
    return false;
  }

  // Every pending reader of a value an update in this run overwrites runs in
  // this run too (before the update), if anyone still holds it.
  void collect_old_readers() {
    for (size_t k = 0; k < set_.size(); ++k) {
      Node* u = set_[k];
      if (u->kind != NodeKind::update) continue;
      for (size_t i = 0; i < u->inputs.size(); ++i) {
        if (i >= u->written) continue;
        Node* target = u->inputs[i].get();
        for (auto& w : target->storage->readers) {
          // A live reader is held by someone besides this lock, and that
          // holder outlives the evaluation.
          NodePtr r = w.lock();
          if (!r || r.get() == u || r->mark == mark_ || !r->pending()) continue;
          if (reads_version(*r, *target)) {
            collect(r.get());
            hold(std::move(r));
          }
        }
      }
    }
  }

  // Pass 2: a topological order where every reader of a leaf's old version
  // runs before the in-place update that overwrites it.
  void order_nodes() {
    std::unordered_map<const Storage*, std::vector<Node*>> readers;
    bool any_update = false;
    for (Node* n : set_) {
      if (n->kind == NodeKind::update) any_update = true;
      if (n->kind == NodeKind::leaf || n->kind == NodeKind::view) continue;
      for (auto& in : n->inputs) {
        Node* b = in->base();
        if (b->kind == NodeKind::leaf) readers[b->storage.get()].push_back(n);
      }
    }
    std::unordered_map<Node*, std::vector<Node*>> extra;
    if (any_update) {
      for (Node* u : set_) {
        if (u->kind != NodeKind::update) continue;
        for (size_t i = 0; i < u->inputs.size(); ++i) {
          if (i >= u->written) continue;
          Node* target = u->inputs[i].get();
          for (Node* r : readers[target->storage.get()])
            if (r != u && reads_version(*r, *target)) extra[u].push_back(r);
        }
      }
    }
    // Iterative DFS post-order; state 1 = on stack, 2 = done.
    std::unordered_map<Node*, int> state;
    state.reserve(set_.size() * 2);
    auto children = [&](Node* n, std::vector<Node*>& out) {
      out.clear();
      if (n->kind != NodeKind::leaf)
        for (auto& i : n->inputs) out.push_back(i.get());
      for (auto& d : n->deps) out.push_back(d.get());
      if (auto e = extra.find(n); e != extra.end())
        for (Node* r : e->second) out.push_back(r);
    };
    struct Frame {
      Node* n;
      std::vector<Node*> kids;
      size_t next;
    };
    std::vector<Frame> stack;
    for (Node* root : set_) {
      if (state[root]) continue;
      stack.push_back({root, {}, 0});
      children(root, stack.back().kids);
      state[root] = 1;
      while (!stack.empty()) {
        Frame& f = stack.back();
        if (f.next < f.kids.size()) {
          Node* k = f.kids[f.next++];
          if (k->mark != mark_) continue;  // done update or outside the set
          int& s = state[k];
          SY_CHECK(s != 1, "scheduler",
                   "a tensor is read both before and after an in-place update of its storage; "
                   "expected every use of a parameter's old value to come before optimizer.step()");
          if (s == 2) continue;
          s = 1;
          stack.push_back({k, {}, 0});
          children(k, stack.back().kids);
        } else {
          state[f.n] = 2;
          f.n->idx = int32_t(order_.size());
          order_.push_back(f.n);
          stack.pop_back();
        }
      }
    }
  }

  static Node* base_of(Node* n) { return n->kind == NodeKind::view ? n->inputs[0].get() : n; }

  // A value survives the program when something outside the graph holds it
  // (a Tensor, autograd, a node that was not asked for).
  void compute_persistence() {
    std::vector<int> refs(order_.size(), 0);
    for (Node* n : order_) {
      if (n->kind != NodeKind::leaf)
        for (auto& i : n->inputs) refs[i->idx]++;
      for (auto& d : n->deps)
        if (d->mark == mark_) refs[d->idx]++;
    }
    persist_.assign(order_.size(), 0);
    for (Node* n : order_)
      if ((n->kind == NodeKind::op || n->kind == NodeKind::view) && ext_count(n, refs[n->idx]) > 0)
        persist_[n->idx] = 1;
    for (Node* n : order_)
      if (n->kind == NodeKind::view && persist_[n->idx]) persist_[base_of(n)->idx] = 1;
  }

  // Owners: the graph's own inputs/deps plus outside holders (tensors,
  // autograd, nodes that were not asked for), less our own holds.
  long ext_count(Node* n, int in_graph) const {
    auto h = held_count_.find(n);
    return n->weak_from_this().use_count() - in_graph - (h == held_count_.end() ? 0 : h->second);
  }

  // Nodes reached through weak references (queued gradients, old readers)
  // are held for the evaluation: another thread may drop its last handle
  // to them meanwhile.
  void hold(NodePtr n) {
    held_count_[n.get()]++;
    held_.push_back(std::move(n));
  }

  std::string signature() {
    std::string key;
    key.reserve(order_.size() * 64);
    for (Node* n : order_) {
      put(key, uint8_t(n->kind));
      put(key, uint8_t(n->params.kernel()));
      put(key, uint8_t(n->dtype));
      if (n->kind == NodeKind::op || n->kind == NodeKind::update) put_static_params(key, n->params);
      put(key, uint8_t(persist_[n->idx]));
      put(key, uint32_t(n->shape.size()));
      for (auto d : n->shape) put(key, d);
      put(key, uint32_t(n->inputs.size()));
      put(key, uint32_t(n->deps.size()));
      if (n->kind != NodeKind::leaf)
        for (auto& i : n->inputs) put(key, i->idx);
      for (auto& d : n->deps) put(key, d->mark == mark_ ? d->idx : -1);
      if (n->kind == NodeKind::view) put(key, uint64_t(n->offset));
      if (n->kind == NodeKind::op)
        for (auto [off, bytes] : n->custom_outputs) put(key, off), put(key, bytes);
      if (n->kind == NodeKind::update) put(key, n->written);
      if (n->kind == NodeKind::leaf) {
        // Aliasing between leaves matters for ordering: record the first leaf
        // with the same storage.
        auto [it, fresh] = storage_first_.emplace(n->storage.get(), n->idx);
        put(key, fresh ? -1 : it->second);
      }
    }
    return key;
  }

  std::unique_ptr<Plan> build_plan() {
    auto plan = std::make_unique<Plan>();
    const int N = int(order_.size());
    std::vector<int32_t> slot(N, -1);
    std::vector<int> last_use(N, -1);
    for (Node* n : order_)
      if (n->kind != NodeKind::leaf)
        for (auto& i : n->inputs) last_use[i->idx] = std::max(last_use[i->idx], n->idx);
    for (Node* n : order_)
      if (n->kind == NodeKind::view) {
        int b = base_of(n)->idx;
        last_use[b] = std::max(last_use[b], last_use[n->idx]);
      }
    uint32_t next = 0;
    for (Node* n : order_)
      if (n->kind == NodeKind::leaf) slot[n->idx] = int32_t(next++);
    for (Node* n : order_)
      if (n->kind == NodeKind::op && persist_[n->idx]) {
        slot[n->idx] = int32_t(next++);
        plan->persist_nodes.push_back(n->idx);
        plan->persist_bytes.push_back(n->bytes());
      }
    const uint32_t temp_base = next;
    std::vector<size_t>& temps = plan->temp_bytes;
    std::vector<int> free_temps;
    auto take_temp = [&](size_t bytes) {
      int best = -1;
      for (size_t k = 0; k < free_temps.size(); ++k) {
        size_t sz = temps[free_temps[k]];
        if (sz >= bytes && (best < 0 || sz < temps[free_temps[best]])) best = int(k);
      }
      if (best < 0 && !free_temps.empty()) {  // grow the largest free one
        best = 0;
        for (size_t k = 1; k < free_temps.size(); ++k)
          if (temps[free_temps[k]] > temps[free_temps[best]]) best = int(k);
        temps[free_temps[best]] = bytes;
      }
      if (best < 0) {
        temps.push_back(bytes);
        return int(temps.size() - 1);
      }
      int t = free_temps[best];
      free_temps.erase(free_temps.begin() + best);
      return t;
    };
    auto arg_of = [&](Node* x) {
      Arg a;
      Node* b = base_of(x);
      a.slot = uint32_t(slot[b->idx]);
      a.offset = x->kind == NodeKind::view ? x->offset : 0;
      a.bytes = x->bytes();
      return a;
    };
    for (Node* n : order_) {
      if (n->kind == NodeKind::leaf || n->kind == NodeKind::view) continue;
      if (n->kind == NodeKind::op && !persist_[n->idx])
        slot[n->idx] = int32_t(temp_base + take_temp(n->bytes()));
      Instr ins;
      ins.kernel = n->params.kernel();
      if (n->kind == NodeKind::op && !n->custom_outputs.empty()) {
        for (auto [off, bytes] : n->custom_outputs) {  // a custom kernel's outputs
          Arg a = arg_of(n);
          a.offset += off;
          a.bytes = bytes;
          ins.args[ins.nargs++] = a;
        }
      } else if (n->kind == NodeKind::op) {
        ins.args[ins.nargs++] = arg_of(n);
      }
      if (kernel_has(ins.kernel, kMultiTensor)) {  // every argument in more_args
        auto& more = plan->program.more_args;
        ins.more = uint32_t(more.size());
        ins.nmore = uint32_t(n->inputs.size());
        for (auto& i : n->inputs) more.push_back(arg_of(i.get()));
      } else {
        for (auto& i : n->inputs) ins.args[ins.nargs++] = arg_of(i.get());
      }
      plan->program.instrs.push_back(ins);
      plan->instr_node.push_back(n->idx);
      // Free temps whose last reader was this node (after the output was
      // placed, so no kernel reads and writes the same temp).
      for (auto& i : n->inputs) {
        Node* b = base_of(i.get());
        int s = slot[b->idx];
        if (last_use[b->idx] == n->idx && s >= int(temp_base) &&
            std::find(free_temps.begin(), free_temps.end(), s - int(temp_base)) == free_temps.end())
          free_temps.push_back(s - int(temp_base));
      }
      if (n->kind == NodeKind::op && last_use[n->idx] < 0 && slot[n->idx] >= int(temp_base))
        free_temps.push_back(slot[n->idx] - int(temp_base));
    }
    plan->program.num_slots = temp_base + uint32_t(temps.size());
    plan->program.id = ctx_.next_program_id++;
    return plan;
  }

  void execute(Plan& plan) {
    BackendDevice& dev = *ctx_.device;
    std::vector<Binding> bind(plan.program.num_slots);
    uint32_t s = 0;
    for (Node* n : order_)
      if (n->kind == NodeKind::leaf) bind[s++] = {n->storage->buffer, n->offset};
    std::vector<std::shared_ptr<Storage>> outs;
    outs.reserve(plan.persist_nodes.size());
    for (size_t j = 0; j < plan.persist_nodes.size(); ++j) {
      outs.push_back(new_storage(ctx_, plan.persist_bytes[j]));
      bind[s++] = {outs.back()->buffer, 0};
    }
    TempGuard guard{ctx_.pool, {}};
    guard.bufs.reserve(plan.temp_bytes.size());
    for (size_t bytes : plan.temp_bytes) {
      guard.bufs.push_back(ctx_.pool.acquire(bytes));
      bind[s++] = {guard.bufs.back(), 0};
    }
    for (size_t i = 0; i < plan.program.instrs.size(); ++i)
      plan.program.instrs[i].params = order_[plan.instr_node[i]]->params;
    try {
      dev.execute(plan.program, bind);
    } catch (...) {
      finish(plan, nullptr);
      throw;
    }
    finish(plan, &outs);
  }

  // Turn computed values into leaves and cut the graph behind them. On a
  // failed run (outs == nullptr) values stay pending, but the in-place updates
  // are dropped so that one bad step does not poison every later one.
  void finish(Plan& plan, std::vector<std::shared_ptr<Storage>>* outs) {
    std::vector<NodePtr> keep;  // nodes may die as inputs are cleared
    for (Node* n : order_) {
      for (auto& i : n->inputs) keep.push_back(i);
      for (auto& d : n->deps) keep.push_back(d);
    }
    std::vector<NodePtr> updates;
    updates.swap(ctx_.pending_updates);
    for (auto& u : updates)
      if (u->mark != mark_) ctx_.pending_updates.push_back(u);  // not in this run
    keep.insert(keep.end(), updates.begin(), updates.end());
    for (Node* n : order_) {
      if (n->kind != NodeKind::update) continue;
      for (size_t i = 0; i < n->inputs.size(); ++i) {
        if (i >= n->written) continue;
        Storage& st = *n->inputs[i]->storage;
        st.version++;
        if (!outs) st.discarded_through = st.version;
      }
      n->done = true;
      n->inputs.clear();
    }
    for (Node* n : order_)
      if (n->kind == NodeKind::leaf) n->deps.clear();
    if (!outs) return;
    for (size_t j = 0; j < plan.persist_nodes.size(); ++j)
      order_[plan.persist_nodes[j]]->storage = (*outs)[j];
    for (Node* n : order_) {
      if (n->kind == NodeKind::view) {
        Node* b = base_of(n);  // earlier in the order: already a leaf here
        n->storage = persist_[n->idx] ? b->storage : nullptr;
        n->offset += b->offset;
      } else if (n->kind == NodeKind::op)
        n->offset = 0;
      else
        continue;
      // Not persisted: nothing outside holds it, so it is never read again.
      n->kind = NodeKind::leaf;
      uncount(*n);
      n->version = 0;
      if (n->storage)
        for (auto& r : n->readers)
          if (!r.expired()) n->storage->add_reader(r.lock());
      n->readers.clear();
    }
    for (Node* n : order_)
      if (n->kind == NodeKind::leaf) n->inputs.clear();
  }

  Context& ctx_;
  uint64_t mark_;
  std::vector<NodePtr> held_;
  std::unordered_map<const Node*, int> held_count_;
  std::vector<Node*> set_;
  std::vector<Node*> order_;
  std::vector<char> persist_;
  std::unordered_map<const Storage*, int32_t> storage_first_;
};

}  // namespace

void queue_value(const NodePtr& n) {
  Context& c = *n->ctx;
  GraphLock lock(c.mu);  // another thread's evaluation may be running n
  if (!n->pending()) return;
  c.pending_values.push_back(n);
  if (c.ops_since_eval >= Context::kFlushOps) evaluate(c, {});
}

void evaluate(Context& c, const std::vector<Node*>& roots) {
  GraphLock lock(c.mu);
  c.ops_since_eval = 0;
  Evaluation e(c);
  try {
    profile::Span span(profile::Track::planning, "collect graph", c.device.get());
    e.prepare(roots);
  } catch (...) {
    // A pending update whose inputs cannot be evaluated would fail every later
    // evaluation on this device: drop it (the error still reaches the caller).
    e.discard_updates();
    throw;
  }
  e.run();
}

}  // namespace switchyard::detail

namespace switchyard::detail {
Context::Context(std::shared_ptr<Device> d)
    : device(std::static_pointer_cast<BackendDevice>(std::move(d))),
      pool(*device),
      host_pool(*device, true) {}
Context::~Context() {
  plans.clear();
  pool.empty();
}
}  // namespace switchyard::detail
