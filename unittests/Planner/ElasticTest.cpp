//===- ElasticTest.cpp - growing workspaces into free space ---------------===//

#include "memopt/Planner/Elastic.h"
#include "memopt/Planner/Validator.h"

#include <gtest/gtest.h>

using namespace memopt::planner;

namespace {

TEST(ElasticTest, GrowsIntoTheLargestFreeBlockWithoutGrowingTheArena) {
  // t=0: a [0,100) big tensor; t=1: b [0,40) and the workspace w.
  Problem problem;
  problem.buffers = {{0, 0, 1, 100, 1}, {1, 1, 2, 40, 1}, {2, 1, 2, 8, 1}};
  Plan plan{{0, 0, 40}, 100};
  ASSERT_TRUE(validatePlan(problem, plan).ok());
  int64_t added = growIntoFreeSpace(problem, plan, {0, 0, 1000});
  EXPECT_EQ(added, 52);
  EXPECT_EQ(problem.buffers[2].size, 60);
  EXPECT_EQ(plan.offsets[2], 40);
  EXPECT_EQ(plan.arenaSize, 100);
  EXPECT_TRUE(validatePlan(problem, plan).ok());
}

TEST(ElasticTest, StopsAtTheMaximumAndMovesToAFittingBlock) {
  // At t=1 the free blocks are [10,30) (20 bytes) and [70,100) (30 bytes);
  // the workspace sits in the smaller one and wants 25 bytes.
  Problem problem;
  problem.buffers = {{0, 0, 3, 10, 1}, {1, 1, 2, 40, 1}, {2, 1, 2, 4, 1}};
  problem.buffers[1].lower = 0;
  Plan plan{{0, 30, 10}, 100};
  ASSERT_TRUE(validatePlan(problem, plan).ok());
  growIntoFreeSpace(problem, plan, {0, 0, 25});
  EXPECT_EQ(problem.buffers[2].size, 25);
  EXPECT_EQ(plan.offsets[2], 70);
  EXPECT_TRUE(validatePlan(problem, plan).ok());
}

TEST(ElasticTest, NoFreeSpaceKeepsTheFloorAndAlignmentIsKept) {
  Problem problem;
  problem.buffers = {{0, 0, 2, 96, 1}, {1, 1, 2, 4, 64}};
  Plan plan{{4, 0}, 100};
  ASSERT_TRUE(validatePlan(problem, plan).ok());
  EXPECT_EQ(growIntoFreeSpace(problem, plan, {0, 1 << 20}), 0);
  EXPECT_EQ(problem.buffers[1].size, 4);
  EXPECT_EQ(plan.offsets[1], 0);

  // With room above, the start is aligned up to 64 and the size shrinks to
  // what fits before the arena's end.
  Problem wide;
  wide.buffers = {{0, 0, 2, 10, 1}, {1, 1, 2, 0, 64}};
  wide.buffers[1].size = 1;
  Plan widePlan{{0, 64}, 200};
  growIntoFreeSpace(wide, widePlan, {0, 1000});
  EXPECT_EQ(widePlan.offsets[1], 64);
  EXPECT_EQ(wide.buffers[1].size, 136);
  EXPECT_TRUE(validatePlan(wide, widePlan).ok());
}

TEST(ElasticTest, TwoElasticBuffersAtTheSameTimeDoNotOverlap) {
  Problem problem;
  problem.buffers = {{0, 0, 1, 1, 1}, {1, 0, 1, 1, 1}};
  Plan plan{{0, 1}, 100};
  growIntoFreeSpace(problem, plan, {60, 60});
  EXPECT_TRUE(validatePlan(problem, plan).ok());
  // The first takes 60 of the free [2, 100); the second the 38 left above it.
  EXPECT_EQ(problem.buffers[0].size, 60);
  EXPECT_EQ(plan.offsets[0], 2);
  EXPECT_EQ(problem.buffers[1].size, 38);
  EXPECT_EQ(plan.offsets[1], 62);
}

} // namespace
