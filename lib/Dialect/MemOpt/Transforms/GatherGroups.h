//===- GatherGroups.h - ZeRO-3 gather groups for memopt-bucket-collectives ===//
//
// The gathers of a ZeRO-3 step grouped per layer and issued one group ahead
// on the communication stream (GatherGroups.cpp says how).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_TRANSFORMS_GATHERGROUPS_H
#define MEMOPT_DIALECT_MEMOPT_TRANSFORMS_GATHERGROUPS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cstdint>
#include <vector>

namespace mlir::memopt {

/// Per gather group, in issue order: its gathers and gathered bytes.
struct GatherGroupsResult {
  std::vector<size_t> groupSizes;
  std::vector<int64_t> groupBytes;
  /// Gathers dropped because an earlier gather of the same shard was still
  /// alive where they would be issued.
  size_t merged = 0;
};

/// Groups the memopt.gather_parameter ops of the single-block `function`
/// (scheduled) into groups of at most `gatherMib` MiB in the schedule's
/// order, numbered `bucket = firstBucket + k`, each issued right after the
/// previous group's wait and waited for right before its first reader; a
/// gather issued while an earlier gather of its shard is alive reads that
/// one instead.
/// `gatherMib` 0 (or no gather) leaves the function alone.
FailureOr<GatherGroupsResult>
groupGathers(func::FuncOp function, double gatherMib, int64_t firstBucket);

} // namespace mlir::memopt

#endif // MEMOPT_DIALECT_MEMOPT_TRANSFORMS_GATHERGROUPS_H
