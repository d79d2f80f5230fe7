//===- GatherGroups.cpp - ZeRO-3 gathers per layer, prefetched one ahead --===//
//
// The gather half of memopt-bucket-collectives (BucketCollectives.cpp does
// the gradients'): a ZeRO-3 step's `memopt.gather_parameter` ops, each
// placed by memopt-data-parallel right before its parameter's first forward
// or backward reader, are grouped in the schedule's order into groups of at
// most `gather-mib` MiB (a group closes at the gather that brings it to the
// cap), and each group is issued one group ahead:
//
//   group 0     issued where its first gather was
//   group k     issued right after group k - 1's wait, that is, before the
//               first op that reads group k - 1 (layer k - 1's compute)
//   wait of k   `memopt.wait_collectives {bucket = B}` right before the
//               first op that reads a parameter of group k
//
// The gathers of a group carry `bucket = B` (numbered after the gradient
// buckets) and are contiguous, so the lowering issues them as one NCCL group
// on the communication stream while the compute stream runs the previous
// layer; the wait makes the compute stream wait for the group's event. The
// forward's groups come in forward order and the backward's in backward
// order (the schedule's), so the backward prefetches in reverse, as FSDP2
// does. A gather whose group is issued while an earlier gather of the same
// shard is still alive reads that buffer instead of gathering again. A
// gathered buffer is defined where its group is issued, so the
// planner keeps it from the issue to its last reader: nothing else gets its
// bytes while the communication stream may write them.
//
// Taken from PyTorch FSDP2 (torch/distributed/_composable/fsdp,
// FSDPParamGroup: one all-gather per module of its parameters, issued on the
// all-gather stream, the next module's all-gather prefetched during the
// current one's forward, and in reverse order in the backward) and
// DeepSpeed ZeRO-3's prefetch (PartitionedParameterCoordinator: the fetch
// order traced from the first step, `stage3_prefetch_bucket_size`). Where we
// differ:
//  - FSDP2 groups by the module the user wrapped (in practice one transformer
//    block each); DeepSpeed traces the first step. Here the compiler groups
//    from the schedule it made, by layer as the parameters' names give it
//    and by bytes (DDP-style caps) within a layer, so no wrapping and no
//    trace.
//  - FSDP2 copies a group's shards into one flat buffer, all-gathers it and
//    copies the parameters out (its all-gather input/output copies); here
//    each parameter is gathered in place in its own planned arena buffer
//    and the group is one NCCL group of per-parameter all-gathers: no copy
//    in or out.
//  - The prefetched buffers are planned arena buffers whose lifetime starts
//    at the issue: the memory plan, the report and the remat solver (which
//    may gather again instead of keeping) all see what prefetching costs.
//
//===----------------------------------------------------------------------===//

#include "GatherGroups.h"

#include "memopt/Analysis/BufferLiveness.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::memopt;

namespace {

/// The position in `position` of the op of `block` that holds `op`.
size_t positionInBlock(Operation *op, Block &block,
                       const DenseMap<Operation *, size_t> &position) {
  Operation *ancestor = block.findAncestorOpInBlock(*op);
  auto it = ancestor ? position.find(ancestor) : position.end();
  return it == position.end() ? position.size() : it->second;
}

/// The storage `value` is a view of (through view ops).
Value storageRoot(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    auto behavior = dyn_cast<BufferBehaviorOpInterface>(def);
    if (!behavior || !behavior.isAliasingView())
      break;
    value = def->getOperand(0);
  }
  return value;
}

/// The layer of a parameter named `name`: the name up to and including its
/// first dotted part that is a number ("model.layers.3" of
/// "model.layers.3.self_attn.q_proj.weight", "h.11" of "h.11.attn.c_attn.
/// weight"); empty when no part is (embeddings, the final norm, the head).
StringRef layerOf(StringRef name) {
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('.', start);
    if (end == StringRef::npos)
      end = name.size();
    StringRef part = name.slice(start, end);
    if (!part.empty() && llvm::all_of(part, llvm::isDigit))
      return name.take_front(end);
    start = end + 1;
  }
  return "";
}

/// The layer of the parameter `gather` gathers (layerOf its variable's
/// name).
StringRef gatherLayer(Operation *gather) {
  Value shard = storageRoot(gather->getOperand(0));
  if (auto variable = shard.getDefiningOp<VariableOp>())
    return layerOf(variable.getName());
  return "";
}

/// One group of gathers and where it goes (positions in the original
/// order: an action at position p comes before the op that was there).
struct GatherGroup {
  SmallVector<Operation *> gathers;
  int64_t bytes = 0;
  size_t issue = 0, wait = 0;
};

} // namespace

FailureOr<GatherGroupsResult> mlir::memopt::groupGathers(func::FuncOp function,
                                                         double gatherMib,
                                                         int64_t firstBucket) {
  GatherGroupsResult result;
  if (gatherMib < 0)
    return function.emitError("gather-mib must be at least 0, got ")
           << llvm::formatv("{0}", llvm::format("%g", gatherMib));
  Block &block = function.getBody().front();
  SmallVector<Operation *> order;
  DenseMap<Operation *, size_t> position;
  SmallVector<Operation *> gathers;
  // Where each storage is written (an update writes its shard).
  DenseMap<Value, SmallVector<size_t>> writes;
  for (Operation &op : block.without_terminator()) {
    position[&op] = order.size();
    order.push_back(&op);
    if (isa<GatherParameterOp>(op))
      gathers.push_back(&op);
    if (auto effects = dyn_cast<MemoryEffectOpInterface>(op)) {
      SmallVector<MemoryEffects::EffectInstance> instances;
      effects.getEffects(instances);
      for (const MemoryEffects::EffectInstance &effect : instances)
        if (isa<MemoryEffects::Write>(effect.getEffect()) && effect.getValue())
          writes[storageRoot(effect.getValue())].push_back(position[&op]);
    }
  }
  if (gatherMib == 0 || gathers.empty())
    return result;

  // The earliest position a gather may be issued at: after its shard's
  // definition and after any earlier write of it.
  auto lowestOf = [&](Operation *gather) {
    size_t at = position.lookup(gather), lowest = 0;
    Value shard = storageRoot(gather->getOperand(0));
    if (Operation *def = shard.getDefiningOp(); def && position.count(def))
      lowest = position.lookup(def) + 1;
    for (size_t write : writes.lookup(shard))
      if (write < at)
        lowest = std::max(lowest, write + 1);
    return lowest;
  };
  int64_t cap = std::max<int64_t>(1, int64_t(gatherMib * 1024 * 1024));
  SmallVector<GatherGroup> groups(1);
  // The layer of the current group: its first named one. A parameter whose
  // name has no layer (an exporter's `val_8` for a transposed weight, the
  // embeddings) joins the group it comes in, so only two named layers part.
  StringRef groupLayer;
  for (Operation *gather : gathers) {
    // A group is issued at one place: a gather that may not move up to the
    // group's first one starts the next group. A group is one layer's: a
    // gather of another layer starts the next.
    StringRef layer = gatherLayer(gather);
    if (!groups.back().gathers.empty() &&
        (lowestOf(gather) > position.lookup(groups.back().gathers.front()) ||
         (!layer.empty() && !groupLayer.empty() && layer != groupLayer))) {
      groups.emplace_back();
      groupLayer = "";
    }
    if (groupLayer.empty())
      groupLayer = layer;
    groups.back().gathers.push_back(gather);
    groups.back().bytes += getTensorBytes(gather->getResult(0).getType());
    if (groups.back().bytes >= cap && gather != gathers.back()) {
      groups.emplace_back();
      groupLayer = "";
    }
  }

  // Where each group is waited for (its first reader) and issued (one
  // group ahead, never before what its shards need: their definition and
  // any earlier write of them).
  for (auto [index, group] : llvm::enumerate(groups)) {
    DenseSet<Operation *> members(group.gathers.begin(), group.gathers.end());
    group.wait = order.size();
    size_t lowest = 0;
    for (Operation *gather : group.gathers) {
      for (Operation *user : gather->getResult(0).getUsers())
        if (!members.contains(user))
          group.wait =
              std::min(group.wait, positionInBlock(user, block, position));
      lowest = std::max(lowest, lowestOf(gather));
    }
    size_t first = position.lookup(group.gathers.front());
    group.issue = index == 0 ? first : std::min(groups[index - 1].wait, first);
    if (index > 0)
      group.issue = std::max(group.issue, groups[index - 1].issue);
    group.issue = std::max(group.issue, lowest);
    // Never inside a gradient bucket's run of collectives (issued as one
    // NCCL group): before it.
    auto bucketOf = [&](size_t at) -> int64_t {
      if (at >= order.size() || isa<GatherParameterOp>(order[at]))
        return -1;
      auto attr = order[at]->getAttrOfType<IntegerAttr>("bucket");
      return attr ? attr.getInt() : -1;
    };
    while (group.issue > 0 && bucketOf(group.issue) >= 0 &&
           bucketOf(group.issue) == bucketOf(group.issue - 1))
      --group.issue;
  }

  // A gather issued while an earlier gather of the same shard and type is
  // still alive (the tied embedding's forward gather, read by the LM head
  // at the end of the forward, when its backward gather is prefetched)
  // reads that one instead: its buffer would hold the same values over the
  // same span. FSDP2 likewise keeps the root module's parameters unsharded
  // from the forward into the backward.
  auto readers = [&](Operation *gather, bool last) {
    size_t at = last ? 0 : order.size();
    for (Operation *user : gather->getResult(0).getUsers()) {
      size_t p = positionInBlock(user, block, position);
      at = last ? std::max(at, p) : std::min(at, p);
    }
    return at;
  };
  DenseMap<Operation *, size_t> lastReader, groupOf;
  DenseMap<std::pair<Value, Type>, Operation *> latest;
  SmallVector<Operation *> merged;
  for (auto [index, group] : llvm::enumerate(groups)) {
    SmallVector<Operation *> kept;
    for (Operation *gather : group.gathers) {
      std::pair<Value, Type> key{gather->getOperand(0),
                                 gather->getResult(0).getType()};
      lastReader[gather] = readers(gather, /*last=*/true);
      auto it = latest.find(key);
      // Nothing may write the shard between the two gathers (an update
      // writes it after its last gather: memopt-data-parallel refuses a
      // read after the update; checked here all the same).
      auto unwritten = [&](Operation *earlier) {
        size_t from = position.lookup(earlier), to = position.lookup(gather);
        return llvm::none_of(writes.lookup(storageRoot(key.first)),
                             [&](size_t at) { return from < at && at < to; });
      };
      if (it != latest.end() && lastReader[it->second] >= group.issue &&
          groups[groupOf[it->second]].wait <= readers(gather, false) &&
          unwritten(it->second)) {
        Operation *earlier = it->second;
        lastReader[earlier] = std::max(lastReader[earlier], lastReader[gather]);
        gather->getResult(0).replaceAllUsesWith(earlier->getResult(0));
        group.bytes -= getTensorBytes(gather->getResult(0).getType());
        merged.push_back(gather);
        continue;
      }
      latest[key] = gather;
      groupOf[gather] = index;
      kept.push_back(gather);
    }
    group.gathers = kept;
  }
  // The groups left, each waited for before the first reader of what it
  // still gathers.
  SmallVector<GatherGroup> kept;
  for (GatherGroup &group : groups) {
    if (group.gathers.empty())
      continue;
    group.wait = order.size();
    for (Operation *gather : group.gathers)
      group.wait = std::min(group.wait, readers(gather, /*last=*/false));
    kept.push_back(group);
  }
  groups = std::move(kept);
  result.merged = merged.size();

  // The new order: before the op at each position, the actions placed
  // there in the order they were decided (group k - 1's wait, then group
  // k's issue, then, if it lands there too, group k's wait).
  struct Action {
    size_t group;
    bool isWait;
  };
  DenseMap<size_t, SmallVector<Action>> actions;
  DenseSet<Operation *> moved(merged.begin(), merged.end());
  for (auto [index, group] : llvm::enumerate(groups)) {
    actions[group.issue].push_back({index, false});
    actions[group.wait].push_back({index, true});
    moved.insert(group.gathers.begin(), group.gathers.end());
  }
  Builder builder(function.getContext());
  Operation *terminator = block.getTerminator();
  SmallVector<Operation *> newOrder;
  auto place = [&](size_t at) {
    auto it = actions.find(at);
    if (it == actions.end())
      return;
    for (const Action &action : it->second) {
      GatherGroup &group = groups[action.group];
      int64_t bucket = firstBucket + int64_t(action.group);
      if (!action.isWait) {
        for (Operation *gather : group.gathers) {
          gather->setAttr("bucket", builder.getI64IntegerAttr(bucket));
          newOrder.push_back(gather);
        }
        continue;
      }
      SmallVector<Value> buffers;
      DenseSet<Value> seen;
      for (Operation *gather : group.gathers)
        if (seen.insert(gather->getOperand(0)).second)
          buffers.push_back(gather->getOperand(0));
      for (Operation *gather : group.gathers)
        buffers.push_back(gather->getResult(0));
      OpBuilder waitBuilder(terminator);
      newOrder.push_back(WaitCollectivesOp::create(
          waitBuilder, group.gathers.back()->getLoc(), buffers, bucket));
    }
  };
  for (auto [at, op] : llvm::enumerate(order)) {
    place(at);
    if (!moved.contains(op))
      newOrder.push_back(op);
  }
  place(order.size());
  for (Operation *op : newOrder)
    op->moveBefore(terminator);
  for (Operation *gather : merged)
    gather->erase();

  for (const GatherGroup &group : groups) {
    result.groupSizes.push_back(group.gathers.size());
    result.groupBytes.push_back(group.bytes);
  }
  return result;
}
