//===- Planner.h - Static memory planner entry point ------------*- C++ -*-===//
//
// The one call a client needs: `plan(problem, options)` picks offsets for
// every buffer in one arena and returns them only after the independent
// validator (Validator.h) has accepted them.
//
// Algorithms:
//  - BestFitSize:     greedy best-fit, largest buffer first (TFLite).
//  - BestFitLifetime: greedy best-fit, longest-lived buffer first (XLA's
//                     second order).
//  - Exact:           canonical-packing search (MiniMalloc). With a capacity
//                     it answers the decision problem: the first packing
//                     within the capacity (a heuristic plan, when one already
//                     fits, else the search's). Without one it behaves like
//                     Auto.
//  - Auto:            both heuristics (keep the better), then the exact
//                     search for smaller arenas, from the best heuristic
//                     result (or the capacity, if that is smaller) down
//                     toward max-live, until the arena equals max-live, every
//                     smaller size is proved impossible, or time runs out.
//
// Example:
//   Problem problem;
//   problem.buffers.push_back({/*id=*/0, /*lower=*/0, /*upper=*/2, 1024});
//   PlanResult result = plan(problem, {});
//   if (!result.ok()) report(result.message);
//   else use(result.plan.offsets, result.plan.arenaSize);
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_PLANNER_PLANNER_H
#define MEMOPT_PLANNER_PLANNER_H

#include "memopt/Planner/Problem.h"

#include <optional>
#include <string>
#include <string_view>

namespace memopt::planner {

enum class Algorithm { BestFitSize, BestFitLifetime, Exact, Auto };

/// "best-fit-size", "best-fit-lifetime", "exact" or "auto".
const char *algorithmName(Algorithm algorithm);

/// Accepts the names above, and "best-fit" for BestFitSize.
std::optional<Algorithm> parseAlgorithm(std::string_view name);

struct PlanOptions {
  Algorithm algorithm = Algorithm::Auto;
  /// When set, the arena must not exceed this many bytes.
  std::optional<int64_t> capacity;
  /// Wall-clock budget for the exact search (the heuristics always run to
  /// completion; they take milliseconds).
  double timeLimitSeconds = 10.0;
  /// Arenas that round up to the same multiple of `granule` bytes cost the
  /// same: the allocator the plan is for rounds every allocation up to at
  /// least this (memopt's runtime allocates the arena with cudaMalloc, whose
  /// sizes go up in 512-byte steps at least, and the pass plans at 256-byte
  /// offsets). The minimizer then stops as soon as the incumbent rounds to
  /// the lower bound's granule, and counts that as optimal. 1: bytes, as
  /// MiniMalloc's benchmark counts them.
  int64_t granule = 1;
};

enum class PlanStatus {
  /// `plan` is valid (and within the capacity, if one was given).
  Ok,
  /// Proved: no packing fits in the capacity (below max-live, a buffer larger
  /// than the capacity, or an exhausted exact search).
  Infeasible,
  /// None found within the capacity: a heuristic missed it, or the exact
  /// search ran out of time.
  NotFound,
  /// The problem failed `checkProblem`.
  InvalidInput,
  /// A planner produced a plan that the validator rejected (a bug; the
  /// message says what the validator found).
  InvalidPlan,
};

struct PlanResult {
  PlanStatus status = PlanStatus::InvalidInput;
  /// When Ok, the validated plan. When Infeasible or NotFound, the best valid
  /// plan found that exceeds the capacity (offsets empty if none).
  Plan plan;
  /// Why the status is not Ok; empty when it is.
  std::string message;
  /// The algorithm that produced `plan` (for Auto: whichever won).
  Algorithm producedBy = Algorithm::Auto;
  /// The lower bound the arena is measured against.
  int64_t maxLive = 0;
  /// True when the arena is proved minimal (it equals max-live, or the exact
  /// search showed every smaller arena infeasible), counted in
  /// `PlanOptions::granule`s.
  bool provedOptimal = false;
  double seconds = 0;
  /// Exact-search nodes visited (0 for the heuristics).
  int64_t searchNodes = 0;

  bool ok() const { return status == PlanStatus::Ok; }
};

/// Plans the problem. Never returns an unvalidated plan: every plan is
/// checked by `validatePlan` first. Zero-size buffers get offset 0.
PlanResult plan(const Problem &problem, const PlanOptions &options);

} // namespace memopt::planner

#endif // MEMOPT_PLANNER_PLANNER_H
