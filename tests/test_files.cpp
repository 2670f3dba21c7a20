// SPDX-License-Identifier: MIT
// Bounded reads and atomic writes (switchyard/backend/files.h): what the
// pipeline cache, traces and bench reports are written with.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "helpers.h"
#include "switchyard/backend/files.h"

namespace fs = std::filesystem;
namespace files = sy::files;

namespace {
fs::path scratch(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("sy_files_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d / name;
}
std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}
// Each test's files in a folder of its own process, removed afterwards.
class Files : public ::testing::Test {
 protected:
  void TearDown() override { fs::remove_all(scratch("").parent_path()); }
};
int temporaries_of(const fs::path& p) {
  int n = 0;
  for (auto& e : fs::directory_iterator(p.parent_path()))
    n += e.path().filename().string().rfind(p.filename().string() + ".tmp.", 0) == 0;
  return n;
}
}  // namespace

TEST_F(Files, ReadRegularRefusesWhatIsNotAFileAndBoundsTheSize) {
  auto f = scratch("plain");
  files::write_atomic(f, "hello", "test");
  EXPECT_EQ(files::read_regular(f, 100, "test").value(), "hello");
  EXPECT_FALSE(files::read_regular(scratch("absent"), 100, "test").has_value());
  expect_error([&] { files::read_regular(f, 4, "test"); },
               {"[test]", "expected at most 4 bytes", "found a file of 5"});
  expect_error([&] { files::read_regular(f.parent_path(), 100, "test"); },
               {"[test]", "expected a regular file", "a directory"});
  auto fifo = scratch("fifo");
  fs::remove(fifo);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);  // opening must not wait for a writer
  expect_error([&] { files::read_regular(fifo, 100, "test"); }, {"a FIFO"});
  auto zero = scratch("zero");
  fs::remove(zero);
  fs::create_symlink("/dev/zero", zero);  // never ends: refused before reading
  expect_error([&] { files::read_regular(zero, 100, "test"); }, {"a device"});
}

TEST_F(Files, AnUncommittedWriteLeavesTheOldFile) {
  auto f = scratch("keep");
  files::write_atomic(f, "old", "test");
  {
    files::AtomicFile w(f, "test");
    w.write("new content");
    EXPECT_TRUE(fs::exists(w.temp_path()));
  }  // destroyed without commit (an exception on the way)
  EXPECT_EQ(slurp(f), "old");
  EXPECT_EQ(temporaries_of(f), 0);
  files::AtomicFile w(f, "test");
  w.write("new");
  w.commit();
  EXPECT_EQ(slurp(f), "new");
}

// A full disk (simulated with a file-size limit; SIGXFSZ ignored, so write()
// fails with EFBIG as it fails with ENOSPC on a full disk): a clear error,
// the old file whole, no temporary left. Runs in a child: the limit is
// process-wide.
TEST_F(Files, AFullDiskLeavesTheOldFileWhole) {
  auto f = scratch("full");
  files::write_atomic(f, "the old content", "test");
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    rlimit lim{1000, 1000};
    setrlimit(RLIMIT_FSIZE, &lim);
    try {
      files::write_atomic(f, std::string(100000, 'x'), "test");
    } catch (const std::exception& e) {
      std::string m = e.what();
      _exit(m.find("[test] cannot write") != std::string::npos &&
                    m.find("write failed: File too large") != std::string::npos &&
                    m.find("unchanged") != std::string::npos
                ? 0
                : 2);
    }
    _exit(1);  // no error: wrong
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of a signal: " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: no error; 2: an unclear message";
  EXPECT_EQ(slurp(f), "the old content");
  EXPECT_EQ(temporaries_of(f), 0);
}

TEST_F(Files, StaleTemporariesOfDeadProcessesAreRemoved) {
  auto f = scratch("stale");
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);  // gone: its pid names no process now
  std::ofstream(f.string() + ".tmp." + std::to_string(child) + ".0") << "x";
  std::ofstream(f.string() + ".tmp." + std::to_string(::getpid()) + ".7") << "x";
  std::ofstream(f.string() + ".tmp.notapid") << "x";
  EXPECT_EQ(files::remove_stale_temporaries(f), 1);
  EXPECT_EQ(temporaries_of(f), 2);  // ours (alive) and the one we cannot read a pid from
}

// /dev/null and links: written through, never replaced by a file of ours.
TEST_F(Files, DevicesAreWrittenInPlaceAndLinksFollowed) {
  files::write_atomic("/dev/null", "into the void", "test");
  struct stat st {};
  ASSERT_EQ(stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/null was replaced";
  auto target = scratch("target"), link = scratch("link");
  files::write_atomic(target, "old", "test");
  fs::create_symlink(target, link);
  files::write_atomic(link, "new", "test");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(slurp(target), "new");
}
