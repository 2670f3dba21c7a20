// SPDX-License-Identifier: MIT
// The safetensors format: reading (mapped, every header field checked before
// use) and writing (atomic). See switchyard/serialize.h.
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "graph.h"
#include "json_check.h"
#include "switchyard/backend/files.h"
#include "switchyard/error.h"
#include "switchyard/serialize.h"

namespace switchyard {
using namespace detail;

namespace {

// The metadata entry holding the CRC-32 of the data section (8 hex digits).
constexpr const char* kCrcKey = "switchyard.crc32";

std::string hex32(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

// Where the checksum's 8 digits are in a header: the last occurrence of the
// key with a string value (tensor names are followed by objects, and the
// checksum is the metadata's last entry); npos when absent.
size_t crc_digits_at(const std::string& h) {
  const std::string key = cat("\"", kCrcKey, "\":\"");
  const size_t k = h.rfind(key);
  if (k == std::string::npos || k + key.size() + 9 > h.size() || h[k + key.size() + 8] != '"')
    return std::string::npos;
  return k + key.size();
}

// The reference implementation's cap: a header is names and numbers, and a
// larger one is a file built to exhaust memory.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// Tensors a header may list (a checkpoint of the largest models has tens of
// thousands; 100 MB of header holds about 1.5 million empty ones).
constexpr size_t kMaxEntries = size_t(1) << 20;

struct StoredType {
  const char* name;
  size_t size;  // bytes per element
  DType to;     // what Switchyard gives for it
  bool ok;      // false: refused when read
};

// Every dtype the format names (safetensors 0.4), with its element size so
// that even a tensor we cannot convert gets its byte range checked.
const StoredType kStored[] = {
    {"F32", 4, DType::f32, true},      {"F16", 2, DType::f16, true},
    {"BF16", 2, DType::bf16, true},    {"F64", 8, DType::f32, true},
    {"I32", 4, DType::i32, true},      {"I16", 2, DType::i32, true},
    {"I8", 1, DType::i32, true},       {"U16", 2, DType::i32, true},
    {"I64", 8, DType::i64, true},      {"U32", 4, DType::i64, true},
    {"U8", 1, DType::u8, true},        {"BOOL", 1, DType::u8, true},
    {"U64", 8, DType::i64, false},     {"F8_E4M3", 1, DType::f32, false},
    {"F8_E5M2", 1, DType::f32, false}, {"C64", 8, DType::f32, false},
};

const StoredType* stored_type(std::string_view name) {
  for (const StoredType& t : kStored)
    if (name == t.name) return &t;
  return nullptr;
}

const char* stored_name(DType t) {
  switch (t) {
    case DType::f32:
      return "F32";
    case DType::i32:
      return "I32";
    case DType::i64:
      return "I64";
    case DType::u8:
      return "U8";
    case DType::bf16:
      return "BF16";
    case DType::f16:
      return "F16";
  }
  return "?";
}

template <class From>
From load_le(const unsigned char* p) {
  From v;
  std::memcpy(&v, p, sizeof v);  // unaligned; the format is little-endian, as this host
  return v;
}

// Converts n stored elements at `src` into Switchyard's dtype at `dst`.
void convert(const StoredType& st, const unsigned char* src, int64_t n, void* dst) {
  const std::string_view name = st.name;
  auto each = [&](auto out, auto f) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(src + size_t(i) * st.size);
  };
  if (name == "F64")
    each(static_cast<float*>(dst), [](auto p) { return float(load_le<double>(p)); });
  else if (name == "I16")
    each(static_cast<int32_t*>(dst), [](auto p) { return int32_t(load_le<int16_t>(p)); });
  else if (name == "I8")
    each(static_cast<int32_t*>(dst), [](auto p) { return int32_t(int8_t(*p)); });
  else if (name == "U16")
    each(static_cast<int32_t*>(dst), [](auto p) { return int32_t(load_le<uint16_t>(p)); });
  else if (name == "U32")
    each(static_cast<int64_t*>(dst), [](auto p) { return int64_t(load_le<uint32_t>(p)); });
  else if (name == "BOOL")
    each(static_cast<uint8_t*>(dst), [](auto p) { return uint8_t(*p != 0); });
  else
    throw Error(cat("[load_safetensors] no conversion from ", st.name, " (internal error)"));
}

}  // namespace

struct SafetensorsFile::State {
  std::string path;
  std::string header;                      // the JSON, as stored (for verify())
  std::unique_ptr<files::MappedFile> map;  // null when parsing caller-owned bytes
  const unsigned char* data = nullptr;     // the data section
  uint64_t data_bytes = 0;
  std::vector<Entry> entries;
  std::unordered_map<std::string, size_t> index;
  Metadata metadata;
};

namespace {

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Error(cat("[load_safetensors] '", path, "': ", what));
}

uint64_t as_u64(const nlohmann::json& j, const std::string& path, const std::string& what) {
  if (!j.is_number_unsigned())
    bad(path, cat("expected a non-negative integer for ", what, ", found ", j.dump()));
  return j.get<uint64_t>();
}

// Parses and checks the header against a data section of `data_bytes`.
void parse_header(SafetensorsFile::State& s, std::string_view header) {
  const std::string& path = s.path;
  if (header.empty() || header.front() != '{')
    bad(path, "expected the JSON header to start with '{'");
  nlohmann::json j;
  try {
    // First a linear pass over the text (json_check.h): the format nests
    // three deep ({name: {shape: [...]}}), deeper is refused before anything
    // is built; duplicate names would silently shadow each other; at most
    // kMaxEntries tensors. Then the value itself.
    std::unordered_set<std::string> names, fields;
    detail::JsonCheck check;
    check.max_depth = 3;
    check.too_deep = [&](int) {
      bad(path, "expected JSON nested at most 3 deep (the format's), found deeper nesting");
    };
    check.on_open = [&](int depth) {
      if (depth == 1) fields.clear();
    };
    size_t tensors = 0;
    check.on_key = [&](int depth, const std::string& k) {
      if (depth == 1) {
        if (!names.insert(k).second)
          bad(path, cat("expected unique tensor names, found '", k, "' twice"));
        if (k != "__metadata__" && ++tensors > kMaxEntries)
          bad(path, cat("expected at most ", kMaxEntries, " tensors in the header, found more"));
      }
      if (depth == 2 && !fields.insert(k).second)
        bad(path, cat("expected each field once, found '", k, "' twice"));
    };
    const std::string text(header);
    check.run(text);
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    bad(path, cat("the header is not valid JSON: ", e.what()));
  }
  if (!j.is_object()) bad(path, "expected the header to be a JSON object");

  for (auto& [name, info] : j.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) bad(path, "expected __metadata__ to be an object of strings");
      for (auto& [k, v] : info.items()) {
        if (!v.is_string())
          bad(path, cat("expected __metadata__ values to be strings, found ", v.dump(), " for '", k,
                        "'"));
        s.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    if (name.empty()) bad(path, "expected non-empty tensor names, found \"\"");
    const std::string what = cat("tensor '", name, "'");
    if (!info.is_object()) bad(path, cat("expected an object for ", what, ", found ", info.dump()));
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!info.contains(field)) bad(path, cat("expected '", field, "' for ", what));
    SafetensorsFile::Entry e;
    e.name = name;
    if (!info["dtype"].is_string())
      bad(path, cat("expected a string dtype for ", what, ", found ", info["dtype"].dump()));
    e.dtype = info["dtype"].get<std::string>();
    const StoredType* st = stored_type(e.dtype);
    if (!st) bad(path, cat("unknown dtype '", e.dtype, "' for ", what));
    const auto& shape = info["shape"];
    if (!shape.is_array()) bad(path, cat("expected a shape array for ", what));
    for (auto& d : shape) {
      uint64_t v = as_u64(d, path, cat("a dimension of ", what));
      if (v > uint64_t(INT64_MAX)) bad(path, cat("dimension ", v, " of ", what, " is too large"));
      e.shape.push_back(int64_t(v));
    }
    const auto& off = info["data_offsets"];
    if (!off.is_array() || off.size() != 2)
      bad(path, cat("expected data_offsets [begin, end] for ", what, ", found ", off.dump()));
    e.begin = as_u64(off[0], path, cat("the data offsets of ", what));
    e.end = as_u64(off[1], path, cat("the data offsets of ", what));
    if (e.begin > e.end)
      bad(path, cat("expected begin <= end in the data offsets of ", what, ", found [", e.begin,
                    ", ", e.end, "]"));
    if (e.end > s.data_bytes)
      bad(path, cat("the data of ", what, " ends at byte ", e.end, ", past the data section's ",
                    s.data_bytes, " bytes (a truncated file?)"));
    // Element count and byte size, with every product checked.
    uint64_t n = 1;
    bool empty = false;
    for (int64_t d : e.shape) empty = empty || d == 0;
    for (int64_t d : e.shape)
      if (!empty && __builtin_mul_overflow(n, uint64_t(d), &n))
        bad(path, cat("the shape ", shape_str(e.shape), " of ", what, " overflows"));
    if (empty) n = 0;
    uint64_t bytes;
    if (__builtin_mul_overflow(n, uint64_t(st->size), &bytes))
      bad(path, cat("the shape ", shape_str(e.shape), " of ", what, " overflows"));
    if (e.end - e.begin != bytes)
      bad(path, cat("expected ", bytes, " bytes for ", what, " (", e.dtype, ", shape ",
                    shape_str(e.shape), "), found a range of ", e.end - e.begin));
    s.entries.push_back(std::move(e));
  }
  // The tensors must tile the data section exactly: no overlaps (one byte
  // read as two tensors), no holes (room for a second, hidden file).
  std::sort(s.entries.begin(), s.entries.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  for (const auto& e : s.entries) {
    if (e.begin != at)
      bad(path,
          cat("expected tensor '", e.name, "' to start at byte ", at, " of the data, found ",
              e.begin, e.begin < at ? " (overlapping another tensor)" : " (a hole before it)"));
    at = e.end;
  }
  if (at != s.data_bytes)
    bad(path, cat("expected the tensors to fill the data section's ", s.data_bytes,
                  " bytes, found they end at byte ", at));
  for (size_t i = 0; i < s.entries.size(); ++i) s.index.emplace(s.entries[i].name, i);
}

void parse_file(SafetensorsFile::State& s, const unsigned char* bytes, uint64_t size) {
  if (size < 8) bad(s.path, cat("expected at least 8 bytes (the header length), found ", size));
  const uint64_t n = load_le<uint64_t>(bytes);
  if (n > kMaxHeaderBytes)
    bad(s.path,
        cat("expected a header of at most ", kMaxHeaderBytes, " bytes, found a length of ", n));
  if (n > size - 8)
    bad(s.path, cat("the header length ", n, " is past the end of the file (", size,
                    " bytes; a truncated file?)"));
  s.data = bytes + 8 + n;
  s.data_bytes = size - 8 - n;
  s.header.assign(reinterpret_cast<const char*>(bytes) + 8, size_t(n));
  parse_header(s, s.header);
}

}  // namespace

SafetensorsFile::SafetensorsFile(std::unique_ptr<State> s) : s_(std::move(s)) {}
SafetensorsFile::~SafetensorsFile() = default;
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;

SafetensorsFile::SafetensorsFile(const std::string& path) : s_(std::make_unique<State>()) {
  s_->path = path;
  s_->map = std::make_unique<files::MappedFile>(path, "load_safetensors");
  parse_file(*s_, s_->map->data(), s_->map->size());
}

SafetensorsFile SafetensorsFile::parse(const void* bytes, size_t size, std::string name) {
  auto s = std::make_unique<State>();
  s->path = std::move(name);
  parse_file(*s, static_cast<const unsigned char*>(bytes), size);
  return SafetensorsFile(std::move(s));
}

const std::string& SafetensorsFile::path() const { return s_->path; }
const std::vector<SafetensorsFile::Entry>& SafetensorsFile::entries() const { return s_->entries; }
const Metadata& SafetensorsFile::metadata() const { return s_->metadata; }

const SafetensorsFile::Entry* SafetensorsFile::find(std::string_view name) const {
  auto it = s_->index.find(std::string(name));
  return it == s_->index.end() ? nullptr : &s_->entries[it->second];
}

DType SafetensorsFile::dtype_of(const Entry& e) const {
  const StoredType* st = stored_type(e.dtype);
  if (!st || !st->ok)
    bad(s_->path, cat("tensor '", e.name, "' has dtype ", e.dtype,
                      ", which Switchyard cannot represent (it reads F32, F16, BF16, F64, I64, "
                      "I32, I16, I8, U32, U16, U8 and BOOL)"));
  return st->to;
}

Tensor SafetensorsFile::tensor(std::string_view name, Device& d) const {
  const Entry* e = find(name);
  if (!e) bad(s_->path, cat("expected a tensor named '", name, "', found none"));
  const DType t = dtype_of(*e);
  const StoredType& st = *stored_type(e->dtype);
  const unsigned char* src = s_->data + e->begin;
  const int64_t n = check_shape("load_safetensors", e->shape, t);
  if (st.size == dtype_size(t) && std::string_view(st.name) == stored_name(t))
    return from_data(src, t, e->shape, Options().device(d));  // straight from the mapping
  std::vector<unsigned char> host(size_t(n) * dtype_size(t));
  convert(st, src, n, host.data());
  return from_data(host.data(), t, e->shape, Options().device(d));
}

bool SafetensorsFile::verify() const {
  auto it = s_->metadata.find(kCrcKey);
  if (it == s_->metadata.end()) return false;
  // The header as written: the recorded digits back to zeros.
  std::string h = s_->header;
  const size_t at = crc_digits_at(h);
  if (at == std::string::npos)
    bad(s_->path, cat("expected the checksum as the last metadata entry, found it elsewhere"));
  h.replace(at, 8, "00000000");
  uLong sum = crc32_z(crc32_z(0, nullptr, 0), reinterpret_cast<const Bytef*>(h.data()), h.size());
  const uint64_t chunk = uint64_t(1) << 30;
  for (uint64_t at = 0; at < s_->data_bytes; at += chunk)
    sum = crc32_z(sum, s_->data + at, size_t(std::min(chunk, s_->data_bytes - at)));
  if (hex32(uint32_t(sum)) != it->second)
    bad(s_->path, cat("the data does not match its checksum (crc32 ", hex32(uint32_t(sum)),
                      ", recorded ", it->second, "): the file was damaged after it was written"));
  return true;
}

NamedTensors load_safetensors(const std::string& path, Device& d, Metadata* metadata) {
  SafetensorsFile f(path);
  f.verify();
  NamedTensors out;
  for (const auto& e : f.entries()) out.emplace_back(e.name, f.tensor(e.name, d));
  if (metadata) *metadata = f.metadata();
  return out;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata) {
  const char* op = "save_safetensors";
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  Metadata meta = metadata;
  meta.erase(kCrcKey);  // a loaded file's checksum would not match this file
  if (!meta.empty()) {
    auto& m = header["__metadata__"] = nlohmann::ordered_json::object();
    for (auto& [k, v] : meta) m[k] = v;
  }
  std::set<std::string_view> seen;
  uint64_t at = 0;
  for (auto& [name, t] : tensors) {
    SY_CHECK(!name.empty() && name != "__metadata__", op,
             "expected tensor names other than \"\" and \"__metadata__\", found '", name, "'");
    SY_CHECK(seen.insert(name).second, op, "expected unique tensor names, found '", name,
             "' twice");
    SY_CHECK(t.defined(), op, "expected a defined tensor for '", name, "'");
    const uint64_t bytes = uint64_t(t.numel()) * dtype_size(t.dtype());
    // Appended (names are unique: `seen`): ordered_json's operator[] looks
    // each name up linearly, a quadratic save for many tensors.
    header.get_ref<nlohmann::ordered_json::object_t&>().push_back(
        {name,
         {{"dtype", stored_name(t.dtype())},
          {"shape", t.shape()},
          {"data_offsets", {at, at + bytes}}}});
    at += bytes;
  }
  files::remove_stale_temporaries(path);  // what killed writers of this file left
  files::AtomicFile out(path, op);
  // A checksum of the header and the data, so that a file damaged after it
  // was written is found (verify()): the last metadata entry, written as
  // zeros and patched at the end; the sum covers the header with the zeros.
  const bool crc = !out.in_place();
  if (crc) {
    if (!header.contains("__metadata__")) {
      nlohmann::ordered_json h2 = {{"__metadata__", nlohmann::ordered_json::object()}};
      h2.update(header);
      header = std::move(h2);
    }
    header["__metadata__"][kCrcKey] = "00000000";
  }
  std::string h;
  try {
    h = header.dump();
  } catch (const nlohmann::json::exception& e) {  // a name that is not UTF-8
    throw Error(cat("[", op, "] '", path, "': cannot write the header: ", e.what()));
  }
  h.resize((h.size() + 7) / 8 * 8, ' ');  // pad so the data starts 8-byte aligned
  const size_t crc_at = crc ? crc_digits_at(h) : 0;
  unsigned char len[8];
  const uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(n >> (8 * i));
  out.write(len, 8);
  out.write(h);
  std::vector<unsigned char> host;
  uLong sum = crc32_z(crc32_z(0, nullptr, 0), reinterpret_cast<const Bytef*>(h.data()), h.size());
  for (auto& [name, t] : tensors) {
    const size_t bytes = size_t(t.numel()) * dtype_size(t.dtype());
    if (!bytes) continue;
    host.resize(bytes);
    copy_to_host(t, host.data());
    sum = crc32_z(sum, host.data(), bytes);
    out.write(host.data(), bytes);
  }
  if (crc) {
    const std::string hex = hex32(uint32_t(sum));
    out.write_at(8 + crc_at, hex.data(), hex.size());
  }
  out.commit();
}

}  // namespace switchyard
