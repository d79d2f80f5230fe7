//===- BufferLiveness.cpp - storages, live ranges, max-live ---------------===//

#include "memopt/Analysis/BufferLiveness.h"
#include "memopt/Dialect/MemOpt/IR/HostUpdates.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::memopt;

int64_t mlir::memopt::promisedWorkspace(Operation *op, int64_t wish) {
  auto cost = dyn_cast<CostOpInterface>(op);
  if (!cost || wish <= 0)
    return 0;
  if (int64_t floor = cost.getWorkspaceFloor(); floor >= 0)
    return std::min(floor, wish);
  return cost.isWorkspaceOptional() ? 0 : std::min(wish, kWorkspaceFloorBytes);
}

StringRef mlir::memopt::stringifyStorageKind(StorageKind kind) {
  switch (kind) {
  case StorageKind::Arena:
    return "arena";
  case StorageKind::Weight:
    return "weight";
  case StorageKind::Input:
    return "input";
  case StorageKind::Output:
    return "output";
  }
  llvm_unreachable("unknown storage kind");
}

SmallVector<Operation *>
mlir::memopt::getExecutionOrder(func::FuncOp function) {
  SmallVector<Operation *> order;
  for (Operation &op : function.getBody().front().without_terminator())
    if (!isWeightRegionOp(&op))
      order.push_back(&op);
  return order;
}

static bool isAliasingView(Operation *op) {
  auto behavior = dyn_cast<BufferBehaviorOpInterface>(op);
  return behavior && behavior.isAliasingView();
}

namespace {
/// Storages under construction: values grouped by views, then merged by
/// in-place decisions. Shared by the analysis and by `decideInPlace`, so the
/// two cannot disagree on what a storage is.
struct StorageBuilder {
  SmallVector<Storage> storages;
  DenseMap<Value, unsigned> storageOf;
  DenseMap<Operation *, int64_t> opIndex;
  /// Storage ids merged away point at the storage that absorbed them.
  SmallVector<unsigned> forward;
  /// The last use of each storage by an op other than a
  /// memopt.wait_collectives (the in-place rule of a collective, canReuse).
  DenseMap<unsigned, int64_t> lastOutsideWaits;

  unsigned find(unsigned id) {
    while (forward[id] != id)
      id = forward[id] = forward[forward[id]];
    return id;
  }
  unsigned storageIdOf(Value value) { return find(storageOf.lookup(value)); }

  unsigned create(Value root, StorageKind kind, int64_t first) {
    unsigned id = storages.size();
    Storage storage;
    storage.id = id;
    storage.kind = kind;
    storage.size = getTensorBytes(root.getType());
    storage.first = first;
    storage.last = first;
    storage.values.push_back(root);
    storages.push_back(std::move(storage));
    forward.push_back(id);
    storageOf[root] = id;
    return id;
  }

  /// Scratch bytes live during the op at `index` only.
  void createWorkspace(Operation *op, int64_t bytes, int64_t index) {
    unsigned id = storages.size();
    Storage storage;
    storage.id = id;
    storage.size = promisedWorkspace(op, bytes);
    storage.maxSize = bytes;
    storage.first = storage.last = index;
    storage.workspaceOf = op;
    storages.push_back(std::move(storage));
    forward.push_back(id);
  }

  void join(Value value, unsigned id) {
    id = find(id);
    storages[id].values.push_back(value);
    storageOf[value] = id;
  }

  /// Moves every value of storage `from` into `into`.
  void merge(unsigned from, unsigned into) {
    from = find(from);
    into = find(into);
    if (from == into)
      return;
    Storage &target = storages[into];
    Storage &source = storages[from];
    target.values.append(source.values.begin(), source.values.end());
    target.first = std::min(target.first, source.first);
    target.last = std::max(target.last, source.last);
    if (source.kind == StorageKind::Output) {
      target.kind = StorageKind::Output;
      target.ioIndex = source.ioIndex;
    }
    source.values.clear();
    forward[from] = into;
    int64_t &last = lastOutsideWaits[into];
    last = std::max(last, lastOutsideWaits.lookup(from));
  }

  /// Builds view-only storages (no in-place yet) with live ranges.
  void build(func::FuncOp function, ArrayRef<Operation *> order) {
    for (BlockArgument argument : function.getArguments()) {
      unsigned id = create(argument, StorageKind::Input, -1);
      storages[id].ioIndex = argument.getArgNumber();
    }
    for (Operation &op : function.getBody().front())
      if (isWeightRegionOp(&op))
        create(op.getResult(0), StorageKind::Weight, -1);
    for (auto [index, op] : llvm::enumerate(order)) {
      opIndex[op] = index;
      if (isAliasingView(op)) {
        join(op->getResult(0), storageIdOf(op->getOperand(0)));
        continue;
      }
      for (Value result : op->getResults())
        create(result, StorageKind::Arena, index);
      if (auto cost = dyn_cast<CostOpInterface>(op))
        if (int64_t bytes = cost.getWorkspaceBytes(); bytes > 0)
          createWorkspace(op, bytes, index);
    }
    int64_t numSteps = order.size();
    for (auto [index, op] : llvm::enumerate(order))
      for (Value operand : op->getOperands()) {
        unsigned id = storageIdOf(operand);
        Storage &storage = storages[id];
        storage.last = std::max<int64_t>(storage.last, index);
        if (!isa<WaitCollectivesOp>(op)) {
          int64_t &last = lastOutsideWaits[id];
          last = std::max<int64_t>(last, index);
        }
      }
    // --offload optimizer: the compute stream waits for an offloaded
    // gradient's copy to the host only at the next offloaded update
    // (lib/Runtime/Cuda/HostOptimizer.cpp), so the copy overlaps the ops in
    // between; the gradient's bytes stay allocated until then (to the end of
    // the step for the last one). HostUpdates.h says which gradients.
    int64_t nextDeferred = numSteps - 1;
    for (int64_t index = numSteps - 1; index >= 0; --index) {
      Value grad = getDeferredOffloadGradient(order[index]);
      if (!grad)
        continue;
      Storage &storage = storages[storageIdOf(grad)];
      storage.last = std::max<int64_t>(storage.last, nextDeferred);
      nextDeferred = index;
    }
    auto returnOp =
        cast<func::ReturnOp>(function.getBody().front().getTerminator());
    for (auto [number, value] : llvm::enumerate(returnOp.getOperands())) {
      Storage &storage = storages[storageIdOf(value)];
      storage.last = numSteps;
      if (storage.kind == StorageKind::Arena) {
        storage.kind = StorageKind::Output;
        storage.ioIndex = number;
      }
    }
  }

  /// True if the operand storage `id` dies at `op`: `op` is its last use,
  /// or its last use but for the memopt.wait_collectives that also wait for
  /// `op`'s result (an asynchronous all-reduce written over its input: the
  /// one buffer is in flight until the wait either way). Another op may not
  /// write over a buffer that a wait keeps alive.
  bool diesAt(unsigned id, Operation *op) {
    const Storage &storage = storages[id];
    int64_t index = opIndex.lookup(op);
    if (storage.last == index)
      return true;
    if (lastOutsideWaits.lookup(id) != index || op->getNumResults() != 1)
      return false;
    for (Value value : storage.values)
      for (Operation *user : value.getUsers())
        if (isa<WaitCollectivesOp>(user) &&
            !llvm::is_contained(user->getOperands(), op->getResult(0)))
          return false;
    return true;
  }

  /// True if `op` may write result 0 over operand `operandIndex` now.
  bool canReuse(Operation *op, unsigned operandIndex) {
    auto behavior = dyn_cast<BufferBehaviorOpInterface>(op);
    if (!behavior || !behavior.canWriteInPlace(operandIndex))
      return false;
    unsigned operandId = storageIdOf(op->getOperand(operandIndex));
    const Storage &operand = storages[operandId];
    const Storage &result = storages[storageIdOf(op->getResult(0))];
    return operand.kind == StorageKind::Arena && diesAt(operandId, op) &&
           operand.size == getTensorBytes(op->getResult(0).getType()) &&
           result.kind == StorageKind::Arena && result.size == operand.size;
  }
};
} // namespace

void BufferLiveness::analyze(func::FuncOp function, ArrayRef<Operation *> order,
                             const DenseMap<Operation *, unsigned> &inPlace) {
  StorageBuilder builder;
  builder.build(function, order);
  for (Operation *op : order) {
    auto it = inPlace.find(op);
    if (it == inPlace.end())
      continue;
    stats.inPlaceSavedBytes += getTensorBytes(op->getResult(0).getType());
    builder.merge(builder.storageIdOf(op->getResult(0)),
                  builder.storageIdOf(op->getOperand(it->second)));
  }

  numSteps = order.size();
  opIndex = std::move(builder.opIndex);
  // Renumber the surviving storages densely, in creation order.
  DenseMap<unsigned, unsigned> newId;
  for (auto [id, storage] : llvm::enumerate(builder.storages)) {
    if (builder.find(id) != id)
      continue;
    newId[id] = storages.size();
    storage.id = storages.size();
    storages.push_back(std::move(storage));
  }
  for (auto &[value, id] : builder.storageOf)
    storageOf[value] = newId.lookup(builder.find(id));
  for (const Storage &storage : storages)
    if (storage.workspaceOf) {
      workspaceOf[storage.workspaceOf] = storage.id;
      stats.naiveBytes += storage.size;
    }

  liveProfile.assign(numSteps, 0);
  bool outputsInArena = function->hasAttr(kOutputsInArenaAttrName);
  for (const Storage &storage : storages) {
    switch (storage.kind) {
    case StorageKind::Weight:
      stats.weightsBytes += storage.size;
      break;
    case StorageKind::Output:
      stats.ioBytes += storage.size;
      stats.outputBytes += storage.size;
      if (!outputsInArena)
        break;
      for (int64_t step = storage.first; step < numSteps; ++step)
        liveProfile[step] += storage.size;
      break;
    case StorageKind::Input:
      stats.ioBytes += storage.size;
      break;
    case StorageKind::Arena:
      for (int64_t step = storage.first;
           step <= std::min(storage.last, numSteps - 1); ++step)
        liveProfile[step] += storage.size;
      break;
    }
  }
  for (Operation *op : order) {
    if (isAliasingView(op)) {
      stats.viewSavedBytes += getTensorBytes(op->getResult(0).getType());
      continue;
    }
    for (Value result : op->getResults())
      if (getStorage(result).kind != StorageKind::Output)
        stats.naiveBytes += getTensorBytes(result.getType());
  }
  for (auto [step, bytes] : llvm::enumerate(liveProfile))
    if (bytes > stats.maxLiveBytes) {
      stats.maxLiveBytes = bytes;
      stats.peakIndex = step;
    }
}

BufferLiveness::BufferLiveness(func::FuncOp function) {
  SmallVector<Operation *> order = getExecutionOrder(function);
  DenseMap<Operation *, unsigned> inPlace;
  for (Operation *op : order)
    if (auto attr = op->getAttrOfType<IntegerAttr>(kInPlaceAttrName))
      inPlace[op] = attr.getInt();
  analyze(function, order, inPlace);
}

BufferLiveness::BufferLiveness(func::FuncOp function,
                               ArrayRef<Operation *> order,
                               const DenseMap<Operation *, unsigned> &inPlace) {
  analyze(function, order, inPlace);
}

const Storage &BufferLiveness::getStorage(Value value) const {
  auto it = storageOf.find(value);
  assert(it != storageOf.end() && "value has no storage");
  return storages[it->second];
}

void BufferLiveness::setWorkspaceSize(unsigned storageId, int64_t bytes) {
  Storage &storage = storages[storageId];
  assert(storage.workspaceOf && bytes >= 0 && bytes <= storage.maxSize &&
         "only workspaces are resized, within their maximum");
  storage.size = bytes;
}

const Storage *BufferLiveness::getWorkspace(Operation *op) const {
  auto it = workspaceOf.find(op);
  return it == workspaceOf.end() ? nullptr : &storages[it->second];
}

std::optional<int64_t> BufferLiveness::getOpIndex(Operation *op) const {
  auto it = opIndex.find(op);
  if (it == opIndex.end())
    return std::nullopt;
  return it->second;
}

DenseMap<Operation *, unsigned>
BufferLiveness::decideInPlace(func::FuncOp function,
                              ArrayRef<Operation *> order) {
  StorageBuilder builder;
  builder.build(function, order);
  DenseMap<Operation *, unsigned> decisions;
  for (Operation *op : order) {
    if (op->getNumResults() != 1 || isAliasingView(op))
      continue;
    for (unsigned index = 0, e = op->getNumOperands(); index < e; ++index) {
      if (!builder.canReuse(op, index))
        continue;
      decisions[op] = index;
      builder.merge(builder.storageIdOf(op->getResult(0)),
                    builder.storageIdOf(op->getOperand(index)));
      break;
    }
  }
  return decisions;
}
