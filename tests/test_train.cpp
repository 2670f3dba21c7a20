// SPDX-License-Identifier: MIT
// Training on real Fashion-MNIST data (a subset) reaches a stated accuracy,
// and is reproducible for a seed.
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "helpers.h"
#include "trainer.h"

TEST(Train, FashionMnistSubsetReachesEightyPercent) {
  sy::models::TrainConfig cfg;
  cfg.device = "cpu";
  cfg.epochs = 2;
  cfg.batch = 64;
  cfg.limit = 10000;
  cfg.test_limit = 2000;
  cfg.hidden = {128};
  auto r = sy::models::train_fashion_mnist(cfg);
  EXPECT_EQ(r.train_samples, 20000);
  EXPECT_GE(r.test_acc, 0.80) << "2 epochs on 10k samples, Adam 1e-3";
  EXPECT_LT(r.final_loss, r.first_losses.front());
  auto r2 = sy::models::train_fashion_mnist(cfg);
  EXPECT_EQ(r.first_losses, r2.first_losses) << "same seed, same losses";
  EXPECT_EQ(r.test_acc, r2.test_acc);
}

TEST(Train, SgdWithMomentumAlsoLearns) {
  sy::models::TrainConfig cfg;
  cfg.device = "cpu";
  cfg.epochs = 1;
  cfg.batch = 32;
  cfg.limit = 5000;
  cfg.test_limit = 1000;
  cfg.opt = "sgd";
  cfg.lr = 0.01f;
  auto r = sy::models::train_fashion_mnist(cfg);
  EXPECT_GE(r.test_acc, 0.70);
}

// No training sample (an empty dataset, or limit 0 from the library): a
// clear error, not a run that reports a final loss of 0 after zero steps.
TEST(Train, AnEmptyTrainingSetIsAnError) {
  auto dir = std::filesystem::temp_directory_path() / ("sy_empty_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const char* name, std::vector<uint8_t> bytes) {
    gzFile f = gzopen((dir / name).c_str(), "wb");
    gzwrite(f, bytes.data(), unsigned(bytes.size()));
    gzclose(f);
  };
  for (const char* set : {"train", "t10k"}) {
    write((std::string(set) + "-images-idx3-ubyte.gz").c_str(),
          {0, 0, 8, 3, 0, 0, 0, 0, 0, 0, 0, 28, 0, 0, 0, 28});
    write((std::string(set) + "-labels-idx1-ubyte.gz").c_str(), {0, 0, 8, 1, 0, 0, 0, 0});
  }
  sy::models::TrainConfig cfg;
  cfg.device = "cpu";
  cfg.epochs = 1;
  cfg.data_dir = dir.string();
  expect_error([&] { sy::models::train_fashion_mnist(cfg); },
               {"[train]", "expected at least one training sample", "empty training set"});
  cfg.data_dir = sy::data::FashionMNIST::kDefaultDir;
  cfg.limit = 0;
  expect_error([&] { sy::models::train_fashion_mnist(cfg); },
               {"[train]", "expected limit >= 1", "found 0"});
  std::filesystem::remove_all(dir);
}

// Memory stays flat over a long run: after epoch 2, the process's RSS stays
// within 1% and the device's bytes in use and reserved do not move
// (10 epochs on cpu, 3 on each GPU), on a reduced dataset. On the cpu the
// batches the loader prepares ahead are cpu tensors too, and how many are
// in flight at an epoch's end depends on timing: up to 4 batches' worth of
// slack there (a leak of one buffer per step would be 32 per epoch).
class LongRun : public OnDevice {};
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SY_UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define SY_UNDER_ASAN 1
#endif

TEST_P(LongRun, MemoryIsFlatAfterTheSecondEpoch) {
#ifdef SY_UNDER_ASAN
  GTEST_SKIP() << "AddressSanitizer's quarantine keeps freed memory resident (RSS grows until it "
                  "fills); the Release build runs this check";
#endif
  auto rss_bytes = [] {
    long pages = 0, resident = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
      std::fclose(f);
    }
    return double(resident) * double(sysconf(_SC_PAGESIZE));
  };
  sy::models::TrainConfig cfg;
  cfg.device = GetParam();
  cfg.epochs = GetParam() == "cpu" ? 10 : 3;
  cfg.batch = 64;
  cfg.limit = 2048;
  cfg.test_limit = 256;
  auto& dev = D();
  struct Mark {
    double rss;
    uint64_t in_use, reserved;
  };
  std::vector<Mark> marks;
  sy::models::train_fashion_mnist(cfg, nullptr, [&](const sy::models::EpochStats&) {
    sy::synchronize(dev);
    marks.push_back({rss_bytes(), dev.counters().bytes_in_use, dev.counters().bytes_reserved});
  });
  ASSERT_EQ(marks.size(), size_t(cfg.epochs));
  const Mark& base = marks[1];
  for (size_t e = 2; e < marks.size(); ++e) {
    // 1%, plus the batches the loader may hold at that moment.
    double batches = 4.0 * double(cfg.batch) * (784 * 4 + 4);
    EXPECT_LE(std::abs(marks[e].rss - base.rss), 0.01 * base.rss + batches)
        << "epoch " << e + 1 << ": RSS " << marks[e].rss << " vs " << base.rss << " after epoch 2";
    double slack = GetParam() == "cpu" ? batches : 0.0;
    EXPECT_LE(std::abs(double(marks[e].in_use) - double(base.in_use)), slack)
        << "epoch " << e + 1 << ": " << marks[e].in_use << " bytes in use vs " << base.in_use
        << " after epoch 2";
    EXPECT_EQ(marks[e].reserved, base.reserved) << "epoch " << e + 1;
  }
}
INSTANTIATE_TEST_SUITE_P(Devices, LongRun, ::testing::ValuesIn([] {
                           std::vector<std::string> d{"cpu"};
                           for (auto& g : gpu_devices()) d.push_back(g);
                           return d;
                         }()),
                         [](const auto& info) { return device_param_name(info.param); });

// ---- checkpoints and resume -----------------------------------------------

namespace {

std::string fresh_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() /
           ("sy_resume_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(d);
  return d.string();
}

sy::models::TrainConfig resume_config(const std::string& device, const std::string& opt) {
  sy::models::TrainConfig cfg;
  cfg.device = device;
  cfg.batch = 64;
  cfg.limit = 1000;
  cfg.test_limit = 500;
  cfg.hidden = {32};
  cfg.opt = opt;
  cfg.lr = opt == "sgd" ? 0.05f : 1e-3f;
  cfg.seed = 7;
  return cfg;
}

class Resume : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  void SetUp() override { SKIP_UNLESS_AVAILABLE(std::get<0>(GetParam())); }
};

}  // namespace

TEST_P(Resume, TwoEpochsThenOneMoreEqualsThreeStraight) {
  auto [device, opt] = GetParam();
  auto cfg = resume_config(device, opt);
  const std::string straight = fresh_dir("straight"), parts = fresh_dir("parts");
  cfg.epochs = 3;
  cfg.save = straight;
  auto full = sy::models::train_fashion_mnist(cfg);
  cfg.epochs = 2;
  cfg.save = parts;
  sy::models::train_fashion_mnist(cfg);
  cfg.epochs = 3;
  cfg.save.clear();
  cfg.resume = parts;
  auto rest = sy::models::train_fashion_mnist(cfg);
  EXPECT_EQ(rest.first_epoch, 3);
  EXPECT_EQ(rest.steps, full.steps / 3);
  EXPECT_NE(rest.resumed_from.find("checkpoint-000002"), std::string::npos);
  sy::SafetensorsFile a(straight + "/checkpoint-000003.safetensors"),
      b(parts + "/checkpoint-000003.safetensors");
  ASSERT_EQ(a.entries().size(), b.entries().size());
  double worst = 0;
  for (auto& e : a.entries()) {  // model and optimizer state alike
    if (a.dtype_of(e) != sy::DType::f32) continue;
    auto x = a.tensor(e.name).to_vector<float>(), y = b.tensor(e.name).to_vector<float>();
    ASSERT_EQ(x.size(), y.size()) << e.name;
    for (size_t i = 0; i < x.size(); ++i)
      worst = std::max(worst, double(std::abs(x[i] - y[i])) / (1e-6 + std::abs(x[i])));
  }
  if (device == "cpu")
    EXPECT_EQ(worst, 0.0) << "bit-identical on the CPU";
  else
    EXPECT_LE(worst, 1e-5);
  EXPECT_EQ(rest.test_acc, full.test_acc);
}

INSTANTIATE_TEST_SUITE_P(Devices, Resume,
                         ::testing::Combine(::testing::Values("cpu", "vulkan:0"),
                                            ::testing::Values("adam", "sgd")),
                         [](const auto& info) {
                           return device_param_name(std::get<0>(info.param)) + "_" +
                                  std::get<1>(info.param);
                         });

TEST(ResumeErrors, ADamagedNewestCheckpointFallsBackToThePreviousOne) {
  auto cfg = resume_config("cpu", "adam");
  const std::string dir = fresh_dir("damaged"), straight = fresh_dir("undamaged");
  cfg.epochs = 3;
  cfg.save = straight;
  auto full = sy::models::train_fashion_mnist(cfg);
  cfg.save = dir;
  sy::models::train_fashion_mnist(cfg);
  // One flipped byte in the data of the newest checkpoint.
  const std::string newest = dir + "/checkpoint-000003.safetensors";
  {
    std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-100, std::ios::end);
    char c = 0;
    f.read(&c, 1);
    c = char(c ^ 0x20);
    f.seekp(-100, std::ios::end);
    f.write(&c, 1);
  }
  expect_error([&] { sy::SafetensorsFile(newest).verify(); }, {"does not match its checksum"});
  cfg.save.clear();
  cfg.resume = dir;
  auto r = sy::models::train_fashion_mnist(cfg);
  EXPECT_NE(r.resumed_from.find("checkpoint-000002"), std::string::npos);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("checkpoint-000003"), std::string::npos) << r.warnings[0];
  EXPECT_EQ(r.test_acc, full.test_acc) << "epoch 3 again, from epoch 2's checkpoint";
  // A truncated file is skipped the same way (the resumed run above wrote
  // epoch 3 again; cut it short).
  std::filesystem::resize_file(dir + "/checkpoint-000003.safetensors", 1000);
  cfg.epochs = 4;
  r = sy::models::train_fashion_mnist(cfg);
  EXPECT_EQ(r.first_epoch, 3);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("past the end of the file"), std::string::npos) << r.warnings[0];
}

TEST(ResumeErrors, OtherSettingsAndMisuseAreClearErrors) {
  auto cfg = resume_config("cpu", "adam");
  const std::string dir = fresh_dir("settings");
  cfg.epochs = 1;
  cfg.save = dir;
  sy::models::train_fashion_mnist(cfg);
  expect_error([&] { sy::models::train_fashion_mnist(cfg); },
               {"holds checkpoints of an earlier run", "--resume"});
  cfg.save.clear();
  cfg.resume = dir;
  expect_error([&] { sy::models::train_fashion_mnist(cfg); },
               {"finished epoch 1", "expected --epochs above it, found 1"});
  cfg.epochs = 2;
  cfg.hidden = {64};
  cfg.lr = 0.5f;
  expect_error([&] { sy::models::train_fashion_mnist(cfg); },
               {"other settings", "sizes [784,32,10] there, [784,64,10] here", "lr"});
  cfg.resume = fresh_dir("nothing");
  expect_error([&] { sy::models::train_fashion_mnist(cfg); }, {"expected a checkpoint directory"});
}

TEST(Predict, SamplesFromIdxAndNpyFiles) {
  const std::string dir = fresh_dir("samples");
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
    return dir + "/" + name;
  };
  auto npy = [](const std::string& descr, const std::string& shape, const std::string& data) {
    std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
    h.resize(((10 + h.size() + 1 + 63) / 64) * 64 - 10 - 1, ' ');
    h += '\n';
    std::string out = "\x93NUMPY\x01";
    out += '\0';
    out += char(h.size() & 0xff);
    out += char(h.size() >> 8);
    return out + h + data;
  };
  std::vector<float> f{1.f, -2.f, 3.5f, 0.f, 7.f, 8.f};
  auto x = sy::data::read_samples(
      write("f.npy", npy("<f4", "(2, 3)", std::string(reinterpret_cast<char*>(f.data()), 24))));
  EXPECT_EQ(x.shape(), (sy::Shape{2, 3}));
  EXPECT_EQ(x.to_vector<float>(), f);
  auto u = sy::data::read_samples(
      write("u.npy", npy("|u1", "(1, 2, 2)", std::string("\0\xff\0\xff", 4))));
  EXPECT_EQ(u.shape(), (sy::Shape{1, 4}));
  EXPECT_FLOAT_EQ(u.to_vector<float>()[1], (1.f - 0.2860f) / 0.3530f);  // as training sees it
  // The test images, as IDX: (10000, 784), normalized.
  auto t = sy::data::read_samples(sy::data::FashionMNIST::kDefaultDir +
                                  std::string("/t10k-images-idx3-ubyte.gz"));
  EXPECT_EQ(t.shape(), (sy::Shape{10000, 784}));
  expect_error(
      [&] { sy::data::read_samples(write("d.npy", npy("<f8", "(2,)", std::string(16, 0)))); },
      {"expected dtype '<f4' (float32) or '|u1' (uint8), found '<f8'"});
  expect_error(
      [&] { sy::data::read_samples(write("s.npy", npy("<f4", "(2, 3)", std::string(20, 0)))); },
      {"expected 24 bytes of data", "found 20"});
  expect_error([&] { sy::data::read_samples(write("b.npy", "\x93NUMPX")); },
               {"expected an .npy file"});
  expect_error(
      [&] {
        sy::data::read_samples(
            write("o.npy", npy("<f4", "(4294967296, 4294967296, 4294967296)", "")));
      },
      {"overflows"});
}
