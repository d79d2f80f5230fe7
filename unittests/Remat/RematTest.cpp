//===- RematTest.cpp - Solver results on graphs with known optima ---------===//

#include "memopt/Remat/Remat.h"
#include "memopt/Remat/ExactSolver.h"
#include "memopt/Remat/FastSolver.h"
#include "memopt/Remat/Staged.h"
#include "memopt/Remat/Validator.h"

#include "RematTestGraphs.h"

#include <gtest/gtest.h>

using namespace memopt::remat;
using namespace memopt::remat::testing;

namespace {

RematResult solve(const Graph &graph, int64_t budget, Method method,
                  int limit = 2) {
  RematOptions options;
  options.budget = budget;
  options.method = method;
  options.maxComputations = limit;
  options.timeLimitSeconds = 30;
  RematResult result = solveRemat(graph, options);
  if (result.ok()) {
    ScheduleCheck check =
        validateSchedule(graph, result.schedule, limit, budget);
    EXPECT_TRUE(check.ok()) << check.message;
    EXPECT_EQ(check.peakBytes, result.peakBytes);
    EXPECT_EQ(check.totalCost, result.totalCost);
  }
  return result;
}

TEST(RematTest, InitialOrderWithinBudgetIsKept) {
  Graph graph = unet();
  for (Method method : {Method::Fast, Method::Exact, Method::Auto}) {
    RematResult result = solve(graph, 50, method);
    ASSERT_TRUE(result.ok()) << result.message;
    EXPECT_EQ(result.schedule, graph.order);
    EXPECT_EQ(result.totalCost, 11);
    EXPECT_TRUE(result.provedOptimal);
  }
}

TEST(RematTest, ChainBelowItsFootprintIsInfeasible) {
  // Every step of a chain holds an input and an output: 20 bytes.
  RematResult result = solve(chain(6), 19, Method::Auto);
  EXPECT_EQ(result.status, RematStatus::Infeasible);
  EXPECT_NE(result.message.find("below the 20 bytes that node 1 needs"),
            std::string::npos)
      << result.message;
  EXPECT_EQ(result.smallestPeak, 20);
  EXPECT_TRUE(solve(chain(6), 20, Method::Auto).ok());
}

TEST(RematTest, UNetRecomputesTheCheapSkip) {
  // At 40 bytes, x1 (cost 1) is recomputed from x0 before y1; recomputing x0
  // (cost 5) would be dearer.
  Graph graph = unet();
  for (Method method : {Method::Fast, Method::Exact}) {
    RematResult result = solve(graph, 40, method);
    ASSERT_TRUE(result.ok()) << result.message;
    EXPECT_EQ(result.totalCost, 12) << methodName(method);
    EXPECT_EQ(result.schedule, (std::vector<int>{0, 1, 2, 3, 4, 1, 5, 6}));
    EXPECT_EQ(result.peakBytes, 40);
  }
  EXPECT_TRUE(solve(graph, 40, Method::Exact).provedOptimal);
}

TEST(RematTest, UNetAtItsFootprintNeedsThreeComputations) {
  // At 30 bytes y2 may hold only x2, x3 and itself, and y1 only y2, x1 and
  // itself: x0 must be gone at both, yet be there for x1's recomputation and
  // for y0. With two computations per node that is impossible; with three,
  // x0 is computed three times and x1 twice (+11).
  Graph graph = unet();
  RematResult two = solve(graph, 30, Method::Exact, 2);
  EXPECT_EQ(two.status, RematStatus::Infeasible);
  EXPECT_NE(two.message.find("proved by the exact method"), std::string::npos)
      << two.message;
  EXPECT_NE(solve(graph, 30, Method::Fast, 2).status, RematStatus::Ok);

  for (Method method : {Method::Fast, Method::Exact}) {
    RematResult three = solve(graph, 30, method, 3);
    ASSERT_TRUE(three.ok()) << three.message;
    EXPECT_EQ(three.totalCost, 22) << methodName(method);
    EXPECT_EQ(three.schedule, (std::vector<int>{0, 1, 2, 3, 4, 0, 1, 5, 0, 6}));
  }
}

TEST(RematTest, NodeLimitOfOneForbidsRecomputation) {
  // The MLIR pass marks ops that must not be recomputed this way.
  Graph graph = unet();
  graph.nodes[1].maxComputations = 1;
  for (Method method : {Method::Fast, Method::Exact}) {
    RematResult result = solve(graph, 40, method);
    ASSERT_TRUE(result.ok()) << result.message;
    // x1 stays resident until y1, so x0 (cost 5) must be gone at y2 and is
    // recomputed for y0 instead.
    EXPECT_EQ(result.totalCost, 16) << methodName(method);
    EXPECT_EQ(result.schedule, (std::vector<int>{0, 1, 2, 3, 4, 5, 0, 6}));
  }
}

TEST(RematTest, DiamondBelowThreeLiveValuesIsInfeasible) {
  // Whichever of b and c comes second sees a, the other and itself: 30
  // bytes, in any order, and recomputing cannot help. The footprint bound is
  // 25, so only the exact method proves it.
  Graph graph = diamond();
  EXPECT_EQ(solve(graph, 25, Method::Exact).status, RematStatus::Infeasible);
  RematResult fast = solve(graph, 25, Method::Fast);
  EXPECT_EQ(fast.status, RematStatus::NotFound);
  EXPECT_EQ(fast.smallestPeak, 30);
  EXPECT_NE(fast.message.find("smallest peak found 30 bytes"),
            std::string::npos)
      << fast.message;
}

TEST(RematTest, RejectsBadInput) {
  Graph graph = chain(3);
  graph.inputs[0].push_back(2);
  RematResult result = solve(graph, 100, Method::Auto);
  EXPECT_EQ(result.status, RematStatus::InvalidInput);
  EXPECT_NE(result.message.find("not topological"), std::string::npos)
      << result.message;
}

TEST(RematTest, StagedPlanRoundTrips) {
  Graph graph = unet();
  StagedPlan plan;
  plan.recomputeStages.assign(7, {});
  plan.recomputeStages[0] = {5, 6};
  plan.recomputeStages[1] = {5};
  std::vector<int> schedule = stagedSchedule(graph, plan);
  EXPECT_EQ(schedule, (std::vector<int>{0, 1, 2, 3, 4, 0, 1, 5, 0, 6}));
  StagedPlan back;
  ASSERT_TRUE(planFromSchedule(graph, schedule, back));
  EXPECT_EQ(back.recomputeStages, plan.recomputeStages);
  EXPECT_FALSE(planFromSchedule(graph, {0, 2, 1, 3, 4, 5, 6}, back));
}

} // namespace
