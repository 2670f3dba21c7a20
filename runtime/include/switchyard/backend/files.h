// SPDX-License-Identifier: MIT
// Files the runtime, its backends and tools read and write: caches, traces,
// reports (and, later, model files). Reads are bounded and refuse what is not
// a regular file; writes are atomic, so a crash, a kill or a full disk leaves
// either the old file or the new one, never a torn one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace switchyard::files {

// The regular file at `path`, opened read-only (close-on-exec), and its
// size; fd -1 when there is no file there. What read_regular refuses (not a
// regular file, an error) it refuses too, with the same messages. Opening
// never blocks. The caller closes fd.
struct RegularFile {
  int fd = -1;
  uint64_t bytes = 0;
};
RegularFile open_regular(const std::string& path, const char* op);
// Closes a descriptor open_regular returned.
void close_file(int fd);

// A regular file mapped read-only, whole (open_regular's checks; a missing
// file is an error here). The mapping is private: pages are read from disk
// as they are touched, so a tensor read from a large file costs its own
// bytes, not the file's. Shrinking the file under the mapping is the
// writer's fault and ends the process with SIGBUS, as for every mmap reader.
class MappedFile {
 public:
  MappedFile(const std::string& path, const char* op);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const unsigned char* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  const unsigned char* data_ = nullptr;
  uint64_t size_ = 0;
};

// The whole content of the regular file at `path`, or nullopt when there is
// no file there. Throws switchyard::Error (naming `op`) when the path is a
// directory, a FIFO, a device or anything else that is not a regular file
// (a FIFO would wait forever, /dev/zero never ends), when the file is larger
// than `max_bytes`, or when reading fails. Opening never blocks.
std::optional<std::string> read_regular(const std::string& path, size_t max_bytes, const char* op);

// A file written under a temporary name in the same directory
// (`<path>.tmp.<pid>.<n>`) and renamed over `path` by commit(), after every
// write and the close were checked and the data was flushed to disk (fsync).
// Until then `path` keeps its old content; destroying an uncommitted file
// removes the temporary. Errors throw switchyard::Error naming `op`, `path`
// and the system's reason (a full disk is "No space left on device").
// Through a symbolic link the file it names is replaced; a path that is not
// a regular file (/dev/null, /dev/stdout, a FIFO) is written in place.
class AtomicFile {
 public:
  AtomicFile(std::string path, const char* op);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void write(const void* data, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  // Overwrites bytes already written (a checksum known only at the end);
  // not for a target written in place.
  void write_at(uint64_t offset, const void* data, size_t n);
  bool in_place() const { return direct_; }
  void commit();
  const std::string& temp_path() const { return tmp_; }

 private:
  void flush();
  [[noreturn]] void fail(const char* what, int err);
  std::string path_, tmp_;
  const char* op_;
  int fd_ = -1;
  std::string buf_;  // writes are batched into large write(2) calls
  bool committed_ = false;
  bool direct_ = false;  // not a regular file: written in place
};

// Writes `data` to `path` atomically (an AtomicFile, committed).
void write_atomic(const std::string& path, std::string_view data, const char* op);

// Removes the temporaries of `path` (`<path>.tmp.<pid>.*`) that a process
// killed before commit() left behind: those whose process is gone. Returns
// how many were removed; never throws.
int remove_stale_temporaries(const std::string& path);

}  // namespace switchyard::files
