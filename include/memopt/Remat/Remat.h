//===- Remat.h - Rematerialization under a byte budget ----------*- C++ -*-===//
//
// The one call a client needs: `solveRemat(graph, options)` returns a
// schedule (node computations in order; a repeated node is recomputed) whose
// peak is within the budget at the least total compute cost it finds. Every
// schedule it returns has passed the independent validator (Validator.h).
//
// Methods:
//  - Fast:  greedy + large-neighbourhood search (FastSolver.h), seconds on
//           hundreds of nodes.
//  - Exact: the Checkmate-style MILP (ExactSolver.h) with CBC, started from
//           the fast method's schedule; optimal in the staged space when it
//           finishes in time.
//  - Auto:  Fast, then Exact while the graph is small enough
//           (`exactNodeLimit`) and time is left.
//
// Example:
//   RematOptions options;
//   options.budget = 1 << 30;
//   RematResult result = solveRemat(graph, options);
//   if (!result.ok()) report(result.message);
//   else use(result.schedule);
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_REMAT_REMAT_H
#define MEMOPT_REMAT_REMAT_H

#include "memopt/Remat/Graph.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memopt::remat {

enum class Method { Auto, Exact, Fast };

/// "auto", "exact" or "fast".
const char *methodName(Method method);
std::optional<Method> parseMethod(std::string_view name);

struct RematOptions {
  /// The peak must not exceed this many bytes.
  int64_t budget = 0;
  /// The most computations of a node whose own limit is 0 (C in Moccasin;
  /// 1 means no recomputation).
  int maxComputations = 2;
  Method method = Method::Auto;
  /// Wall-clock limit for the whole solve (the greedy construction always
  /// runs to completion).
  double timeLimitSeconds = 10.0;
  /// Auto runs the exact method only on graphs with at most this many nodes
  /// (the MILP grows with the cube of the node count).
  int exactNodeLimit = 30;
  uint64_t seed = 1;
};

enum class RematStatus {
  /// `schedule` is valid and within the budget.
  Ok,
  /// Proved: no schedule fits (a node's inputs and output alone exceed the
  /// budget, or the exact method proved it in the staged space).
  Infeasible,
  /// No schedule within the budget was found (not proved impossible).
  NotFound,
  /// The graph or the options failed their checks.
  InvalidInput,
  /// A solver produced a schedule the validator rejected (a bug; the message
  /// says what the validator found).
  InvalidSchedule,
};

struct RematResult {
  RematStatus status = RematStatus::InvalidInput;
  /// When Ok: node indices, in computation order.
  std::vector<int> schedule;
  int64_t peakBytes = 0;
  int64_t totalCost = 0;
  /// Cost and peak of the initial order without recomputation.
  int64_t baseCost = 0;
  int64_t initialPeak = 0;
  int64_t budget = 0;
  /// Number of recomputations in `schedule`.
  int recomputations = 0;
  /// When not Ok: the smallest peak any schedule reached.
  int64_t smallestPeak = 0;
  /// True when the cost is proved minimal in the staged space (no
  /// recomputation needed, or the exact method finished).
  bool provedOptimal = false;
  /// The exact method's lower bound on the total cost (0 if it did not run).
  double costLowerBound = 0;
  Method producedBy = Method::Fast;
  double seconds = 0;
  /// Why the status is not Ok; empty when it is.
  std::string message;

  bool ok() const { return status == RematStatus::Ok; }
};

/// The peak of the graph's initial order, without recomputation.
int64_t initialPeak(const Graph &graph);

RematResult solveRemat(const Graph &graph, const RematOptions &options);

} // namespace memopt::remat

#endif // MEMOPT_REMAT_REMAT_H
