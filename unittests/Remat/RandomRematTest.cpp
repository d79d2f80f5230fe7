//===- RandomRematTest.cpp - Exact vs brute force vs fast on random DAGs --===//
//
// On graphs small enough to enumerate every staged plan, the exact method
// must match the brute-force optimum; on slightly larger ones the fast method
// must never beat the proved optimum, and its gap is reported.
//
//===----------------------------------------------------------------------===//

#include "memopt/Remat/ExactSolver.h"
#include "memopt/Remat/FastSolver.h"
#include "memopt/Remat/Remat.h"
#include "memopt/Remat/Staged.h"
#include "memopt/Remat/Validator.h"

#include "RematTestGraphs.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>

using namespace memopt::remat;
using namespace memopt::remat::testing;

namespace {

Graph randomGraph(std::mt19937_64 &rng, int n) {
  std::vector<std::pair<int64_t, int64_t>> nodes;
  std::vector<std::pair<int, int>> edges;
  for (int v = 0; v < n; ++v) {
    nodes.push_back({1 + static_cast<int64_t>(rng() % 9),
                     1 + static_cast<int64_t>(rng() % 9)});
    if (v == 0)
      continue;
    // One input among the last three nodes keeps it connected; more at
    // random, including long skips.
    int first = v - 1 - static_cast<int>(rng() % std::min(v, 3));
    edges.push_back({first, v});
    for (int u = 0; u < v; ++u)
      if (rng() % 5 == 0 && u != first)
        edges.push_back({u, v});
  }
  return makeGraph(nodes, edges);
}

// The cheapest schedule in the staged space with at most two computations
// per node, by enumerating every plan; judged by the validator alone.
int64_t bruteForce(const Graph &graph, int64_t budget) {
  int n = static_cast<int>(graph.nodes.size());
  // choice[v] = 0: no recomputation, else the stage v + choice[v].
  std::vector<int> choice(n, 0);
  int64_t best = std::numeric_limits<int64_t>::max();
  while (true) {
    StagedPlan plan;
    plan.recomputeStages.assign(n, {});
    for (int v = 0; v < n; ++v)
      if (choice[v] > 0)
        plan.recomputeStages[v].push_back(v + choice[v]);
    ScheduleCheck check =
        validateSchedule(graph, stagedSchedule(graph, plan), 2, budget);
    if (check.ok())
      best = std::min(best, check.totalCost);
    int v = 0;
    while (v < n && ++choice[v] >= n - v)
      choice[v++] = 0;
    if (v == n)
      return best;
  }
}

int64_t budgetBetween(const Graph &graph, std::mt19937_64 &rng) {
  int64_t low = computationLowerBound(graph);
  int64_t high = initialPeak(graph);
  return low + static_cast<int64_t>(rng() % (high - low + 1));
}

TEST(RandomRematTest, ExactMatchesBruteForce) {
  std::mt19937_64 rng(7);
  int compared = 0;
  for (int trial = 0; trial < 60; ++trial) {
    Graph graph = randomGraph(rng, 4 + trial % 4);
    ASSERT_EQ(checkGraph(graph), "");
    int64_t budget = budgetBetween(graph, rng);
    int64_t expected = bruteForce(graph, budget);
    ExactOptions options;
    options.budget = budget;
    options.timeLimitSeconds = 30;
    ExactResult exact = solveExact(graph, options);
    if (expected == std::numeric_limits<int64_t>::max()) {
      EXPECT_EQ(exact.status, ExactStatus::Infeasible) << "trial " << trial;
      continue;
    }
    ASSERT_EQ(exact.status, ExactStatus::Optimal) << "trial " << trial;
    EXPECT_EQ(exact.totalCost, expected) << "trial " << trial;
    ScheduleCheck check =
        validateSchedule(graph, stagedSchedule(graph, exact.plan), 2, budget);
    EXPECT_TRUE(check.ok()) << check.message;
    EXPECT_EQ(check.totalCost, exact.totalCost);
    ++compared;
  }
  EXPECT_GT(compared, 30);
}

TEST(RandomRematTest, FastAgainstExact) {
  std::mt19937_64 rng(11);
  int solved = 0, foundToo = 0, matched = 0;
  double worstGap = 0;
  for (int trial = 0; trial < 40; ++trial) {
    Graph graph = randomGraph(rng, 8 + trial % 7);
    ASSERT_EQ(checkGraph(graph), "");
    int64_t budget = budgetBetween(graph, rng);
    ExactOptions exactOptions;
    exactOptions.budget = budget;
    exactOptions.timeLimitSeconds = 30;
    ExactResult exact = solveExact(graph, exactOptions);
    FastOptions fastOptions;
    fastOptions.budget = budget;
    fastOptions.timeLimitSeconds = 5;
    fastOptions.stallRounds = 300;
    FastResult fast = solveFast(graph, fastOptions);
    if (fast.found) {
      ScheduleCheck check =
          validateSchedule(graph, stagedSchedule(graph, fast.plan), 2, budget);
      EXPECT_TRUE(check.ok()) << check.message;
      EXPECT_EQ(check.totalCost, fast.totalCost);
      // The exact method never proves a plan the fast one found impossible.
      EXPECT_NE(exact.status, ExactStatus::Infeasible) << "trial " << trial;
    }
    if (exact.status != ExactStatus::Optimal)
      continue;
    ++solved;
    if (!fast.found)
      continue;
    ++foundToo;
    EXPECT_GE(fast.totalCost, exact.totalCost) << "trial " << trial;
    if (fast.totalCost == exact.totalCost)
      ++matched;
    worstGap = std::max(worstGap, double(fast.totalCost - exact.totalCost) /
                                      double(exact.totalCost));
  }
  std::printf("exact optimum on %d graphs; fast found a schedule on %d, "
              "the optimum on %d; worst gap %.2f%%\n",
              solved, foundToo, matched, 100 * worstGap);
  EXPECT_GT(solved, 20);
  EXPECT_GE(matched, solved * 8 / 10);
}

// In-place inputs and scratch bytes: the evaluator the solvers score with
// and the independent validator agree on every random plan, and the solver's
// schedules hold; the footprint bound never rules out a schedule that
// exists.
TEST(RandomRematTest, InPlaceAndScratchAgreeWithTheValidator) {
  std::mt19937_64 rng(23);
  int scheduled = 0;
  for (int trial = 0; trial < 60; ++trial) {
    int n = 4 + trial % 4;
    Graph graph = randomGraph(rng, n);
    for (int v = 0; v < n; ++v) {
      Node &node = graph.nodes[v];
      if (rng() % 3 == 0)
        node.scratchBytes = static_cast<int64_t>(rng() % 6);
      if (!graph.inputs[v].empty() && rng() % 2 == 0) {
        int u = graph.inputs[v][rng() % graph.inputs[v].size()];
        node.inPlaceInput = u;
        if (rng() % 4 != 0)
          node.bytes = graph.nodes[u].bytes;
      }
    }
    ASSERT_EQ(checkGraph(graph), "");
    StagedEvaluator evaluator(graph);
    for (int round = 0; round < 20; ++round) {
      StagedPlan plan;
      plan.recomputeStages.assign(n, {});
      for (int p = 0; p + 1 < n; ++p)
        if (rng() % 3 == 0) {
          int stage = p + 1 + static_cast<int>(rng() % (n - p - 1));
          plan.recomputeStages[graph.order[p]].push_back(stage);
        }
      int64_t excess = 0;
      int64_t peak = evaluator.run(evaluator.toPositions(plan), 0, excess);
      ScheduleCheck check =
          validateSchedule(graph, stagedSchedule(graph, plan), 2);
      ASSERT_TRUE(check.ok()) << check.message;
      EXPECT_EQ(peak, check.peakBytes) << "trial " << trial;
    }
    int64_t budget = budgetBetween(graph, rng);
    int64_t best = bruteForce(graph, budget);
    RematOptions options;
    options.budget = budget;
    options.method = Method::Fast;
    options.timeLimitSeconds = 0.2;
    RematResult result = solveRemat(graph, options);
    if (best != std::numeric_limits<int64_t>::max()) {
      EXPECT_NE(result.status, RematStatus::Infeasible) << "trial " << trial;
    }
    if (!result.ok())
      continue;
    ++scheduled;
    ScheduleCheck check = validateSchedule(graph, result.schedule, 2, budget);
    EXPECT_TRUE(check.ok()) << check.message;
    EXPECT_FALSE(result.provedOptimal && result.recomputations > 0);
  }
  EXPECT_GT(scheduled, 30);
}

} // namespace
