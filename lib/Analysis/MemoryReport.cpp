//===- MemoryReport.cpp - where the memory goes ---------------------------===//

#include "memopt/Analysis/MemoryReport.h"
#include "memopt/Analysis/CostModel.h"
#include "memopt/Analysis/RematSummary.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Format.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::memopt;

/// The innermost NameLoc's name in `loc`, looking through fused and call
/// site locations.
static std::optional<std::string> findName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (std::optional<std::string> name = findName(inner))
        return name;
  if (auto callSite = dyn_cast<CallSiteLoc>(loc))
    return findName(callSite.getCallee());
  return std::nullopt;
}

std::string mlir::memopt::getOpName(Operation *op) {
  return findName(op->getLoc()).value_or(op->getName().stripDialect().str());
}

std::string mlir::memopt::getValueName(Value value) {
  if (auto argument = dyn_cast<BlockArgument>(value)) {
    if (auto function =
            dyn_cast<func::FuncOp>(argument.getOwner()->getParentOp()))
      if (auto name = function.getArgAttrOfType<StringAttr>(
              argument.getArgNumber(), "memopt.name"))
        return name.str();
    return "arg" + std::to_string(argument.getArgNumber());
  }
  auto result = cast<OpResult>(value);
  Operation *op = result.getOwner();
  std::string name = getOpName(op);
  if (result.getResultNumber() > 0)
    name += ":" + std::to_string(result.getResultNumber());
  return name;
}

void PrecisionBytes::add(Type elementType, int64_t bytes) {
  std::string name;
  llvm::raw_string_ostream(name) << elementType;
  auto it =
      llvm::find_if(byType, [&](const auto &e) { return e.first == name; });
  if (it == byType.end())
    byType.emplace_back(name, bytes);
  else
    it->second += bytes;
  int64_t width =
      elementType.isIntOrFloat()
          ? std::max<int64_t>(elementType.getIntOrFloatBitWidth(), 8)
          : 32;
  // A low-precision float tensor would take 32 bits per element in f32.
  f32Equivalent +=
      isa<FloatType>(elementType) && width < 32 ? bytes * 32 / width : bytes;
}

int64_t PrecisionBytes::total() const {
  int64_t sum = 0;
  for (const auto &entry : byType)
    sum += entry.second;
  return sum;
}

/// The element type a storage holds (its root tensor's).
static Type storageElementType(const Storage &storage) {
  return getElementTypeOrSelf(storage.values.front().getType());
}

/// A cast of a parameter variable: its low-precision copy.
static bool isParameterCopy(Value value) {
  auto cast = value.getDefiningOp<CastOp>();
  if (!cast)
    return false;
  auto variable = cast.getInput().getDefiningOp<VariableOp>();
  return variable && variable.getRole() == "parameter";
}

/// Fills report.training.mixedPrecision for an f16 / bf16 training step.
static void addMixedPrecisionReport(func::FuncOp function,
                                    const BufferLiveness &liveness,
                                    const llvm::DenseSet<unsigned> &saved,
                                    ArrayRef<unsigned> gradientStorages,
                                    MemoryReport &report) {
  MixedPrecisionReport &mixed = report.training.mixedPrecision;
  if (report.precision != "f16" && report.precision != "bf16")
    return;
  mixed.present = true;
  mixed.precision = report.precision;
  for (const Storage &storage : liveness.getStorages()) {
    if (storage.kind != StorageKind::Arena || storage.values.empty())
      continue;
    Type element = storageElementType(storage);
    if (saved.contains(storage.id))
      mixed.savedForBackward.add(element, storage.size);
    if (llvm::is_contained(gradientStorages, storage.id))
      mixed.gradients.add(element, storage.size);
    if (llvm::any_of(storage.values, isParameterCopy)) {
      mixed.weightCopies.add(element, storage.size);
      mixed.weightCopyCount += llvm::count_if(storage.values, isParameterCopy);
    }
  }
  function.walk([&](Operation *op) {
    if (auto variable = dyn_cast<VariableOp>(op)) {
      mixed.persistentState.add(getElementTypeOrSelf(variable.getType()),
                                getTensorBytes(variable.getType()));
      return;
    }
    if (auto update = dyn_cast<UpdateLossScaleOp>(op)) {
      mixed.lossScaling = true;
      mixed.growthFactor = update.getGrowthFactor().convertToDouble();
      mixed.backoffFactor = update.getBackoffFactor().convertToDouble();
      mixed.growthInterval = update.getGrowthInterval();
      if (auto variable = update.getLossScale().getDefiningOp<VariableOp>())
        if (auto initial = variable.getInitialValueAttr())
          if (auto dense = dyn_cast<DenseElementsAttr>(initial))
            mixed.initialLossScale =
                (*dense.getValues<APFloat>().begin()).convertToDouble();
    }
  });
  if (auto casts =
          function->getAttrOfType<DictionaryAttr>("memopt.weight_casts")) {
    if (auto decision = casts.getAs<StringAttr>("decision"))
      mixed.weightCastDecision = decision.str();
    if (auto policy = casts.getAs<StringAttr>("policy"))
      mixed.weightCastPolicy = policy.str();
    if (auto held = casts.getAs<IntegerAttr>("held_bytes"))
      mixed.weightCastHeldBytes = held.getInt();
    if (auto seconds = casts.getAs<FloatAttr>("recast_seconds"))
      mixed.weightCastSeconds = seconds.getValueAsDouble();
    if (auto seconds = casts.getAs<FloatAttr>("step_seconds"))
      mixed.stepSeconds = seconds.getValueAsDouble();
  }
}

/// Fills report.training for a function with state (memopt.variable).
static void addTrainingReport(func::FuncOp function,
                              const BufferLiveness &liveness,
                              MemoryReport &report) {
  Block &body = function.getBody().front();
  TrainingReport &training = report.training;
  for (Operation &op : body) {
    if (auto variable = dyn_cast<VariableOp>(op)) {
      training.present = true;
      int64_t bytes = getTensorBytes(variable.getType());
      if (variable.getRole() == "parameter") {
        training.parameterBytes += bytes;
        training.parameterCount +=
            cast<ShapedType>(variable.getType()).getNumElements();
      } else if (variable.getRole() == "optimizer_state")
        training.optimizerStateBytes += bytes;
      else if (variable.getRole() == "statistic")
        training.statisticBytes += bytes;
      else if (variable.getRole() == "gradient_accumulator") {
        training.gradientAccumulatorBytes += bytes;
        training.gradientAccumulatorsOnHost |= isHostPlaced(variable);
      }
    } else if (isa<ConstantOp>(op)) {
      training.constantBytes += getTensorBytes(op.getResult(0).getType());
    }
  }
  if (!training.present)
    return;
  // The forward half: every op the returned loss depends on.
  llvm::DenseSet<Operation *> forward;
  SmallVector<Value> worklist(body.getTerminator()->getOperands());
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (!def || !forward.insert(def).second)
      continue;
    worklist.append(def->operand_begin(), def->operand_end());
  }
  // The backward starts after the last op the loss depends on (ops that
  // prepare backward values from forward ones may be scheduled earlier; they
  // count as part of the forward phase).
  training.backwardStart = 0;
  for (Operation *op : forward)
    if (std::optional<int64_t> index = liveness.getOpIndex(op))
      training.backwardStart = std::max(training.backwardStart, *index + 1);
  if (std::optional<int64_t> peak = [&]() -> std::optional<int64_t> {
        for (Operation &op : body.without_terminator())
          if (liveness.getOpIndex(&op) == report.peakIndex)
            return forward.contains(&op) ? 0 : 1;
        return std::nullopt;
      }())
    training.peakInBackward = *peak == 1;
  // Gradients: the `grad` operand of each update, or in a data-parallel
  // step the input of the collective that gives it (the local gradient);
  // a collective's result in a storage of its own is a communication
  // buffer.
  llvm::SmallSetVector<unsigned, 16> gradientStorages, communicationStorages;
  for (Operation &op : body) {
    Value gradient;
    if (auto sgd = dyn_cast<SGDUpdateOp>(op)) {
      gradient = sgd.getGrad();
      training.accumulationSteps = sgd.getAccumulationSteps();
    } else if (auto adamw = dyn_cast<AdamWUpdateOp>(op)) {
      gradient = adamw.getGrad();
      training.accumulationSteps = adamw.getAccumulationSteps();
    }
    if (!gradient)
      continue;
    if (Operation *collective = gradient.getDefiningOp();
        isa_and_nonnull<AllReduceOp, ReduceScatterOp>(collective)) {
      const Storage &result = liveness.getStorage(gradient);
      gradient = collective->getOperand(0);
      if (result.kind == StorageKind::Arena &&
          result.id != liveness.getStorage(gradient).id)
        communicationStorages.insert(result.id);
    }
    if (liveness.getStorage(gradient).kind == StorageKind::Arena)
      gradientStorages.insert(liveness.getStorage(gradient).id);
  }
  // ZeRO-3: the gathered whole parameters, arena buffers of their own.
  llvm::SetVector<unsigned> gatheredStorages;
  function.walk([&](GatherParameterOp gather) {
    const Storage &storage = liveness.getStorage(gather.getResult());
    if (storage.kind == StorageKind::Arena)
      gatheredStorages.insert(storage.id);
  });
  for (unsigned id : gatheredStorages) {
    const Storage &storage = liveness.getStorages()[id];
    report.dataParallel.gatheredParameterBytes += storage.size;
    if (storage.first <= report.peakIndex && report.peakIndex <= storage.last)
      report.dataParallel.gatheredParameterBytesAtPeak += storage.size;
  }
  for (unsigned id : communicationStorages) {
    const Storage &storage = liveness.getStorages()[id];
    report.dataParallel.communicationBufferBytes += storage.size;
    if (storage.first <= report.peakIndex && report.peakIndex <= storage.last)
      report.dataParallel.communicationBufferBytesAtPeak += storage.size;
  }
  SmallVector<int64_t> profile(report.liveProfile.begin(),
                               report.liveProfile.end());
  for (unsigned id : gradientStorages) {
    const Storage &storage = liveness.getStorages()[id];
    training.gradientBytes += storage.size;
    if (storage.first <= report.peakIndex && report.peakIndex <= storage.last)
      training.gradientBytesAtPeak += storage.size;
    for (int64_t i = storage.last + 1; i < int64_t(profile.size()); ++i)
      profile[i] += storage.size;
  }
  int64_t heldMaxLive = 0;
  for (int64_t bytes : profile)
    heldMaxLive = std::max(heldMaxLive, bytes);
  training.fusedUpdateSavedBytes = heldMaxLive - report.maxLiveBytes;
  // Saved for backward: arena tensors alive across the forward/backward
  // boundary.
  llvm::DenseSet<unsigned> saved;
  for (const Storage &storage : liveness.getStorages()) {
    if (storage.kind != StorageKind::Arena || storage.values.empty())
      continue;
    if (storage.first < training.backwardStart &&
        storage.last >= training.backwardStart) {
      training.savedForBackwardBytes += storage.size;
      saved.insert(storage.id);
    }
  }
  // The picture colours buffers by what they hold.
  for (BufferReport &buffer : report.buffers) {
    if (gradientStorages.contains(buffer.storageId))
      buffer.kind = "gradient";
    else if (communicationStorages.contains(buffer.storageId))
      buffer.kind = "communication";
    else if (saved.contains(buffer.storageId))
      buffer.kind = "saved_for_backward";
  }
  addMixedPrecisionReport(function, liveness, saved,
                          gradientStorages.getArrayRef(), report);
}

/// Fills report.dataParallel for a step memopt-data-parallel rewrote (the
/// communication buffers come from addTrainingReport).
static void addDataParallelReport(func::FuncOp function, MemoryReport &report) {
  auto attr = function->getAttrOfType<DictionaryAttr>("memopt.data_parallel");
  if (!attr)
    return;
  DataParallelReport &dataParallel = report.dataParallel;
  dataParallel.present = true;
  if (auto ranks = attr.getAs<IntegerAttr>("ranks"))
    dataParallel.ranks = ranks.getInt();
  if (auto shard = attr.getAs<StringAttr>("shard"))
    dataParallel.shard = shard.str();
  int64_t ranks = std::max<int64_t>(dataParallel.ranks, 1);
  // Ring volumes: what one rank sends for a tensor of `bytes` bytes.
  auto ring = [&](int64_t bytes, int64_t passes) {
    return passes * bytes * (ranks - 1) / ranks;
  };
  int64_t microSteps = std::max<int64_t>(report.training.accumulationSteps, 1);
  // Gather groups by bucket number, in issue order.
  llvm::SmallDenseMap<int64_t, size_t> gatherGroups;
  for (Operation &op : function.getBody().front()) {
    if (auto bucket = op.getAttrOfType<IntegerAttr>("bucket");
        bucket && isa<GatherParameterOp>(op)) {
      auto [it, added] = gatherGroups.try_emplace(
          bucket.getInt(), dataParallel.gatherGroupBytes.size());
      if (added)
        dataParallel.gatherGroupBytes.push_back(0);
      dataParallel.gatherGroupBytes[it->second] +=
          getTensorBytes(op.getResult(0).getType());
    }
    if (auto bucket = op.getAttrOfType<IntegerAttr>("bucket");
        bucket && bucket.getInt() >= 0 &&
        isa<AllReduceOp, ReduceScatterOp>(op)) {
      size_t index = size_t(bucket.getInt());
      if (dataParallel.bucketBytes.size() <= index)
        dataParallel.bucketBytes.resize(index + 1, 0);
      dataParallel.bucketBytes[index] +=
          getTensorBytes(op.getOperand(0).getType());
    }
    if (auto reduce = dyn_cast<AllReduceOp>(op)) {
      ++dataParallel.allReduces;
      // Gated on the micro-step: once per optimizer step.
      int64_t times = reduce.getMicroStep() ? 1 : microSteps;
      dataParallel.sentBytesPerStep +=
          times * ring(getTensorBytes(reduce.getInput().getType()), 2);
    } else if (auto scatter = dyn_cast<ReduceScatterOp>(op)) {
      ++dataParallel.reduceScatters;
      int64_t times = scatter.getMicroStep() ? 1 : microSteps;
      dataParallel.sentBytesPerStep +=
          times * ring(getTensorBytes(scatter.getInput().getType()), 1);
    } else if (auto gather = dyn_cast<AllGatherOp>(op)) {
      ++dataParallel.allGathers;
      dataParallel.sentBytesPerStep +=
          ring(getTensorBytes(gather.getParam().getType()), 1);
    } else if (auto gather = dyn_cast<GatherParameterOp>(op)) {
      // Every micro-batch gathers (forward and backward).
      ++dataParallel.parameterGathers;
      dataParallel.sentBytesPerStep +=
          microSteps * ring(getTensorBytes(gather.getType()), 1);
    } else if (auto variable = dyn_cast<VariableOp>(op)) {
      if (variable->hasAttr("memopt.shards"))
        dataParallel.unshardedParameterBytes +=
            getTensorBytes(variable.getInitialValueAttr().getType());
      else if (variable.getRole() == "parameter")
        dataParallel.unshardedParameterBytes +=
            getTensorBytes(variable.getType());
    }
    // Sharded updates: what their state would hold whole.
    int64_t shards = 1, paramBytes = 0, states = 0;
    bool accumulator = false;
    if (auto sgd = dyn_cast<SGDUpdateOp>(op)) {
      shards = sgd.getShards();
      paramBytes = getTensorBytes(sgd.getParam().getType());
      states = sgd.getMomentumBuffer() ? 1 : 0;
      accumulator = bool(sgd.getAccumulator());
    } else if (auto adamw = dyn_cast<AdamWUpdateOp>(op)) {
      shards = adamw.getShards();
      paramBytes = getTensorBytes(adamw.getParam().getType());
      states = 2;
      accumulator = bool(adamw.getAccumulator());
    }
    if (shards > 1) {
      dataParallel.unshardedOptimizerStateBytes += states * paramBytes;
      if (accumulator)
        dataParallel.unshardedAccumulatorBytes += paramBytes;
    }
  }
  if (dataParallel.shard == "none" || ranks == 1) {
    dataParallel.unshardedOptimizerStateBytes =
        report.training.optimizerStateBytes;
    dataParallel.unshardedAccumulatorBytes =
        report.training.gradientAccumulatorBytes;
  } else if (dataParallel.shard == "optimizer") {
    dataParallel.unshardedAccumulatorBytes =
        report.training.gradientAccumulatorBytes;
  }
}

/// Fills report.remat from the clones memopt-rematerialize left
/// (`memopt.recomputed`) and its summary (RematSummary.h), pricing every op
/// with the costs the solver chose with.
static void addRematReport(func::FuncOp function,
                           const BufferLiveness &liveness,
                           MemoryReport &report) {
  RematReport &remat = report.remat;
  std::optional<RematSummary> summary = readRematSummary(function);
  RematSummary costs = summary ? *summary : RematSummary();
  for (Operation &op : function.getBody().front().without_terminator()) {
    std::optional<int64_t> index = liveness.getOpIndex(&op);
    if (!index)
      continue;
    int64_t flops = getOpFlops(&op);
    double seconds = estimateRematSeconds(&op, costs);
    if (!op.hasAttr(kRecomputedAttrName)) {
      remat.stepFlops += flops;
      remat.stepSeconds += seconds;
      continue;
    }
    remat.recomputed.push_back({getOpName(&op),
                                op.getName().stripDialect().str(), *index,
                                flops, seconds});
    remat.addedFlops += flops;
    remat.addedSeconds += seconds;
  }
  remat.present = summary || !remat.recomputed.empty();
  if (!remat.present)
    return;
  remat.roofline = Roofline::h100().name;
  remat.costModel = describeRematCosts(costs);
  if (!summary)
    return;
  remat.solverBudgetBytes = summary->budget;
  remat.solverInitialPeakBytes = summary->initialPeak;
  remat.solverPeakBytes = summary->peak;
  remat.unconstrainedArenaBytes = summary->unconstrainedArena;
}

int64_t mlir::memopt::getHostStateBytes(func::FuncOp function) {
  int64_t bytes = 0;
  for (Operation &op : function.getBody().front())
    if (isa<VariableOp>(op) && isHostPlaced(op.getResult(0)))
      bytes += getTensorBytes(op.getResult(0).getType());
  return bytes;
}

int64_t mlir::memopt::getPinnedHostBytes(func::FuncOp function) {
  int64_t bytes = getHostStateBytes(function);
  for (StringRef name : {"memopt.host_staging_size", "memopt.host_pool_size"})
    if (auto size = function->getAttrOfType<IntegerAttr>(name))
      bytes += size.getInt();
  return bytes;
}

MemoryReport mlir::memopt::buildMemoryReport(func::FuncOp function,
                                             const BufferLiveness &liveness,
                                             ArrayRef<int64_t> storageOffsets,
                                             int64_t arenaBytes,
                                             int64_t budgetBytes) {
  MemoryReport report;
  report.budgetBytes = budgetBytes;
  const MemoryStats &stats = liveness.getStats();
  report.function = function.getSymName().str();
  if (auto precision = function->getAttrOfType<StringAttr>("memopt.precision"))
    report.precision = precision.str();
  // Host-placed state (--offload optimizer) is in the liveness analysis's
  // weight storages but not on the device.
  report.hostStateBytes = getHostStateBytes(function);
  report.weightsBytes = stats.weightsBytes - report.hostStateBytes;
  if (auto staging =
          function->getAttrOfType<IntegerAttr>("memopt.host_staging_size"))
    report.hostStagingBytes = staging.getInt();
  report.ioBytes = stats.ioBytes;
  report.outputBytes = stats.outputBytes;
  report.arenaBytes = arenaBytes;
  report.maxLiveBytes = stats.maxLiveBytes;
  report.naiveBytes = stats.naiveBytes;
  report.inPlaceSavedBytes = stats.inPlaceSavedBytes;
  report.viewSavedBytes = stats.viewSavedBytes;
  report.peakIndex = stats.peakIndex;
  report.numSteps = liveness.getNumSteps();
  report.liveProfile.assign(liveness.getLiveProfile().begin(),
                            liveness.getLiveProfile().end());

  for (const Storage &storage : liveness.getStorages()) {
    // Arena storages, and outputs when the plan put them in the arena.
    if (storage.size == 0 || (storage.kind != StorageKind::Arena &&
                              !(storage.kind == StorageKind::Output &&
                                storageOffsets[storage.id] >= 0)))
      continue;
    BufferReport buffer;
    buffer.name =
        storage.workspaceOf
            ? getValueName(storage.workspaceOf->getResult(0)) + ".workspace"
            : getValueName(storage.values.front());
    for (Value value : storage.values)
      buffer.tensors.push_back(getValueName(value));
    buffer.size = storage.size;
    buffer.offset = storageOffsets[storage.id];
    buffer.first = storage.first;
    buffer.last = storage.last;
    buffer.storageId = storage.id;
    if (storage.workspaceOf)
      buffer.kind = "workspace";
    report.buffers.push_back(std::move(buffer));
  }

  // Free blocks of the arena at the peak: the gaps between the buffers
  // alive there.
  std::vector<std::pair<int64_t, int64_t>> used;
  for (const BufferReport &buffer : report.buffers)
    if (buffer.first <= report.peakIndex && report.peakIndex <= buffer.last)
      used.push_back({buffer.offset, buffer.offset + buffer.size});
  llvm::sort(used);
  int64_t cursor = 0, largestFree = 0, totalFree = 0;
  auto addGap = [&](int64_t gap) {
    if (gap <= 0)
      return;
    totalFree += gap;
    largestFree = std::max(largestFree, gap);
  };
  for (auto [begin, end] : used) {
    addGap(begin - cursor);
    cursor = std::max(cursor, end);
  }
  addGap(arenaBytes - cursor);
  report.fragmentationIndex =
      totalFree == 0 ? 0.0 : 100.0 * (1.0 - double(largestFree) / totalFree);
  addTrainingReport(function, liveness, report);
  addDataParallelReport(function, report);
  addRematReport(function, liveness, report);
  if (auto offload =
          function->getAttrOfType<DictionaryAttr>("memopt.offload")) {
    OffloadReport &out = report.offload;
    out.present = true;
    auto integer = [&](StringRef name) {
      auto attr = offload.getAs<IntegerAttr>(name);
      return attr ? attr.getInt() : int64_t(0);
    };
    auto real = [&](StringRef name) {
      auto attr = offload.getAs<FloatAttr>(name);
      return attr ? attr.getValueAsDouble() : 0.0;
    };
    out.values = integer("offloaded");
    out.bytes = integer("bytes");
    out.copySeconds = real("copy_seconds");
    out.exposedSeconds = real("exposed_seconds");
    out.bytesPerSecond = real("bytes_per_second");
    if (auto pool =
            function->getAttrOfType<IntegerAttr>("memopt.host_pool_size"))
      out.hostPoolBytes = pool.getInt();
  }
  return report;
}

llvm::json::Value mlir::memopt::toJson(const MemoryReport &report) {
  llvm::json::Array buffers;
  for (const BufferReport &buffer : report.buffers) {
    llvm::json::Array tensors;
    for (const std::string &tensor : buffer.tensors)
      tensors.push_back(tensor);
    buffers.push_back(llvm::json::Object{{"name", buffer.name},
                                         {"kind", buffer.kind},
                                         {"tensors", std::move(tensors)},
                                         {"size", buffer.size},
                                         {"offset", buffer.offset},
                                         {"first", buffer.first},
                                         {"last", buffer.last}});
  }
  llvm::json::Array profile;
  for (int64_t bytes : report.liveProfile)
    profile.push_back(bytes);
  llvm::json::Object result{{"function", report.function},
                            {"precision", report.precision},
                            {"weights_bytes", report.weightsBytes},
                            {"host_state_bytes", report.hostStateBytes},
                            {"host_staging_bytes", report.hostStagingBytes},
                            {"io_bytes", report.ioBytes},
                            {"output_bytes", report.outputBytes},
                            {"arena_bytes", report.arenaBytes},
                            {"max_live_bytes", report.maxLiveBytes},
                            {"naive_bytes", report.naiveBytes},
                            {"fragmentation_index", report.fragmentationIndex},
                            {"inplace_saved_bytes", report.inPlaceSavedBytes},
                            {"view_saved_bytes", report.viewSavedBytes},
                            {"peak_index", report.peakIndex},
                            {"num_ops", report.numSteps},
                            {"plan_algorithm", report.algorithm},
                            {"plan_seconds", report.planSeconds},
                            {"plan_proved_optimal", report.provedOptimal},
                            {"live_bytes_per_op", std::move(profile)},
                            {"buffers", std::move(buffers)}};
  if (report.budgetBytes > 0)
    result["budget_bytes"] = report.budgetBytes;
  if (report.remat.present) {
    const RematReport &remat = report.remat;
    llvm::json::Array recomputed;
    for (const RematReport::Recomputation &op : remat.recomputed)
      recomputed.push_back(llvm::json::Object{{"name", op.name},
                                              {"op", op.kind},
                                              {"index", op.opIndex},
                                              {"flops", op.flops},
                                              {"seconds", op.seconds}});
    llvm::json::Object object{
        {"recomputed_ops", int64_t(remat.recomputed.size())},
        {"added_flops", remat.addedFlops},
        {"added_seconds", remat.addedSeconds},
        {"step_flops", remat.stepFlops},
        {"step_seconds", remat.stepSeconds},
        {"added_time_fraction",
         remat.stepSeconds > 0 ? remat.addedSeconds / remat.stepSeconds : 0.0},
        {"roofline", remat.roofline},
        {"cost_model", remat.costModel},
        {"solver_budget_bytes", remat.solverBudgetBytes},
        {"solver_initial_peak_bytes", remat.solverInitialPeakBytes},
        {"solver_peak_bytes", remat.solverPeakBytes},
        {"recomputed", std::move(recomputed)}};
    if (remat.unconstrainedArenaBytes > 0) {
      object["unconstrained_arena_bytes"] = remat.unconstrainedArenaBytes;
      object["saved_bytes"] = remat.unconstrainedArenaBytes - report.arenaBytes;
    }
    result["remat"] = std::move(object);
  }
  if (report.offload.present) {
    const OffloadReport &offload = report.offload;
    result["offload"] = llvm::json::Object{
        {"values", offload.values},
        {"bytes", offload.bytes},
        {"host_pool_bytes", offload.hostPoolBytes},
        {"copy_seconds", offload.copySeconds},
        {"hidden_seconds", offload.copySeconds - offload.exposedSeconds},
        {"exposed_seconds", offload.exposedSeconds},
        {"bytes_per_second", offload.bytesPerSecond}};
  }
  if (report.training.present) {
    const TrainingReport &training = report.training;
    result["training"] = llvm::json::Object{
        {"parameters", training.parameterCount},
        {"parameter_bytes", training.parameterBytes},
        {"gradient_bytes", training.gradientBytes},
        {"gradient_bytes_at_peak", training.gradientBytesAtPeak},
        {"optimizer_state_bytes", training.optimizerStateBytes},
        {"statistic_bytes", training.statisticBytes},
        {"constant_bytes", training.constantBytes},
        {"saved_for_backward_bytes", training.savedForBackwardBytes},
        {"fused_update_saved_bytes", training.fusedUpdateSavedBytes},
        {"backward_start_index", training.backwardStart},
        {"gradient_accumulator_bytes", training.gradientAccumulatorBytes},
        {"accumulation_steps", training.accumulationSteps},
        {"peak_phase", training.peakInBackward ? "backward" : "forward"}};
    const MixedPrecisionReport &mixed = training.mixedPrecision;
    if (mixed.present) {
      auto category = [](const PrecisionBytes &bytes) {
        llvm::json::Object byType;
        for (const auto &[type, size] : bytes.byType)
          byType[type] = size;
        return llvm::json::Object{
            {"bytes", bytes.total()},
            {"by_type", std::move(byType)},
            {"f32_equivalent_bytes", bytes.f32Equivalent},
            {"saved_bytes", bytes.f32Equivalent - bytes.total()}};
      };
      llvm::json::Object object{
          {"precision", mixed.precision},
          {"saved_for_backward", category(mixed.savedForBackward)},
          {"gradients", category(mixed.gradients)},
          {"weight_copies", category(mixed.weightCopies)},
          {"weight_copy_count", mixed.weightCopyCount},
          {"persistent_state", category(mixed.persistentState)},
          {"weight_casts",
           llvm::json::Object{{"policy", mixed.weightCastPolicy},
                              {"decision", mixed.weightCastDecision},
                              {"held_bytes", mixed.weightCastHeldBytes},
                              {"recast_seconds", mixed.weightCastSeconds},
                              {"step_seconds", mixed.stepSeconds}}}};
      if (mixed.lossScaling)
        object["loss_scaling"] =
            llvm::json::Object{{"initial_scale", mixed.initialLossScale},
                               {"growth_factor", mixed.growthFactor},
                               {"backoff_factor", mixed.backoffFactor},
                               {"growth_interval", mixed.growthInterval}};
      else
        object["loss_scaling"] = nullptr;
      (*result.getObject("training"))["mixed_precision"] = std::move(object);
    }
  }
  if (report.dataParallel.present) {
    const DataParallelReport &dataParallel = report.dataParallel;
    const TrainingReport &training = report.training;
    result["data_parallel"] = llvm::json::Object{
        {"ranks", dataParallel.ranks},
        {"shard", dataParallel.shard},
        {"all_reduces", dataParallel.allReduces},
        {"reduce_scatters", dataParallel.reduceScatters},
        {"all_gathers", dataParallel.allGathers},
        {"parameter_gathers", dataParallel.parameterGathers},
        {"per_rank",
         llvm::json::Object{
             {"parameter_bytes", training.parameterBytes},
             {"gradient_bytes", training.gradientBytes},
             {"optimizer_state_bytes", training.optimizerStateBytes},
             {"gradient_accumulator_bytes", training.gradientAccumulatorBytes},
             {"communication_buffer_bytes",
              dataParallel.communicationBufferBytes},
             {"communication_buffer_bytes_at_peak",
              dataParallel.communicationBufferBytesAtPeak},
             {"gathered_parameter_bytes", dataParallel.gatheredParameterBytes},
             {"gathered_parameter_bytes_at_peak",
              dataParallel.gatheredParameterBytesAtPeak},
             {"arena_bytes", report.arenaBytes},
             {"weights_bytes", report.weightsBytes}}},
        {"unsharded_parameter_bytes", dataParallel.unshardedParameterBytes},
        {"unsharded_optimizer_state_bytes",
         dataParallel.unshardedOptimizerStateBytes},
        {"unsharded_gradient_accumulator_bytes",
         dataParallel.unshardedAccumulatorBytes},
        {"sent_bytes_per_step", dataParallel.sentBytesPerStep},
        {"buckets", llvm::json::Array(dataParallel.bucketBytes)},
        {"gather_groups", llvm::json::Array(dataParallel.gatherGroupBytes)}};
  }
  return result;
}

static std::string formatBytes(int64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB"};
  double value = bytes;
  int unit = 0;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  if (unit == 0)
    os << bytes << " B";
  else
    os << llvm::format("%.2f ", value) << units[unit];
  return text;
}

static std::string formatSeconds(double seconds) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (seconds >= 1e-3)
    os << llvm::format("%.2f ms", seconds * 1e3);
  else
    os << llvm::format("%.1f us", seconds * 1e6);
  return text;
}

static void printRematReport(const MemoryReport &report,
                             llvm::raw_ostream &os) {
  const RematReport &remat = report.remat;
  os << "  rematerialization: " << remat.recomputed.size()
     << " ops recomputed, +"
     << llvm::format("%.3g", double(remat.addedFlops) / 1e9) << " GFLOP, +"
     << formatSeconds(remat.addedSeconds)
     << llvm::format(" (%.2f%% of the ",
                     remat.stepSeconds > 0
                         ? 100.0 * remat.addedSeconds / remat.stepSeconds
                         : 0.0)
     << formatSeconds(remat.stepSeconds) << " step on "
     << (remat.costModel == "roofline"
             ? remat.roofline
             : remat.costModel + " (" + remat.roofline + ")")
     << ")\n";
  if (remat.unconstrainedArenaBytes > 0)
    os << "    arena " << formatBytes(remat.unconstrainedArenaBytes) << " -> "
       << formatBytes(report.arenaBytes) << " ("
       << formatBytes(remat.unconstrainedArenaBytes - report.arenaBytes)
       << " saved)\n";
  if (remat.recomputed.empty())
    return;
  os << "    recomputed:";
  size_t shown = std::min<size_t>(remat.recomputed.size(), 12);
  for (size_t i = 0; i < shown; ++i)
    os << (i ? ", " : " ") << remat.recomputed[i].name << " ("
       << remat.recomputed[i].kind << ")";
  if (shown < remat.recomputed.size())
    os << " and " << remat.recomputed.size() - shown << " more";
  os << "\n";
}

void mlir::memopt::printTextReport(const MemoryReport &report,
                                   llvm::raw_ostream &os) {
  auto ratio = [&](int64_t bytes) {
    return report.maxLiveBytes == 0
               ? 1.0
               : double(bytes) / double(report.maxLiveBytes);
  };
  os << "memory report of @" << report.function << " (" << report.numSteps
     << " ops"
     << (report.precision == "f32"
             ? ""
             : ", " + report.precision + " mixed precision")
     << ")\n";
  os << "  weights      "
     << llvm::right_justify(formatBytes(report.weightsBytes), 12) << "\n";
  if (report.hostStateBytes)
    os << "  host state   "
       << llvm::right_justify(formatBytes(report.hostStateBytes), 12)
       << "  (pinned host memory: f32 masters and optimizer state, "
          "--offload optimizer; plus "
       << formatBytes(report.hostStagingBytes) << " of gradient staging)\n";
  os << "  inputs+outputs "
     << llvm::right_justify(formatBytes(report.ioBytes), 10) << "  (outputs "
     << formatBytes(report.outputBytes) << ")\n";
  os << "  arena        "
     << llvm::right_justify(formatBytes(report.arenaBytes), 12)
     << llvm::format("  (%.3fx max-live, plan: %s%s, %.3f s)",
                     ratio(report.arenaBytes), report.algorithm.c_str(),
                     report.provedOptimal ? ", optimal" : "",
                     report.planSeconds)
     << "\n";
  os << "  max-live     "
     << llvm::right_justify(formatBytes(report.maxLiveBytes), 12) << "  (at op "
     << report.peakIndex << ")\n";
  os << "  naive        "
     << llvm::right_justify(formatBytes(report.naiveBytes), 12)
     << llvm::format("  (%.2fx max-live)", ratio(report.naiveBytes)) << "\n";
  os << "  in-place saved "
     << llvm::right_justify(formatBytes(report.inPlaceSavedBytes), 10)
     << ", views saved " << formatBytes(report.viewSavedBytes) << "\n";
  os << llvm::format("  fragmentation at peak %.2f%%\n",
                     report.fragmentationIndex);
  if (report.budgetBytes > 0)
    os << "  budget       "
       << llvm::right_justify(formatBytes(report.budgetBytes), 12)
       << llvm::format("  (arena %.1f%% of it)", 100.0 *
                                                     double(report.arenaBytes) /
                                                     double(report.budgetBytes))
       << "\n";
  if (report.remat.present)
    printRematReport(report, os);
  if (report.offload.present) {
    const OffloadReport &offload = report.offload;
    os << "  offload: " << offload.values << " activations, "
       << formatBytes(offload.bytes) << " to the host (pinned pool "
       << formatBytes(offload.hostPoolBytes) << "), copies "
       << formatSeconds(offload.copySeconds) << ", "
       << formatSeconds(offload.copySeconds - offload.exposedSeconds)
       << " hidden under compute"
       << llvm::format(" (%.0f GB/s per direction)",
                       offload.bytesPerSecond / 1e9)
       << "\n";
  }
  if (report.training.present) {
    const TrainingReport &training = report.training;
    os << "  training step (backward from op " << training.backwardStart
       << ", peak in the " << (training.peakInBackward ? "backward" : "forward")
       << ")\n";
    os << "    parameters       "
       << llvm::right_justify(formatBytes(training.parameterBytes), 12) << " ("
       << training.parameterCount << " trained elements)\n";
    os << "    optimizer state  "
       << llvm::right_justify(formatBytes(training.optimizerStateBytes), 12)
       << "\n";
    os << "    BN statistics    "
       << llvm::right_justify(formatBytes(training.statisticBytes), 12) << "\n";
    os << "    constants        "
       << llvm::right_justify(formatBytes(training.constantBytes), 12)
       << "  (frozen weights, normalization statistics)\n";
    os << "    gradients        "
       << llvm::right_justify(formatBytes(training.gradientBytes), 12)
       << "  in the arena, " << formatBytes(training.gradientBytesAtPeak)
       << " alive at the peak\n";
    os << "    saved for backward "
       << llvm::right_justify(formatBytes(training.savedForBackwardBytes), 10)
       << "\n";
    os << "    fused update saved "
       << llvm::right_justify(formatBytes(training.fusedUpdateSavedBytes), 10)
       << "  (max-live if every gradient lived to the end of the step)\n";
    if (training.accumulationSteps > 1)
      os << "    accumulators     "
         << llvm::right_justify(formatBytes(training.gradientAccumulatorBytes),
                                12)
         << (training.gradientAccumulatorsOnHost ? "  (host memory"
                                                 : "  (weight region")
         << ": gradients summed over " << training.accumulationSteps
         << " micro-batches)\n";
    const MixedPrecisionReport &mixed = training.mixedPrecision;
    if (mixed.present) {
      os << "    mixed precision (" << mixed.precision
         << "): by type, and what f32 would take\n";
      auto line = [&](StringRef name, const PrecisionBytes &bytes) {
        os << "      " << llvm::left_justify(name, 20);
        for (const auto &[type, size] : bytes.byType)
          os << " " << type << " " << formatBytes(size);
        os << "  (f32: " << formatBytes(bytes.f32Equivalent) << ", saved "
           << formatBytes(bytes.f32Equivalent - bytes.total()) << ")\n";
      };
      line("saved for backward", mixed.savedForBackward);
      line("gradients", mixed.gradients);
      line("state (weights)", mixed.persistentState);
      os << "      weight copies        " << mixed.weightCopyCount << " in "
         << formatBytes(mixed.weightCopies.total()) << " of arena buffers";
      if (!mixed.weightCastDecision.empty())
        os << "; memopt-weight-casts: " << mixed.weightCastDecision << " ("
           << mixed.weightCastPolicy << ")";
      os << "\n";
      if (mixed.lossScaling)
        os << "      loss scaling         dynamic, from "
           << llvm::format("%g", mixed.initialLossScale) << " (x"
           << llvm::format("%g", mixed.growthFactor) << " after "
           << mixed.growthInterval << " clean steps, x"
           << llvm::format("%g", mixed.backoffFactor) << " on overflow)\n";
      else
        os << "      loss scaling         none\n";
    }
  }
  if (report.dataParallel.present) {
    const DataParallelReport &dataParallel = report.dataParallel;
    os << "  data parallel: " << dataParallel.ranks << " ranks, shard "
       << dataParallel.shard << " (" << dataParallel.allReduces
       << " all-reduces, " << dataParallel.reduceScatters
       << " reduce-scatters, " << dataParallel.allGathers << " all-gathers";
    if (dataParallel.parameterGathers)
      os << ", " << dataParallel.parameterGathers << " parameter gathers";
    os << "); per rank:\n";
    if (dataParallel.shard == "parameters")
      os << "    parameters       "
         << llvm::right_justify(formatBytes(report.training.parameterBytes), 12)
         << "  of " << formatBytes(dataParallel.unshardedParameterBytes)
         << " unsharded; gathered "
         << formatBytes(dataParallel.gatheredParameterBytes)
         << " in the arena, "
         << formatBytes(dataParallel.gatheredParameterBytesAtPeak)
         << " alive at the peak\n";
    os << "    optimizer state  "
       << llvm::right_justify(formatBytes(report.training.optimizerStateBytes),
                              12)
       << "  of " << formatBytes(dataParallel.unshardedOptimizerStateBytes)
       << " unsharded\n";
    if (report.training.accumulationSteps > 1)
      os << "    accumulators     "
         << llvm::right_justify(
                formatBytes(report.training.gradientAccumulatorBytes), 12)
         << "  of " << formatBytes(dataParallel.unshardedAccumulatorBytes)
         << " unsharded\n";
    os << "    communication    "
       << llvm::right_justify(
              formatBytes(dataParallel.communicationBufferBytes), 12)
       << "  in the arena, "
       << formatBytes(dataParallel.communicationBufferBytesAtPeak)
       << " alive at the peak\n";
    os << "    sent per step    "
       << llvm::right_justify(formatBytes(dataParallel.sentBytesPerStep), 12)
       << "  (ring all-reduce / reduce-scatter / all-gather volumes)\n";
    if (!dataParallel.bucketBytes.empty()) {
      os << "    buckets          "
         << llvm::right_justify(std::to_string(dataParallel.bucketBytes.size()),
                                12)
         << "  overlapping the backward:";
      for (auto [index, bytes] : llvm::enumerate(dataParallel.bucketBytes))
        os << (index ? ", " : " ") << formatBytes(bytes);
      os << "\n";
    }
    if (!dataParallel.gatherGroupBytes.empty()) {
      os << "    gather groups    "
         << llvm::right_justify(
                std::to_string(dataParallel.gatherGroupBytes.size()), 12)
         << "  prefetched one ahead:";
      for (auto [index, bytes] : llvm::enumerate(dataParallel.gatherGroupBytes))
        os << (index ? ", " : " ") << formatBytes(bytes);
      os << "\n";
    }
  }
  std::vector<const BufferReport *> largest;
  for (const BufferReport &buffer : report.buffers)
    largest.push_back(&buffer);
  llvm::stable_sort(largest, [](const BufferReport *a, const BufferReport *b) {
    return a->size > b->size;
  });
  size_t shown = std::min<size_t>(largest.size(), 10);
  os << "  largest buffers (" << shown << " of " << largest.size() << "):\n";
  os << "    " << llvm::left_justify("name", 32)
     << llvm::right_justify("size", 12) << llvm::right_justify("offset", 12)
     << llvm::right_justify("ops", 14) << "  tensors\n";
  for (const BufferReport *buffer : ArrayRef(largest).take_front(shown)) {
    std::string range =
        std::to_string(buffer->first) + ".." + std::to_string(buffer->last);
    os << "    " << llvm::left_justify(buffer->name, 32)
       << llvm::right_justify(formatBytes(buffer->size), 12)
       << llvm::right_justify(std::to_string(buffer->offset), 12)
       << llvm::right_justify(range, 14) << "  " << buffer->tensors.size()
       << "\n";
  }
}

/// Escapes text for XML/HTML.
static std::string escape(StringRef text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '&':
      out += "&amp;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

namespace {
/// Colours of the timeline's rectangles by BufferReport::kind.
struct BufferStyle {
  const char *fill, *stroke, *label;
};
const BufferStyle &styleOf(StringRef kind) {
  static const BufferStyle saved{"#fdae6b", "#e6550d", "saved for backward"},
      gradient{"#a1d99b", "#31a354", "gradient"},
      workspace{"#d9d9d9", "#969696", "workspace"},
      communication{"#bcbddc", "#756bb1", "communication"},
      activation{"#9ecae1", "#3182bd", "other"};
  if (kind == "saved_for_backward")
    return saved;
  if (kind == "communication")
    return communication;
  if (kind == "gradient")
    return gradient;
  if (kind == "workspace")
    return workspace;
  return activation;
}
} // namespace

void mlir::memopt::writeSvgTimeline(const MemoryReport &report,
                                    llvm::raw_ostream &os) {
  // Each arena buffer is a rectangle: x spans its live op range, y its
  // planned bytes. The live-bytes curve, the arena line and the max-live
  // line sit on top; the largest buffers carry their names.
  const double width = 1000, height = 480, left = 80, right = 20, top = 40,
               bottom = 50;
  double plotWidth = width - left - right, plotHeight = height - top - bottom;
  double steps = std::max<int64_t>(report.numSteps, 1);
  double maxBytes =
      std::max<double>({double(report.arenaBytes), double(report.maxLiveBytes),
                        double(report.budgetBytes), 1.0});
  auto x = [&](double step) { return left + step / steps * plotWidth; };
  auto y = [&](double bytes) {
    return top + plotHeight - bytes / maxBytes * plotHeight;
  };
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width
     << "\" height=\"" << height << "\" font-family=\"sans-serif\" "
     << "font-size=\"11\">\n";
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  os << "<text x=\"" << left << "\" y=\"20\" font-size=\"14\">memory of @"
     << escape(report.function) << ": arena " << formatBytes(report.arenaBytes)
     << ", max-live " << formatBytes(report.maxLiveBytes);
  if (report.budgetBytes > 0)
    os << ", budget " << formatBytes(report.budgetBytes);
  os << "</text>\n";
  if (report.remat.present) {
    const RematReport &remat = report.remat;
    os << "<text x=\"" << left << "\" y=\"34\" fill=\"#de2d26\">"
       << remat.recomputed.size() << " ops recomputed (red ticks): +"
       << llvm::format("%.3g", double(remat.addedFlops) / 1e9) << " GFLOP, +"
       << formatSeconds(remat.addedSeconds)
       << llvm::format(" (%.2f%% of the step)",
                       remat.stepSeconds > 0
                           ? 100.0 * remat.addedSeconds / remat.stepSeconds
                           : 0.0);
    if (remat.unconstrainedArenaBytes > 0)
      os << ", arena " << formatBytes(remat.unconstrainedArenaBytes) << " -> "
         << formatBytes(report.arenaBytes);
    os << "</text>\n";
  }
  for (const BufferReport &buffer : report.buffers) {
    double x0 = x(buffer.first), x1 = x(buffer.last + 1);
    double y0 = y(buffer.offset + buffer.size), y1 = y(buffer.offset);
    const BufferStyle &style = styleOf(buffer.kind);
    os << llvm::format("<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
                       "height=\"%.2f\" fill=\"%s\" stroke=\"%s\" "
                       "stroke-width=\"0.3\" class=\"%s\"><title>",
                       x0, y0, std::max(x1 - x0, 0.5), std::max(y1 - y0, 0.5),
                       style.fill, style.stroke, buffer.kind.c_str())
       << escape(buffer.name) << " " << formatBytes(buffer.size) << " @"
       << buffer.offset << " ops " << buffer.first << ".." << buffer.last
       << " (" << style.label << ")</title></rect>\n";
  }
  os << "<polyline fill=\"none\" stroke=\"#e6550d\" stroke-width=\"1.2\" "
        "points=\"";
  for (auto [step, bytes] : llvm::enumerate(report.liveProfile))
    os << llvm::format("%.2f,%.2f %.2f,%.2f ", x(step), y(bytes), x(step + 1),
                       y(bytes));
  os << "\"/>\n";
  auto hline = [&](int64_t bytes, const char *color, const std::string &label) {
    os << llvm::format("<line x1=\"%.2f\" x2=\"%.2f\" y1=\"%.2f\" y2=\"%.2f\" "
                       "stroke=\"%s\" stroke-dasharray=\"6,3\"/>\n",
                       left, left + plotWidth, y(bytes), y(bytes), color);
    os << llvm::format("<text x=\"%.2f\" y=\"%.2f\" fill=\"%s\" "
                       "text-anchor=\"end\">",
                       left + plotWidth, y(bytes) - 3, color)
       << escape(label) << "</text>\n";
  };
  if (report.training.present) {
    double divider = x(report.training.backwardStart);
    os << llvm::format("<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
                       "height=\"%.2f\" fill=\"#fdd0a2\" opacity=\"0.25\"/>\n",
                       divider, top, left + plotWidth - divider, plotHeight);
    os << llvm::format("<line x1=\"%.2f\" x2=\"%.2f\" y1=\"%.2f\" "
                       "y2=\"%.2f\" stroke=\"#636363\"/>\n",
                       divider, divider, top, top + plotHeight);
    os << llvm::format("<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\">"
                       "forward</text><text x=\"%.2f\" y=\"%.2f\">"
                       "backward + update</text>\n",
                       divider - 4, top + 12, divider + 4, top + 12);
    os << llvm::format("<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\" "
                       "class=\"boundary\">",
                       divider - 4, top + 26)
       << "saved for backward "
       << escape(formatBytes(report.training.savedForBackwardBytes))
       << "</text>\n";
    // Legend: what the colours mean.
    double legendY = 24;
    double legendX = left + plotWidth - 330;
    SmallVector<StringRef> kinds = {"activation", "saved_for_backward",
                                    "gradient"};
    if (report.dataParallel.communicationBufferBytes > 0) {
      kinds.push_back("communication");
      legendX -= 110;
    }
    for (StringRef kind : kinds) {
      const BufferStyle &style = styleOf(kind);
      os << llvm::format("<rect x=\"%.2f\" y=\"%.2f\" width=\"10\" "
                         "height=\"10\" fill=\"%s\" stroke=\"%s\"/>"
                         "<text x=\"%.2f\" y=\"%.2f\">%s</text>\n",
                         legendX, legendY - 9, style.fill, style.stroke,
                         legendX + 13, legendY, style.label);
      legendX += 110;
    }
  }
  if (report.budgetBytes > 0)
    hline(report.budgetBytes, "#de2d26",
          "budget " + formatBytes(report.budgetBytes));
  for (const RematReport::Recomputation &op : report.remat.recomputed)
    os << llvm::format("<line x1=\"%.2f\" x2=\"%.2f\" y1=\"%.2f\" "
                       "y2=\"%.2f\" stroke=\"#de2d26\" "
                       "stroke-width=\"1.5\"><title>",
                       x(op.opIndex + 0.5), x(op.opIndex + 0.5),
                       top + plotHeight, top + plotHeight + 8)
       << "recomputed " << escape(op.name) << " (" << escape(op.kind)
       << ")</title></line>\n";
  hline(report.arenaBytes, "#31a354",
        "arena " + formatBytes(report.arenaBytes));
  hline(report.maxLiveBytes, "#756bb1",
        "max-live " + formatBytes(report.maxLiveBytes));
  std::vector<const BufferReport *> largest;
  for (const BufferReport &buffer : report.buffers)
    largest.push_back(&buffer);
  llvm::stable_sort(largest, [](const BufferReport *a, const BufferReport *b) {
    return a->size > b->size;
  });
  for (const BufferReport *buffer : ArrayRef(largest).take_front(5))
    os << llvm::format("<text x=\"%.2f\" y=\"%.2f\">", x(buffer->first) + 2,
                       y(buffer->offset + buffer->size / 2.0) + 4)
       << escape(buffer->name) << "</text>\n";
  // Axes.
  os << llvm::format("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" "
                     "stroke=\"black\"/>\n",
                     left, top + plotHeight, left + plotWidth,
                     top + plotHeight);
  os << llvm::format("<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" "
                     "stroke=\"black\"/>\n",
                     left, top, left, top + plotHeight);
  os << llvm::format("<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">op "
                     "index (0..%lld)</text>\n",
                     left + plotWidth / 2, height - 15,
                     (long long)report.numSteps);
  os << llvm::format("<text x=\"15\" y=\"%.2f\" transform=\"rotate(-90 15 "
                     "%.2f)\" text-anchor=\"middle\">bytes (0..",
                     top + plotHeight / 2, top + plotHeight / 2)
     << formatBytes(int64_t(maxBytes)) << ")</text>\n";
  os << "</svg>\n";
}

void mlir::memopt::writeHtmlReport(const MemoryReport &report,
                                   llvm::raw_ostream &os) {
  os << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>memopt "
        "memory report: "
     << escape(report.function)
     << "</title>\n<style>body{font-family:sans-serif;margin:2em}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;"
        "padding:2px 8px;text-align:right}td:first-child{text-align:left}"
        "</style></head><body>\n";
  os << "<h1>memory report of @" << escape(report.function) << "</h1>\n<pre>";
  std::string text;
  llvm::raw_string_ostream textStream(text);
  printTextReport(report, textStream);
  os << escape(text) << "</pre>\n";
  writeSvgTimeline(report, os);
  os << "<h2>buffers</h2>\n<table><tr><th>name</th><th>size</th><th>offset"
        "</th><th>first</th><th>last</th><th>tensors</th></tr>\n";
  for (const BufferReport &buffer : report.buffers) {
    os << "<tr><td>" << escape(buffer.name) << "</td><td>" << buffer.size
       << "</td><td>" << buffer.offset << "</td><td>" << buffer.first
       << "</td><td>" << buffer.last << "</td><td>";
    llvm::interleave(
        buffer.tensors, os, [&](const std::string &t) { os << escape(t); },
        ", ");
    os << "</td></tr>\n";
  }
  os << "</table>\n</body></html>\n";
}
