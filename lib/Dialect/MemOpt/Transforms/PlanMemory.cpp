//===- PlanMemory.cpp - static memory plan --------------------------------===//
//
// Turns the liveness analysis into a planner problem, runs the planner
// (validated), and records offsets in the IR. IREE's stream dialect records
// packed offsets as `stream.resource.pack` results; TFLite keeps them in
// the interpreter. We keep them as attributes on the ops themselves so a lit
// test can check an offset next to the op that owns it.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/BufferLiveness.h"
#include "memopt/Analysis/MemoryReport.h"
#include "memopt/Dialect/MemOpt/IR/HostUpdates.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/Transforms/MemoryPhase.h"
#include "memopt/Dialect/MemOpt/Transforms/Offload.h"
#include "memopt/Dialect/MemOpt/Transforms/Passes.h"
#include "memopt/Planner/Elastic.h"
#include "memopt/Planner/Planner.h"
#include "memopt/Planner/Validator.h"
#include "mlir/IR/Builders.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::memopt {
#define GEN_PASS_DEF_MEMOPTPLANMEMORY
#include "memopt/Dialect/MemOpt/Transforms/Passes.h.inc"
} // namespace mlir::memopt

using namespace mlir;
using namespace mlir::memopt;
namespace planner = ::memopt::planner;

namespace {

/// Writes `write(os)` to `path`, reporting failure on `op`.
template <typename WriteFn>
LogicalResult writeFile(Operation *op, StringRef path, WriteFn write) {
  std::string errorMessage;
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(path, &errorMessage);
  if (!output)
    return op->emitError("cannot write '") << path << "': " << errorMessage;
  write(output->os());
  output->keep();
  return success();
}

} // namespace

FailureOr<MemoryReport>
mlir::memopt::planFunctionMemory(func::FuncOp function,
                                 const PlanMemoryOptions &planOptions) {
  if (!function.getBody().hasOneBlock())
    return function.emitError(
        "memopt-plan-memory expects a single-block function");
  Builder builder(function.getContext());
  if (planOptions.outputsInArena)
    function->setAttr(kOutputsInArenaAttrName, builder.getUnitAttr());
  else
    function->removeAttr(kOutputsInArenaAttrName);
  BufferLiveness liveness(function);

  planner::Problem problem;
  for (const Storage &storage : liveness.getStorages())
    if ((storage.kind == StorageKind::Arena ||
         (planOptions.outputsInArena && storage.kind == StorageKind::Output)) &&
        storage.size > 0)
      problem.buffers.push_back({storage.id, storage.first, storage.last + 1,
                                 storage.size, planOptions.alignment});
  planner::PlanOptions options;
  options.algorithm = planOptions.algorithm;
  options.timeLimitSeconds = planOptions.timeLimitSeconds;
  // The arena is one allocation whose size the allocator rounds up anyway
  // (cudaMalloc: 512-byte steps at least): arenas within one alignment
  // granule cost the same, and the exact search stops there.
  options.granule = planOptions.alignment;
  if (planOptions.capacity > 0)
    options.capacity = planOptions.capacity;
  planner::PlanResult result = planner::plan(problem, options);
  if (!result.ok())
    return function.emitError("memory planning failed: ") << result.message;

  // Workspaces were planned at their floor; grow them into the bytes that
  // are free anyway while their op runs (the arena does not change), then
  // check the grown plan again. Optional workspaces (floor 0) join here.
  for (const Storage &storage : liveness.getStorages())
    if (storage.workspaceOf && storage.size == 0 && storage.maxSize > 0) {
      problem.buffers.push_back({storage.id, storage.first, storage.last + 1, 0,
                                 planOptions.alignment});
      result.plan.offsets.push_back(0);
    }
  std::vector<int64_t> maxSizes;
  for (const planner::Buffer &buffer : problem.buffers)
    maxSizes.push_back(liveness.getStorages()[buffer.id].maxSize);
  planner::growIntoFreeSpace(problem, result.plan, maxSizes);
  planner::ValidationResult grown =
      planner::validatePlan(problem, result.plan, result.plan.arenaSize);
  if (!grown.ok())
    return function.emitError("memory planning failed: growing workspaces "
                              "broke the plan: ")
           << grown.message;
  for (const planner::Buffer &buffer : problem.buffers)
    if (liveness.getStorages()[buffer.id].workspaceOf)
      liveness.setWorkspaceSize(buffer.id, buffer.size);

  SmallVector<int64_t> storageOffsets(liveness.getStorages().size(), -1);
  for (auto [buffer, offset] :
       llvm::zip_equal(problem.buffers, result.plan.offsets))
    storageOffsets[buffer.id] = offset;
  for (const Storage &storage : liveness.getStorages())
    if (storage.kind == StorageKind::Arena && storage.size == 0)
      storageOffsets[storage.id] = 0;

  // Where each function result lives: its planned arena slot, or -1 (the
  // caller's buffer: outputs outside the arena, or a result that is an
  // input, a weight or a second use of another output's storage).
  SmallVector<int64_t> outputOffsets(function.getNumResults(), -1);
  for (const Storage &storage : liveness.getStorages())
    if (storage.kind == StorageKind::Output && storageOffsets[storage.id] >= 0)
      outputOffsets[storage.ioIndex] = storageOffsets[storage.id];
  function->setAttr("memopt.output_offsets",
                    builder.getDenseI64ArrayAttr(outputOffsets));

  int64_t weightsSize = 0;
  // --offload optimizer: host-placed variables get offsets in the host
  // state region, and each update with a host master a staging slot
  // after them (its scalars, then its gradient), used once per step.
  int64_t hostSize = 0, stagingSize = 0;
  SmallVector<std::pair<Operation *, int64_t>> stagingSlots;
  for (Operation &op : function.getBody().front().without_terminator()) {
    if (isWeightRegionOp(&op) && isHostPlaced(op.getResult(0))) {
      hostSize = planner::alignUp(hostSize, planOptions.alignment);
      op.setAttr("memopt.host_offset", builder.getI64IntegerAttr(hostSize));
      hostSize += getTensorBytes(op.getResult(0).getType());
      continue;
    }
    // The staged tensor: the gradient, or the f32 sum of a device
    // accumulator, and a low working parameter's copy (HostUpdates.h).
    if (int64_t bytes = getStagingSlotBytes(&op))
      stagingSlots.push_back({&op, bytes});
  }
  for (auto [op, bytes] : stagingSlots) {
    hostSize = planner::alignUp(hostSize, planOptions.alignment);
    op->setAttr("memopt.staging_offset", builder.getI64IntegerAttr(hostSize));
    hostSize += bytes;
    stagingSize += bytes;
  }
  if (hostSize > 0) {
    function->setAttr("memopt.host_size",
                      builder.getI64IntegerAttr(
                          planner::alignUp(hostSize, planOptions.alignment)));
    function->setAttr("memopt.host_staging_size",
                      builder.getI64IntegerAttr(stagingSize));
  }
  for (Operation &op : function.getBody().front().without_terminator()) {
    if (isWeightRegionOp(&op) && isHostPlaced(op.getResult(0)))
      continue;
    if (isWeightRegionOp(&op)) {
      weightsSize = planner::alignUp(weightsSize, planOptions.alignment);
      op.setAttr("memopt.weight_offset",
                 builder.getI64IntegerAttr(weightsSize));
      weightsSize += getTensorBytes(op.getResult(0).getType());
      continue;
    }
    SmallVector<int64_t> offsets;
    for (Value result : op.getResults()) {
      const Storage &storage = liveness.getStorage(result);
      offsets.push_back(
          storage.kind == StorageKind::Arena ? storageOffsets[storage.id] : -1);
    }
    op.setAttr("memopt.offsets", builder.getDenseI64ArrayAttr(offsets));
    if (const Storage *workspace = liveness.getWorkspace(&op)) {
      op.setAttr("memopt.workspace_offset",
                 builder.getI64IntegerAttr(storageOffsets[workspace->id]));
      op.setAttr("memopt.workspace_size",
                 builder.getI64IntegerAttr(workspace->size));
    }
  }
  function->setAttr("memopt.arena_size",
                    builder.getI64IntegerAttr(result.plan.arenaSize));
  function->setAttr("memopt.weights_size",
                    builder.getI64IntegerAttr(weightsSize));
  // Activation offload's pinned host pool, packed in the final order.
  if (failed(planHostPool(function)))
    return failure();
  function->setAttr("memopt.max_live", builder.getI64IntegerAttr(
                                           liveness.getStats().maxLiveBytes));

  MemoryReport report =
      buildMemoryReport(function, liveness, storageOffsets,
                        result.plan.arenaSize, planOptions.capacity);
  report.algorithm = planner::algorithmName(result.producedBy);
  report.planSeconds = result.seconds;
  report.provedOptimal = result.provedOptimal;
  return report;
}

namespace {
struct MemOptPlanMemoryPass
    : public mlir::memopt::impl::MemOptPlanMemoryBase<MemOptPlanMemoryPass> {
  using MemOptPlanMemoryBase::MemOptPlanMemoryBase;

  void runOnOperation() override {
    std::optional<planner::Algorithm> parsed =
        planner::parseAlgorithm(algorithm);
    if (!parsed) {
      getOperation().emitError("unknown planning algorithm '")
          << algorithm
          << "' (expected best-fit-size, best-fit-lifetime, exact or auto)";
      return signalPassFailure();
    }
    if (alignment < 1) {
      getOperation().emitError("alignment must be at least 1");
      return signalPassFailure();
    }
    llvm::json::Array reports;
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      if (function.isExternal())
        continue;
      PlanMemoryOptions planOptions;
      planOptions.algorithm = *parsed;
      planOptions.timeLimitSeconds = timeLimit;
      planOptions.alignment = alignment;
      planOptions.capacity = capacity;
      planOptions.outputsInArena = outputsInArena;
      FailureOr<MemoryReport> report =
          planFunctionMemory(function, planOptions);
      if (failed(report))
        return signalPassFailure();
      if (printReport)
        printTextReport(*report, llvm::outs());
      reports.push_back(toJson(*report));
      if (!reportSvg.empty() &&
          failed(writeFile(function, reportSvg, [&](raw_ostream &os) {
            writeSvgTimeline(*report, os);
          })))
        return signalPassFailure();
      if (!reportHtml.empty() &&
          failed(writeFile(function, reportHtml, [&](raw_ostream &os) {
            writeHtmlReport(*report, os);
          })))
        return signalPassFailure();
    }
    if (!reportJson.empty() &&
        failed(writeFile(getOperation(), reportJson, [&](raw_ostream &os) {
          llvm::json::Value value = reports.size() == 1
                                        ? std::move(reports[0])
                                        : llvm::json::Value(std::move(reports));
          os << llvm::formatv("{0:2}", value) << "\n";
        })))
      return signalPassFailure();
  }
};
} // namespace
