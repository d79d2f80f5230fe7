//===- Validator.h - Independent check of a remat schedule ------*- C++ -*-===//
//
// Checks a schedule against its graph without trusting anything a solver
// computed: it shares only the `Graph` struct with the solvers and recounts
// the memory from the sequence itself, step by step. `solveRemat` runs it on
// every schedule it returns, as the planner runs its validator on every plan.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_REMAT_VALIDATOR_H
#define MEMOPT_REMAT_VALIDATOR_H

#include "memopt/Remat/Graph.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memopt::remat {

/// The first thing wrong with a schedule.
enum class Violation {
  None,
  /// A step names a node index out of range.
  UnknownNode,
  /// A node is computed before one of its inputs was ever computed.
  MissingInput,
  /// A node is never computed (every node, the graph's outputs included,
  /// must be computed at least once).
  NeverComputed,
  /// A node is computed more often than its limit allows.
  TooManyComputations,
  /// The peak exceeds the budget.
  OverBudget,
};

struct ScheduleCheck {
  Violation violation = Violation::None;
  /// Names the node by id; empty when the schedule is valid.
  std::string message;
  /// Peak bytes and total cost of the schedule (valid whenever the
  /// violation is None or OverBudget).
  int64_t peakBytes = 0;
  int64_t totalCost = 0;

  bool ok() const { return violation == Violation::None; }
};

/// Checks that every step names a node, every input of a computation has been
/// computed before it (a copy stays resident until its last use before the
/// next computation of its node, so an earlier computation is resident),
/// every node is computed at least once and at most its limit
/// (`computationLimit(graph, v, defaultLimit)`), and, when a budget is given,
/// that the peak is within it. `schedule` holds node indices.
ScheduleCheck validateSchedule(const Graph &graph,
                               const std::vector<int> &schedule,
                               int defaultLimit,
                               std::optional<int64_t> budget = std::nullopt);

} // namespace memopt::remat

#endif // MEMOPT_REMAT_VALIDATOR_H
