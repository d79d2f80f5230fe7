//===- OffloadOps.cpp - activation offload ops ----------------------------===//
//
// Verifiers of the copy-stream ops that move a saved activation to pinned
// host memory and back (OffloadOps.td; docs/offload.md, "Activations").
// The ops carry the copy's slot (its events) and its offset in the host
// pool; lib/Dialect/MemOpt/Transforms/Offload.cpp places them.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/MemOpt/IR/OffloadOps.h"

using namespace mlir;
using namespace mlir::memopt;

#define GET_OP_CLASSES
#include "memopt/Dialect/MemOpt/IR/OffloadOps.cpp.inc"

LogicalResult OffloadOp::verify() {
  if (int64_t(getSlot()) < 0)
    return emitOpError("needs a slot >= 0");
  return success();
}

LogicalResult ReloadOp::verify() {
  if (int64_t(getSlot()) < 0)
    return emitOpError("needs a slot >= 0");
  return success();
}

LogicalResult ReloadWaitOp::verify() {
  auto reload = getInput().getDefiningOp<ReloadOp>();
  if (!reload)
    return emitOpError("waits on a value that no memopt.reload produced");
  if (reload.getSlot() != getSlot())
    return emitOpError("waits on slot ")
           << getSlot() << " for a reload of slot " << reload.getSlot();
  return success();
}

bool ReloadWaitOp::isAliasingView() { return true; }
