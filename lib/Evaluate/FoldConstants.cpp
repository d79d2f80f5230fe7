//===- FoldConstants.cpp - memopt-fold-constants
//---------------------------===//
//
// Folds every op of constants in program order: the op's folder first, the
// host kernels (HostEvaluator.h) where it has none. The importer does this
// as it builds each op; the pass serves IR that comes from elsewhere.
//
// Taken from XLA's HloConstantFolding (one walk, an evaluator for what the
// simplifier cannot fold, large results skipped). Different: the evaluator
// is the runtime's own host backend, and initializers that training trains
// never fold.
//
//===----------------------------------------------------------------------===//

#include "memopt/Evaluate/HostEvaluator.h"
#include "memopt/Evaluate/Passes.h"

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::memopt {
#define GEN_PASS_DEF_MEMOPTFOLDCONSTANTS
#include "memopt/Evaluate/Passes.h.inc"
} // namespace mlir::memopt

using namespace mlir;
using namespace mlir::memopt;

namespace {

struct FoldConstantsPass
    : public memopt::impl::MemOptFoldConstantsBase<FoldConstantsPass> {
  using MemOptFoldConstantsBase::MemOptFoldConstantsBase;

  void runOnOperation() override {
    HostEvaluationLimits limits;
    limits.maxElements = maxElements;
    HostConstantEvaluator evaluator(limits);
    OpBuilder builder(&getContext());
    int64_t folded = 0;
    // Program order, so a chain folds from its first op to its last.
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) { ops.push_back(op); });
    for (Operation *op : ops) {
      if (isa<ConstantOp>(op) || op->getNumOperands() == 0 ||
          op->getNumResults() == 0 || readsTrainableInitializer(op) ||
          !llvm::all_of(op->getOperands(), [](Value operand) {
            return operand.getDefiningOp<ConstantOp>();
          }))
        continue;
      SmallVector<Value> operands(op->getOperands());
      builder.setInsertionPoint(op);
      SmallVector<Value> results;
      if (failed(builder.tryFold(op, results)) || results.empty()) {
        FailureOr<SmallVector<Value>> evaluated = evaluator.fold(builder, op);
        if (failed(evaluated))
          continue;
        results = std::move(*evaluated);
      }
      op->replaceAllUsesWith(results);
      op->erase();
      ++folded;
      for (Value operand : operands)
        if (Operation *constant = operand.getDefiningOp();
            constant && constant->use_empty())
          constant->erase();
    }
    if (report)
      llvm::outs() << "[fold-constants] " << folded << " op(s) folded, "
                   << evaluator.getEvaluatedCount() << " by the host kernels\n";
  }
};

} // namespace
