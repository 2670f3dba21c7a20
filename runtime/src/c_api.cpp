// SPDX-License-Identifier: MIT
// The C API (switchyard/switchyard_c.h) over the C++ one. Every entry point
// that can fail runs its body in guard(), which turns exceptions into a
// status and this thread's last-error message: nothing is thrown across.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "graph.h"
#include "switchyard/switchyard.h"
#include "switchyard/switchyard_c.h"

namespace sy = switchyard;

// The C enums carry the C++ values.
static_assert(SY_F32 == int(switchyard::DType::f32) && SY_I32 == int(switchyard::DType::i32) &&
              SY_U8 == int(switchyard::DType::u8) && SY_I64 == int(switchyard::DType::i64) &&
              SY_BF16 == int(switchyard::DType::bf16) && SY_F16 == int(switchyard::DType::f16) &&
              SY_F16 + 1 == switchyard::kNumDTypes);
static_assert(SY_DEVICE_CPU == int(switchyard::DeviceType::cpu) &&
              SY_DEVICE_INTEGRATED_GPU == int(switchyard::DeviceType::integrated_gpu) &&
              SY_DEVICE_DISCRETE_GPU == int(switchyard::DeviceType::discrete_gpu) &&
              SY_DEVICE_VIRTUAL_GPU == int(switchyard::DeviceType::virtual_gpu) &&
              SY_DEVICE_OTHER == int(switchyard::DeviceType::other));

// A device's facts are copied in: its strings outlive the runtime's
// registry (an atexit handler may still ask).
struct sy_device {
  sy::Device* d;
  std::string name;  // "vulkan:0"
  sy::DeviceInfo info;
};
struct sy_tensor {
  sy::Tensor t;
};
struct sy_model {
  std::shared_ptr<sy::nn::Module> m;
  sy::Device* device;
};
struct sy_tensor_list {
  sy::NamedTensors items;
  sy::Metadata metadata;
};

namespace {

// A bad argument from the caller: SY_ERROR_INVALID_ARGUMENT.
class InvalidArgument : public sy::Error {
 public:
  using Error::Error;
};

// A plain buffer: a thread_local with a destructor can be torn down before
// the thread's last use on some platforms (mingw-w64's emulated TLS), and
// copying into it never allocates. Longer messages are cut, marked "...".
thread_local char t_last_error[4096];

sy_status fail(sy_status s, const char* what) noexcept {
  const size_t n = std::strlen(what), room = sizeof t_last_error - 1;
  if (n <= room) {
    std::memcpy(t_last_error, what, n + 1);
    return s;
  }
  size_t cut = room - 3;  // "..." after whole UTF-8 characters only
  while (cut > 0 && (static_cast<unsigned char>(what[cut]) & 0xC0) == 0x80) --cut;
  std::memcpy(t_last_error, what, cut);
  std::memcpy(t_last_error + cut, "...", 4);
  return s;
}

template <class F>
sy_status guard(const char* op, F&& body) noexcept {
  try {
    body();
    return SY_OK;
  } catch (const InvalidArgument& e) {
    return fail(SY_ERROR_INVALID_ARGUMENT, e.what());
  } catch (const sy::OutOfMemory& e) {
    return fail(SY_ERROR_OUT_OF_MEMORY, e.what());
  } catch (const sy::DeviceLimit& e) {
    return fail(SY_ERROR_DEVICE_LIMIT, e.what());
  } catch (const sy::DeviceLost& e) {
    return fail(SY_ERROR_DEVICE_LOST, e.what());
  } catch (const sy::Error& e) {
    return fail(SY_ERROR, e.what());
  } catch (const std::bad_alloc&) {
    return fail(SY_ERROR_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& e) {
    try {
      return fail(SY_ERROR_INTERNAL,
                  sy::detail::cat("[", op, "] internal error: ", e.what()).c_str());
    } catch (...) {
      return fail(SY_ERROR_INTERNAL, e.what());
    }
  } catch (...) {
    return fail(SY_ERROR_INTERNAL, "internal error: an unknown exception");
  }
}

template <class T>
T* need(T* p, const char* op, const char* what) {
  if (!p) throw InvalidArgument(sy::detail::cat("[", op, "] expected ", what, ", found NULL"));
  return p;
}

// Handles and strings that live until exit (devices, backend facts).
struct Interned {
  std::mutex mu;
  std::map<sy::Device*, std::unique_ptr<sy_device>> devices;
  std::set<std::string, std::less<>> strings;
};
Interned& interned() {
  static Interned* i = new Interned;  // never destroyed: handles outlive statics
  return *i;
}
sy_device* handle(sy::Device& d) {
  Interned& in = interned();
  std::lock_guard lock(in.mu);
  auto& h = in.devices[&d];
  if (!h) h.reset(new sy_device{&d, d.str(), d.info()});
  return h.get();
}
const char* intern(const std::string& s) {
  Interned& in = interned();
  std::lock_guard lock(in.mu);
  return in.strings.insert(s).first->c_str();
}

sy::DType dtype_of(sy_dtype t, const char* op) {
  if (int(t) < 0 || int(t) >= sy::kNumDTypes)
    throw InvalidArgument(sy::detail::cat(
        "[", op, "] expected a dtype SY_F32, SY_I32, SY_U8 or SY_I64, found ", int(t)));
  return sy::DType(t);
}

sy_tensor* wrap(sy::Tensor t) { return new sy_tensor{std::move(t)}; }

// `out` is written last, so a failure leaves it as the caller had it.
template <class T>
void give(T** out, T* value) {
  *out = value;
}

}  // namespace

extern "C" {

const char* sy_version(void) { return sy::version(); }
const char* sy_last_error(void) { return t_last_error; }

const char* sy_status_name(sy_status s) {
  switch (s) {
    case SY_OK:
      return "SY_OK";
    case SY_ERROR_INVALID_ARGUMENT:
      return "SY_ERROR_INVALID_ARGUMENT";
    case SY_ERROR:
      return "SY_ERROR";
    case SY_ERROR_OUT_OF_MEMORY:
      return "SY_ERROR_OUT_OF_MEMORY";
    case SY_ERROR_DEVICE_LIMIT:
      return "SY_ERROR_DEVICE_LIMIT";
    case SY_ERROR_INTERNAL:
      return "SY_ERROR_INTERNAL";
    case SY_ERROR_DEVICE_LOST:
      return "SY_ERROR_DEVICE_LOST";
    case SY_STATUS_MAX_:
      break;
  }
  return "SY_ERROR_UNKNOWN_STATUS";
}

const char* sy_dtype_name(sy_dtype t) {
  return int(t) >= 0 && int(t) < sy::kNumDTypes ? sy::dtype_name(sy::DType(t)) : nullptr;
}
size_t sy_dtype_size(sy_dtype t) {
  return int(t) >= 0 && int(t) < sy::kNumDTypes ? sy::dtype_size(sy::DType(t)) : 0;
}

void sy_set_message_handler(sy_message_fn fn, void* user) {
  try {
    if (!fn)
      sy::set_message_handler(nullptr);
    else
      sy::set_message_handler([fn, user](std::string_view m) { fn(std::string(m).c_str(), user); });
  } catch (...) {  // no memory for the handler: the old one stays
  }
}
void sy_reset_message_handler(void) { sy::reset_message_handler(); }
void sy_set_disk_cache(int enabled) { sy::set_disk_cache(enabled != 0); }

// ---- backends and devices -------------------------------------------------

sy_status sy_backend_count(size_t* count) {
  return guard("sy_backend_count", [&] {
    need(count, "sy_backend_count", "a count pointer");
    *count = sy::backends().size();
  });
}

sy_status sy_backend_info(size_t index, const char** name, int* available, const char** reason) {
  return guard("sy_backend_info", [&] {
    const auto& all = sy::backends();
    if (index >= all.size())
      throw InvalidArgument(sy::detail::cat("[sy_backend_info] expected an index below ",
                                            all.size(), ", found ", index));
    const sy::BackendEntry& b = all[index];
    const char* n = intern(b.name);
    const char* r = intern(b.available ? std::string() : b.reason);
    if (name) *name = n;
    if (available) *available = b.available ? 1 : 0;
    if (reason) *reason = r;
  });
}

sy_status sy_device_count(size_t* count) {
  return guard("sy_device_count", [&] {
    need(count, "sy_device_count", "a count pointer");
    *count = sy::devices().size();
  });
}

sy_status sy_device_get(size_t index, sy_device** out) {
  return guard("sy_device_get", [&] {
    need(out, "sy_device_get", "an output pointer");
    auto all = sy::devices();
    if (index >= all.size())
      throw InvalidArgument(sy::detail::cat("[sy_device_get] expected an index below ", all.size(),
                                            " (the usable devices), found ", index));
    give(out, handle(*all[index]));
  });
}

sy_status sy_device_by_name(const char* name, sy_device** out) {
  return guard("sy_device_by_name", [&] {
    need(name, "sy_device_by_name", "a device name");
    need(out, "sy_device_by_name", "an output pointer");
    give(out, handle(sy::device(name)));
  });
}

sy_status sy_device_default(sy_device** out) {
  return guard("sy_device_default", [&] {
    need(out, "sy_device_default", "an output pointer");
    give(out, handle(sy::default_device()));
  });
}

const char* sy_device_name(const sy_device* d) { return d ? d->name.c_str() : nullptr; }
const char* sy_device_backend(const sy_device* d) { return d ? d->info.backend.c_str() : nullptr; }
const char* sy_device_description(const sy_device* d) { return d ? d->info.name.c_str() : nullptr; }
int sy_device_index(const sy_device* d) { return d ? d->info.index : 0; }
sy_device_type sy_device_kind(const sy_device* d) {
  return d ? sy_device_type(d->info.type) : SY_DEVICE_OTHER;
}
const char* sy_device_type_name(sy_device_type t) {
  return int(t) >= 0 && int(t) <= int(SY_DEVICE_OTHER) ? sy::device_type_name(sy::DeviceType(t))
                                                       : nullptr;
}
uint64_t sy_device_memory_bytes(const sy_device* d) { return d ? d->info.memory_bytes : 0; }
size_t sy_device_property_count(const sy_device* d) { return d ? d->info.properties.size() : 0; }

sy_status sy_device_property(const sy_device* d, size_t index, const char** key,
                             const char** value) {
  return guard("sy_device_property", [&] {
    need(d, "sy_device_property", "a device");
    const auto& props = d->info.properties;
    if (index >= props.size())
      throw InvalidArgument(sy::detail::cat("[sy_device_property] expected an index below ",
                                            props.size(), " for ", d->name, ", found ", index));
    if (key) *key = props[index].first.c_str();
    if (value) *value = props[index].second.c_str();
  });
}

sy_status sy_device_synchronize(sy_device* d) {
  return guard("sy_device_synchronize", [&] {
    need(d, "sy_device_synchronize", "a device");
    sy::synchronize(*d->d);
  });
}

// ---- tensors -----------------------------------------------------------

sy_status sy_tensor_create(sy_device* d, sy_dtype dtype, const int64_t* shape, size_t ndim,
                           const void* data, sy_tensor** out) {
  const char* op = "sy_tensor_create";
  return guard(op, [&] {
    need(d, op, "a device");
    need(out, op, "an output pointer");
    if (ndim) need(shape, op, "a shape");
    sy::DType t = dtype_of(dtype, op);
    sy::Shape s(shape, shape + ndim);
    for (size_t i = 0; i < ndim; ++i)
      if (s[i] < 0)
        throw InvalidArgument(
            sy::detail::cat("[", op, "] expected sizes >= 0, found shape ", sy::shape_str(s)));
    sy::Options o = sy::Options(*d->d).dtype(t);
    sy::Tensor x = data ? sy::from_data(data, t, s, o) : sy::zeros(s, o);
    sy::eval({x});  // allocated (and filled) now: out-of-memory is reported here
    give(out, wrap(std::move(x)));
  });
}

void sy_tensor_destroy(sy_tensor* t) { delete t; }

sy_status sy_tensor_to(const sy_tensor* t, sy_device* d, sy_tensor** out) {
  return guard("sy_tensor_to", [&] {
    need(t, "sy_tensor_to", "a tensor");
    need(d, "sy_tensor_to", "a device");
    need(out, "sy_tensor_to", "an output pointer");
    give(out, wrap(t->t.to(*d->d)));
  });
}

sy_status sy_tensor_read(const sy_tensor* t, void* dst, size_t dst_bytes) {
  const char* op = "sy_tensor_read";
  return guard(op, [&] {
    need(t, op, "a tensor");
    const size_t bytes = size_t(t->t.numel()) * sy::dtype_size(t->t.dtype());
    if (dst_bytes != bytes)
      throw InvalidArgument(sy::detail::cat(
          "[", op, "] expected a buffer of ", bytes, " bytes for a ", sy::dtype_name(t->t.dtype()),
          " tensor of shape ", sy::shape_str(t->t.shape()), ", found ", dst_bytes));
    if (bytes) need(dst, op, "a destination buffer");
    sy::detail::copy_to_host(t->t, dst);  // straight into the caller's buffer
  });
}

sy_status sy_tensor_shape(const sy_tensor* t, size_t* ndim, int64_t* dims, size_t capacity) {
  const char* op = "sy_tensor_shape";
  return guard(op, [&] {
    need(t, op, "a tensor");
    const sy::Shape& s = t->t.shape();
    if (dims && capacity < s.size())
      throw InvalidArgument(sy::detail::cat("[", op, "] expected room for ", s.size(),
                                            " dimensions, found ", capacity));
    if (dims) std::copy(s.begin(), s.end(), dims);
    if (ndim) *ndim = s.size();
  });
}

int64_t sy_tensor_numel(const sy_tensor* t) { return t ? t->t.numel() : 0; }
size_t sy_tensor_nbytes(const sy_tensor* t) {
  return t ? size_t(t->t.numel()) * sy::dtype_size(t->t.dtype()) : 0;
}
sy_dtype sy_tensor_dtype(const sy_tensor* t) { return t ? sy_dtype(t->t.dtype()) : SY_F32; }
sy_device* sy_tensor_device(const sy_tensor* t) {
  if (!t) return nullptr;
  try {
    return handle(t->t.device());
  } catch (...) {
    return nullptr;
  }
}

// ---- model files -------------------------------------------------------

sy_status sy_model_load(const char* path, sy_device* d, sy_model** out) {
  const char* op = "sy_model_load";
  return guard(op, [&] {
    need(path, op, "a file path");
    need(d, op, "a device");
    need(out, op, "an output pointer");
    auto m = sy::nn::load(path, *d->d);
    m->eval();
    give(out, new sy_model{std::move(m), d->d});
  });
}

void sy_model_destroy(sy_model* m) { delete m; }

sy_status sy_model_forward(sy_model* m, const sy_tensor* input, sy_tensor** out) {
  const char* op = "sy_model_forward";
  return guard(op, [&] {
    need(m, op, "a model");
    need(input, op, "an input tensor");
    need(out, op, "an output pointer");
    if (&input->t.device() != m->device)
      throw InvalidArgument(sy::detail::cat("[", op, "] expected the input on the model's device ",
                                            m->device->str(), ", found it on ",
                                            input->t.device().str()));
    sy::NoGradGuard no_grad;
    sy::Tensor y = (*m->m)(input->t);
    sy::eval({y});  // failures of the computation are reported here, not at the read
    give(out, wrap(std::move(y)));
  });
}

sy_status sy_model_to(sy_model* m, sy_device* d) {
  return guard("sy_model_to", [&] {
    need(m, "sy_model_to", "a model");
    need(d, "sy_model_to", "a device");
    m->m->to(*d->d);
    m->device = d->d;
  });
}

sy_device* sy_model_device(const sy_model* m) {
  if (!m) return nullptr;
  try {
    return handle(*m->device);
  } catch (...) {
    return nullptr;
  }
}

sy_status sy_model_save(const sy_model* m, const char* path) {
  return guard("sy_model_save", [&] {
    need(m, "sy_model_save", "a model");
    need(path, "sy_model_save", "a file path");
    sy::nn::save(*m->m, path);
  });
}

sy_status sy_model_state(const sy_model* m, sy_tensor_list** out) {
  return guard("sy_model_state", [&] {
    need(m, "sy_model_state", "a model");
    need(out, "sy_model_state", "an output pointer");
    give(out, new sy_tensor_list{m->m->state_dict(), {}});
  });
}

// ---- safetensors files and named tensors -------------------------------------

sy_status sy_tensor_list_create(sy_tensor_list** out) {
  return guard("sy_tensor_list_create", [&] {
    need(out, "sy_tensor_list_create", "an output pointer");
    give(out, new sy_tensor_list{});
  });
}

void sy_tensor_list_destroy(sy_tensor_list* l) { delete l; }
size_t sy_tensor_list_size(const sy_tensor_list* l) { return l ? l->items.size() : 0; }
const char* sy_tensor_list_name(const sy_tensor_list* l, size_t index) {
  return l && index < l->items.size() ? l->items[index].first.c_str() : nullptr;
}

sy_status sy_tensor_list_get(const sy_tensor_list* l, size_t index, sy_tensor** out) {
  return guard("sy_tensor_list_get", [&] {
    need(l, "sy_tensor_list_get", "a tensor list");
    need(out, "sy_tensor_list_get", "an output pointer");
    if (index >= l->items.size())
      throw InvalidArgument(sy::detail::cat("[sy_tensor_list_get] expected an index below ",
                                            l->items.size(), ", found ", index));
    give(out, wrap(l->items[index].second));
  });
}

sy_status sy_tensor_list_find(const sy_tensor_list* l, const char* name, sy_tensor** out) {
  return guard("sy_tensor_list_find", [&] {
    need(l, "sy_tensor_list_find", "a tensor list");
    need(name, "sy_tensor_list_find", "a name");
    need(out, "sy_tensor_list_find", "an output pointer");
    for (const auto& [n, t] : l->items)
      if (n == name) return give(out, wrap(t));
    throw sy::Error(sy::detail::cat("[sy_tensor_list_find] expected a tensor named '", name,
                                    "', found none among ", l->items.size()));
  });
}

sy_status sy_tensor_list_add(sy_tensor_list* l, const char* name, const sy_tensor* t) {
  const char* op = "sy_tensor_list_add";
  return guard(op, [&] {
    need(l, op, "a tensor list");
    need(name, op, "a name");
    need(t, op, "a tensor");
    if (!*name || std::strcmp(name, "__metadata__") == 0)
      throw InvalidArgument(sy::detail::cat("[", op,
                                            "] expected a non-empty name other than __metadata__, "
                                            "found \"",
                                            name, "\""));
    for (const auto& e : l->items)
      if (e.first == name)
        throw InvalidArgument(sy::detail::cat("[", op, "] expected a new name, found '", name,
                                              "' already in the list"));
    l->items.emplace_back(name, t->t);
  });
}

const char* sy_tensor_list_metadata(const sy_tensor_list* l, const char* key) {
  if (!l || !key) return nullptr;
  for (const auto& [k, v] : l->metadata)  // no temporary string: nothing can throw
    if (k == key) return v.c_str();
  return nullptr;
}

sy_status sy_tensor_list_set_metadata(sy_tensor_list* l, const char* key, const char* value) {
  return guard("sy_tensor_list_set_metadata", [&] {
    need(l, "sy_tensor_list_set_metadata", "a tensor list");
    need(key, "sy_tensor_list_set_metadata", "a key");
    need(value, "sy_tensor_list_set_metadata", "a value");
    std::string v = value;  // made before the map changes: a failure changes nothing
    l->metadata.insert_or_assign(std::string(key), std::move(v));
  });
}

sy_status sy_safetensors_load(const char* path, sy_device* d, sy_tensor_list** out) {
  const char* op = "sy_safetensors_load";
  return guard(op, [&] {
    need(path, op, "a file path");
    need(d, op, "a device");
    need(out, op, "an output pointer");
    auto l = std::make_unique<sy_tensor_list>();
    l->items = sy::load_safetensors(path, *d->d, &l->metadata);
    give(out, l.release());
  });
}

sy_status sy_safetensors_save(const char* path, const sy_tensor_list* l) {
  return guard("sy_safetensors_save", [&] {
    need(path, "sy_safetensors_save", "a file path");
    need(l, "sy_safetensors_save", "a tensor list");
    sy::save_safetensors(path, l->items, l->metadata);
  });
}

// ---- data ---------------------------------------------------------------

sy_status sy_read_samples(const char* path, sy_tensor** out) {
  return guard("sy_read_samples", [&] {
    need(path, "sy_read_samples", "a file path");
    need(out, "sy_read_samples", "an output pointer");
    give(out, wrap(sy::data::read_samples(path)));
  });
}

sy_status sy_read_idx(const char* path, sy_tensor** out) {
  return guard("sy_read_idx", [&] {
    need(path, "sy_read_idx", "a file path");
    need(out, "sy_read_idx", "an output pointer");
    sy::data::IdxArray a = sy::data::read_idx(path);
    give(out, wrap(sy::from_data(a.data.data(), sy::DType::u8, a.dims)));
  });
}

}  // extern "C"
