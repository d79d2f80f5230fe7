//===- Bufferize.cpp - in-place reuse decisions ---------------------------===//
//
// Marks the ops that write their result over a dying operand. The decision
// rule lives in BufferLiveness::decideInPlace so that the scheduler scores
// orders with exactly the decisions taken here; bufferizeFunction
// (MemoryPhase.h) is the pass's body, which the remat budget search calls.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/BufferLiveness.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/Transforms/MemoryPhase.h"
#include "memopt/Dialect/MemOpt/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::memopt {
#define GEN_PASS_DEF_MEMOPTBUFFERIZE
#include "memopt/Dialect/MemOpt/Transforms/Passes.h.inc"
} // namespace mlir::memopt

using namespace mlir;
using namespace mlir::memopt;

FailureOr<size_t> mlir::memopt::bufferizeFunction(func::FuncOp function) {
  if (!function.getBody().hasOneBlock())
    return function.emitError(
        "memopt-bufferize expects a single-block function");
  SmallVector<Operation *> order = getExecutionOrder(function);
  for (Operation *op : order)
    op->removeAttr(kInPlaceAttrName);
  DenseMap<Operation *, unsigned> decisions =
      BufferLiveness::decideInPlace(function, order);
  Builder builder(function.getContext());
  for (Operation *op : order)
    if (auto it = decisions.find(op); it != decisions.end())
      op->setAttr(kInPlaceAttrName, builder.getI64IntegerAttr(it->second));
  return decisions.size();
}

namespace {
struct MemOptBufferizePass
    : public mlir::memopt::impl::MemOptBufferizeBase<MemOptBufferizePass> {
  using MemOptBufferizeBase::MemOptBufferizeBase;

  void runOnOperation() override {
    func::FuncOp function = getOperation();
    FailureOr<size_t> inPlace = bufferizeFunction(function);
    if (failed(inPlace))
      return signalPassFailure();
    if (report) {
      BufferLiveness liveness(function);
      llvm::outs() << "memopt-bufferize @" << function.getSymName() << ": "
                   << *inPlace << " ops in place, saved "
                   << liveness.getStats().inPlaceSavedBytes << " bytes; views "
                   << "saved " << liveness.getStats().viewSavedBytes
                   << " bytes\n";
    }
  }
};
} // namespace
