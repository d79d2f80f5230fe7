//===- ExactSolver.h - Checkmate-style MILP over staged schedules -*- C++ -*-//
//
// The exact method: a mixed-integer program over Checkmate's staged schedule
// space (Jain et al., "Checkmate: Breaking the Memory Wall with Optimal
// Tensor Rematerialization", MLSys 2020), solved with COIN-OR CBC. It is
// exact in that space, which is the one Moccasin's reference results use
// (first computations in the given order, recomputations in stages), and it
// honours per-node computation limits as Moccasin's C does. Its size grows
// with the cube of the node count, so it is meant for small graphs and for
// proving the fast method's gap.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_REMAT_EXACTSOLVER_H
#define MEMOPT_REMAT_EXACTSOLVER_H

#include "memopt/Remat/Graph.h"
#include "memopt/Remat/Staged.h"

#include <cstdint>

namespace memopt::remat {

struct ExactOptions {
  int64_t budget = 0;
  int maxComputations = 2;
  double timeLimitSeconds = 60.0;
  /// A plan to start from (e.g. the fast method's); may be null.
  const StagedPlan *start = nullptr;
};

enum class ExactStatus {
  /// `plan` is proved optimal in the staged space.
  Optimal,
  /// `plan` is within the budget; optimality is not proved.
  Feasible,
  /// Proved: no staged schedule meets the budget within the limits.
  Infeasible,
  /// Neither a plan nor a proof within the time limit.
  Unknown,
};

struct ExactResult {
  ExactStatus status = ExactStatus::Unknown;
  StagedPlan plan;
  int64_t totalCost = 0;
  /// The solver's lower bound on the total cost (when it has one).
  double lowerBound = 0;
  int64_t variables = 0;
  int64_t constraints = 0;
};

ExactResult solveExact(const Graph &graph, const ExactOptions &options);

} // namespace memopt::remat

#endif // MEMOPT_REMAT_EXACTSOLVER_H
