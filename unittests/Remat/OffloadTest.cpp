//===- OffloadTest.cpp - the copy choice of the memory-budget solver ------===//
//
// The timeline replay (what hides, what stalls), the placement of one copy,
// and the choice against recomputation (include/memopt/Remat/Offload.h).
//
//===----------------------------------------------------------------------===//

#include "memopt/Remat/Offload.h"

#include <gtest/gtest.h>

using namespace memopt::remat;

namespace {

/// Ten steps of 10 us; one value of `bytes` read at step 1 and step 8, live
/// from 0 to 8, with 100 bytes of other data everywhere and 50 more at step
/// 5 (the peak).
OffloadProblem oneValue(int64_t bytes, double bytesPerSecond,
                        double recomputeSeconds) {
  OffloadProblem problem;
  problem.stepSeconds.assign(10, 10e-6);
  problem.stepBytes.assign(10, 100);
  for (int k = 0; k <= 8; ++k)
    problem.stepBytes[k] += bytes;
  problem.stepBytes[5] += 50;
  problem.candidates.push_back({7, "v", bytes, 1, 8, recomputeSeconds});
  problem.bytesPerSecond = bytesPerSecond;
  problem.latencySeconds = 0;
  problem.budget = 100;
  return problem;
}

TEST(OffloadTest, FastCopyHidesBetweenTheReads) {
  // 1 MB at 1e11 B/s: 10 us, one step each way.
  OffloadProblem problem = oneValue(1000000, 1e11, 1.0);
  OffloadPlacement placement;
  ASSERT_TRUE(placeOffload(problem, 0, placement));
  EXPECT_EQ(placement.offloadAfter, 1);
  EXPECT_EQ(placement.waitBefore, 3);
  EXPECT_EQ(placement.reloadBefore, 7);
  EXPECT_EQ(placement.reloadWaitBefore, 8);
  OffloadTimeline timeline = simulateOffload(problem, {placement});
  EXPECT_NEAR(timeline.copySeconds, 20e-6, 1e-12);
  EXPECT_NEAR(timeline.exposedSeconds(), 0, 1e-12);
  EXPECT_NEAR(timeline.hiddenSeconds(), 20e-6, 1e-12);

  OffloadPlan plan = planOffload(problem);
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.offloadedBytes, 1000000);
  // Free over steps [3, 7).
  EXPECT_EQ(plan.stepBytes[2], 1000100);
  EXPECT_EQ(plan.stepBytes[3], 100);
  EXPECT_EQ(plan.stepBytes[5], 150);
  EXPECT_EQ(plan.stepBytes[6], 100);
  EXPECT_EQ(plan.stepBytes[7], 1000100);
  EXPECT_EQ(plan.peakBytes, 1000100);
}

TEST(OffloadTest, SlowCopyStallsAndLosesToRecomputation) {
  // 1 MB at 1e9 B/s: 1 ms each way against 60 us of compute in the gap.
  OffloadProblem problem = oneValue(1000000, 1e9, 50e-6);
  OffloadPlacement placement;
  ASSERT_TRUE(placeOffload(problem, 0, placement));
  EXPECT_EQ(placement.waitBefore, 2);
  EXPECT_EQ(placement.reloadBefore, 8);
  OffloadTimeline timeline = simulateOffload(problem, {placement});
  // D2H: issued at 20 us, ends at 1020 us (the wait at 20 us stalls 1 ms);
  // H2D: issued after step 7, 1 ms stalled again.
  EXPECT_NEAR(timeline.exposedSeconds(), 2e-3, 1e-9);
  EXPECT_NEAR(timeline.hiddenSeconds(), 0, 1e-9);
  OffloadPlan plan = planOffload(problem);
  EXPECT_TRUE(plan.placements.empty());
  EXPECT_EQ(plan.refusedForRecompute, 1);
  // The same copy when the value may not be recomputed: taken, stall and all.
  problem.candidates[0].recomputeSeconds =
      std::numeric_limits<double>::infinity();
  plan = planOffload(problem);
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_NEAR(plan.timeline.exposedSeconds(), 2e-3, 1e-9);
}

TEST(OffloadTest, CopiesQueueOnTheirStream) {
  // Two values offloaded after the same step share the D2H engine: the
  // second copy starts when the first ends.
  OffloadProblem problem;
  problem.stepSeconds.assign(6, 10e-6);
  problem.stepBytes.assign(6, 0);
  problem.candidates.push_back({0, "a", 1000000, 0, 5, 1.0});
  problem.candidates.push_back({1, "b", 1000000, 0, 5, 1.0});
  problem.bytesPerSecond = 1e11;
  problem.latencySeconds = 0;
  OffloadPlacement a, b;
  ASSERT_TRUE(placeOffload(problem, 0, a));
  ASSERT_TRUE(placeOffload(problem, 1, b));
  // Alone, each waits at step 2 (10 us after its issue at step 1).
  EXPECT_EQ(a.waitBefore, 2);
  OffloadTimeline timeline = simulateOffload(problem, {a, b});
  // b's D2H ends at 30 us, waited for at 20 us (10 us stalled); both
  // reloads are issued at 50 us, b's ends at 70 us, waited for at 60 us:
  // 10 + 10 us exposed.
  EXPECT_NEAR(timeline.exposedSeconds(), 20e-6, 1e-12);
}

TEST(OffloadTest, NoGapNoCandidate) {
  OffloadProblem problem = oneValue(1000, 1e11, 1.0);
  problem.candidates[0].lastForwardStep = 7;
  OffloadPlacement placement;
  EXPECT_FALSE(placeOffload(problem, 0, placement));
  EXPECT_TRUE(planOffload(problem).placements.empty());
}

TEST(OffloadTest, ChecksTheProblem) {
  OffloadProblem problem = oneValue(1000, 1e11, 1.0);
  EXPECT_EQ(checkOffloadProblem(problem), "");
  problem.candidates[0].firstBackwardStep = 10;
  EXPECT_NE(checkOffloadProblem(problem).find("'v'"), std::string::npos);
  problem = oneValue(1000, 0, 1.0);
  EXPECT_NE(checkOffloadProblem(problem), "");
}

} // namespace
