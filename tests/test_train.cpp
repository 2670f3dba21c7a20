// Training on real Fashion-MNIST data (a subset) reaches a stated accuracy,
// and is reproducible for a seed.
#include <unistd.h>
#include <zlib.h>

#include <filesystem>

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
TEST_P(LongRun, MemoryIsFlatAfterTheSecondEpoch) {
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
