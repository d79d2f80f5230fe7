//===- Rematerialize.h - recompute to fit a byte budget ---------*- C++ -*-===//
//
// The library behind --memopt-rematerialize: map a function onto the
// solver's graph (lib/Remat), solve, and clone the recomputed ops next to
// their late users; and the memory budget search around it (memopt-compile
// --memory-budget replans until the packed arena fits, docs/remat.md). See
// Passes.td for the rules.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_TRANSFORMS_REMATERIALIZE_H
#define MEMOPT_DIALECT_MEMOPT_TRANSFORMS_REMATERIALIZE_H

#include "memopt/Analysis/BufferLiveness.h"
#include "memopt/Analysis/CostModel.h"
#include "memopt/Dialect/MemOpt/Transforms/Offload.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>
#include <vector>

namespace mlir::memopt {

struct RematerializeOptions {
  /// Peak bytes in the solver's model (the memory budget search chooses it
  /// per probe).
  int64_t budget = 0;
  /// Op kinds (mnemonics, with or without "memopt.") that may be recomputed;
  /// empty: every op with a cost.
  std::vector<std::string> allow;
  int maxComputations = 2;
  double timeLimitSeconds = 5.0;
  /// auto, fast or exact.
  std::string method = "auto";
  Roofline roofline = Roofline::h100();
  const KernelTimes *kernelTimes = nullptr;
  /// The third choice: copy saved values to pinned host memory and back
  /// (Offload.h) where that is cheaper than recomputing them; the copy
  /// bandwidth per direction in bytes per second (a measured one in
  /// `kernelTimes`, kCopyGiBTimeKey, wins).
  bool offload = false;
  double offloadBytesPerSecond = 40e9;
};

struct RematerializeResult {
  /// A schedule within the budget was applied (possibly with nothing to
  /// recompute). When false the function is unchanged.
  bool fits = false;
  /// Peak of the current order and of the applied schedule, in the model.
  int64_t initialPeak = 0;
  int64_t peak = 0;
  /// When !fits: the smallest peak the solver reached.
  int64_t smallestPeak = 0;
  /// Number of clones inserted.
  int recomputations = 0;
  /// FLOPs and estimated seconds the clones add; estimated seconds of the
  /// function before (every executed op once).
  int64_t addedFlops = 0;
  double addedSeconds = 0;
  double baseSeconds = 0;
  /// Ops (ONNX node names) whose recomputation the solver chose but that
  /// would have read state after its update: they were limited to one
  /// computation before solving again.
  std::vector<std::string> refusedStateReaders;
  bool provedOptimal = false;
  /// When !fits: why, naming the node that decides it where the solver knows.
  std::string message;
  /// Nodes in the solver's graph.
  int nodes = 0;
  /// What the copy choice did (before the recomputation solver ran).
  OffloadResult offload;
};

/// Checks the options (kinds in `allow` must be memopt ops, the method must
/// be known); returns an error message or "".
std::string checkRematerializeOptions(MLIRContext *context,
                                      const RematerializeOptions &options);

/// Rematerializes `function` (one block of memopt ops) within
/// `options.budget`. Fails, after emitting an error, only on IR it cannot
/// handle or a solver bug; a budget that no schedule meets is a result with
/// `fits == false`.
FailureOr<RematerializeResult>
rematerializeFunction(func::FuncOp function,
                      const RematerializeOptions &options);

/// The peak of `function`'s current order in the solver's model (no
/// recomputation): what `budget` is measured against.
int64_t getRematModelPeak(func::FuncOp function,
                          const RematerializeOptions &options);

/// The memory budget search (memopt-compile --memory-budget, the pass's
/// memory-budget=): only the packed arena counts. Each candidate goes
/// through the memory phase as the compile pipeline runs it (MemoryPhase.h:
/// scheduling, the data-parallel buckets, bufferization, planning), called
/// directly, and the planned arena decides.
struct MemoryBudgetOptions {
  /// Bytes the planned arena must fit in.
  int64_t memoryBudget = 0;
  /// Everything but the solver's budget, which the search chooses.
  RematerializeOptions remat;
  /// The most solver runs (each followed by a plan).
  int maxProbes = 8;
  /// Data parallel: a bucket keeps its gradients and reduced values alive
  /// until its wait, so each candidate is planned with the buckets the
  /// compile pipeline will add (memopt-bucket-collectives; 0: none).
  double bucketMib = 0;
  /// ZeRO-3: a prefetched gather group's parameters are alive from its
  /// issue, one group ahead; planned like the buckets (0: none).
  double gatherMib = 0;
  /// Plan the function's outputs inside the arena (as memopt-compile does).
  bool outputsInArena = true;
  /// Seconds the planner's exact search may take per probe; the
  /// unconstrained plan searches as long as memopt-plan-memory does, so
  /// that the unconstrained arena is what a compile without a budget gets.
  double probePlanSeconds = 0.2;
};

struct MemoryBudgetResult {
  /// The arena fits: `module` holds the chosen function in the order its
  /// arena was measured in (scheduled: the pipeline does not schedule it
  /// again), neither bucketed, bufferized nor planned.
  bool fits = false;
  OwningOpRef<ModuleOp> module;
  /// The arena planned without recomputation, and the best one reached.
  int64_t unconstrainedArena = 0;
  int64_t arena = 0;
  /// The chosen solver run (when fits and something was recomputed).
  RematerializeResult remat;
  int64_t solverBudget = 0;
  int probes = 0;
  /// The budget was met only without gradient buckets: the function's
  /// collectives stay synchronous (the budget is a limit, overlap a
  /// preference).
  bool synchronousCollectives = false;
  /// When !fits: one message giving the smallest arena reached and the
  /// buffers that hold it there.
  std::string message;
  /// One line per probe (solver budget, recomputations, planned arena).
  std::vector<std::string> log;
};

FailureOr<MemoryBudgetResult>
rematerializeToMemoryBudget(ModuleOp module,
                            const MemoryBudgetOptions &options);

} // namespace mlir::memopt

#endif // MEMOPT_DIALECT_MEMOPT_TRANSFORMS_REMATERIALIZE_H
