//===- Remat.cpp - Rematerialization entry point --------------------------===//
//
// Checks the input, answers the easy cases (the initial order fits; a node's
// own footprint exceeds the budget), runs the fast method, then the exact one
// where asked or where the graph is small, and validates what it returns.
// Shaped like the planner's `plan()` (lib/Planner/Planner.cpp).
//
//===----------------------------------------------------------------------===//

#include "memopt/Remat/Remat.h"

#include "memopt/Remat/ExactSolver.h"
#include "memopt/Remat/FastSolver.h"
#include "memopt/Remat/Staged.h"
#include "memopt/Remat/Validator.h"

#include <algorithm>
#include <chrono>

namespace memopt::remat {

const char *methodName(Method method) {
  switch (method) {
  case Method::Auto:
    return "auto";
  case Method::Exact:
    return "exact";
  case Method::Fast:
    return "fast";
  }
  return "unknown";
}

std::optional<Method> parseMethod(std::string_view name) {
  if (name == "auto")
    return Method::Auto;
  if (name == "exact")
    return Method::Exact;
  if (name == "fast")
    return Method::Fast;
  return std::nullopt;
}

int64_t initialPeak(const Graph &graph) {
  StagedEvaluator evaluator(graph);
  int64_t excess = 0;
  return evaluator.run(StagedEvaluator::PositionPlan(evaluator.size()), 0,
                       excess);
}

namespace {

std::string nodeLabel(const Graph &graph, int v) {
  const Node &node = graph.nodes[v];
  std::string text = "node " + std::to_string(node.id);
  if (!node.name.empty() && node.name != std::to_string(node.id))
    text += " ('" + node.name + "')";
  return text;
}

} // namespace

RematResult solveRemat(const Graph &graph, const RematOptions &options) {
  auto started = std::chrono::steady_clock::now();
  auto elapsed = [&]() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         started)
        .count();
  };
  RematResult result;
  result.budget = options.budget;
  std::string error = checkGraph(graph);
  if (error.empty() && options.budget < 0)
    error = "the budget is negative";
  if (error.empty() && options.maxComputations < 1)
    error = "the computation limit must be at least 1";
  if (error.empty() && !(options.timeLimitSeconds > 0))
    error = "the time limit must be positive";
  if (error.empty() && options.maxComputations > 1 &&
      baseCost(graph) >
          (int64_t(1) << 62) / std::min<int64_t>(options.maxComputations,
                                                 graph.nodes.size() + 1))
    error = "the total cost with recomputation could overflow";
  if (!error.empty()) {
    result.message = error;
    return result;
  }
  result.baseCost = baseCost(graph);
  result.initialPeak = initialPeak(graph);

  auto finish = [&](RematResult &done) -> RematResult & {
    done.seconds = elapsed();
    if (!done.ok())
      return done;
    ScheduleCheck check = validateSchedule(
        graph, done.schedule, options.maxComputations, options.budget);
    if (!check.ok()) {
      done.status = RematStatus::InvalidSchedule;
      done.message = std::string(methodName(done.producedBy)) +
                     " produced an invalid schedule: " + check.message;
      return done;
    }
    done.peakBytes = check.peakBytes;
    done.totalCost = check.totalCost;
    done.recomputations =
        static_cast<int>(done.schedule.size() - graph.nodes.size());
    return done;
  };

  // The initial order fits: nothing to recompute, and nothing is cheaper.
  if (result.initialPeak <= options.budget) {
    result.status = RematStatus::Ok;
    result.schedule = graph.order;
    result.provedOptimal = true;
    result.producedBy = options.method;
    return finish(result);
  }

  int count = static_cast<int>(graph.nodes.size());
  bool runExact =
      options.method == Method::Exact ||
      (options.method == Method::Auto && count <= options.exactNodeLimit);
  FastOptions fastOptions;
  fastOptions.budget = options.budget;
  fastOptions.maxComputations = options.maxComputations;
  fastOptions.seed = options.seed;
  // Leave most of the time to the exact method when it runs.
  fastOptions.timeLimitSeconds =
      runExact ? options.timeLimitSeconds * 0.2 : options.timeLimitSeconds;
  FastResult fast = solveFast(graph, fastOptions);
  result.smallestPeak = fast.smallestPeak;
  if (fast.found) {
    result.status = RematStatus::Ok;
    result.schedule = stagedSchedule(graph, fast.plan);
    result.producedBy = Method::Fast;
  }

  int bottleneck = -1;
  int64_t footprint = computationLowerBound(graph, &bottleneck);
  if (options.budget < footprint) {
    result.status = RematStatus::Infeasible;
    result.message =
        "infeasible: the budget of " + std::to_string(options.budget) +
        " bytes is below the " + std::to_string(footprint) + " bytes that " +
        nodeLabel(graph, bottleneck) + " needs for its inputs and output" +
        (graph.nodes[bottleneck].scratchBytes > 0
             ? std::string(" and its scratch")
             : std::string()) +
        "; smallest peak found " + std::to_string(fast.smallestPeak) + " bytes";
    return finish(result);
  }

  if (runExact) {
    ExactOptions exactOptions;
    exactOptions.budget = options.budget;
    exactOptions.maxComputations = options.maxComputations;
    exactOptions.timeLimitSeconds =
        std::max(0.5, options.timeLimitSeconds - elapsed());
    exactOptions.start = fast.found ? &fast.plan : nullptr;
    ExactResult exact = solveExact(graph, exactOptions);
    // With in-place nodes the MILP's model is stricter than the schedule's
    // (ExactSolver.h): its schedules hold, its proofs do not.
    bool proofsHold = !hasInPlaceNodes(graph);
    if (proofsHold)
      result.costLowerBound = exact.lowerBound;
    if (exact.status == ExactStatus::Infeasible && proofsHold) {
      result.status = RematStatus::Infeasible;
      result.schedule.clear();
      result.message =
          "infeasible: no schedule with at most " +
          std::to_string(options.maxComputations) +
          " computations per node fits in " + std::to_string(options.budget) +
          " bytes (proved by the exact method over staged schedules); "
          "smallest peak found " +
          std::to_string(fast.smallestPeak) + " bytes";
      return finish(result);
    }
    if (exact.status == ExactStatus::Optimal ||
        exact.status == ExactStatus::Feasible) {
      bool better = !fast.found || exact.totalCost <= fast.totalCost;
      if (better) {
        result.status = RematStatus::Ok;
        result.schedule = stagedSchedule(graph, exact.plan);
        result.producedBy = Method::Exact;
      }
      result.provedOptimal = proofsHold &&
                             exact.status == ExactStatus::Optimal &&
                             (better || exact.totalCost == fast.totalCost);
    }
  }

  if (result.status != RematStatus::Ok) {
    result.status = RematStatus::NotFound;
    result.message =
        "no schedule with at most " + std::to_string(options.maxComputations) +
        " computations per node found within the budget of " +
        std::to_string(options.budget) + " bytes; smallest peak found " +
        std::to_string(fast.smallestPeak) + " bytes";
  }
  return finish(result);
}

} // namespace memopt::remat
