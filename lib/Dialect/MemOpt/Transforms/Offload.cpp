//===- Offload.cpp - saved activations to pinned host memory --------------===//
//
// The copy choice of --memory-budget (docs/offload.md, "Activations"). The
// function, in its execution order, becomes an OffloadProblem
// (include/memopt/Remat/Offload.h): each op a step timed like the
// rematerialization solver's nodes (roofline or measured kernel times), the
// live bytes per step from BufferLiveness with bufferization's in-place
// decisions (the scheduler's and the planner's model), and a candidate per
// arena value that has a gap between two reads: its last read before the
// longest gap (in time) is the forward's, the first after it the
// backward's. The chosen copies become memopt.offload / offload_wait /
// reload / reload_wait ops at the steps the timeline gave them, and the
// readers after the gap read the reloaded value.
//
// Taken from torchtune's activation offloading (a copy stream, pinned host
// buffers, the compute stream waiting on the reload's event right before
// the consumer) and from the swap planners (Capuchin, SwapAdvisor, POET)
// and torchtitan's keep / recompute / offload choice. Further: the host
// buffers are one pinned pool packed at compile time by the arena's own
// planner (torchtune allocates a pinned tensor per activation at run time),
// and where a copy goes is decided against a timeline that predicts how
// much of it hides.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/MemOpt/Transforms/Offload.h"
#include "memopt/Analysis/BufferLiveness.h"
#include "memopt/Analysis/MemoryReport.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/IR/OffloadOps.h"
#include "memopt/Planner/BestFit.h"
#include "memopt/Planner/Validator.h"
#include "memopt/Remat/Offload.h"
#include "mlir/IR/Builders.h"

#include <algorithm>
#include <map>

using namespace mlir;
using namespace mlir::memopt;
namespace remat = ::memopt::remat;
namespace planner = ::memopt::planner;

namespace {

bool isView(Operation *op) {
  auto behavior = dyn_cast<BufferBehaviorOpInterface>(op);
  return behavior && behavior.isAliasingView();
}

/// Host pool offsets are aligned like the arena's.
constexpr int64_t kHostAlignment = 256;

} // namespace

FailureOr<OffloadResult> mlir::memopt::offloadFunction(
    func::FuncOp function, const OffloadOptions &options,
    llvm::function_ref<double(Operation *)> recomputeSeconds) {
  if (!function.getBody().hasOneBlock())
    return function.emitError("activation offload expects a single-block "
                              "function");
  SmallVector<Operation *> order = getExecutionOrder(function);
  BufferLiveness liveness(function, order,
                          BufferLiveness::decideInPlace(function, order));
  remat::OffloadProblem problem;
  problem.bytesPerSecond = options.bytesPerSecond;
  problem.latencySeconds = options.latencySeconds;
  problem.budget = options.budget;
  problem.stepBytes.assign(liveness.getLiveProfile().begin(),
                           liveness.getLiveProfile().end());
  DenseMap<Operation *, int> stepOf;
  for (auto [step, op] : llvm::enumerate(order)) {
    stepOf[op] = step;
    problem.stepSeconds.push_back(
        estimateOpSeconds(op, options.roofline, options.kernelTimes));
  }
  std::vector<double> start(order.size() + 1, 0.0);
  for (size_t k = 0; k < order.size(); ++k)
    start[k + 1] = start[k] + problem.stepSeconds[k];

  // Candidates: arena values with a storage of their own (no views, no
  // in-place partner) read on both sides of a gap.
  SmallVector<Value> candidateValues;
  for (const Storage &storage : liveness.getStorages()) {
    if (storage.kind != StorageKind::Arena || storage.workspaceOf ||
        storage.values.size() != 1 || storage.size <= 0)
      continue;
    Value value = storage.values.front();
    Operation *producer = value.getDefiningOp();
    if (!producer || isView(producer) || isa<ReloadOp>(producer))
      continue;
    SmallVector<int> points = {stepOf.lookup(producer)};
    for (Operation *user : value.getUsers())
      if (auto it = stepOf.find(user); it != stepOf.end())
        points.push_back(it->second);
    llvm::sort(points);
    points.erase(std::unique(points.begin(), points.end()), points.end());
    int bestGap = -1;
    for (size_t i = 0; i + 1 < points.size(); ++i)
      if (points[i + 1] - points[i] >= 2 &&
          (bestGap < 0 ||
           start[points[i + 1]] - start[points[i] + 1] >
               start[points[bestGap + 1]] - start[points[bestGap] + 1]))
        bestGap = int(i);
    if (bestGap < 0)
      continue;
    remat::OffloadCandidate candidate;
    candidate.id = candidateValues.size();
    candidate.name = getValueName(value);
    candidate.bytes = storage.size;
    candidate.lastForwardStep = points[bestGap];
    candidate.firstBackwardStep = points[bestGap + 1];
    candidate.recomputeSeconds = recomputeSeconds(producer);
    problem.candidates.push_back(std::move(candidate));
    candidateValues.push_back(value);
  }
  std::string error = remat::checkOffloadProblem(problem);
  if (!error.empty())
    return function.emitError("activation offload: ") << error;

  remat::OffloadPlan plan = remat::planOffload(problem);
  OffloadResult result;
  result.offloaded = plan.placements.size();
  result.offloadedBytes = plan.offloadedBytes;
  result.copySeconds = plan.timeline.copySeconds;
  result.exposedSeconds = plan.timeline.exposedSeconds();
  result.refusedForRecompute = plan.refusedForRecompute;
  result.peakBefore = problem.stepBytes.empty()
                          ? 0
                          : *std::max_element(problem.stepBytes.begin(),
                                              problem.stepBytes.end());
  result.peakAfter = plan.peakBytes;
  if (plan.placements.empty())
    return result;

  // Slots continue after the ones already in the function.
  int64_t firstSlot = 0;
  function.walk([&](OffloadOp op) {
    firstSlot = std::max<int64_t>(firstSlot, op.getSlot() + 1);
  });
  // Events in program order; at one position: offload issues, offload
  // waits, reload issues, reload waits (the order the timeline replays).
  struct Event {
    int position;
    int kind;
    int placement;
  };
  SmallVector<Event> events;
  for (auto [index, placement] : llvm::enumerate(plan.placements)) {
    int p = index;
    events.push_back({placement.offloadAfter + 1, 0, p});
    events.push_back({placement.waitBefore, 1, p});
    events.push_back({placement.reloadBefore, 2, p});
    events.push_back({placement.reloadWaitBefore, 3, p});
  }
  llvm::stable_sort(events, [](const Event &x, const Event &y) {
    return x.position != y.position ? x.position < y.position : x.kind < y.kind;
  });
  Block &body = function.getBody().front();
  OpBuilder builder(function.getContext());
  SmallVector<Value> reloaded(plan.placements.size());
  for (const Event &event : events) {
    const remat::OffloadPlacement &placement = plan.placements[event.placement];
    Value value = candidateValues[placement.candidate];
    if (event.position < int(order.size()))
      builder.setInsertionPoint(order[event.position]);
    else
      builder.setInsertionPoint(body.getTerminator());
    Location loc = value.getDefiningOp()->getLoc();
    int64_t slot = firstSlot + event.placement;
    switch (event.kind) {
    case 0:
      OffloadOp::create(builder, loc, value, slot, /*host_offset=*/-1);
      break;
    case 1:
      OffloadWaitOp::create(builder, loc, value, slot);
      break;
    case 2:
      reloaded[event.placement] =
          ReloadOp::create(builder, loc, value.getType(), slot, -1);
      break;
    case 3: {
      Value ready = ReloadWaitOp::create(builder, loc, value.getType(),
                                         reloaded[event.placement], slot);
      // The readers after the gap read the reloaded copy.
      int firstBackward = placement.reloadWaitBefore;
      value.replaceUsesWithIf(ready, [&](OpOperand &use) {
        auto it = stepOf.find(use.getOwner());
        return it != stepOf.end() && it->second >= firstBackward;
      });
      // The function's return is not a step; a returned value is not a
      // candidate (its storage is an output).
      break;
    }
    }
  }
  if (failed(planHostPool(function)))
    return failure();
  if (auto size = function->getAttrOfType<IntegerAttr>(kHostPoolSizeAttrName))
    result.hostPoolBytes = size.getInt();
  Builder attrs(function.getContext());
  function->setAttr(
      kOffloadAttrName,
      attrs.getDictionaryAttr({
          attrs.getNamedAttr("offloaded",
                             attrs.getI64IntegerAttr(result.offloaded)),
          attrs.getNamedAttr("bytes",
                             attrs.getI64IntegerAttr(result.offloadedBytes)),
          attrs.getNamedAttr("copy_seconds",
                             attrs.getF64FloatAttr(result.copySeconds)),
          attrs.getNamedAttr("exposed_seconds",
                             attrs.getF64FloatAttr(result.exposedSeconds)),
          attrs.getNamedAttr("bytes_per_second",
                             attrs.getF64FloatAttr(options.bytesPerSecond)),
      }));
  return result;
}

LogicalResult mlir::memopt::planHostPool(func::FuncOp function) {
  // Slot -> (offload op, its position, the reload_wait's position).
  struct Slot {
    OffloadOp offload;
    ReloadOp reload;
    int64_t first = -1, last = -1, bytes = 0;
  };
  std::map<int64_t, Slot> slots;
  int64_t position = 0;
  for (Operation &op : function.getBody().front()) {
    ++position;
    if (auto offload = dyn_cast<OffloadOp>(op)) {
      Slot &slot = slots[offload.getSlot()];
      if (slot.offload)
        return offload.emitOpError("repeats offload slot ")
               << offload.getSlot();
      slot.offload = offload;
      slot.first = position;
      slot.bytes = getTensorBytes(offload.getInput().getType());
    } else if (auto reload = dyn_cast<ReloadOp>(op)) {
      slots[reload.getSlot()].reload = reload;
    } else if (auto wait = dyn_cast<ReloadWaitOp>(op)) {
      slots[wait.getSlot()].last = position;
    }
  }
  if (slots.empty()) {
    function->removeAttr(kHostPoolSizeAttrName);
    return success();
  }
  planner::Problem problem;
  SmallVector<Slot *> order;
  for (auto &[number, slot] : slots) {
    if (!slot.offload || !slot.reload || slot.last < 0) {
      InFlightDiagnostic diagnostic =
          slot.offload ? slot.offload.emitOpError() : function.emitError();
      return diagnostic << "offload slot " << number
                        << " needs one memopt.offload, memopt.reload and "
                        << "memopt.reload_wait";
    }
    if (slot.last < slot.first)
      return slot.offload.emitOpError("slot ")
             << number << " is reloaded before it is offloaded";
    if (getTensorBytes(slot.reload.getType()) != slot.bytes)
      return slot.reload.emitOpError("reloads ")
             << getTensorBytes(slot.reload.getType()) << " bytes of slot "
             << number << ", which offloaded " << slot.bytes;
    planner::Buffer buffer;
    buffer.id = number;
    buffer.lower = slot.first;
    buffer.upper = slot.last + 1;
    buffer.size = slot.bytes;
    buffer.alignment = kHostAlignment;
    problem.buffers.push_back(buffer);
    order.push_back(&slot);
  }
  planner::Plan plan =
      planner::planBestFit(problem, planner::BestFitOrder::DecreasingSize);
  planner::ValidationResult check = planner::validatePlan(problem, plan);
  if (!check.ok())
    return function.emitError("the host pool plan is invalid: ")
           << check.message;
  Builder builder(function.getContext());
  for (auto [slot, offset] : llvm::zip_equal(order, plan.offsets)) {
    slot->offload.setHostOffset(offset);
    slot->reload.setHostOffset(offset);
  }
  function->setAttr(kHostPoolSizeAttrName,
                    builder.getI64IntegerAttr(plan.arenaSize));
  return success();
}
