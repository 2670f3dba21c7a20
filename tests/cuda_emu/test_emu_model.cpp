// SPDX-License-Identifier: MIT
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

TEST(EmulationModel, WarpsRunInAnOrderThatAlternates) {
  // Forward, the first warps read the later ones' slots unwritten; in
  // reverse, the last warp reads the first's: the stale reads move.
  std::vector<int> first = neighbour_reads(false), second = neighbour_reads(false);
  EXPECT_NE(first, second);
  EXPECT_TRUE(first[kThreads - 1] == -1 || second[kThreads - 1] == -1)
      << "the last warp reads warp 0 early";
  EXPECT_TRUE(first[0] == -1 || second[0] == -1) << "warp 0 reads warp 1 early";
}

TEST(EmulationModel, AMissingTrailingBarrierLetsAWarpOverwriteUnreadData) {
  // Two rounds of a block sum through one shared array: without the barrier
  // after each round's reads, a warp running ahead writes round 2's partial
  // sum before slower warps have read round 1's.
  for (bool trailing : {true, false}) {
    std::vector<int> got(kThreads * 2);
    static int part[kThreads / 32];
    sy_emu::run(dim3(1), dim3(kThreads), [&] {
      for (int round = 0; round < 2; ++round) {
        if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = int(threadIdx.x / 32) + 100 * round;
        __syncthreads();
        int sum = 0;
        for (int w = 0; w < int(kThreads / 32); ++w) sum += part[w];
        got[size_t(round) * kThreads + threadIdx.x] = sum;
        if (trailing) __syncthreads();
      }
    });
    int wrong = 0;
    for (unsigned t = 0; t < kThreads; ++t) wrong += (got[t] != 28) + (got[kThreads + t] != 828);
    if (trailing)
      EXPECT_EQ(wrong, 0);
    else
      EXPECT_GT(wrong, 0);
  }
}

TEST(EmulationModel, BackToBackShufflesReduceAWarp) {
  std::vector<float> got(96);
  sy_emu::run(dim3(1), dim3(96), [&] {
    float v = float(threadIdx.x % 32);
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    got[threadIdx.x] = v;
  });
  for (float v : got) EXPECT_EQ(v, 496.f);  // 0 + 1 + ... + 31 in every lane
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
