//===- RematSummary.h - what memopt-rematerialize decided -------*- C++ -*-===//
//
// The one typed record of a rematerialization that outlives its pass:
// memopt-rematerialize writes it on the function (`memopt.remat`, and
// `memopt.remat_kernel_seconds` for the measured times), and the memory
// report and memopt-compile's "[remat]" line read it, all through
// readRematSummary / writeRematSummary (no other code spells its keys).
// It carries the costs the choice was made with, so that the report prices
// the chosen recomputations as the solver did: measured kernel times where
// they were given (the entries for this function's ops), the roofline
// elsewhere. XLA keeps its rematerialization's summary in the pass's return
// value only; a pass here ends where the next begins, so the summary rides
// on the IR, as IREE's stream passes leave `stream.resource.pack` results
// for the next pass.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_ANALYSIS_REMATSUMMARY_H
#define MEMOPT_ANALYSIS_REMATSUMMARY_H

#include "memopt/Analysis/CostModel.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>

namespace mlir::memopt {

/// Dictionary attribute beside `memopt.remat` (kRematAttrName): the
/// measured seconds that priced the function's ops, by ONNX node name.
inline constexpr llvm::StringLiteral kRematKernelSecondsAttrName =
    "memopt.remat_kernel_seconds";

struct RematSummary {
  /// The solver ran (budget, initialPeak and peak are known): bytes in its
  /// model of memory.
  bool solved = false;
  int64_t budget = 0;
  int64_t initialPeak = 0;
  int64_t peak = 0;
  /// Clones inserted.
  int64_t recomputations = 0;
  /// The memory budget search ran (memopt-compile --memory-budget,
  /// memopt-rematerialize memory-budget=): the budget on the planned arena,
  /// the arena without and with recomputation, the solver runs, and the
  /// time the chosen recomputations add over the step's.
  bool searched = false;
  int64_t memoryBudget = 0;
  int64_t unconstrainedArena = 0;
  int64_t plannedArena = 0;
  int64_t solverRuns = 0;
  double addedTimeFraction = 0;
  /// Measured seconds that priced this function's ops, by ONNX node name
  /// (empty: the roofline priced every op).
  KernelTimes kernelSeconds;
};

/// The summary on `function`, if memopt-rematerialize left one.
std::optional<RematSummary> readRematSummary(func::FuncOp function);

/// Leaves `summary` on `function` (replacing any earlier one).
void writeRematSummary(func::FuncOp function, const RematSummary &summary);

/// The entries of `times` that name an op of `function` (what priced it).
KernelTimes selectKernelTimes(func::FuncOp function, const KernelTimes &times);

/// One execution of `op` as the summary's costs price it: its measured time
/// where there is one, else the H100 roofline's estimate (CostModel.h).
double estimateRematSeconds(Operation *op, const RematSummary &summary);

/// "the H100 roofline" or "measured kernel times (N ops), the H100 roofline
/// elsewhere": what estimateRematSeconds uses.
std::string describeRematCosts(const RematSummary &summary);

} // namespace mlir::memopt

#endif // MEMOPT_ANALYSIS_REMATSUMMARY_H
