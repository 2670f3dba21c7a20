// Training on real Fashion-MNIST data (a subset) reaches a stated accuracy,
// and is reproducible for a seed.
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
