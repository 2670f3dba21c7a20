// SPDX-License-Identifier: MIT
// Tensors in files: the safetensors format (Hugging Face's; PyTorch, candle,
// Burn, MLX and llama.cpp's converters read and write it). A file is an
// 8-byte little-endian header length N, N bytes of JSON naming each tensor's
// dtype, shape and byte range, then the tensors' bytes, back to back.
//
// Files are input from strangers: every offset, length, shape and name is
// checked before anything is allocated or read, and a bad file is one
// switchyard::Error naming the file and the problem.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "switchyard/tensor.h"

namespace switchyard {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
// The header's optional "__metadata__": a map of strings.
using Metadata = std::map<std::string, std::string>;

// Writes `tensors` (in this order; names unique and non-empty) and
// `metadata` to `path` atomically: a crash or a kill leaves the old file or
// the new one, never a torn file. Tensors on any device are read back;
// their dtypes are stored as F32, BF16, F16, I32, I64 and U8. The metadata gains
// "switchyard.crc32", the data's checksum (see SafetensorsFile::verify).
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata = {});

// A safetensors file, mapped and its header checked; tensors are read when
// asked, straight from the mapping into the target device's memory (no host
// copy for the dtypes Switchyard has). Files over 4 GiB work.
//
// Stored dtypes map to Switchyard's: F32 gives f32, BF16 bf16 and F16 f16
// (kept as stored, not widened); F64 gives f32 (rounded); I32, I16, I8 and
// U16 give i32; I64 and U32 give i64; U8 and
// BOOL give u8. Others (U64, F8 types, complex) are an error naming them.
class SafetensorsFile {
 public:
  struct Entry {
    std::string name;
    std::string dtype;  // as stored: "F32", "BF16", ...
    Shape shape;
    uint64_t begin = 0, end = 0;  // byte range in the data section
  };

  explicit SafetensorsFile(const std::string& path);
  // A file's bytes already in memory (kept alive by the caller); `name`
  // stands for the path in messages.
  static SafetensorsFile parse(const void* bytes, size_t size, std::string name);
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;

  const std::string& path() const;
  const std::vector<Entry>& entries() const;  // in the order of their data
  const Entry* find(std::string_view name) const;
  const Metadata& metadata() const;
  // The tensor named `name` on `d`, in Switchyard's dtype for the stored one.
  Tensor tensor(std::string_view name, Device& d = cpu()) const;
  // The Switchyard dtype `tensor()` gives for a stored dtype (throws for
  // one it cannot convert).
  DType dtype_of(const Entry& e) const;
  // Files Switchyard writes record a CRC-32 of their data in the metadata
  // ("switchyard.crc32"). Checks it (reading the whole file): throws when
  // the data was damaged; false when the file has no checksum (other
  // writers'). load_safetensors and nn::load call it.
  bool verify() const;

  struct State;  // opaque

 private:
  explicit SafetensorsFile(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

// Every tensor of the file at `path`, on `d`, in file order. When
// `metadata` is given it receives the file's metadata.
NamedTensors load_safetensors(const std::string& path, Device& d = cpu(),
                              Metadata* metadata = nullptr);

}  // namespace switchyard
