//===- BucketCollectives.cpp - bucketed collectives that overlap compute --===//
//
// memopt-bucket-collectives groups a data-parallel step's gradient
// collectives into buckets that run while the backward goes on
// (docs/data-parallel.md, "Overlap"): each bucket is issued as one group
// right after its last gradient is produced, and a memopt.wait_collectives
// after the next bucket's issue ends it; the updates that read the bucket's
// results move after that wait. Then the ZeRO-3 parameter gathers are
// grouped per layer and prefetched one group ahead (GatherGroups.cpp).
//
// Taken from PyTorch DDP (torch/csrc/distributed/c10d/reducer.cpp,
// compute_bucket_assignment_by_size): buckets filled in the order gradients
// become ready, a small first bucket (1 MiB) so that communication starts
// early, then 25 MiB ones; a bucket's all-reduce launched when its last
// gradient is ready; the optimizer waits on the buckets' futures. Where we
// differ:
//  - DDP guesses the ready order (the reverse of the parameters' order,
//    rebuilt after the first iteration from what it saw); here the compiler
//    knows it: the schedule's order of the collectives.
//  - DDP copies a bucket's gradients into one flat buffer and all-reduces it
//    in one NCCL call; here every gradient keeps its own planned buffer and
//    the bucket's calls go in one NCCL group (ncclGroupStart/End), so no
//    copy and no flat buffers (DDP's gradient_as_bucket_view avoids the copy
//    at the price of fixed gradient storage). The planner sees exactly
//    which buffers are in flight: the wait's operands.
//  - DDP's optimizer waits for every bucket; an update here waits only for
//    its own bucket, and the gradients of a bucket die at its updates, so a
//    step holds at most about two buckets of gradients more than without
//    overlap, not all of them.
//
//===----------------------------------------------------------------------===//

#include "GatherGroups.h"

#include "memopt/Analysis/BufferLiveness.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/Transforms/MemoryPhase.h"
#include "memopt/Dialect/MemOpt/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::memopt {
#define GEN_PASS_DEF_MEMOPTBUCKETCOLLECTIVES
#include "memopt/Dialect/MemOpt/Transforms/Passes.h.inc"
} // namespace mlir::memopt

using namespace mlir;
using namespace mlir::memopt;

namespace {

bool isView(Operation *op) {
  auto behavior = dyn_cast<BufferBehaviorOpInterface>(op);
  return behavior && behavior.isAliasingView();
}

/// The value whose storage `value` is, through view ops.
Value storageRoot(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    if (!isView(def))
      break;
    value = def->getOperand(0);
  }
  return value;
}

/// A gradient collective: an all-reduce or reduce-scatter whose result is
/// the gradient of an optimizer update (not the loss scale's flag, which
/// the updates read too).
bool isGradientCollective(Operation *op) {
  if (!isa<AllReduceOp, ReduceScatterOp>(op))
    return false;
  Value result = op->getResult(0);
  return llvm::any_of(result.getUsers(), [&](Operation *user) {
    if (auto sgd = dyn_cast<SGDUpdateOp>(user))
      return sgd.getGrad() == result;
    if (auto adamw = dyn_cast<AdamWUpdateOp>(user))
      return adamw.getGrad() == result;
    return false;
  });
}

/// Ops that must stay after a set of ops: those that use a value the set
/// produces, read or write storage the set writes, or write storage the set
/// reads (the scheduler's state-write order, Schedule.cpp).
class DependentSet {
public:
  void add(Operation *op) {
    members.insert(op);
    for (Value result : op->getResults())
      produced.insert(result);
    for (Value operand : op->getOperands())
      used.insert(storageRoot(operand));
    collectWrites(op, written);
  }

  bool contains(Operation *op) const { return members.contains(op); }

  bool dependsOnSet(Operation *op) const {
    for (Value operand : op->getOperands())
      if (produced.contains(operand) || written.contains(storageRoot(operand)))
        return true;
    DenseSet<Value> writes;
    collectWrites(op, writes);
    return llvm::any_of(writes,
                        [&](Value root) { return used.contains(root); });
  }

private:
  static void collectWrites(Operation *op, DenseSet<Value> &into) {
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    if (!effects)
      return;
    SmallVector<MemoryEffects::EffectInstance> instances;
    effects.getEffects(instances);
    for (const MemoryEffects::EffectInstance &effect : instances)
      if (isa<MemoryEffects::Write>(effect.getEffect()) && effect.getValue())
        into.insert(storageRoot(effect.getValue()));
  }

  DenseSet<Operation *> members;
  DenseSet<Value> produced, used, written;
};

/// The ops after `first` (in `order`) that depend on `seeds`, directly or
/// through each other.
DependentSet dependents(ArrayRef<Operation *> order, size_t first,
                        ArrayRef<Operation *> seeds) {
  DependentSet set;
  for (Operation *seed : seeds)
    set.add(seed);
  DenseSet<Operation *> isSeed(seeds.begin(), seeds.end());
  for (size_t i = first; i < order.size(); ++i)
    if (!isSeed.contains(order[i]) && set.dependsOnSet(order[i]))
      set.add(order[i]);
  return set;
}

/// Issues bucket `index` where its last collective is and puts its wait
/// after the next bucket's issue (or right after the bucket); rewrites
/// `order`.
void placeBucket(SmallVectorImpl<Operation *> &order,
                 ArrayRef<Operation *> bucket, ArrayRef<Operation *> next,
                 int64_t index) {
  auto position = [&](Operation *op) {
    return size_t(llvm::find(order, op) - order.begin());
  };
  size_t firstPosition = position(bucket.front());
  DependentSet after = dependents(order, firstPosition, bucket);
  DenseSet<Operation *> inBucket(bucket.begin(), bucket.end());
  // Waiting after the next bucket's issue lets this bucket run while the
  // backward produces the next one's gradients; unless the next bucket
  // needs this one's results (then there is nothing to overlap).
  bool overlap = !next.empty() && llvm::none_of(next, [&](Operation *op) {
    return after.contains(op) && !inBucket.contains(op);
  });
  Operation *waitAfter = overlap ? next.back() : bucket.back();

  // The new order: the ops up to the bucket's last collective that do not
  // depend on the bucket, the bucket, the independent ops up to
  // `waitAfter`, then the wait and the dependents moved from before it; or,
  // when none had to move, the ops after `waitAfter` up to the first
  // dependent one (or the end) before the wait: the later the wait, the
  // more the bucket overlaps. Then the rest as it was.
  SmallVector<Operation *> result(order.begin(), order.begin() + firstPosition);
  SmallVector<Operation *> moved;
  size_t i = firstPosition;
  bool waitPlaced = false;
  OpBuilder builder(bucket.front()->getContext());
  auto placeWait = [&](Operation *before) {
    SmallVector<Value> buffers;
    DenseSet<Value> seen;
    for (Operation *collective : bucket) {
      for (Value value : collective->getOperands())
        if (seen.insert(value).second)
          buffers.push_back(value);
      if (seen.insert(collective->getResult(0)).second)
        buffers.push_back(collective->getResult(0));
    }
    builder.setInsertionPoint(before);
    auto wait = WaitCollectivesOp::create(builder, bucket.back()->getLoc(),
                                          buffers, index);
    result.push_back(wait);
    result.append(moved.begin(), moved.end());
    waitPlaced = true;
  };
  bool pastWaitPoint = false;
  for (; i < order.size(); ++i) {
    Operation *op = order[i];
    if (inBucket.contains(op)) {
      if (op == bucket.back())
        result.append(bucket.begin(), bucket.end());
    } else if (after.contains(op) && !waitPlaced) {
      if (pastWaitPoint) {
        placeWait(op);
        result.push_back(op);
      } else {
        moved.push_back(op);
      }
    } else {
      result.push_back(op);
    }
    if (op == waitAfter) {
      pastWaitPoint = true;
      if (!moved.empty())
        placeWait(op->getNextNode());
    }
  }
  if (!waitPlaced) {
    Operation *terminator = bucket.back()->getBlock()->getTerminator();
    placeWait(terminator);
  }
  order.assign(result.begin(), result.end());
}

/// The gradient collectives of `order` (the schedule) in buckets, placed
/// and waited for; `bucketMib` 0 leaves them synchronous.
LogicalResult bucketGradients(func::FuncOp function,
                              SmallVectorImpl<Operation *> &order,
                              ArrayRef<Operation *> collectives,
                              double bucketMib, double firstBucketMib,
                              BucketCollectivesResult &result) {
  if (bucketMib == 0 || collectives.empty())
    return success();
  Block &block = function.getBody().front();

  // Fill buckets in the schedule's order; a bucket closes when it reaches
  // its cap, or before a collective that needs its results.
  auto capBytes = [&](size_t bucket) {
    double mib = bucket == 0 ? firstBucketMib : bucketMib;
    return std::max<int64_t>(1, int64_t(mib * 1024 * 1024));
  };
  SmallVector<SmallVector<Operation *>> buckets(1);
  SmallVector<int64_t> bytes(1, 0);
  for (Operation *collective : collectives) {
    SmallVector<Operation *> &current = buckets.back();
    if (!current.empty()) {
      size_t first = llvm::find(order, current.front()) - order.begin();
      if (dependents(order, first, current).contains(collective)) {
        buckets.emplace_back();
        bytes.push_back(0);
      }
    }
    buckets.back().push_back(collective);
    bytes.back() += getTensorBytes(collective->getOperand(0).getType());
    if (bytes.back() >= capBytes(buckets.size() - 1) &&
        collective != collectives.back()) {
      buckets.emplace_back();
      bytes.push_back(0);
    }
  }

  Builder builder(function.getContext());
  for (auto [index, bucket] : llvm::enumerate(buckets)) {
    for (Operation *collective : bucket)
      collective->setAttr("bucket", builder.getI64IntegerAttr(index));
    ArrayRef<Operation *> next = index + 1 < buckets.size()
                                     ? ArrayRef(buckets[index + 1])
                                     : ArrayRef<Operation *>();
    placeBucket(order, bucket, next, index);
  }
  Operation *terminator = block.getTerminator();
  for (Operation *op : order)
    op->moveBefore(terminator);

  for (auto [bucket, bucketBytes] : llvm::zip_equal(buckets, bytes)) {
    result.bucketSizes.push_back(bucket.size());
    result.bucketBytes.push_back(bucketBytes);
  }
  return success();
}

} // namespace

FailureOr<BucketCollectivesResult>
mlir::memopt::bucketCollectives(func::FuncOp function, double bucketMib,
                                double firstBucketMib, double gatherMib) {
  BucketCollectivesResult result;
  if (function.isExternal() || !function->hasAttr("memopt.data_parallel") ||
      function->hasAttr(kSynchronousCollectivesAttrName))
    return result;
  if (bucketMib < 0 || firstBucketMib < 0)
    return function.emitError("bucket sizes must be at least 0 MiB, got ")
           << llvm::formatv("{0} and {1}", llvm::format("%g", firstBucketMib),
                            llvm::format("%g", bucketMib));
  if (!function.getBody().hasOneBlock())
    return function.emitError("memopt-bucket-collectives expects a "
                              "single-block function");
  Block &block = function.getBody().front();
  SmallVector<Operation *> order;
  SmallVector<Operation *> collectives;
  for (Operation &op : block.without_terminator()) {
    if (isa<WaitCollectivesOp>(op) || op.hasAttr("bucket"))
      return op.emitError("the collectives are bucketed already: run "
                          "memopt-bucket-collectives once");
    order.push_back(&op);
    if (isGradientCollective(&op))
      collectives.push_back(&op);
  }
  result.collectives = collectives.size();
  if (failed(bucketGradients(function, order, collectives, bucketMib,
                             firstBucketMib, result)))
    return failure();
  // The gather groups after the gradient buckets (on the final order),
  // numbered after them.
  FailureOr<GatherGroupsResult> groups =
      groupGathers(function, gatherMib, int64_t(result.bucketSizes.size()));
  if (failed(groups))
    return failure();
  result.gatherGroupSizes = std::move(groups->groupSizes);
  result.gatherGroupBytes = std::move(groups->groupBytes);
  result.gathersMerged = groups->merged;
  return result;
}

namespace {
struct BucketCollectivesPass
    : public mlir::memopt::impl::MemOptBucketCollectivesBase<
          BucketCollectivesPass> {
  using MemOptBucketCollectivesBase::MemOptBucketCollectivesBase;

  void runOnOperation() override {
    FailureOr<BucketCollectivesResult> result =
        bucketCollectives(getOperation(), bucketMib, firstBucketMib, gatherMib);
    if (failed(result))
      return signalPassFailure();
    if (report && !result->gatherGroupSizes.empty()) {
      llvm::outs() << "memopt-bucket-collectives: "
                   << result->gatherGroupSizes.size()
                   << " gather groups prefetched one ahead:";
      for (auto [index, size] : llvm::enumerate(result->gatherGroupSizes))
        llvm::outs() << (index ? ", " : " ") << size << " x "
                     << result->gatherGroupBytes[index] << " bytes";
      if (result->gathersMerged)
        llvm::outs() << "; " << result->gathersMerged
                     << " gathers read an earlier gather still alive";
      llvm::outs() << "\n";
    }
    if (!report || result->bucketSizes.empty())
      return;
    llvm::outs() << "memopt-bucket-collectives: " << result->bucketSizes.size()
                 << " buckets (" << result->collectives
                 << " gradient collectives):";
    for (auto [index, size] : llvm::enumerate(result->bucketSizes))
      llvm::outs() << (index ? ", " : " ") << size << " x "
                   << result->bucketBytes[index] << " bytes";
    llvm::outs() << "\n";
  }
};
} // namespace
