// The emulation's execution model itself (cuda_emu.h): __syncthreads and
// shuffles wait for the whole block or warp; warps run ahead of each other,
// so a missing barrier gives wrong data instead of passing by luck; a
// barrier some threads never reach, and a shuffle from an exited lane, stop
// the process with the reason.
#include <gtest/gtest.h>

#include <vector>

#include "cuda_emu.h"

namespace {

constexpr unsigned kThreads = 256;

// Each thread writes its slot, then reads the slot 32 threads on (the next
// warp's), with or without a barrier between: what a block reduction does.
std::vector<int> neighbour_reads(bool barrier) {
  std::vector<int> got(kThreads, -1);
  static int slots[kThreads];
  for (int& s : slots) s = -1;
  sy_emu::run(dim3(1), dim3(kThreads), [&] {
    const unsigned t = threadIdx.x;
    slots[t] = int(t);
    if (barrier) __syncthreads();
    got[t] = slots[(t + 32) % kThreads];
  });
  return got;
}

TEST(EmulationModel, SyncthreadsWaitsForTheWholeBlock) {
  for (int round = 0; round < 2; ++round) {  // both orders of the warps
    const std::vector<int> got = neighbour_reads(true);
    for (unsigned t = 0; t < kThreads; ++t) ASSERT_EQ(got[t], int((t + 32) % kThreads)) << t;
  }
}

TEST(EmulationModel, AMissingSyncthreadsReadsStaleData) {
  // Warps run ahead of each other: without the barrier, the warps that run
  // first read slots not yet written, in either order.
  for (int round = 0; round < 2; ++round) {
    const std::vector<int> got = neighbour_reads(false);
    int stale = 0;
    for (unsigned t = 0; t < kThreads; ++t) stale += got[t] == -1;
    EXPECT_GT(stale, 0) << "round " << round;
  }
}

TEST(EmulationModel, ShufflesExchangeWithinTheWarp) {
  std::vector<int> got(64);
  sy_emu::run(dim3(1), dim3(64),
              [&] { got[threadIdx.x] = __shfl_xor_sync(0xffffffffu, int(threadIdx.x), 1); });
  for (int t = 0; t < 64; ++t) EXPECT_EQ(got[t], t ^ 1);
}

TEST(EmulationModel, ExitedThreadsLeaveTheBarrier) {
  // Half the block returns early; the rest still pass __syncthreads.
  std::vector<int> got(kThreads, 0);
  sy_emu::run(dim3(2), dim3(kThreads), [&] {
    if (threadIdx.x % 2) return;
    __syncthreads();
    got[threadIdx.x] += 1;
  });
  for (unsigned t = 0; t < kThreads; ++t) EXPECT_EQ(got[t], t % 2 ? 0 : 2) << t;
}

using EmulationModelDeathTest = ::testing::Test;

TEST_F(EmulationModelDeathTest, ABarrierSomeThreadsNeverReachIsADeadlock) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Lanes 0-15 wait in a shuffle that lanes 16-31, waiting at the block's
  // barrier, never join.
  EXPECT_DEATH(sy_emu::run(dim3(1), dim3(64),
                           [] {
                             if (threadIdx.x < 16)
                               (void)__shfl_xor_sync(0xffffffffu, 1, 1);
                             else
                               __syncthreads();
                           }),
               "deadlock");
}

TEST_F(EmulationModelDeathTest, AShuffleFromAnExitedLaneAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(sy_emu::run(dim3(1), dim3(32),
                           [] {
                             if (threadIdx.x == 1) return;
                             (void)__shfl_xor_sync(0xffffffffu, 1, 1);
                           }),
               "exited");
}

}  // namespace
