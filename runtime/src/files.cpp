// SPDX-License-Identifier: MIT
// Bounded reads of regular files and atomic writes (see backend/files.h).
#include "switchyard/backend/files.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "switchyard/backend/platform.h"
#include "switchyard/error.h"

#if defined(_WIN32)
#include <io.h>
#include <windows.h>
#else
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace switchyard::files {

namespace {

// The system calls below, on POSIX and on Windows (its C runtime's
// descriptors, in binary mode, not inherited by child processes).
#if defined(_WIN32)
using sys_stat_t = struct _stat64;  // 64-bit sizes
int sys_fstat(int fd, sys_stat_t* st) { return ::_fstat64(fd, st); }
int sys_stat(const char* path, sys_stat_t* st) { return ::_stat64(path, st); }
constexpr int kReadFlags = _O_RDONLY | _O_BINARY | _O_NOINHERIT;
constexpr int kWriteFlags = _O_WRONLY | _O_BINARY | _O_NOINHERIT;
constexpr int kCreateFlags = kWriteFlags | _O_CREAT | _O_EXCL;
int sys_fsync(int fd) { return ::_commit(fd); }
// As pwrite: the file position is left where it was.
ssize_t sys_pwrite(int fd, const void* p, size_t n, uint64_t off) {
  const int64_t at = ::_telli64(fd);
  if (at < 0 || ::_lseeki64(fd, int64_t(off), SEEK_SET) < 0) return -1;
  ssize_t r = ::_write(fd, p, unsigned(n > (1u << 30) ? (1u << 30) : n));
  int e = errno;
  if (::_lseeki64(fd, at, SEEK_SET) < 0) return -1;
  errno = e;
  return r;
}
int errno_of(DWORD e) {
  switch (e) {
    case ERROR_FILE_NOT_FOUND:
    case ERROR_PATH_NOT_FOUND:
      return ENOENT;
    case ERROR_DISK_FULL:
    case ERROR_HANDLE_DISK_FULL:
      return ENOSPC;
    case ERROR_NOT_ENOUGH_MEMORY:
    case ERROR_OUTOFMEMORY:
      return ENOMEM;
    default:
      return EACCES;  // sharing violations, access denied
  }
}
ssize_t sys_read(int fd, void* p, size_t n) {
  return ::_read(fd, p, unsigned(n > (1u << 30) ? (1u << 30) : n));
}
ssize_t sys_write(int fd, const void* p, size_t n) {
  return ::_write(fd, p, unsigned(n > (1u << 30) ? (1u << 30) : n));
}
// rename() of the C runtime refuses an existing target.
int sys_rename(const char* from, const char* to) {
  if (MoveFileExA(from, to, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)) return 0;
  errno = errno_of(GetLastError());
  return -1;
}
void sync_dir(const std::string&) {}  // MOVEFILE_WRITE_THROUGH flushed the rename
void* sys_map(int fd, size_t n, int* err) {
  HANDLE m = CreateFileMappingA(reinterpret_cast<HANDLE>(::_get_osfhandle(fd)), nullptr,
                                PAGE_READONLY, 0, 0, nullptr);
  void* p = m ? MapViewOfFile(m, FILE_MAP_READ, 0, 0, n) : nullptr;
  *err = p ? 0 : errno_of(GetLastError());
  if (m) CloseHandle(m);  // the view keeps the mapping
  return p;
}
void sys_unmap(const void* p, size_t) { UnmapViewOfFile(p); }
#else
using sys_stat_t = struct stat;
int sys_fstat(int fd, sys_stat_t* st) { return ::fstat(fd, st); }
int sys_stat(const char* path, sys_stat_t* st) { return ::stat(path, st); }
constexpr int kReadFlags = O_RDONLY | O_NONBLOCK | O_CLOEXEC;  // a FIFO must not block the open
constexpr int kWriteFlags = O_WRONLY | O_CLOEXEC;
constexpr int kCreateFlags = kWriteFlags | O_CREAT | O_EXCL;
int sys_fsync(int fd) { return ::fsync(fd); }
ssize_t sys_pwrite(int fd, const void* p, size_t n, uint64_t off) {
  return ::pwrite(fd, p, n, off_t(off));
}
ssize_t sys_read(int fd, void* p, size_t n) { return ::read(fd, p, n); }
ssize_t sys_write(int fd, const void* p, size_t n) { return ::write(fd, p, n); }
int sys_rename(const char* from, const char* to) { return ::rename(from, to); }
// The rename itself survives a power cut once the directory is synced.
void sync_dir(const std::string& dir) {
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}
void* sys_map(int fd, size_t n, int* err) {
  void* p = ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE, fd, 0);
  *err = errno;
  return p == MAP_FAILED ? nullptr : p;
}
void sys_unmap(const void* p, size_t n) { ::munmap(const_cast<void*>(p), n); }
#endif

const char* kind_of(unsigned m) {
  if (S_ISDIR(m)) return "a directory";
#if defined(S_ISFIFO)
  if (S_ISFIFO(m)) return "a FIFO";
#endif
  if (S_ISCHR(m)) return "a device";
#if defined(S_ISBLK)
  if (S_ISBLK(m)) return "a device";
#endif
#if defined(S_ISSOCK)
  if (S_ISSOCK(m)) return "a socket";
#endif
  return "not a regular file";
}

std::string dir_of(const std::string& path) {
  auto d = std::filesystem::path(path).parent_path();
  return d.empty() ? "." : d.string();
}

}  // namespace

RegularFile open_regular(const std::string& path, const char* op) {
  int fd = ::open(path.c_str(), kReadFlags);
  if (fd < 0) {
    if (errno == ENOENT) return {};
    throw Error(detail::cat("[", op, "] cannot open '", path, "': ", std::strerror(errno)));
  }
  sys_stat_t st{};
  if (sys_fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw Error(detail::cat("[", op, "] cannot stat '", path, "': ", std::strerror(e)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(detail::cat("[", op, "] '", path, "': expected a regular file, found ",
                            kind_of(st.st_mode)));
  }
  return {fd, uint64_t(st.st_size)};
}

void close_file(int fd) { ::close(fd); }

MappedFile::MappedFile(const std::string& path, const char* op) {
  RegularFile f = open_regular(path, op);
  if (f.fd < 0)
    throw Error(detail::cat("[", op, "] cannot open '", path, "': ", std::strerror(ENOENT)));
  size_ = f.bytes;
  if (size_ > 0) {
    int e = 0;
    void* p = sys_map(f.fd, size_t(size_), &e);
    ::close(f.fd);
    if (!p)
      throw Error(detail::cat("[", op, "] cannot map '", path, "' (", size_,
                              " bytes): ", std::strerror(e)));
    data_ = static_cast<const unsigned char*>(p);
  } else {
    ::close(f.fd);
  }
}

MappedFile::~MappedFile() {
  if (data_) sys_unmap(data_, size_t(size_));
}

std::optional<std::string> read_regular(const std::string& path, size_t max_bytes, const char* op) {
  RegularFile f = open_regular(path, op);
  if (f.fd < 0) return std::nullopt;
  const int fd = f.fd;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (f.bytes > max_bytes)
    throw Error(detail::cat("[", op, "] '", path, "': expected at most ", max_bytes,
                            " bytes, found a file of ", f.bytes));
  std::string out(size_t(f.bytes), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t r = sys_read(fd, out.data() + got, out.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0)
      throw Error(detail::cat("[", op, "] cannot read '", path, "': ", std::strerror(errno)));
    if (r == 0) break;  // shrank while we read: keep what was there
    got += size_t(r);
  }
  out.resize(got);
  return out;
}

AtomicFile::AtomicFile(std::string path, const char* op) : path_(std::move(path)), op_(op) {
  // Through a link, the file it names is replaced (the link stays).
  std::error_code ec;
  for (int hops = 0; hops < 8 && std::filesystem::is_symlink(path_, ec); ++hops) {
    std::filesystem::path link(path_), target = std::filesystem::read_symlink(link, ec);
    if (ec) break;
    path_ = (target.is_absolute() ? target : link.parent_path() / target).string();
  }
  // Not a regular file (/dev/null, /dev/stdout, a FIFO): written in place,
  // never replaced by a file of ours.
  sys_stat_t st{};
  if (sys_stat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    direct_ = true;
    fd_ = ::open(path_.c_str(), kWriteFlags);
    if (fd_ < 0)
      throw Error(detail::cat("[", op_, "] cannot write '", path_, "': ", std::strerror(errno)));
    return;
  }
  static std::atomic<unsigned> counter{0};
  tmp_ = detail::cat(path_, ".tmp.", platform::process_id(), ".", counter++);
  fd_ = ::open(tmp_.c_str(), kCreateFlags, 0644);
  if (fd_ < 0)
    throw Error(detail::cat("[", op_, "] cannot write '", path_, "': cannot create '", tmp_,
                            "': ", std::strerror(errno)));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !direct_) ::unlink(tmp_.c_str());
}

void AtomicFile::fail(const char* what, int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!direct_) ::unlink(tmp_.c_str());
  committed_ = true;  // nothing left to remove
  throw Error(detail::cat("[", op_, "] cannot write '", path_, "': ", what, " failed: ",
                          std::strerror(err), " (the previous file, if any, is unchanged)"));
}

void AtomicFile::flush() {
  size_t done = 0;
  while (done < buf_.size()) {
    ssize_t r = sys_write(fd_, buf_.data() + done, buf_.size() - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) fail("write", r < 0 ? errno : ENOSPC);
    done += size_t(r);
  }
  buf_.clear();
}

void AtomicFile::write(const void* data, size_t n) {
  SY_CHECK(fd_ >= 0 && !committed_, op_, "write to '", path_, "' after it was committed or failed");
  constexpr size_t kBatch = size_t(1) << 20;
  if (n < kBatch) {  // small writes are batched
    buf_.append(static_cast<const char*>(data), n);
    if (buf_.size() >= kBatch) flush();
    return;
  }
  flush();  // a large block goes to the file as it is, not through a copy
  for (size_t done = 0; done < n;) {
    ssize_t r = sys_write(fd_, static_cast<const char*>(data) + done, n - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) fail("write", r < 0 ? errno : ENOSPC);
    done += size_t(r);
  }
}

void AtomicFile::write_at(uint64_t offset, const void* data, size_t n) {
  SY_CHECK(fd_ >= 0 && !committed_ && !direct_, op_, "patch of '", path_,
           "' after it was committed, or written in place");
  flush();
  size_t done = 0;
  while (done < n) {
    ssize_t r = sys_pwrite(fd_, static_cast<const char*>(data) + done, n - done, offset + done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) fail("write", r < 0 ? errno : ENOSPC);
    done += size_t(r);
  }
}

void AtomicFile::commit() {
  SY_CHECK(fd_ >= 0 && !committed_, op_, "commit of '", path_, "' twice or after it failed");
  flush();
  if (direct_) {
    ::close(fd_);
    fd_ = -1;
    committed_ = true;
    return;
  }
  if (sys_fsync(fd_) != 0) fail("fsync", errno);
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("close", errno);
  if (sys_rename(tmp_.c_str(), path_.c_str()) != 0) fail("rename", errno);
  committed_ = true;
  sync_dir(dir_of(path_));
}

void write_atomic(const std::string& path, std::string_view data, const char* op) {
  AtomicFile f(path, op);
  f.write(data);
  f.commit();
}

int remove_stale_temporaries(const std::string& path) {
  int removed = 0;
  std::error_code ec;
  std::string prefix = std::filesystem::path(path).filename().string() + ".tmp.";
  std::filesystem::directory_iterator it(dir_of(path), ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    char* stop = nullptr;
    long pid = std::strtol(name.c_str() + prefix.size(), &stop, 10);
    if (pid <= 0 || !stop || *stop != '.') continue;
    // Alive (or not ours to ask about): leave it; it may be mid-write.
    if (pid == platform::process_id() || !platform::process_gone(pid)) continue;
    std::error_code rm;
    if (std::filesystem::remove(it->path(), rm)) ++removed;
  }
  return removed;
}

}  // namespace switchyard::files
