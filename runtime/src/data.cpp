// SPDX-License-Identifier: MIT
// Datasets (TensorDataset, IDX files, Fashion-MNIST) and the DataLoader with a
// background thread that prepares the next batch while the current one trains.
#include "switchyard/data.h"

#include <zlib.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <random>
#include <thread>

#include "graph.h"
#include "switchyard/backend/files.h"
#include "switchyard/error.h"

namespace switchyard::data {

TensorDataset::TensorDataset(Tensor data, Tensor targets) {
  SY_CHECK(data.defined() && targets.defined(), "TensorDataset", "expected defined tensors");
  SY_CHECK(data.dim() >= 1 && targets.dim() >= 1 && data.size(0) == targets.size(0),
           "TensorDataset", "expected data and targets with the same number of rows, found ",
           shape_str(data.shape()), " and ", shape_str(targets.shape()));
  n_ = data.size(0);
  data_shape_ = data.shape(), target_shape_ = targets.shape();
  data_dtype_ = data.dtype(), target_dtype_ = targets.dtype();
  auto host = [](const Tensor& t, std::vector<char>& out) {
    Tensor c = t.to(cpu());
    out.resize(size_t(c.numel()) * dtype_size(c.dtype()));
    detail::copy_to_host(c, out.data());  // the elements' bytes, whatever the dtype
  };
  host(data, data_host_);
  host(targets, target_host_);
  data_row_ = n_ ? data_host_.size() / size_t(n_) : 0;
  target_row_ = n_ ? target_host_.size() / size_t(n_) : 0;
}

Batch TensorDataset::get_batch(std::span<const int64_t> idx) const {
  std::vector<char> x(idx.size() * data_row_), y(idx.size() * target_row_);
  for (size_t k = 0; k < idx.size(); ++k) {
    SY_CHECK(idx[k] >= 0 && idx[k] < n_, "TensorDataset", "index ", idx[k], " out of range [0, ",
             n_, ")");
    std::memcpy(x.data() + k * data_row_, data_host_.data() + size_t(idx[k]) * data_row_,
                data_row_);
    std::memcpy(y.data() + k * target_row_, target_host_.data() + size_t(idx[k]) * target_row_,
                target_row_);
  }
  Shape xs = data_shape_, ys = target_shape_;
  xs[0] = ys[0] = int64_t(idx.size());
  return {from_data(x.data(), data_dtype_, xs), from_data(y.data(), target_dtype_, ys)};
}

namespace {

// Deflate never expands data by more than about 1032:1, so a gzip file of
// `file_bytes` cannot hold more than this (a plain file holds itself).
constexpr uint64_t kMaxGzipRatio = 1100;

// An open IDX file: a regular file only (a FIFO, a directory or a device
// would hang or never end), read through zlib (gzip or plain).
class IdxReader {
 public:
  explicit IdxReader(const std::string& path) : path_(path) {
    files::RegularFile file = files::open_regular(path, "read_idx");
    SY_CHECK(file.fd >= 0, "read_idx", "file not found: ", path);
    file_bytes_ = file.bytes;
    f_ = gzdopen(file.fd, "rb");  // owns fd from here
    if (!f_) {
      files::close_file(file.fd);
      throw Error(detail::cat("[read_idx] cannot open ", path, ": out of memory in zlib"));
    }
  }
  ~IdxReader() { gzclose(f_); }
  IdxReader(const IdxReader&) = delete;
  IdxReader& operator=(const IdxReader&) = delete;

  uint64_t file_bytes() const { return file_bytes_; }

  // Reads up to n bytes; a zlib error (corrupt or truncated gzip data) throws
  // with zlib's own message.
  size_t read(void* dst, size_t n) {
    size_t got = 0;
    while (got < n) {
      int r =
          gzread(f_, static_cast<char*>(dst) + got, unsigned(std::min<size_t>(n - got, 1 << 30)));
      if (r < 0 || (r == 0 && !gzeof(f_))) check_zlib();
      if (r <= 0) break;
      got += size_t(r);
    }
    check_zlib();  // a truncated gzip stream ends with Z_BUF_ERROR
    return got;
  }

 private:
  void check_zlib() {
    int err = Z_OK;
    const char* msg = gzerror(f_, &err);
    if (err == Z_OK || err == Z_STREAM_END) return;
    throw Error(detail::cat("[read_idx] ", path_,
                            ": expected valid gzip data, found corrupt or truncated ",
                            "compressed data (zlib: ", msg ? msg : "error", ")"));
  }
  std::string path_;
  gzFile f_ = nullptr;
  uint64_t file_bytes_ = 0;
};

}  // namespace

IdxArray read_idx(const std::string& path) {
  IdxReader in(path);
  unsigned char magic[4];
  SY_CHECK(in.read(magic, 4) == 4, "read_idx", path, ": expected a 4-byte IDX header, found a ",
           "shorter file");
  SY_CHECK(magic[0] == 0 && magic[1] == 0, "read_idx", path,
           ": expected an IDX magic number 00 00 type ndim, found ", int(magic[0]), " ",
           int(magic[1]), " (not an IDX file, or corrupt)");
  SY_CHECK(magic[2] == 0x08, "read_idx", path,
           ": expected element type 0x08 (unsigned byte), "
           "found 0x",
           std::hex, int(magic[2]));
  SY_CHECK(magic[3] >= 1 && magic[3] <= 4, "read_idx", path, ": expected 1 to 4 dimensions, found ",
           int(magic[3]));
  IdxArray a;
  uint64_t total = 1;
  for (int d = 0; d < magic[3]; ++d) {
    unsigned char b[4];
    SY_CHECK(in.read(b, 4) == 4, "read_idx", path, ": truncated header");
    uint64_t n = (uint64_t(b[0]) << 24) | (uint64_t(b[1]) << 16) | (uint64_t(b[2]) << 8) | b[3];
    a.dims.push_back(int64_t(n));
    // Checked in 64 bits: a corrupt header must not wrap around to a small size.
    SY_CHECK(n == 0 || total <= (uint64_t(1) << 32) / n, "read_idx", path,
             ": implausible dimensions ", shape_str(a.dims), " (over 4 GiB)");
    total *= n;
  }
  // What the header claims must fit in what the file can hold, so a tiny
  // file cannot make us allocate gigabytes.
  SY_CHECK(total <= in.file_bytes() * kMaxGzipRatio, "read_idx", path, ": the header claims ",
           total, " bytes of data (dimensions ", shape_str(a.dims), "), expected at most ",
           kMaxGzipRatio, " times the file's ", in.file_bytes(),
           " bytes (more than gzip can hold)");
  // Grown as data arrives (at most doubling), never allocated up front.
  uint64_t got = 0;
  while (got < total) {
    size_t want = size_t(std::min<uint64_t>(total - got, std::max<uint64_t>(got, 1 << 20)));
    a.data.resize(size_t(got) + want);
    size_t r = in.read(a.data.data() + got, want);
    got += r;
    if (r < want) break;
  }
  SY_CHECK(got == total, "read_idx", path, ": truncated: expected ", total,
           " bytes of data, found ", got);
  return a;
}

FashionMNIST::FashionMNIST(const std::string& dir, bool train, int64_t limit) {
  std::string prefix = dir + "/" + (train ? "train" : "t10k");
  std::string img = prefix + "-images-idx3-ubyte.gz", lab = prefix + "-labels-idx1-ubyte.gz";
  for (const auto& f : {img, lab})
    SY_CHECK(std::filesystem::exists(f), "FashionMNIST", "missing dataset file ", f,
             ": install Debian's dataset-fashion-mnist package (apt-get install "
             "dataset-fashion-mnist), or pass the folder holding the IDX .gz files (--data DIR)");
  IdxArray x = read_idx(img), y = read_idx(lab);
  SY_CHECK(x.dims.size() == 3 && y.dims.size() == 1 && x.dims[0] == y.dims[0], "FashionMNIST",
           "expected images (N,28,28) and labels (N), found ", shape_str(x.dims), " and ",
           shape_str(y.dims));
  for (uint8_t l : y.data)
    SY_CHECK(l < 10, "FashionMNIST", lab, ": expected labels 0..9, found ", int(l));
  n_ = x.dims[0];
  pixels_ = x.dims[1] * x.dims[2];
  if (limit >= 0 && limit < n_) n_ = limit;
  x.data.resize(size_t(n_ * pixels_));
  y.data.resize(size_t(n_));
  images_ = std::move(x.data);
  labels_ = std::move(y.data);
}

// Pixel bytes to the normalized floats the models are trained on.
static const std::array<float, 256>& pixel_lut() {
  static const auto lut = [] {
    std::array<float, 256> t{};
    for (int v = 0; v < 256; ++v) t[v] = (float(v) / 255.f - 0.2860f) / 0.3530f;
    return t;
  }();
  return lut;
}

Batch FashionMNIST::get_batch(std::span<const int64_t> idx) const {
  const auto& lut = pixel_lut();
  int64_t b = int64_t(idx.size());
  std::vector<float> x(size_t(b * pixels_));
  std::vector<int32_t> y(static_cast<size_t>(b));
  for (int64_t k = 0; k < b; ++k) {
    SY_CHECK(idx[k] >= 0 && idx[k] < n_, "FashionMNIST", "index ", idx[k], " out of range [0, ", n_,
             ")");
    const uint8_t* src = images_.data() + idx[k] * pixels_;
    float* dst = x.data() + k * pixels_;
    for (int64_t p = 0; p < pixels_; ++p) dst[p] = lut[src[p]];
    y[size_t(k)] = labels_[size_t(idx[k])];
  }
  return {from_vector(x, {b, pixels_}), from_vector(y, {b})};
}

// ---- DataLoader ----------------------------------------------------------------

struct DataLoader::Epoch {
  std::shared_ptr<const Dataset> ds;
  std::vector<int64_t> order;
  int64_t batch = 1, batches = 0, consumed = 0;
  int64_t ranks = 1, rank = 0;
  bool prefetch = true, pin = false;
  Device* pin_device = nullptr;
  std::thread worker;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Batch> ready;
  std::exception_ptr error;
  bool stop = false;

  Batch make(int64_t b) {
    int64_t lo = b * batch, hi = std::min<int64_t>(int64_t(order.size()), lo + batch);
    if (ranks > 1) {  // this rank's share: sizes differ by at most one row
      const int64_t n = hi - lo, q = n / ranks, extra = n % ranks;
      lo += rank * q + std::min<int64_t>(rank, extra);
      hi = lo + q + (rank < extra);
    }
    Batch out = ds->get_batch(std::span<const int64_t>(order.data() + lo, size_t(hi - lo)));
    if (pin && pin_device)
      out = {out.data.pin_memory(*pin_device), out.target.pin_memory(*pin_device)};
    else if (pin)
      out = {out.data.pin_memory(), out.target.pin_memory()};
    return out;
  }

  void start() {
    if (!prefetch) return;
    worker = std::thread([this] {
      try {
        for (int64_t b = 0; b < batches; ++b) {
          Batch next = make(b);
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return stop || ready.size() < 2; });
          if (stop) return;
          ready.push_back(std::move(next));
          cv.notify_all();
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        error = std::current_exception();
        cv.notify_all();
      }
    });
  }

  bool next(Batch& out) {
    if (consumed >= batches) return false;
    if (!prefetch) {
      out = make(consumed++);
      return true;
    }
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return !ready.empty() || error; });
    if (ready.empty() && error) std::rethrow_exception(error);
    out = std::move(ready.front());
    ready.pop_front();
    consumed++;
    cv.notify_all();
    return true;
  }

  ~Epoch() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    if (worker.joinable()) worker.join();
  }
};

DataLoader::DataLoader(std::shared_ptr<const Dataset> ds, LoaderOptions o)
    : ds_(std::move(ds)), o_(o) {
  SY_CHECK(ds_ != nullptr, "DataLoader", "expected a dataset, found null");
  SY_CHECK(o.batch_size > 0, "DataLoader", "expected batch_size > 0, found ", o.batch_size);
  const DistributedSampler& d = o.sampler;
  SY_CHECK(d.num_replicas >= 1 && d.rank >= 0 && d.rank < d.num_replicas, "DataLoader",
           "expected a sampler rank in [0, num_replicas), found rank ", d.rank, " of ",
           d.num_replicas);
  SY_CHECK(o.batch_size >= d.num_replicas, "DataLoader", "expected batch_size >= num_replicas (",
           d.num_replicas, ") so that every rank has rows, found ", o.batch_size);
}

int64_t DataLoader::num_batches() const {
  int64_t n = ds_->size();
  int64_t full = n / o_.batch_size, last = n % o_.batch_size;
  // A last batch too small to give every rank a row is dropped.
  return full + (!o_.drop_last && last >= o_.sampler.num_replicas);
}

std::vector<int64_t> DataLoader::order(uint64_t epoch) const {
  std::vector<int64_t> idx(size_t(ds_->size()));
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = int64_t(i);
  if (o_.shuffle) {
    // Our own Fisher-Yates over mt19937_64, so the order is the same with
    // every standard library.
    std::mt19937_64 rng(o_.seed * 0x9E3779B97F4A7C15ull + epoch);
    for (size_t i = idx.size(); i > 1; --i) std::swap(idx[i - 1], idx[rng() % i]);
  }
  return idx;
}

DataLoader::Iterator DataLoader::begin() {
  auto e = std::make_shared<Epoch>();
  e->ds = ds_;
  e->order = order(epoch_++);
  e->batch = o_.batch_size;
  e->batches = num_batches();
  e->ranks = o_.sampler.num_replicas;
  e->rank = o_.sampler.rank;
  e->prefetch = o_.prefetch;
  e->pin = o_.pin_memory;
  e->pin_device = o_.pin_device;
  e->start();
  return Iterator(std::move(e));
}

DataLoader::Iterator::Iterator(std::shared_ptr<Epoch> e) : epoch_(std::move(e)) { ++*this; }

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  if (epoch_ && !epoch_->next(current_)) {
    epoch_.reset();
    current_ = Batch{};
  }
  return *this;
}

}  // namespace switchyard::data

namespace switchyard::data {

namespace {

// An .npy file (NumPy's format, versions 1 to 3): magic, version, a header
// length, a Python dict literal {'descr', 'fortran_order', 'shape'}, data.
Tensor read_npy(const std::string& path) {
  const char* op = "read_samples";
  auto bytes = files::read_regular(path, size_t(1) << 32, op);
  SY_CHECK(bytes, op, "file not found: ", path);
  const std::string& b = *bytes;
  auto bad = [&](const std::string& what) {
    return Error(detail::cat("[", op, "] '", path, "': ", what));
  };
  if (b.size() < 10 || b.compare(0, 6, "\x93NUMPY") != 0)
    throw bad("expected an .npy file (magic \\x93NUMPY)");
  const int major = uint8_t(b[6]);
  if (major < 1 || major > 3) throw bad(detail::cat("expected .npy version 1 to 3, found ", major));
  size_t at = major == 1 ? 10 : 12;
  if (b.size() < at) throw bad("truncated header");
  uint64_t hlen = uint8_t(b[8]) | uint64_t(uint8_t(b[9])) << 8;
  if (major > 1) hlen |= uint64_t(uint8_t(b[10])) << 16 | uint64_t(uint8_t(b[11])) << 24;
  if (hlen > b.size() - at) throw bad("the header length is past the end of the file");
  const std::string h = b.substr(at, size_t(hlen));
  at += size_t(hlen);
  auto value_of = [&](const char* key) {
    size_t k = h.find(detail::cat("'", key, "':"));
    if (k == std::string::npos) throw bad(detail::cat("expected '", key, "' in the header"));
    k = h.find_first_not_of(' ', k + std::strlen(key) + 3);
    if (k == std::string::npos) throw bad(detail::cat("no value for '", key, "'"));
    return k;
  };
  size_t d = value_of("descr");
  const char q = h[d];
  size_t e = (q == '\'' || q == '"') ? h.find(q, d + 1) : std::string::npos;
  if (e == std::string::npos) throw bad("expected a quoted 'descr'");
  const std::string descr = h.substr(d + 1, e - d - 1);
  const bool f32 = descr == "<f4", u8 = descr == "|u1" || descr == "<u1";
  if (!f32 && !u8)
    throw bad(detail::cat("expected dtype '<f4' (float32) or '|u1' (uint8), found '", descr, "'"));
  if (h.compare(value_of("fortran_order"), 5, "False") != 0)
    throw bad("expected fortran_order False (C order)");
  size_t sh = value_of("shape");
  size_t close = h.find(')', sh);
  if (h[sh] != '(' || close == std::string::npos) throw bad("expected a shape tuple");
  Shape shape;
  std::string cur;
  for (size_t i = sh + 1; i <= close; ++i) {
    char c = h[i];
    if (c >= '0' && c <= '9') {
      if (cur.size() > 18) throw bad("a dimension of the shape is too large");
      cur += c;
    } else if (c == ',' || c == ')') {
      if (!cur.empty()) shape.push_back(std::stoll(cur));
      cur.clear();
    } else if (c != ' ' && c != 'L') {
      throw bad(detail::cat("unexpected '", c, "' in the shape"));
    }
  }
  if (shape.empty()) throw bad("expected at least one dimension (samples), found a scalar");
  int64_t n = shape[0], features = 1;
  Shape flat{n, 1};
  for (size_t i = 1; i < shape.size(); ++i)
    if (__builtin_mul_overflow(features, shape[i], &features))
      throw bad(detail::cat("the shape ", shape_str(shape), " overflows"));
  flat[1] = features;
  const int64_t count = detail::check_shape(op, flat, DType::f32);
  const uint64_t need = uint64_t(count) * (f32 ? 4 : 1);
  if (b.size() - at != need)
    throw bad(detail::cat("expected ", need, " bytes of data for shape ", shape_str(shape),
                          ", found ", b.size() - at));
  std::vector<float> x(static_cast<size_t>(count));
  if (f32)
    std::memcpy(x.data(), b.data() + at, size_t(need));
  else
    for (size_t i = 0; i < x.size(); ++i) x[i] = pixel_lut()[uint8_t(b[at + i])];
  return from_vector(x, flat);
}

}  // namespace

Tensor read_samples(const std::string& path) {
  const std::string npy = ".npy";
  if (path.size() >= npy.size() && path.compare(path.size() - npy.size(), npy.size(), npy) == 0)
    return read_npy(path);
  IdxArray a = read_idx(path);
  SY_CHECK(!a.dims.empty(), "read_samples", "'", path, "': expected samples, found a scalar");
  Shape flat{a.dims[0], 1};
  for (size_t i = 1; i < a.dims.size(); ++i) flat[1] *= a.dims[i];  // read_idx checked the product
  std::vector<float> x(a.data.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = pixel_lut()[a.data[i]];
  return from_vector(x, flat);
}

}  // namespace switchyard::data
