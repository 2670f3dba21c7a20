// SPDX-License-Identifier: MIT
// Model files: a safetensors file with the architecture in its metadata, and
// the registry of module types that nn::load builds from it.
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>

#include "json_check.h"
#include "switchyard/error.h"
#include "switchyard/nn.h"

namespace switchyard::nn {
using detail::cat;

namespace {

constexpr const char* kModelKey = "switchyard.model";
constexpr int kFormatVersion = 1;
constexpr int kMaxDepth = 32;  // modules inside modules, in a file from anywhere
// Modules in one file (a large transformer has a few thousand).
constexpr size_t kMaxModules = size_t(1) << 16;

struct Registry {
  std::mutex mu;
  std::unordered_map<std::string, ModuleFactory> make;
};

// A setting of a module spec (`args` or `reals`), present and in [lo, hi].
template <class T>
T setting(const ModuleSpec& s, const std::map<std::string, T>& from, const std::string& name, T lo,
          T hi) {
  auto it = from.find(name);
  SY_CHECK(it != from.end(), "nn::load", "expected '", name, "' for a ", s.type, " module");
  SY_CHECK(it->second >= lo && it->second <= hi, "nn::load", "expected ", name, " in [", lo, ", ",
           hi, "] for a ", s.type, " module, found ", it->second);
  return it->second;
}

template <class M>
ModuleFactory stateless() {
  return [](const ModuleSpec&, Device&) { return std::make_shared<M>(); };
}

Registry& registry() {
  static Registry* r = [] {
    auto* r = new Registry;  // never destroyed: loads may run during exit
    r->make["Linear"] = [](const ModuleSpec& s, Device& d) {
      return std::make_shared<Linear>(s.arg("in_features", 1, int64_t(1) << 31),
                                      s.arg("out_features", 1, int64_t(1) << 31),
                                      s.arg("bias", 0, 1) != 0, d);
    };
    r->make["ReLU"] = stateless<ReLU>();
    r->make["GELU"] = stateless<GELU>();
    r->make["Tanh"] = stateless<Tanh>();
    r->make["Sigmoid"] = stateless<Sigmoid>();
    r->make["Flatten"] = stateless<Flatten>();
    r->make["Dropout"] = [](const ModuleSpec& s, Device&) {
      return std::make_shared<Dropout>(float(s.real("p", 0.0, 1.0)));
    };
    r->make["Embedding"] = [](const ModuleSpec& s, Device& d) {
      return std::make_shared<Embedding>(s.arg("num_embeddings", 1, (int64_t(1) << 31) - 1),
                                         s.arg("embedding_dim", 1, int64_t(1) << 31), d);
    };
    r->make["LayerNorm"] = [](const ModuleSpec& s, Device& d) {
      return std::make_shared<LayerNorm>(s.arg("normalized_shape", 1, int64_t(1) << 31),
                                         float(s.real("eps", 1e-30, 1.0)),
                                         s.arg("elementwise_affine", 0, 1) != 0, d);
    };
    constexpr int64_t kBig = int64_t(1) << 31;
    auto pair = [](const ModuleSpec& s, const std::string& name, int64_t lo) {
      return Size2(s.arg(name + "_h", lo, kBig), s.arg(name + "_w", lo, kBig));
    };
    r->make["Conv2d"] = [pair](const ModuleSpec& s, Device& d) {
      return std::make_shared<Conv2d>(s.arg("in_channels", 1, kBig), s.arg("out_channels", 1, kBig),
                                      pair(s, "kernel", 1), pair(s, "stride", 1),
                                      pair(s, "padding", 0), pair(s, "dilation", 1),
                                      s.arg("groups", 1, kBig), s.arg("bias", 0, 1) != 0, d);
    };
    r->make["MaxPool2d"] = [pair](const ModuleSpec& s, Device&) {
      return std::make_shared<MaxPool2d>(pair(s, "kernel", 1), pair(s, "stride", 1),
                                         pair(s, "padding", 0));
    };
    r->make["AvgPool2d"] = [pair](const ModuleSpec& s, Device&) {
      return std::make_shared<AvgPool2d>(pair(s, "kernel", 1), pair(s, "stride", 1),
                                         pair(s, "padding", 0),
                                         s.arg("count_include_pad", 0, 1) != 0);
    };
    r->make["AdaptiveAvgPool2d"] = [pair](const ModuleSpec& s, Device&) {
      return std::make_shared<AdaptiveAvgPool2d>(pair(s, "output", 1));
    };
    for (int dims : {1, 2})
      r->make[dims == 1 ? "BatchNorm1d" : "BatchNorm2d"] = [dims](const ModuleSpec& s, Device& d) {
        return std::make_shared<BatchNorm>(
            dims, s.arg("num_features", 1, kBig), float(s.real("eps", 1e-30, 1.0)),
            float(s.real("momentum", 0.0, 1.0)), s.arg("affine", 0, 1) != 0, d);
      };
    r->make["Unflatten"] = [](const ModuleSpec& s, Device&) {
      std::vector<int64_t> sizes(size_t(s.arg("dims", 1, 8)));
      for (size_t i = 0; i < sizes.size(); ++i)
        sizes[i] = s.arg("size" + std::to_string(i), 1, kBig);
      return std::make_shared<Unflatten>(std::move(sizes));
    };
    r->make["Sequential"] = [](const ModuleSpec& s, Device& d) {
      auto seq = std::make_shared<Sequential>();
      for (auto& c : s.children) seq->add(build(c, d));
      return seq;
    };
    return r;
  }();
  return *r;
}

nlohmann::json to_json(const ModuleSpec& s) {
  nlohmann::json j{{"type", s.type}};
  if (!s.args.empty()) j["args"] = s.args;
  if (!s.reals.empty()) j["reals"] = s.reals;
  if (!s.children.empty()) {
    j["children"] = nlohmann::json::array();
    for (auto& c : s.children) j["children"].push_back(to_json(c));
  }
  return j;
}

ModuleSpec from_json(const nlohmann::json& j, const std::string& path, int depth) {
  auto bad = [&](const std::string& what) -> Error {
    return Error(cat("[nn::load] '", path, "': the recorded architecture is invalid: ", what));
  };
  if (depth > kMaxDepth) throw bad(cat("modules nested deeper than ", kMaxDepth));
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    throw bad(cat("expected {\"type\": ...}, found ", j.dump().substr(0, 200)));
  ModuleSpec s;
  s.type = j["type"].get<std::string>();
  if (j.contains("args")) {
    if (!j["args"].is_object()) throw bad("expected 'args' to be an object");
    for (auto& [k, v] : j["args"].items()) {
      if (!v.is_number_integer()) throw bad(cat("expected an integer for '", k, "'"));
      s.args[k] = v.get<int64_t>();
    }
  }
  if (j.contains("reals")) {
    if (!j["reals"].is_object()) throw bad("expected 'reals' to be an object");
    for (auto& [k, v] : j["reals"].items()) {
      if (!v.is_number()) throw bad(cat("expected a number for '", k, "'"));
      s.reals[k] = v.get<double>();
    }
  }
  if (j.contains("children")) {
    if (!j["children"].is_array()) throw bad("expected 'children' to be an array");
    for (auto& c : j["children"]) s.children.push_back(from_json(c, path, depth + 1));
  }
  return s;
}

}  // namespace

int64_t ModuleSpec::arg(const std::string& name, int64_t lo, int64_t hi) const {
  return setting(*this, args, name, lo, hi);
}
double ModuleSpec::real(const std::string& name, double lo, double hi) const {
  return setting(*this, reals, name, lo, hi);
}

std::optional<ModuleSpec> Sequential::spec() const {
  ModuleSpec s("Sequential");
  for (auto& l : layers_) {
    auto c = l->spec();
    if (!c) return std::nullopt;
    s.children.push_back(std::move(*c));
  }
  return s;
}

void register_module_type(const std::string& type, ModuleFactory make) {
  SY_CHECK(!type.empty() && make, "register_module_type",
           "expected a type name and a factory, found ", type.empty() ? "an empty name" : "none");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.make[type] = std::move(make);
}

std::shared_ptr<Module> build(const ModuleSpec& spec, Device& d) {
  ModuleFactory make;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.make.find(spec.type);
    if (it != r.make.end()) make = it->second;
  }
  SY_CHECK(make, "nn::load", "expected a registered module type, found '", spec.type,
           "' (register it with nn::register_module_type before loading)");
  auto m = make(spec, d);
  SY_CHECK(m != nullptr, "nn::load", "the factory for '", spec.type, "' returned null");
  return m;
}

namespace {
// dtype: the floating tensors' stored dtype; none keeps each tensor's own.
void save_as(const Module& m, const std::string& path, std::optional<DType> dtype,
             const Metadata& metadata) {
  auto spec = m.spec();
  SY_CHECK(spec, "nn::save",
           "expected a module whose architecture can be recorded (built-in layers, or a type "
           "with spec()), found one without; save its state_dict with save_safetensors instead");
  Metadata meta = metadata;
  meta["format"] = "pt";  // what PyTorch-side loaders look for
  meta[kModelKey] = nlohmann::json{{"version", kFormatVersion}, {"module", to_json(*spec)}}.dump();
  NamedTensors state = m.state_dict();
  if (dtype) {
    NoGradGuard no_grad;
    for (auto& [name, t] : state)
      if (is_floating(t.dtype())) t = t.to(*dtype);
  }
  save_safetensors(path, state, meta);
}
}  // namespace

void save(const Module& m, const std::string& path, const Metadata& metadata) {
  save_as(m, path, std::nullopt, metadata);
}

void save(const Module& m, const std::string& path, DType dtype, const Metadata& metadata) {
  SY_CHECK(is_floating(dtype), "nn::save",
           "expected a floating dtype to store the weights in (f32, bf16, f16), found ",
           dtype_name(dtype));
  save_as(m, path, dtype, metadata);
}

std::shared_ptr<Module> load(const std::string& path, Device& d) {
  SafetensorsFile f(path);
  f.verify();
  auto it = f.metadata().find(kModelKey);
  SY_CHECK(it != f.metadata().end(), "nn::load", "'", path, "': expected a model file (metadata '",
           kModelKey,
           "' recording the architecture), found a plain safetensors file; build the model "
           "and call load_state_dict instead");
  nlohmann::json j;
  try {
    // A linear pass first (json_check.h): nesting bombs and more modules
    // than kMaxModules are refused before anything is built.
    detail::JsonCheck check;
    check.max_depth = 3 * kMaxDepth;
    check.too_deep = [&](int) {
      throw Error(cat("[nn::load] '", path, "': the recorded architecture nests deeper than ",
                      3 * kMaxDepth, " levels"));
    };
    size_t modules = 0;
    check.on_key = [&](int, const std::string& k) {
      if (k == "type" && ++modules > kMaxModules)
        throw Error(cat("[nn::load] '", path, "': expected at most ", kMaxModules,
                        " modules in the recorded architecture, found more"));
    };
    check.run(it->second);
    j = nlohmann::json::parse(it->second);
  } catch (const nlohmann::json::exception& e) {
    throw Error(cat("[nn::load] '", path, "': the recorded architecture is not JSON: ", e.what()));
  }
  SY_CHECK(j.is_object() && j.contains("version") && j["version"] == kFormatVersion &&
               j.contains("module"),
           "nn::load", "'", path, "': expected model format version ", kFormatVersion, ", found ",
           j.is_object() && j.contains("version") ? j["version"].dump() : "none");
  auto m = build(from_json(j["module"], path, 0), d);
  m->load_state_dict(f);
  return m;
}

}  // namespace switchyard::nn
