//===- EmitCollectives.cpp - collectives and offload copies ---------------===//
//
// The collectives family of the program emitter (EmitProgramInternal.h):
// all_reduce, reduce_scatter, all_gather, gather_parameter and the waits
// of bucketed collectives, the bucket boundaries (beginCollectives /
// endCollectives around a bucket's collectives), and activation offload's
// copies and waits on the copy stream (docs/offload.md).
//
// Taken from: PyTorch DDP's gradient buckets (one communication group per
// bucket, waited on before the gradients' first use) and FSDP2's parameter
// all-gather per module, prefetched (a ZeRO-3 gather group is a bucket of
// gather_parameter calls, waited on before its first reader). Different:
// buckets and groups are fixed at compile time (memopt-bucket-collectives)
// and checked here to be contiguous.
//
//===----------------------------------------------------------------------===//

#include "EmitProgramInternal.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::emit_program;

std::optional<LogicalResult>
ProgramEmitter::emitCollectiveOp(Operation *op, const std::string &node) {
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](AllReduceOp reduce) {
        os << "  {\n"
           << accumulation(reduce.getAccumulator(), reduce.getMicroStep(),
                           reduce.getAccumulationSteps())
           << "    allReduce(ctx, " << node << ", CollectiveReduction::"
           << (reduce.getReduction() == "sum"   ? "Sum"
               : reduce.getReduction() == "max" ? "Max"
                                                : "Average")
           << ", " << ref(reduce.getInput()) << ", " << ref(reduce.getResult())
           << (reduce.getMicroStep() ? ", &accumulation" : "") << ");\n  }\n";
        return success();
      })
      .Case([&](ReduceScatterOp scatter) {
        os << "  {\n"
           << accumulation(scatter.getAccumulator(), scatter.getMicroStep(),
                           scatter.getAccumulationSteps())
           << "    reduceScatter(ctx, " << node << ", CollectiveReduction::"
           << (scatter.getReduction() == "sum" ? "Sum" : "Average") << ", "
           << scatter.getRanks() << ", " << ref(scatter.getInput()) << ", "
           << ref(scatter.getResult())
           << (scatter.getMicroStep() ? ", &accumulation" : "") << ");\n  }\n";
        return success();
      })
      .Case([&](WaitCollectivesOp wait) -> LogicalResult {
        int64_t bucket = wait.getBucketAttr().getInt();
        if (!issuedBuckets.contains(bucket))
          return error(op) << "waits for bucket " << bucket
                           << ", which no collective before it starts";
        os << "  waitCollectives(ctx, " << node << ", " << bucket << ");\n";
        return success();
      })
      .Case([&](GatherParameterOp gather) {
        os << "  gatherParameter(ctx, " << node << ", " << gather.getRanks()
           << ", " << ref(gather.getShard()) << ", " << ref(gather.getResult())
           << ");\n";
        return success();
      })
      .Case([&](AllGatherOp gather) {
        os << "  {\n"
           << accumulation(Value(), gather.getMicroStep(),
                           gather.getAccumulationSteps())
           << "    allGather(ctx, " << node << ", " << gather.getRanks() << ", "
           << ref(gather.getParam())
           << (gather.getMicroStep() ? ", &accumulation" : "") << ");\n  }\n";
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}

LogicalResult ProgramEmitter::emitBucketBoundary(Operation *op) {
  std::optional<int64_t> bucket;
  auto attr = op->getAttrOfType<IntegerAttr>("bucket");
  if (attr && !isa<WaitCollectivesOp>(op)) {
    if (!isa<AllReduceOp, ReduceScatterOp, GatherParameterOp>(op))
      return error(op) << "has a bucket but is not an all_reduce, "
                          "reduce_scatter or gather_parameter";
    bucket = attr.getInt();
  }
  if (bucket == openBucket)
    return success();
  // A bucket's collectives are issued together: one group on the
  // communication stream (memopt-bucket-collectives made them contiguous).
  if (openBucket)
    os << "  endCollectives(ctx, " << *openBucket << ");\n";
  openBucket = bucket;
  if (!bucket)
    return success();
  if (!issuedBuckets.insert(*bucket).second)
    return error(op) << "is in bucket " << *bucket
                     << ", whose collectives were issued already (a "
                        "bucket's collectives must be contiguous)";
  os << "  beginCollectives(ctx, " << *bucket << ");\n";
  return success();
}

LogicalResult ProgramEmitter::emitCopyStreamOp(Operation *op) {
  std::string node = nodeLiteral(op);
  auto hostOffset = [&](int64_t offset) -> FailureOr<int64_t> {
    if (offset < 0)
      return error(op) << "has no host pool offset (plan the pool first)";
    return offset;
  };
  if (auto wait = dyn_cast<ReloadWaitOp>(op)) {
    os << "  reloadWait(ctx, " << node << ", " << wait.getSlot() << ");\n";
    return declare(wait.getOutput(), pointers.lookup(wait.getInput()));
  }
  if (auto wait = dyn_cast<OffloadWaitOp>(op)) {
    os << "  offloadWait(ctx, " << node << ", " << wait.getSlot() << ");\n";
    return success();
  }
  if (auto offload = dyn_cast<OffloadOp>(op)) {
    FailureOr<int64_t> offset = hostOffset(int64_t(offload.getHostOffset()));
    if (failed(offset))
      return failure();
    os << "  offloadStart(ctx, " << node << ", " << offload.getSlot() << ", "
       << pointers.lookup(offload.getInput()) << ", " << *offset << ", "
       << getBytes(cast<RankedTensorType>(offload.getInput().getType()))
       << ");\n";
    return success();
  }
  auto reload = cast<ReloadOp>(op);
  FailureOr<int64_t> offset = hostOffset(int64_t(reload.getHostOffset()));
  if (failed(offset) || failed(declareResults(op)))
    return failure();
  os << "  reloadStart(ctx, " << node << ", " << reload.getSlot() << ", "
     << pointers.lookup(reload.getOutput()) << ", " << *offset << ", "
     << getBytes(cast<RankedTensorType>(reload.getOutput().getType()))
     << ");\n";
  return success();
}
