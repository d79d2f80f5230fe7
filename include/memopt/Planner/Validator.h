//===- Validator.h - Independent check of a memory plan ---------*- C++ -*-===//
//
// Checks a plan against its problem without trusting anything a planner
// computed: it is written apart from the solvers and shares no code with
// them beyond the `Problem`/`Plan` structs. `plan()` runs it on every plan it
// returns; MiniMalloc keeps a validator beside its solver in the same way.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_PLANNER_VALIDATOR_H
#define MEMOPT_PLANNER_VALIDATOR_H

#include "memopt/Planner/Problem.h"

#include <optional>
#include <string>

namespace memopt::planner {

/// The first thing wrong with a plan.
enum class Violation {
  None,
  /// `offsets.size()` differs from the number of buffers.
  OffsetCount,
  /// An offset is negative.
  NegativeOffset,
  /// An offset is not a multiple of the buffer's alignment.
  Misaligned,
  /// offset + size exceeds the plan's arena size.
  OutsideArena,
  /// The arena size exceeds the capacity the caller allowed.
  OverCapacity,
  /// Two buffers whose lifetimes intersect share bytes.
  Overlap,
};

struct ValidationResult {
  Violation violation = Violation::None;
  /// Names the buffer(s) by id; empty when the plan is valid.
  std::string message;

  bool ok() const { return violation == Violation::None; }
};

/// Checks that: there is one offset per buffer; each offset is >= 0 and a
/// multiple of the buffer's alignment; offset + size <= plan.arenaSize;
/// plan.arenaSize <= capacity when one is given; and no two buffers of
/// non-zero size whose lifetimes intersect have intersecting byte ranges.
/// Returns the first violation found.
ValidationResult validatePlan(const Problem &problem, const Plan &plan,
                              std::optional<int64_t> capacity = std::nullopt);

} // namespace memopt::planner

#endif // MEMOPT_PLANNER_VALIDATOR_H
