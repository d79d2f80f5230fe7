//===- RematerializeBudget.cpp - replan until the arena fits --------------===//
//
// memopt-compile --memory-budget: the solver works on a model of memory
// (views, in-place reuse and workspace floors as the planner sees them, but
// no packing: no fragmentation, no alignment), and only the packed arena
// counts. So the search probes: solve at the budget scaled into the model's
// bytes, let scheduling, bufferization and the real planner run on a copy,
// read the arena, and solve again lower (by the excess) until the arena
// fits. A fit within 2% of the budget ends the search (where the model is
// accurate, one solver run is enough); a fit with room to spare means the
// model overestimated, so the budget is loosened by the room left and then
// bisected between the loosest fit and the tightest miss, for the cheapest
// recomputation that fits. XLA's HloRematerialization likewise re-measures
// memory with its own heap simulator after each rewrite; here the measure is
// the planner's actual packing, workspaces included.
//
// Each probe calls the memory phase's functions (MemoryPhase.h) directly on
// a copy, as XLA's rematerialization calls its heap simulator: no nested
// PassManager, typed results. The chosen candidate comes back in the order
// its arena was measured in, so the pipeline does not schedule it again.
// Where we go further than XLA: the data-parallel buckets are part of the
// measure, and a budget met only without them turns them off.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/BufferLiveness.h"
#include "memopt/Analysis/MemoryReport.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/Transforms/MemoryPhase.h"
#include "memopt/Dialect/MemOpt/Transforms/Rematerialize.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::memopt;

namespace {

/// The one function with a body.
func::FuncOp getBodyFunction(ModuleOp module) {
  func::FuncOp found;
  for (auto function : module.getOps<func::FuncOp>()) {
    if (function.isExternal())
      continue;
    if (found)
      return {};
    found = function;
  }
  return found;
}

std::string formatBytes(int64_t bytes) {
  if (bytes < 1024)
    return std::to_string(bytes) + " B";
  const char *units[] = {"KiB", "MiB", "GiB"};
  double value = bytes / 1024.0;
  int unit = 0;
  while (value >= 1024 && unit < 2) {
    value /= 1024;
    ++unit;
  }
  return llvm::formatv("{0:F2} {1}", value, units[unit]).str();
}

/// A candidate's memory phase: `module`'s function is scheduled in place;
/// a copy is bucketed, bufferized and planned. Returns the planned copy and
/// its arena.
FailureOr<std::pair<OwningOpRef<ModuleOp>, int64_t>>
planCandidate(ModuleOp module, const MemoryBudgetOptions &options,
              double bucketMib, double gatherMib, bool thorough) {
  if (failed(scheduleFunction(getBodyFunction(module))))
    return failure();
  OwningOpRef<ModuleOp> copy = module.clone();
  func::FuncOp function = getBodyFunction(*copy);
  if ((bucketMib > 0 || gatherMib > 0) &&
      failed(bucketCollectives(function, bucketMib,
                               getFirstBucketMib(bucketMib), gatherMib)))
    return failure();
  if (failed(bufferizeFunction(function)))
    return failure();
  PlanMemoryOptions plan;
  plan.outputsInArena = options.outputsInArena;
  if (!thorough)
    plan.timeLimitSeconds = options.probePlanSeconds;
  FailureOr<MemoryReport> planned = planFunctionMemory(function, plan);
  if (failed(planned))
    return failure();
  return std::make_pair(std::move(copy), planned->arenaBytes);
}

/// "the smallest arena reached is A (...): at its peak, op K ('name'), it
/// holds X (size), Y (size), ..." for a planned module.
std::string describeArena(ModuleOp planned, int64_t arena) {
  func::FuncOp function = getBodyFunction(planned);
  BufferLiveness liveness(function);
  int64_t peak = liveness.getStats().peakIndex;
  std::string peakOp;
  for (Operation &op : function.getBody().front().without_terminator())
    if (liveness.getOpIndex(&op) == peak)
      peakOp = getOpName(&op);
  bool outputsInArena = function->hasAttr(kOutputsInArenaAttrName);
  std::vector<const Storage *> alive;
  for (const Storage &storage : liveness.getStorages())
    if ((storage.kind == StorageKind::Arena ||
         (outputsInArena && storage.kind == StorageKind::Output)) &&
        storage.size > 0 && storage.first <= peak && peak <= storage.last)
      alive.push_back(&storage);
  llvm::stable_sort(alive, [](const Storage *a, const Storage *b) {
    return a->size > b->size;
  });
  std::string text = formatBytes(arena) + " (" + std::to_string(arena) +
                     " bytes); at its peak, op " + std::to_string(peak) +
                     " ('" + peakOp + "'), it holds";
  size_t shown = std::min<size_t>(alive.size(), 6);
  int64_t rest = 0;
  for (size_t i = 0; i < alive.size(); ++i) {
    const Storage &storage = *alive[i];
    if (i >= shown) {
      rest += storage.size;
      continue;
    }
    // The ONNX node name and the op kind: a node's gradient ops share its
    // name.
    Operation *owner = storage.workspaceOf
                           ? storage.workspaceOf
                           : storage.values.front().getDefiningOp();
    std::string name = storage.workspaceOf
                           ? getOpName(owner)
                           : getValueName(storage.values.front());
    std::string kind = owner ? owner->getName().stripDialect().str() : "";
    if (storage.workspaceOf)
      kind += " workspace";
    text += (i ? ", '" : " '") + name + "' (" + kind + ") " +
            formatBytes(storage.size);
  }
  if (alive.size() > shown)
    text += " and " + std::to_string(alive.size() - shown) + " more (" +
            formatBytes(rest) + ")";
  return text;
}

} // namespace

/// One search with `bucketMib` MiB gradient buckets and `gatherMib` MiB
/// prefetched gather groups (0: none).
static FailureOr<MemoryBudgetResult>
searchMemoryBudget(ModuleOp module, const MemoryBudgetOptions &options,
                   double bucketMib, double gatherMib) {
  func::FuncOp function = getBodyFunction(module);
  MemoryBudgetResult result;
  int64_t budget = options.memoryBudget;

  OwningOpRef<ModuleOp> scheduled = module.clone();
  FailureOr<std::pair<OwningOpRef<ModuleOp>, int64_t>> unconstrained =
      planCandidate(*scheduled, options, bucketMib, gatherMib,
                    /*thorough=*/true);
  if (failed(unconstrained))
    return failure();
  result.unconstrainedArena = unconstrained->second;
  result.arena = result.unconstrainedArena;
  result.log.push_back("unconstrained arena " + std::to_string(result.arena) +
                       " bytes");
  if (result.unconstrainedArena <= budget) {
    result.fits = true;
    result.module = std::move(scheduled);
    return result;
  }

  // The smallest arena reached, planned, for the failure message.
  OwningOpRef<ModuleOp> smallestPlanned = std::move(unconstrained->first);
  int64_t smallestArena = result.unconstrainedArena;
  int smallestRecomputations = 0;

  int64_t modelPeak = getRematModelPeak(function, options.remat);
  // Where the model and the arena agree, the budget maps one to one; start
  // at the budget scaled by their ratio.
  int64_t solverBudget = std::min<int64_t>(
      modelPeak - 1,
      int64_t(double(budget) * double(modelPeak) / double(result.arena)));
  // Solver budgets known to fit (the loosest) and to miss (the tightest
  // above it); -1: none yet.
  int64_t fitting = -1, missing = -1;
  int64_t loosenStep = 0, lastFitArena = -1;
  OwningOpRef<ModuleOp> best;
  std::string solverMessage;
  for (int probe = 0; probe < options.maxProbes && solverBudget > 0; ++probe) {
    OwningOpRef<ModuleOp> candidate = module.clone();
    RematerializeOptions rematOptions = options.remat;
    rematOptions.budget = solverBudget;
    FailureOr<RematerializeResult> solved =
        rematerializeFunction(getBodyFunction(*candidate), rematOptions);
    if (failed(solved))
      return failure();
    ++result.probes;
    if (!solved->fits) {
      solverMessage = solved->message;
      result.log.push_back(llvm::formatv("solver budget {0}: no schedule "
                                         "(smallest peak {1})",
                                         solverBudget, solved->smallestPeak)
                               .str());
      if (best)
        break;
      // Lower budgets fail too; the lowest peak the solver reached is the
      // last one worth planning (the model may overestimate the arena).
      int64_t next = solved->smallestPeak;
      if (next <= solverBudget || (missing >= 0 && next >= missing) ||
          next >= modelPeak)
        break;
      solverBudget = next;
      continue;
    }
    FailureOr<std::pair<OwningOpRef<ModuleOp>, int64_t>> planned =
        planCandidate(*candidate, options, bucketMib, gatherMib,
                      /*thorough=*/false);
    if (failed(planned))
      return failure();
    int64_t arena = planned->second;
    result.log.push_back(
        llvm::formatv("solver budget {0}: {1} recomputations (+{2:F2}% "
                      "estimated time){5}, arena {3} bytes{4}",
                      solverBudget, solved->recomputations,
                      solved->baseSeconds > 0
                          ? 100.0 * solved->addedSeconds / solved->baseSeconds
                          : 0.0,
                      arena, arena <= budget ? " (fits)" : "",
                      solved->offload.offloaded > 0
                          ? llvm::formatv(", {0} offloaded ({1} bytes, "
                                          "{2:F2} us of {3:F2} us exposed)",
                                          solved->offload.offloaded,
                                          solved->offload.offloadedBytes,
                                          solved->offload.exposedSeconds * 1e6,
                                          solved->offload.copySeconds * 1e6)
                                .str()
                          : std::string())
            .str());
    if (arena < smallestArena) {
      smallestArena = arena;
      smallestPlanned = std::move(planned->first);
      smallestRecomputations = solved->recomputations;
    }
    if (arena <= budget) {
      // Recomputation and the copies' predicted stall, together.
      auto cost = [](const RematerializeResult &run) {
        return run.addedSeconds + run.offload.exposedSeconds;
      };
      if (!best || cost(*solved) < cost(result.remat)) {
        best = std::move(candidate);
        result.remat = *solved;
        result.solverBudget = solverBudget;
        result.arena = arena;
      }
      fitting = std::max(fitting, solverBudget);
      if (missing >= 0 && missing <= fitting)
        missing = -1;
    } else if (solverBudget > fitting) {
      missing = missing >= 0 ? std::min(missing, solverBudget) : solverBudget;
    }
    int64_t next;
    int64_t tolerance = budget / 50 + 1;
    if (fitting < 0) {
      // Lower by the excess, at least in proportion.
      next = std::min(
          solverBudget - (arena - budget),
          int64_t(double(solverBudget) * double(budget) / double(arena)));
      next = std::min(next, solved->peak - 1);
    } else if (missing < 0) {
      // It fits. Within 2% of the budget nothing cheaper is left to find;
      // otherwise the model overestimated the arena: loosen by the room
      // left, doubling the step while the arena does not move.
      int64_t room = budget - arena;
      if (arena > budget || room <= tolerance || fitting >= modelPeak - 1)
        break;
      loosenStep = arena == lastFitArena ? 2 * loosenStep : room;
      lastFitArena = arena;
      next = std::min(modelPeak - 1, fitting + loosenStep);
    } else {
      // Bisect until the bracket is within 2% of the budget.
      if (missing - fitting <= tolerance)
        break;
      next = fitting + (missing - fitting) / 2;
    }
    if (next == solverBudget || next <= 0)
      break;
    solverBudget = next;
  }

  if (best) {
    result.fits = true;
    result.module = std::move(best);
    return result;
  }
  result.arena = smallestArena;
  std::string message =
      "the arena does not fit in the memory budget of " + formatBytes(budget) +
      " (" + std::to_string(budget) + " bytes): without recomputation it is " +
      formatBytes(result.unconstrainedArena) + "; the smallest arena reached";
  if (smallestRecomputations > 0)
    message +=
        " (" + std::to_string(smallestRecomputations) + " ops recomputed)";
  message += " is " + describeArena(*smallestPlanned, smallestArena);
  if (!solverMessage.empty())
    message +=
        "; below that, the solver's model of the arena says " + solverMessage;
  result.message = message;
  return result;
}

FailureOr<MemoryBudgetResult>
mlir::memopt::rematerializeToMemoryBudget(ModuleOp module,
                                          const MemoryBudgetOptions &options) {
  if (!getBodyFunction(module))
    return module.emitError(
        "--memory-budget needs a module with exactly one function");
  FailureOr<MemoryBudgetResult> result =
      searchMemoryBudget(module, options, options.bucketMib, options.gatherMib);
  if (failed(result) || result->fits ||
      (options.bucketMib <= 0 && options.gatherMib <= 0))
    return result;
  // The budget is a limit, overlap a preference: when the buckets' in-
  // flight gradients or the prefetched gathers keep the arena above the
  // budget, the collectives run synchronously (each frees its buffers at
  // once, as --bucket-mib 0 --gather-mib 0).
  FailureOr<MemoryBudgetResult> unbucketed =
      searchMemoryBudget(module, options, /*bucketMib=*/0, /*gatherMib=*/0);
  if (failed(unbucketed))
    return failure();
  if (!unbucketed->fits)
    return result;
  unbucketed->synchronousCollectives = true;
  unbucketed->log.push_back(
      llvm::formatv("the budget is met with synchronous collectives: with "
                    "{0} MiB gradient buckets{1} {2}",
                    llvm::format("%g", options.bucketMib),
                    options.gatherMib > 0
                        ? llvm::formatv(" and {0} MiB gather groups",
                                        llvm::format("%g", options.gatherMib))
                              .str()
                        : std::string(),
                    result->message)
          .str());
  return unbucketed;
}
