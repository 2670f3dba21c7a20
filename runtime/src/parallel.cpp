// SPDX-License-Identifier: MIT
// nn::DataParallel: one model over several devices of any backends in one
// process. The model itself is the first device's replica; the others are
// rebuilt copies whose parameters are refreshed from it when it has
// changed. A forward builds every replica's graph, then evaluates them all
// at once (one thread per device, so a CPU device computes while a GPU's
// submission runs), and gathers the outputs. Its backward (a GradFn on the
// gathered output) runs each replica's backward the same way and sums the
// replicas' gradients into the model's parameters.
#include "switchyard/parallel.h"

#include <algorithm>
#include <cmath>
#include <future>
#include <mutex>
#include <numeric>
#include <optional>

#include "graph.h"
#include "switchyard/error.h"
#include "switchyard/profile.h"

namespace switchyard::nn {
using detail::GradFn;

namespace {

double now_s() { return double(profile::now_ns()) * 1e-9; }

std::vector<Device*> default_devices() {
  std::vector<Device*> gpus;
  for (Device* d : switchyard::devices())
    if (d->info().type != DeviceType::cpu) gpus.push_back(d);
  if (gpus.empty()) gpus.push_back(&cpu());
  return gpus;
}

std::vector<Device*> resolve(const std::vector<std::string>& names) {
  std::vector<Device*> out;
  for (const std::string& n : names) out.push_back(&device(n));
  return out;
}

}  // namespace

struct DataParallel::State {
  DataParallelOptions opt;
  std::vector<Device*> devices;
  std::vector<std::shared_ptr<Module>> replicas;  // [0] is the model itself
  std::vector<std::vector<Tensor>> params;        // each replica's parameters, in order
  std::vector<std::vector<Tensor>> buffers;
  // The model's parameter and buffer values last copied to the replicas:
  // a forward after no optimizer step copies nothing.
  std::vector<std::weak_ptr<detail::Node>> sent;
  std::vector<double> weights;  // per device, summing to 1 (balance = measured)
  std::vector<double> busy_s;   // measured seconds per device
  std::vector<int64_t> busy_samples;
  int timed_steps = 0;
  mutable std::mutex mu;  // guards stats
  DataParallelStats stats;

  void add_comm(double secs, uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu);
    stats.comm_seconds += secs;
    stats.bytes_moved += bytes;
  }

  // Moves ts[i] to *to[i], counted: the tensors that go between the same
  // two devices together (to_device), with one wait on their source, so a
  // step costs a wait per pair of devices rather than one per parameter.
  std::vector<Tensor> move_all(const std::vector<Tensor>& ts, const std::vector<Device*>& to) {
    std::vector<Tensor> out(ts.size());
    std::vector<bool> done(ts.size(), false);
    const double t0 = now_s();
    uint64_t bytes = 0;
    for (size_t i = 0; i < ts.size(); ++i) {
      if (done[i]) continue;
      Device* from = &ts[i].device();
      std::vector<size_t> which;
      std::vector<Tensor> group;
      for (size_t j = i; j < ts.size(); ++j)
        if (!done[j] && &ts[j].device() == from && to[j] == to[i]) {
          done[j] = true;
          which.push_back(j);
          group.push_back(ts[j]);
          if (from != to[i]) bytes += uint64_t(ts[j].numel()) * dtype_size(ts[j].dtype());
        }
      std::vector<Tensor> moved = detail::to_device(group, *to[i]);
      for (size_t j = 0; j < which.size(); ++j) out[which[j]] = std::move(moved[j]);
    }
    if (bytes) add_comm(now_s() - t0, bytes);
    return out;
  }
  std::vector<Tensor> move_all(const std::vector<Tensor>& ts, Device& to) {
    return move_all(ts, std::vector<Device*>(ts.size(), &to));
  }
  Tensor move(const Tensor& t, Device& to) { return move_all({t}, to).front(); }

  // Copies the model's current values to replicas 1.., when they changed.
  void broadcast() {
    for (size_t k = 1; k < replicas.size(); ++k)  // frozen parameters are frozen in each
      for (size_t i = 0; i < params[0].size(); ++i)
        params[k][i].requires_grad_(params[0][i].requires_grad());
    std::vector<Tensor> values = params[0];
    values.insert(values.end(), buffers[0].begin(), buffers[0].end());
    bool changed = sent.size() != values.size();
    for (size_t i = 0; !changed && i < values.size(); ++i)
      changed = sent[i].lock() != detail::node_of(values[i]);
    if (!changed) return;
    NoGradGuard no_grad;
    // Every copy first, then the swaps, then `sent`: a copy that fails (out
    // of memory on a device) leaves no replica half updated, and the next
    // forward copies again.
    std::vector<Tensor> detached;
    for (const Tensor& v : values) detached.push_back(v.detach());
    std::vector<std::pair<Tensor, Tensor>> swaps;
    for (size_t k = 1; k < replicas.size(); ++k) {
      std::vector<Tensor> moved = move_all(detached, *devices[k]);
      for (size_t i = 0; i < params[0].size(); ++i) swaps.push_back({params[k][i], moved[i]});
      for (size_t i = 0; i < buffers[0].size(); ++i)
        swaps.push_back({buffers[k][i], moved[params[0].size() + i]});
    }
    for (auto& [target, value] : swaps) target.set_data(value);
    sent.clear();
    for (const Tensor& v : values) sent.push_back(detail::node_of(v));
  }

  // Whether this step is timed: after the first (untimed: it compiles and
  // allocates), until measure_steps were.
  bool timed_step() const {
    return opt.balance == DataParallelOptions::Balance::measured && weights.empty() &&
           stats.steps >= 1;
  }

  // Evaluates work[k] on devices[k] and waits for it: every device at once
  // (a thread each, the caller's the last), or one after the other, timed.
  void run(const std::vector<std::vector<Tensor>>& work, const std::vector<int64_t>& rows,
           bool timed) {
    auto one = [&](size_t k) {
      if (work[k].empty()) return;
      switchyard::eval(work[k]);
      switchyard::synchronize(*devices[k]);
    };
    if (timed) {
      for (size_t k = 0; k < work.size(); ++k) {
        const double t0 = now_s();
        one(k);
        busy_s[k] += now_s() - t0;
        busy_samples[k] += rows[k];  // forward and backward: twice per step, as the time
      }
      return;
    }
    std::vector<std::future<void>> others;
    for (size_t k = 0; k + 1 < work.size(); ++k)
      if (!work[k].empty()) others.push_back(std::async(std::launch::async, one, k));
    std::exception_ptr first;
    try {
      one(work.size() - 1);
    } catch (...) {
      first = std::current_exception();
    }
    for (auto& f : others) {  // every thread is joined before anything is rethrown
      try {
        f.get();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }

  // After the timed steps: each device's share, in proportion to its speed.
  void settle_weights() {
    if (!timed_step() || timed_steps < opt.measure_steps) return;
    std::vector<double> speed(devices.size(), 0.0);
    for (size_t k = 0; k < devices.size(); ++k)
      speed[k] = busy_s[k] > 0 ? double(busy_samples[k]) / busy_s[k] : 0.0;
    double total = std::accumulate(speed.begin(), speed.end(), 0.0);
    if (total <= 0) {  // nothing measured: equal shares, and no more timed steps
      speed.assign(devices.size(), 1.0);
      total = double(devices.size());
    }
    weights.clear();
    for (double v : speed) weights.push_back(v / total);
    std::lock_guard<std::mutex> lock(mu);
    stats.speed = speed;
  }

  std::vector<int64_t> split(int64_t n) const {
    const size_t k = devices.size();
    std::vector<int64_t> out(k, 0);
    if (weights.empty()) {  // equal: the first n % k devices get one more
      for (size_t i = 0; i < k; ++i) out[i] = n / int64_t(k) + (int64_t(i) < n % int64_t(k));
      return out;
    }
    // In proportion to the weights; the rows left by rounding down go to
    // the largest remainders.
    std::vector<std::pair<double, size_t>> rem;
    int64_t given = 0;
    for (size_t i = 0; i < k; ++i) {
      const double exact = double(n) * weights[i];
      out[i] = int64_t(std::floor(exact));
      given += out[i];
      rem.push_back({exact - double(out[i]), i});
    }
    std::sort(rem.begin(), rem.end(), [](auto& a, auto& b) { return a.first > b.first; });
    for (size_t j = 0; given < n; ++j, ++given) ++out[rem[j % k].second];
    return out;
  }
};

DataParallel::DataParallel(std::shared_ptr<Module> module, const std::vector<std::string>& devices,
                           DataParallelOptions o)
    : DataParallel(std::move(module), resolve(devices), std::move(o)) {}

DataParallel::DataParallel(std::shared_ptr<Module> module, std::vector<Device*> devs,
                           DataParallelOptions o)
    : module_(std::move(module)), state_(std::make_shared<State>()) {
  const char* op = "DataParallel";
  SY_CHECK(module_ != nullptr, op, "expected a module, found null");
  if (devs.empty()) devs = default_devices();
  for (size_t i = 0; i < devs.size(); ++i) {
    SY_CHECK(devs[i] != nullptr, op, "expected devices, found null at position ", i);
    for (size_t j = 0; j < i; ++j)
      SY_CHECK(devs[j] != devs[i], op, "expected each device once, found ", devs[i]->str(),
               " twice");
  }
  SY_CHECK(o.measure_steps >= 1, op, "expected measure_steps >= 1, found ", o.measure_steps);
  output_ = o.output_device ? o.output_device : devs[0];
  register_module("module", module_);
  module_->to(*devs[0]);

  State& s = *state_;
  s.opt = std::move(o);
  s.devices = devs;
  s.busy_s.assign(devs.size(), 0.0);
  s.busy_samples.assign(devs.size(), 0);
  std::optional<ModuleSpec> spec = module_->spec();
  SY_CHECK(devs.size() == 1 || s.opt.replicate || spec, op,
           "expected a model that can be replicated: one with spec() (the built-in layers and "
           "Sequential), or DataParallelOptions::replicate; found neither");
  auto names = [](const auto& named) {
    std::vector<std::pair<std::string, Shape>> out;
    for (auto& [n, t] : named) out.push_back({n, t.shape()});
    return out;
  };
  for (size_t k = 0; k < devs.size(); ++k) {
    std::shared_ptr<Module> r = module_;
    if (k > 0) {
      // Built without disturbing the global generator: the run draws the
      // same numbers as on one device.
      const RandomState rs = random_state();
      NoGradGuard no_grad;
      r = s.opt.replicate ? s.opt.replicate() : build(*spec, cpu());
      set_random_state(rs);
      SY_CHECK(r != nullptr, op, "the replicate function returned null");
      SY_CHECK(names(r->named_parameters()) == names(module_->named_parameters()) &&
                   names(r->named_buffers()) == names(module_->named_buffers()),
               op, "expected replicas with the model's parameters and buffers (names, shapes)");
    }
    s.replicas.push_back(r);
    s.params.push_back(r->parameters());
    s.buffers.emplace_back();
    for (auto& [n, b] : r->named_buffers()) s.buffers.back().push_back(b);
  }
  s.stats.shard.assign(devs.size(), 0);
}

DataParallel::~DataParallel() = default;

const std::vector<Device*>& DataParallel::devices() const { return state_->devices; }

std::vector<int64_t> DataParallel::shard_sizes(int64_t batch) const { return state_->split(batch); }

DataParallelStats DataParallel::stats() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->stats;
}

Tensor DataParallel::forward(const Tensor& x) {
  const char* op = "DataParallel";
  State& s = *state_;
  SY_CHECK(x.defined() && x.dim() >= 1, op, "expected an input with a batch dimension, found ",
           x.defined() ? "a scalar" : "an undefined tensor");
  SY_CHECK(x.size(0) >= 1, op, "expected at least one row to split, found an empty batch");
  // The replicas mirror the parameters the model had when this was built.
  const std::vector<Tensor> now = module_->parameters();
  bool same = now.size() == s.params[0].size();
  for (size_t i = 0; same && i < now.size(); ++i) same = now[i].impl() == s.params[0][i].impl();
  SY_CHECK(same, op,
           "expected the model's parameters to keep their identity (assign values with "
           "set_data or load_state_dict), found a parameter replaced or added: build the "
           "DataParallel again");
  const double t0 = now_s();
  s.settle_weights();
  const bool timed = s.timed_step();
  s.timed_steps += timed;
  s.broadcast();
  const int64_t n = x.size(0);
  const std::vector<int64_t> rows = s.split(n);
  const size_t k_count = s.devices.size();
  const bool grad = is_grad_enabled();
  const bool x_grad = grad && x.requires_grad();

  // Each replica's graph, built here; evaluated below, all at once.
  auto xs = std::make_shared<std::vector<Tensor>>(k_count);
  auto outs = std::make_shared<std::vector<Tensor>>(k_count);
  std::vector<std::vector<Tensor>> work(k_count);
  int64_t begin = 0;
  for (size_t k = 0; k < k_count; ++k) {
    if (rows[k] == 0) continue;
    Tensor xk;
    {
      NoGradGuard no_grad;
      xk = s.move(x.slice(begin, begin + rows[k]).detach(), *s.devices[k]);
    }
    if (x_grad) {
      xk = xk.detach();  // a leaf of this replica's graph
      xk.requires_grad_();
    }
    begin += rows[k];
    if (k > 0) s.replicas[k]->train(module_->is_training());
    (*xs)[k] = xk;
    (*outs)[k] = (*s.replicas[k])(xk);
    work[k].push_back((*outs)[k]);
  }
  s.run(work, rows, timed);

  // Gathered on the output device.
  std::vector<Tensor> parts;
  {
    NoGradGuard no_grad;
    for (size_t k = 0; k < k_count; ++k)
      if (rows[k]) parts.push_back(s.move((*outs)[k].detach(), *output_));
  }
  Tensor out;
  {
    NoGradGuard no_grad;
    out = cat(parts, 0);
    if (parts.size() == 1) out = out.detach();  // cat returns its only input as it is
  }
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.stats.steps++;
    s.stats.shard = rows;
    s.stats.step_seconds += now_s() - t0;
  }

  bool needs = x_grad;
  for (const Tensor& p : s.params[0]) needs = needs || p.requires_grad();
  if (!grad || !needs) return out;

  // The backward: every replica's, at once; the gradients of replicas 1..
  // summed onto the model's parameters (replica 0 is the model: its own
  // backward accumulates into them directly).
  auto fn = std::make_shared<GradFn>();
  fn->name = "DataParallel";
  const std::vector<Tensor>& master = s.params[0];
  for (const Tensor& p : master) fn->inputs.push_back(p.requires_grad() ? p.impl_ptr() : nullptr);
  if (x_grad) fn->inputs.push_back(x.impl_ptr());
  Device* x_dev = &x.device();
  fn->backward = [sp = state_, xs, outs, rows, x_grad, x_dev, timed](const Tensor& g) {
    State& s = *sp;
    const size_t k_count = s.devices.size();
    for (size_t k = 0; k < k_count; ++k)
      SY_CHECK(!rows[k] || (*outs)[k].defined(), "backward",
               "trying to backward through DataParallel's output a second time; its replicas' "
               "graphs were freed by the first backward()");
    const double t0 = now_s();
    // The model's gradients so far, set aside: replica 0's backward adds into
    // them, and if anything below fails they are put back as they were (a
    // step after the error never sees one replica's share alone).
    std::vector<Tensor> before;
    for (Tensor& p : s.params[0]) {
      before.push_back(p.grad());
      p.zero_grad();
    }
    std::vector<std::vector<Tensor>> work(k_count);
    std::vector<Tensor> result;
    try {
      int64_t begin = 0;
      for (size_t k = 0; k < k_count; ++k) {
        if (rows[k] == 0) continue;
        Tensor gk = s.move(g.slice(begin, begin + rows[k]), *s.devices[k]);
        begin += rows[k];
        if (k > 0)
          for (Tensor& p : s.params[k]) p.zero_grad();
        (*outs)[k].backward(gk);
        for (Tensor& p : s.params[k])
          if (p.grad().defined()) work[k].push_back(p.grad());
        if (x_grad && (*xs)[k].grad().defined()) work[k].push_back((*xs)[k].grad());
      }
      s.run(work, rows, timed);

      // Each replica's gradients move to the model's devices together.
      const std::vector<Tensor>& master = s.params[0];
      std::vector<Tensor> sums(master.size());
      for (size_t k = 1; k < k_count; ++k) {
        if (!rows[k]) continue;
        std::vector<size_t> which;
        std::vector<Tensor> grads;
        std::vector<Device*> to;
        for (size_t i = 0; i < master.size(); ++i)
          if (Tensor gi = s.params[k][i].grad(); master[i].requires_grad() && gi.defined()) {
            which.push_back(i);
            grads.push_back(gi);
            to.push_back(&master[i].device());
          }
        std::vector<Tensor> moved = s.move_all(grads, to);
        for (size_t j = 0; j < which.size(); ++j) {
          Tensor& sum = sums[which[j]];
          sum = sum.defined() ? sum + moved[j] : moved[j];
        }
      }
      result = std::move(sums);
      if (x_grad) {
        std::vector<Tensor> parts;
        for (size_t k = 0; k < k_count; ++k) {
          if (!rows[k]) continue;
          Tensor gx = (*xs)[k].grad();
          parts.push_back(gx.defined() ? s.move(gx, *x_dev)
                                       : zeros((*xs)[k].shape(), Options(*x_dev)));
        }
        result.push_back(cat(parts, 0));
      }
    } catch (...) {
      for (size_t i = 0; i < before.size(); ++i) s.params[0][i].set_grad(before[i]);
      throw;
    }
    for (size_t i = 0; i < before.size(); ++i) {  // replica 0's share on top of the old
      Tensor now = s.params[0][i].grad();
      if (!before[i].defined()) continue;
      Tensor sum = now.defined() ? before[i] + now : before[i];
      s.params[0][i].set_grad(sum);
      detail::queue_value(detail::node_of(sum));  // accumulation stays bounded
    }
    for (size_t k = 0; k < k_count; ++k) {  // the graphs are spent: free them now
      (*outs)[k] = Tensor();
      (*xs)[k] = Tensor();
    }
    std::lock_guard<std::mutex> lock(s.mu);
    s.stats.step_seconds += now_s() - t0;
    return result;
  };
  out.requires_grad_();
  out.impl()->grad_fn = std::move(fn);
  return out;
}

}  // namespace switchyard::nn
