// SPDX-License-Identifier: MIT
// Bounded reads of regular files and atomic writes (see backend/files.h).
#include "switchyard/backend/files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "switchyard/error.h"

namespace switchyard::files {

namespace {

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

std::string dir_of(const std::string& path) {
  auto d = std::filesystem::path(path).parent_path();
  return d.empty() ? "." : d.string();
}

}  // namespace

RegularFile open_regular(const std::string& path, const char* op) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return {};
    throw Error(detail::cat("[", op, "] cannot open '", path, "': ", std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
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

MappedFile::MappedFile(const std::string& path, const char* op) {
  RegularFile f = open_regular(path, op);
  if (f.fd < 0)
    throw Error(detail::cat("[", op, "] cannot open '", path, "': ", std::strerror(ENOENT)));
  size_ = f.bytes;
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_t(size_), PROT_READ, MAP_PRIVATE, f.fd, 0);
    int e = errno;
    ::close(f.fd);
    if (p == MAP_FAILED)
      throw Error(detail::cat("[", op, "] cannot map '", path, "' (", size_,
                              " bytes): ", std::strerror(e)));
    data_ = static_cast<const unsigned char*>(p);
  } else {
    ::close(f.fd);
  }
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<unsigned char*>(data_), size_t(size_));
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
    ssize_t r = ::read(fd, out.data() + got, out.size() - got);
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
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    direct_ = true;
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0)
      throw Error(detail::cat("[", op_, "] cannot write '", path_, "': ", std::strerror(errno)));
    return;
  }
  static std::atomic<unsigned> counter{0};
  tmp_ = detail::cat(path_, ".tmp.", ::getpid(), ".", counter++);
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
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
    ssize_t r = ::write(fd_, buf_.data() + done, buf_.size() - done);
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
    ssize_t r = ::write(fd_, static_cast<const char*>(data) + done, n - done);
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
    ssize_t r =
        ::pwrite(fd_, static_cast<const char*>(data) + done, n - done, off_t(offset + done));
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
  if (::fsync(fd_) != 0) fail("fsync", errno);
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("close", errno);
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) fail("rename", errno);
  committed_ = true;
  // The rename itself survives a power cut once the directory is synced.
  int dfd = ::open(dir_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
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
    if (pid == ::getpid() || ::kill(pid_t(pid), 0) == 0 || errno != ESRCH) continue;
    std::error_code rm;
    if (std::filesystem::remove(it->path(), rm)) ++removed;
  }
  return removed;
}

}  // namespace switchyard::files
