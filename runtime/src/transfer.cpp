// SPDX-License-Identifier: MIT
// Copies between devices: Tensor::to for one tensor, to_device for several
// that share a device, with one wait on their source.
#include <algorithm>
#include <memory>

#include "graph.h"
#include "switchyard/error.h"

namespace switchyard {
namespace detail {
// GPU to GPU copies go through a host buffer of at most this many bytes at
// a time (a whole model would otherwise be held twice in host memory).
constexpr size_t kStagedBytes = size_t(64) << 20;

std::vector<Tensor> to_device(const std::vector<Tensor>& ts, Device& dev) {
  if (ts.empty()) return {};
  Context& c = context_of(dev);
  BackendDevice& d = *c.device;
  std::vector<NodePtr> src;
  std::vector<std::shared_ptr<Storage>> dst;
  Context* from_ctx = nullptr;
  {
    // The source's graph lock is held through the copies, so no update of
    // them runs and no set_data moves them while they are read; released
    // before the destination's lock is taken (make_leaf), so copies in both
    // directions cannot deadlock.
    auto source_lock = lock_graph(ts.front());
    from_ctx = node_of(ts.front())->ctx;
    for (const Tensor& t : ts)
      SY_CHECK(node_of(t)->ctx == from_ctx, "to",
               "expected the tensors copied together to share a device, found ",
               from_ctx->device->str(), " and ", node_of(t)->ctx->device->str());
    if (from_ctx->device.get() == &dev) return ts;
    BackendDevice& from = *from_ctx->device;
    std::vector<NodePtr> pending;  // whatever is pending, in one submission
    for (const Tensor& t : ts)
      if (NodePtr n = node_of(t); n->pending() || !n->deps.empty()) pending.push_back(std::move(n));
    if (!pending.empty()) {
      std::vector<Node*> roots;
      for (const NodePtr& n : pending) roots.push_back(n.get());
      evaluate(*from_ctx, roots);
    }
    // Each copy's route: a device copy from the destination's own pinned
    // memory; an upload from host-visible source memory; a download into
    // host-visible destination memory; or GPU to GPU through a host buffer.
    enum class Route { empty, pinned, from_host, into_host, staged };
    std::vector<Route> route;
    size_t staged = 0;
    for (const Tensor& t : ts) {
      src.push_back(materialize(t));
      const Node& m = *src.back();
      dst.push_back(new_storage(c, m.bytes()));
      route.push_back(!m.bytes()                                                     ? Route::empty
                      : m.storage->pin_ctx && m.storage->pin_ctx->device.get() == &d ? Route::pinned
                      : from.host_pointer(m.storage->buffer) ? Route::from_host
                      : d.host_pointer(dst.back()->buffer)   ? Route::into_host
                                                             : Route::staged);
      if (route.back() == Route::staged) staged = std::max(staged, m.bytes());
    }
    // The host must see finished values before it reads the source's memory.
    if (std::find(route.begin(), route.end(), Route::from_host) != route.end()) from.synchronize();
    // One wait for the downloads queued so far, however many tensors (a
    // staging device pays a submission and a fence for each wait), then the
    // uploads of what came through the host buffer; another wait only when
    // that buffer is full.
    const size_t cap = std::max(staged, std::min(staged * ts.size(), kStagedBytes));
    std::unique_ptr<char[]> tmp(new char[cap]);
    std::vector<size_t> held;  // staged tensors in tmp, in order, waiting for the wait
    size_t used = 0;           // bytes of tmp they hold
    bool queued = false;       // downloads queued since the last wait
    auto flush = [&] {
      if (!queued) return;
      from.synchronize();
      queued = false;
      size_t at = 0;
      for (size_t i : held) {
        d.upload(dst[i]->buffer, 0, tmp.get() + at, src[i]->bytes());
        at += src[i]->bytes();
      }
      held.clear();
      used = 0;
    };
    try {
      for (size_t i = 0; i < src.size(); ++i) {
        const Node& m = *src[i];
        Storage& st = *dst[i];
        switch (route[i]) {
          case Route::empty:
            break;
          case Route::pinned:
            d.copy(m.storage->pin_buffer, m.offset, st.buffer, 0, m.bytes());
            break;
          case Route::from_host:
            d.upload(st.buffer, 0,
                     static_cast<char*>(from.host_pointer(m.storage->buffer)) + m.offset,
                     m.bytes());
            break;
          case Route::into_host:
            // The host writes the destination's memory here, outside its
            // queue: a pooled buffer may still be read or written by work
            // queued on `d` before it was released, which must finish first.
            d.wait_until_unused(st.buffer);
            from.download(m.storage->buffer, m.offset, d.host_pointer(st.buffer), m.bytes());
            queued = true;
            break;
          case Route::staged:
            if (used + m.bytes() > cap) flush();
            from.download(m.storage->buffer, m.offset, tmp.get() + used, m.bytes());
            held.push_back(i);
            used += m.bytes();
            queued = true;
            break;
        }
      }
      flush();
    } catch (...) {
      // Downloads may still be queued into tmp or the destination's memory,
      // both freed on the way out: they must land (or be cancelled) first.
      try {
        from.synchronize();
      } catch (...) {
      }
      throw;
    }
    // Nothing to wait for: upload() has consumed (copied or staged) the
    // source, and the device orders the copy before any later work on it.
    // Waiting here would cost a submission per batch on a staging device.
  }
  std::vector<Tensor> out;
  for (size_t i = 0; i < ts.size(); ++i) {
    const Node& m = *src[i];
    out.push_back(wrap(make_leaf(c, std::move(dst[i]), 0, m.shape, m.dtype)));
    // As in PyTorch, a copy to another device is differentiable.
    if (ts[i].requires_grad() && is_grad_enabled()) {
      auto fn = std::make_shared<GradFn>();
      fn->name = "to";
      fn->inputs = {ts[i].impl_ptr()};
      Device* back = from_ctx->device.get();
      fn->backward = [back](const Tensor& g) { return std::vector<Tensor>{g.to(*back)}; };
      out.back().impl()->requires_grad = true;
      out.back().impl()->grad_fn = std::move(fn);
    }
  }
  return out;
}
}  // namespace detail

Tensor Tensor::to(Device& dev, bool non_blocking) const {
  (void)non_blocking;  // every copy is ordered on both devices' queues (to_device)
  return detail::to_device({*this}, dev).front();
}
}  // namespace switchyard
