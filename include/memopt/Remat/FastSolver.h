//===- FastSolver.h - Greedy + large-neighbourhood remat search -*- C++ -*-===//
//
// The fast method: XLA's HloRematerialization idea (at the point of highest
// memory, pick the value that frees the most bytes per unit of recompute
// cost), made exact and global over Checkmate's staged schedule space, then
// improved by large-neighbourhood search (remove a few recomputations, repair
// greedily with randomized scores, drop recomputations that are no longer
// needed) until the time or iteration budget runs out. Every candidate is
// scored by an exact evaluation of the whole schedule.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_REMAT_FASTSOLVER_H
#define MEMOPT_REMAT_FASTSOLVER_H

#include "memopt/Remat/Graph.h"
#include "memopt/Remat/Staged.h"

#include <cstdint>

namespace memopt::remat {

struct FastOptions {
  int64_t budget = 0;
  /// Limit for nodes whose own `maxComputations` is 0.
  int maxComputations = 2;
  /// Wall-clock limit for the improvement phase.
  double timeLimitSeconds = 10.0;
  /// The search stops after this many improvement rounds without a better
  /// schedule (which makes it deterministic when the time limit is not hit).
  int stallRounds = 5000;
  uint64_t seed = 1;
};

struct FastResult {
  /// A plan within the budget was found.
  bool found = false;
  /// The cheapest plan within the budget (when found), else the plan with
  /// the smallest peak the search reached.
  StagedPlan plan;
  int64_t peakBytes = 0;
  int64_t totalCost = 0;
  /// The smallest peak seen over the whole search.
  int64_t smallestPeak = 0;
  int64_t rounds = 0;
  int64_t evaluations = 0;
};

FastResult solveFast(const Graph &graph, const FastOptions &options);

} // namespace memopt::remat

#endif // MEMOPT_REMAT_FASTSOLVER_H
