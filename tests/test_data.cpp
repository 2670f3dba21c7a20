// SPDX-License-Identifier: MIT
// DataLoader and datasets: coverage, seeded order, last batch, IDX parsing.
#include <sys/resource.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "helpers.h"

using sy::Tensor;
namespace data = sy::data;

namespace {
std::shared_ptr<data::TensorDataset> numbered(int64_t n) {
  std::vector<float> x(size_t(n * 2));
  std::vector<int32_t> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    x[size_t(2 * i)] = float(i), x[size_t(2 * i + 1)] = float(-i), y[size_t(i)] = int32_t(i);
  return std::make_shared<data::TensorDataset>(sy::from_vector(x, {n, 2}), sy::from_vector(y, {n}));
}

std::vector<int32_t> epoch_labels(data::DataLoader& dl, std::vector<int64_t>* sizes = nullptr) {
  std::vector<int32_t> all;
  for (const auto& b : dl) {
    auto y = b.target.to_vector<int32_t>();
    auto x = b.data.to_vector<float>();
    EXPECT_EQ(b.data.shape(), (sy::Shape{int64_t(y.size()), 2}));
    for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(x[2 * i], float(y[i]));  // rows stay paired
    if (sizes) sizes->push_back(int64_t(y.size()));
    all.insert(all.end(), y.begin(), y.end());
  }
  return all;
}
}  // namespace

TEST(DataLoader, CoversEverySampleOnceWithAShortLastBatch) {
  data::DataLoader dl(numbered(10), {.batch_size = 3, .shuffle = true, .seed = 7});
  EXPECT_EQ(dl.num_batches(), 4);
  std::vector<int64_t> sizes;
  auto labels = epoch_labels(dl, &sizes);
  EXPECT_EQ(sizes, (std::vector<int64_t>{3, 3, 3, 1}));
  std::multiset<int32_t> seen(labels.begin(), labels.end());
  for (int32_t i = 0; i < 10; ++i) EXPECT_EQ(seen.count(i), 1u);
}

TEST(DataLoader, DropLastDropsTheShortBatch) {
  data::DataLoader dl(numbered(10), {.batch_size = 3, .drop_last = true});
  EXPECT_EQ(dl.num_batches(), 3);
  std::vector<int64_t> sizes;
  EXPECT_EQ(epoch_labels(dl, &sizes).size(), 9u);
  EXPECT_EQ(sizes, (std::vector<int64_t>{3, 3, 3}));
}

TEST(DataLoader, SeededOrderIsReproducibleAndChangesPerEpoch) {
  data::DataLoader a(numbered(50), {.batch_size = 8, .shuffle = true, .seed = 3});
  data::DataLoader b(numbered(50), {.batch_size = 8, .shuffle = true, .seed = 3});
  data::DataLoader c(numbered(50), {.batch_size = 8, .shuffle = true, .seed = 4});
  auto e1 = epoch_labels(a), e2 = epoch_labels(a);
  EXPECT_EQ(e1, epoch_labels(b));
  EXPECT_NE(e1, e2) << "each epoch reshuffles";
  EXPECT_NE(e1, epoch_labels(c));
  std::vector<int32_t> sorted(e1);
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(e1, sorted) << "shuffled";
  auto o = a.order(0);
  EXPECT_EQ(std::vector<int32_t>(o.begin(), o.end()), e1);
}

TEST(DataLoader, InOrderByDefaultAsPyTorch) {
  data::DataLoader a(numbered(10), {.batch_size = 4});
  auto la = epoch_labels(a);
  for (int32_t i = 0; i < 10; ++i) EXPECT_EQ(la[size_t(i)], i);
}

TEST(DataLoader, NoShuffleKeepsOrderAndPrefetchChangesNothing) {
  data::DataLoader a(numbered(20), {.batch_size = 6, .shuffle = false, .prefetch = false});
  data::DataLoader b(numbered(20), {.batch_size = 6, .shuffle = false, .prefetch = true});
  auto la = epoch_labels(a);
  for (int32_t i = 0; i < 20; ++i) EXPECT_EQ(la[size_t(i)], i);
  EXPECT_EQ(la, epoch_labels(b));
}

TEST(DataLoader, StoppingEarlyAndErrorsInTheWorker) {
  data::DataLoader a(numbered(100), {.batch_size = 1});
  int n = 0;
  for (const auto& b : a) {
    (void)b;
    if (++n == 3) break;  // the worker thread must shut down cleanly
  }
  struct Failing : data::Dataset {
    int64_t size() const override { return 10; }
    data::Batch get_batch(std::span<const int64_t> idx) const override {
      if (idx[0] >= 4 || (idx.size() > 1 && idx[1] >= 4))
        throw sy::Error("[Failing] sample 4 is corrupt");
      return {sy::zeros({int64_t(idx.size()), 1}),
              sy::zeros({int64_t(idx.size())}, sy::DType::i32)};
    }
  };
  data::DataLoader f(std::make_shared<Failing>(), {.batch_size = 2, .shuffle = false});
  expect_error(
      [&] {
        for (const auto& b : f) (void)b;
      },
      {"[Failing]", "corrupt"});
}

TEST(DataLoader, BatchesMoveToTheDevice) {
  data::DataLoader dl(numbered(8), {.batch_size = 4, .shuffle = false});
  for (const auto& b : dl) {
    Tensor x = b.data.to(mock_device());
    EXPECT_EQ(&x.device(), &mock_device());
    EXPECT_EQ(x.to_vector<float>(), b.data.to_vector<float>());
  }
}

namespace {
std::string write_gz(const std::string& name, const std::vector<uint8_t>& bytes) {
  auto path = (std::filesystem::temp_directory_path() / name).string();
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), unsigned(bytes.size()));
  gzclose(f);
  return path;
}
}  // namespace

TEST(Idx, ReadsAValidFileAndRejectsCorruptOnes) {
  std::vector<uint8_t> ok = {0, 0, 8, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6};
  auto a = data::read_idx(write_gz("sy_ok.idx.gz", ok));
  EXPECT_EQ(a.dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.data, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6}));
  auto truncated = ok;
  truncated.resize(15);
  expect_error([&] { data::read_idx(write_gz("sy_trunc.idx.gz", truncated)); },
               {"[read_idx]", "truncated", "expected 6 bytes", "found 3"});
  expect_error(
      [&] {
        data::read_idx(write_gz("sy_magic.idx.gz", {1, 2, 8, 1, 0, 0, 0, 1, 9}));
      },
      {"[read_idx]", "magic"});
  expect_error(
      [&] {
        data::read_idx(write_gz("sy_type.idx.gz", {0, 0, 0x0D, 1, 0, 0, 0, 1, 9, 9, 9, 9}));
      },
      {"[read_idx]", "element type"});
  expect_error([] { data::read_idx("/nonexistent/file.gz"); }, {"[read_idx]", "not found"});
  // Dimensions whose product wraps around 64 bits must not pass as small.
  expect_error(
      [&] {
        data::read_idx(write_gz("sy_huge.idx.gz", {0,    0,    8,    4,    0xff, 0xff, 0xff, 0xff,
                                                   0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                                   0,    0,    0,    16,   1,    2,    3}));
      },
      {"[read_idx]", "implausible dimensions"});
}

namespace {
long peak_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}
std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}
std::string write_raw(const std::string& name, const std::vector<uint8_t>& bytes) {
  auto path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  return path;
}
}  // namespace

// A header claiming gigabytes in a file of a few bytes costs a few bytes:
// the claim is checked against what the file can hold, and the buffer grows
// only as data arrives.
TEST(Idx, TinyFilesClaimingGigabytesCostNothing) {
  long before = peak_rss_kib();
  // 4 GiB claimed in 8 bytes (plain, not gzip).
  expect_error(
      [] {
        data::read_idx(write_raw("sy_claim4g.idx", {0, 0, 8, 1, 0xff, 0xff, 0xff, 0xff}));
      },
      {"[read_idx]", "claims 4294967295 bytes", "at most", "file's 8 bytes"});
  // 5M images of 28x28 (3.9 GB) claimed by a 40-byte gzip file.
  expect_error(
      [] {
        data::read_idx(write_gz("sy_claim5m.idx.gz", {0, 0, 8, 3, 0x00, 0x4c, 0x4b, 0x40, 0, 0, 0,
                                                      28, 0, 0, 0, 28, 1, 2}));
      },
      {"[read_idx]", "claims 3920000000 bytes"});
  // A claim gzip could hold (65536 x 1024 = 64 MiB) over 100 KiB of
  // incompressible data: truncated, after reading what is there.
  std::vector<uint8_t> hdr = {0, 0, 8, 2, 0, 1, 0, 0, 0, 0, 4, 0};
  std::mt19937 rng(3);
  for (int i = 0; i < 100 * 1024; ++i) hdr.push_back(uint8_t(rng()));
  expect_error([&] { data::read_idx(write_gz("sy_claim64m.idx.gz", hdr)); },
               {"[read_idx]", "truncated", "expected 67108864 bytes", "found 102400"});
  EXPECT_LT(peak_rss_kib() - before, 32 * 1024) << "KiB of peak RSS for files of at most 100 KiB";
  // A file that really holds its claim is read whole (64 MiB of zeros
  // compress to 64 KiB: a ratio gzip reaches).
  std::vector<uint8_t> zeros = {0, 0, 8, 2, 0, 1, 0, 0, 0, 0, 4, 0};
  zeros.resize(zeros.size() + (size_t(64) << 20), 0);
  auto a = data::read_idx(write_gz("sy_zeros64m.idx.gz", zeros));
  EXPECT_EQ(a.dims, (std::vector<int64_t>{65536, 1024}));
  EXPECT_EQ(a.data.size(), size_t(64) << 20);
  for (const char* f :
       {"sy_claim4g.idx", "sy_claim5m.idx.gz", "sy_claim64m.idx.gz", "sy_zeros64m.idx.gz"})
    std::filesystem::remove(std::filesystem::temp_directory_path() / f);
}

// Paths that are not regular files are refused at once: a FIFO would wait
// for a writer forever, a directory or /dev/zero never ends.
TEST(Idx, NonRegularFilesAreRefused) {
  auto fifo = (std::filesystem::temp_directory_path() / "sy_fifo.idx").string();
  std::filesystem::remove(fifo);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_error([&] { data::read_idx(fifo); }, {"[read_idx]", "expected a regular file", "a FIFO"});
  std::filesystem::remove(fifo);
  expect_error([] { data::read_idx(std::filesystem::temp_directory_path().string()); },
               {"[read_idx]", "expected a regular file", "a directory"});
  expect_error([] { data::read_idx("/dev/zero"); }, {"[read_idx]", "a device"});
}

// Corrupt gzip data is reported as such, with zlib's message, not as a
// short IDX header.
TEST(Idx, CorruptGzipReportsZlibsError) {
  std::vector<uint8_t> ok = {0, 0, 8, 1, 0, 0, 0x10, 0};
  std::mt19937 rng(5);
  for (int i = 0; i < 4096; ++i) ok.push_back(uint8_t(rng() % 7));
  auto bytes = file_bytes(write_gz("sy_gz_ok.idx.gz", ok));
  ASSERT_GT(bytes.size(), 100u);
  auto cut = bytes;
  cut.resize(bytes.size() / 2);  // the gzip stream ends in the middle
  expect_error([&] { data::read_idx(write_raw("sy_gz_cut.idx.gz", cut)); },
               {"[read_idx]", "corrupt or truncated compressed data", "zlib: "});
  auto flipped = bytes;
  for (size_t i = 12; i < 40; ++i) flipped[i] ^= 0x5a;  // inside the deflate stream
  expect_error([&] { data::read_idx(write_raw("sy_gz_flip.idx.gz", flipped)); },
               {"[read_idx]", "zlib: "});
  for (const char* f : {"sy_gz_ok.idx.gz", "sy_gz_cut.idx.gz", "sy_gz_flip.idx.gz"})
    std::filesystem::remove(std::filesystem::temp_directory_path() / f);
}

TEST(FashionMNIST, MissingDatasetSaysWhichPackageProvidesIt) {
  expect_error(
      [] { data::FashionMNIST("/nonexistent-dir", true); },
      {"[FashionMNIST]", "dataset-fashion-mnist", "--data", "/nonexistent-dir/train-images"});
}

TEST(FashionMNIST, LoadsRealDataAndNormalizes) {
  data::FashionMNIST ds(data::FashionMNIST::kDefaultDir, false, 100);
  EXPECT_EQ(ds.size(), 100);
  std::vector<int64_t> idx{0, 99};
  auto b = ds.get_batch(idx);
  EXPECT_EQ(b.data.shape(), (sy::Shape{2, 784}));
  EXPECT_EQ(b.target.dtype(), sy::DType::i32);
  auto x = b.data.to_vector<float>();
  float lo = *std::min_element(x.begin(), x.end()), hi = *std::max_element(x.begin(), x.end());
  EXPECT_NEAR(lo, -0.2860f / 0.3530f, 1e-5);
  EXPECT_NEAR(hi, (1.f - 0.2860f) / 0.3530f, 1e-5);
  for (int32_t l : b.target.to_vector<int32_t>()) EXPECT_TRUE(l >= 0 && l < 10);
  EXPECT_EQ(b.target.to_vector<int32_t>()[0], 9) << "the first t10k label is 9 (ankle boot)";
}

TEST(DataLoader, Int64TargetsComeThroughAsInt64) {
  std::vector<float> x{0, 1, 2, 3, 4, 5};
  std::vector<int64_t> y{int64_t(1) << 40, -2, 3};
  auto ds =
      std::make_shared<data::TensorDataset>(sy::from_vector(x, {3, 2}), sy::from_vector(y, {3}));
  data::DataLoader dl(ds, {.batch_size = 2});
  std::vector<int64_t> seen;
  for (const auto& b : dl) {
    EXPECT_EQ(b.target.dtype(), sy::DType::i64);
    auto t = b.target.to_vector<int64_t>();
    seen.insert(seen.end(), t.begin(), t.end());
  }
  EXPECT_EQ(seen, y);
}
