//===- MemoryPhase.h - schedule, bucket, bufferize, plan --------*- C++ -*-===//
//
// The memory phase as plain functions on one function: memopt-schedule,
// memopt-bucket-collectives, memopt-bufferize and memopt-plan-memory are
// thin passes over them, and the remat budget search
// (RematerializeBudget.cpp) calls them directly on each candidate, with no
// nested PassManager, reading typed results. IREE keeps its passes thin the
// same way (the logic behind a pass is a function a pipeline or another
// pass may call); XLA's rematerialization calls its heap simulator directly
// rather than a pass pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_TRANSFORMS_MEMORYPHASE_H
#define MEMOPT_DIALECT_MEMOPT_TRANSFORMS_MEMORYPHASE_H

#include "memopt/Analysis/MemoryReport.h"
#include "memopt/Planner/Planner.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>
#include <vector>

namespace mlir::memopt {

/// What memopt-schedule chose.
struct ScheduleResult {
  /// "original", "greedy" or "depth-first".
  std::string chosen = "original";
  int64_t maxLiveBefore = 0;
  int64_t maxLiveAfter = 0;
  /// Activation offload placed its copies in the order: it was kept.
  bool orderKept = false;
};

/// Reorders `function` (one block) to the order of lowest max-live among
/// the original, greedy and depth-first ones. Fails (after emitting an
/// error) on a function with more than one block.
FailureOr<ScheduleResult> scheduleFunction(func::FuncOp function);

/// What memopt-bucket-collectives did.
struct BucketCollectivesResult {
  /// The gradient collectives of the step.
  size_t collectives = 0;
  /// Per bucket, in issue order: its collectives and gradient bytes (empty:
  /// the function was left alone).
  std::vector<size_t> bucketSizes;
  std::vector<int64_t> bucketBytes;
  /// ZeRO-3: per gather group, in issue order, its parameter gathers and
  /// gathered bytes (empty: every gather synchronous where it is).
  std::vector<size_t> gatherGroupSizes;
  std::vector<int64_t> gatherGroupBytes;
  /// Gathers that read an earlier, still alive gather of their shard.
  size_t gathersMerged = 0;
};

/// The first bucket's cap for buckets of `bucketMib`: DDP's 1 MiB (so that
/// communication starts early), or `bucketMib` when that is smaller. The
/// compile pipeline and the remat search's candidates use it alike.
inline double getFirstBucketMib(double bucketMib) {
  return bucketMib < 1.0 ? bucketMib : 1.0;
}

/// Groups the gradient collectives of a data-parallel `function` into
/// buckets of at most `bucketMib` MiB (the first `firstBucketMib`) that
/// overlap the backward, and its ZeRO-3 parameter gathers into groups of at
/// most `gatherMib` MiB, each prefetched one group ahead. Leaves alone a
/// function that is not data-parallel or is marked
/// `memopt.synchronous_collectives`; `bucketMib` 0 leaves the gradient
/// collectives synchronous, `gatherMib` 0 the gathers.
FailureOr<BucketCollectivesResult> bucketCollectives(func::FuncOp function,
                                                     double bucketMib,
                                                     double firstBucketMib,
                                                     double gatherMib);

/// memopt-bufferize: marks the ops that write their result over a dying
/// operand (BufferLiveness::decideInPlace); returns how many.
FailureOr<size_t> bufferizeFunction(func::FuncOp function);

/// memopt-plan-memory's options (Passes.td has their defaults).
struct PlanMemoryOptions {
  ::memopt::planner::Algorithm algorithm = ::memopt::planner::Algorithm::Auto;
  /// Seconds the exact search may take.
  double timeLimitSeconds = 10.0;
  int64_t alignment = 256;
  /// Fail unless the arena fits in this many bytes (0: no limit).
  int64_t capacity = 0;
  bool outputsInArena = false;
};

/// Plans `function`'s arena (validated) and records the offsets, the arena
/// and weight sizes and the host regions in its attributes; returns the
/// memory report.
FailureOr<MemoryReport> planFunctionMemory(func::FuncOp function,
                                           const PlanMemoryOptions &options);

} // namespace mlir::memopt

#endif // MEMOPT_DIALECT_MEMOPT_TRANSFORMS_MEMORYPHASE_H
