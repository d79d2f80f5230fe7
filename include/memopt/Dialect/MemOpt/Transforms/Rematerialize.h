//===- Rematerialize.h - recompute to fit a byte budget ---------*- C++ -*-===//
//
// The library behind --memopt-rematerialize, for drivers that search over
// budgets (memopt-compile --memory-budget replans until the packed arena
// fits): map a function onto the solver's graph (lib/Remat), solve, and clone
// the recomputed ops next to their late users. See Passes.td for the rules.
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
  /// Peak bytes in the solver's model.
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

/// Replanning under an arena budget (memopt-compile --memory-budget): only
/// the packed arena counts. `plan` runs the rest of the memory pipeline
/// (scheduling, bufferization, planning) on a module and must leave
/// `memopt.arena_size` (workspaces included) on its function.
struct ArenaBudgetOptions {
  /// Bytes the planned arena must fit in.
  int64_t arenaBudget = 0;
  /// Everything but the budget, which the search chooses.
  RematerializeOptions remat;
  /// The most solver runs (each followed by a plan).
  int maxProbes = 8;
};

struct ArenaBudgetResult {
  /// The arena fits: `module` holds the rematerialized function (not yet
  /// planned; the original when no recomputation was needed).
  bool fits = false;
  OwningOpRef<ModuleOp> module;
  /// The arena planned without recomputation, and the best one reached.
  int64_t unconstrainedArena = 0;
  int64_t arena = 0;
  /// The chosen solver run (when fits and something was recomputed).
  RematerializeResult remat;
  int64_t solverBudget = 0;
  int probes = 0;
  /// When !fits: one message giving the smallest arena reached and the
  /// buffers that hold it there.
  std::string message;
  /// One line per probe (solver budget, recomputations, planned arena).
  std::vector<std::string> log;
};

/// `plan(module, thorough)` runs the memory phase on a copy: `thorough` for
/// the unconstrained arena (searched as long as the final plan is, so that
/// the report's unconstrained arena is what a compile without a budget
/// gets), quick for the probes.
FailureOr<ArenaBudgetResult> rematerializeToArenaBudget(
    ModuleOp module, const ArenaBudgetOptions &options,
    llvm::function_ref<LogicalResult(ModuleOp, bool thorough)> plan);

} // namespace mlir::memopt

#endif // MEMOPT_DIALECT_MEMOPT_TRANSFORMS_REMATERIALIZE_H
