//===- ValidatorTest.cpp - The independent schedule validator -------------===//

#include "memopt/Remat/Validator.h"

#include "RematTestGraphs.h"

#include <gtest/gtest.h>

using namespace memopt::remat;
using namespace memopt::remat::testing;

namespace {

bool mentions(const ScheduleCheck &check, const std::string &text) {
  return check.message.find(text) != std::string::npos;
}

TEST(RematValidatorTest, PeakOfInitialOrder) {
  Graph graph = unet();
  ScheduleCheck check = validateSchedule(graph, graph.order, 1);
  ASSERT_TRUE(check.ok()) << check.message;
  EXPECT_EQ(check.peakBytes, 50);
  EXPECT_EQ(check.totalCost, 11);
}

TEST(RematValidatorTest, ChainPeakIsInputPlusOutput) {
  ScheduleCheck check = validateSchedule(chain(5), {0, 1, 2, 3, 4}, 1, 20);
  ASSERT_TRUE(check.ok()) << check.message;
  EXPECT_EQ(check.peakBytes, 20);
}

TEST(RematValidatorTest, RecomputationFreesTheFirstCopy) {
  // x1 recomputed before y1: x1's first copy dies after x2 reads it.
  Graph graph = unet();
  ScheduleCheck check = validateSchedule(graph, {0, 1, 2, 3, 4, 1, 5, 6}, 2);
  ASSERT_TRUE(check.ok()) << check.message;
  EXPECT_EQ(check.peakBytes, 40);
  EXPECT_EQ(check.totalCost, 12);
}

TEST(RematValidatorTest, CatchesOverBudget) {
  Graph graph = unet();
  ScheduleCheck check = validateSchedule(graph, graph.order, 1, 49);
  EXPECT_EQ(check.violation, Violation::OverBudget);
  EXPECT_TRUE(mentions(check, "peak of 50 bytes at step 4 (node 4)"))
      << check.message;
}

TEST(RematValidatorTest, CatchesMissingInput) {
  ScheduleCheck check = validateSchedule(chain(3), {0, 2, 1}, 2);
  EXPECT_EQ(check.violation, Violation::MissingInput);
  EXPECT_TRUE(mentions(check, "computes node 2 before its input node 1"))
      << check.message;
}

TEST(RematValidatorTest, CatchesNeverComputed) {
  ScheduleCheck check = validateSchedule(chain(3), {0, 1}, 2);
  EXPECT_EQ(check.violation, Violation::NeverComputed);
  EXPECT_TRUE(mentions(check, "node 2 is never computed")) << check.message;
}

TEST(RematValidatorTest, CatchesTooManyComputations) {
  ScheduleCheck check = validateSchedule(chain(3), {0, 1, 0, 0, 2}, 2);
  EXPECT_EQ(check.violation, Violation::TooManyComputations);
  EXPECT_TRUE(mentions(check, "node 0 is computed 3 times, over its limit "
                              "of 2"))
      << check.message;
  // A per-node limit overrides the default.
  Graph graph = chain(3);
  graph.nodes[1].maxComputations = 1;
  EXPECT_EQ(validateSchedule(graph, {0, 1, 1, 2}, 2).violation,
            Violation::TooManyComputations);
}

TEST(RematValidatorTest, CatchesUnknownNode) {
  ScheduleCheck check = validateSchedule(chain(3), {0, 1, 7, 2}, 2);
  EXPECT_EQ(check.violation, Violation::UnknownNode);
}

TEST(RematValidatorTest, InPlaceTakesOverTheCopyItReadsLast) {
  // A chain written in place: one buffer's bytes at a time.
  Graph graph = chain(4);
  for (int v = 1; v < 4; ++v)
    graph.nodes[v].inPlaceInput = v - 1;
  ASSERT_EQ(checkGraph(graph), "");
  ScheduleCheck check = validateSchedule(graph, graph.order, 1, 10);
  ASSERT_TRUE(check.ok()) << check.message;
  EXPECT_EQ(check.peakBytes, 10);
  EXPECT_EQ(computationLowerBound(graph), 10);
}

TEST(RematValidatorTest, InPlaceNeedsTheLastReadAndEqualBytes) {
  // Node 0 is read by 1 (in place) and again by 2: 1 writes a new buffer.
  Graph graph =
      makeGraph({{1, 10}, {1, 10}, {1, 10}}, {{0, 1}, {0, 2}, {1, 2}});
  graph.nodes[1].inPlaceInput = 0;
  EXPECT_EQ(validateSchedule(graph, graph.order, 1).peakBytes, 30);
  // Recomputing 0 for node 2 makes node 1 its first copy's last reader.
  EXPECT_EQ(validateSchedule(graph, {0, 1, 0, 2}, 2).peakBytes, 30);
  Graph wider = chain(2);
  wider.nodes[1].bytes = 20;
  wider.nodes[1].inPlaceInput = 0;
  EXPECT_EQ(validateSchedule(wider, wider.order, 1).peakBytes, 30);
}

TEST(RematValidatorTest, ScratchCountsDuringItsComputationOnly) {
  Graph graph = chain(3);
  graph.nodes[1].scratchBytes = 7;
  ScheduleCheck check = validateSchedule(graph, graph.order, 1);
  ASSERT_TRUE(check.ok()) << check.message;
  EXPECT_EQ(check.peakBytes, 27);
  EXPECT_EQ(computationLowerBound(graph), 27);
}

} // namespace
