//===- Offload.h - saved activations to pinned host memory ------*- C++ -*-===//
//
// The copy choice of --memory-budget (docs/offload.md, "Activations"): maps
// a function onto the offload model of lib/Remat (include/memopt/Remat/
// Offload.h), chooses the values to copy to host memory and back, inserts
// memopt.offload / offload_wait / reload / reload_wait where the timeline
// put them, and plans the pinned host pool like the arena.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_TRANSFORMS_OFFLOAD_H
#define MEMOPT_DIALECT_MEMOPT_TRANSFORMS_OFFLOAD_H

#include "memopt/Analysis/CostModel.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <limits>

namespace mlir::memopt {

/// The function attribute the offload leaves (bytes, copy and exposed
/// seconds, copies) and the host pool's size (set by planHostPool).
constexpr llvm::StringLiteral kOffloadAttrName = "memopt.offload";
constexpr llvm::StringLiteral kHostPoolSizeAttrName = "memopt.host_pool_size";

struct OffloadOptions {
  /// Peak bytes (BufferLiveness's model) the offloads aim for.
  int64_t budget = 0;
  /// Copy bandwidth per direction, bytes per second; latency per copy.
  double bytesPerSecond = 40e9;
  double latencySeconds = 2e-6;
  Roofline roofline = Roofline::h100();
  const KernelTimes *kernelTimes = nullptr;
};

struct OffloadResult {
  int offloaded = 0;
  int64_t offloadedBytes = 0;
  /// Both directions; the part the compute stream waited for.
  double copySeconds = 0;
  double exposedSeconds = 0;
  /// Candidates refused because recomputing them was cheaper.
  int refusedForRecompute = 0;
  int64_t peakBefore = 0, peakAfter = 0;
  int64_t hostPoolBytes = 0;
};

/// The KernelTimes entry that gives the measured copy bandwidth: seconds to
/// copy 1 GiB from pinned host memory to the device (or back).
constexpr llvm::StringLiteral kCopyGiBTimeKey = "<copy 1 GiB>";

/// Chooses and inserts the offloads of `function` (one block, in its
/// execution order). `recomputeSeconds(op)` prices recomputing op's result
/// instead (infinity: it must not run twice). Plans the host pool.
FailureOr<OffloadResult>
offloadFunction(func::FuncOp function, const OffloadOptions &options,
                llvm::function_ref<double(Operation *)> recomputeSeconds);

/// Gives every offload slot its offset in the pinned host pool: a buffer
/// lives from its memopt.offload to its memopt.reload_wait in the current
/// op order, packed by the planner (best fit, checked by its validator).
/// Sets `memopt.host_pool_size` (0 and no attribute without offloads).
LogicalResult planHostPool(func::FuncOp function);

} // namespace mlir::memopt

#endif // MEMOPT_DIALECT_MEMOPT_TRANSFORMS_OFFLOAD_H
