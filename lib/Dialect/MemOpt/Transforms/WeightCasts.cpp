//===- WeightCasts.cpp - low-precision copies of the master weights -------===//
//
// Mixed-precision training reads each f32 parameter that runs low through
// one cast (memopt-mixed-precision, training=true). After autodiff that copy
// has forward users and backward users (a matmul's input gradient reads the
// weight), so it is held across the forward/backward boundary. This pass
// decides whether to keep it there or to cast the master weight again right
// before the backward users.
//
// Taken from: PyTorch autocast's weight cast cache (one low copy per
// parameter per autocast region, kept alive by autograd for the backward) and
// Apex O2 / DeepSpeed's fp16 model copy (a persistent low copy next to the
// f32 master, refreshed after every step). Both always keep. Further: the
// copy is an arena buffer like any activation, and the choice is made per
// program by bytes and time on the cost model's roofline (CostModel.h), the
// same trade rematerialization makes; with --memory-budget the remat solver
// can still recompute a kept copy.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/CostModel.h"
#include "memopt/Analysis/MemoryReport.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::memopt {
#define GEN_PASS_DEF_MEMOPTWEIGHTCASTS
#include "memopt/Dialect/MemOpt/Transforms/Passes.h.inc"
} // namespace mlir::memopt

using namespace mlir;
using namespace mlir::memopt;

namespace {

/// A parameter's low-precision copy with users on both sides of the
/// forward/backward boundary.
struct WeightCopy {
  CastOp cast;
  /// Its backward users, in block order.
  SmallVector<Operation *> backwardUsers;
};

bool isLowFloat(Type type) {
  Type element = getElementTypeOrSelf(type);
  return element.isF16() || element.isBF16();
}

struct WeightCastsPass
    : public mlir::memopt::impl::MemOptWeightCastsBase<WeightCastsPass> {
  using MemOptWeightCastsBase::MemOptWeightCastsBase;

  void runOnOperation() override {
    func::FuncOp function = getOperation();
    if (function.isExternal())
      return;
    if (policy != "auto" && policy != "keep" && policy != "recast") {
      function.emitError("memopt-weight-casts: policy '")
          << policy << "' is not auto, keep or recast";
      return signalPassFailure();
    }
    Block &body = function.getBody().front();
    // The forward: every op the returned loss depends on (as the memory
    // report defines it).
    llvm::DenseSet<Operation *> forward;
    SmallVector<Value> worklist(body.getTerminator()->getOperands());
    while (!worklist.empty()) {
      Operation *def = worklist.pop_back_val().getDefiningOp();
      if (!def || !forward.insert(def).second)
        continue;
      worklist.append(def->operand_begin(), def->operand_end());
    }

    Roofline roofline = Roofline::h100();
    double stepSeconds = 0, recastSeconds = 0;
    int64_t heldBytes = 0, boundaryBytes = 0;
    SmallVector<WeightCopy> copies;
    for (Operation &op : body.without_terminator()) {
      stepSeconds += estimateOpSeconds(&op, roofline);
      if (!forward.contains(&op) || isa<VariableOp, ConstantOp>(op))
        continue;
      // Forward values read by the backward: held across the boundary.
      for (Value result : op.getResults())
        if (llvm::any_of(result.getUsers(), [&](Operation *user) {
              return !forward.contains(user);
            }))
          boundaryBytes += getTensorBytes(result.getType());
      auto cast = dyn_cast<CastOp>(op);
      auto variable =
          cast ? cast.getInput().getDefiningOp<VariableOp>() : VariableOp();
      if (!variable || variable.getRole() != "parameter" ||
          !isLowFloat(cast.getType()))
        continue;
      WeightCopy copy{cast, {}};
      for (Operation *user : cast->getUsers())
        if (!forward.contains(user))
          copy.backwardUsers.push_back(user);
      if (copy.backwardUsers.empty())
        continue;
      llvm::sort(copy.backwardUsers, [](Operation *a, Operation *b) {
        return a->isBeforeInBlock(b);
      });
      heldBytes += getTensorBytes(cast.getType());
      recastSeconds += estimateOpSeconds(cast, roofline);
      copies.push_back(std::move(copy));
    }

    // Recast when the share of the held bytes it frees is larger than the
    // share of the step's time it adds.
    double bytesShare =
        boundaryBytes > 0 ? double(heldBytes) / double(boundaryBytes) : 0.0;
    double timeShare = stepSeconds > 0 ? recastSeconds / stepSeconds : 1.0;
    bool recast = policy == "recast" || (policy == "auto" && !copies.empty() &&
                                         bytesShare > timeShare);
    if (recast)
      for (WeightCopy &copy : copies) {
        OpBuilder builder(copy.backwardUsers.front());
        std::string name = getValueName(copy.cast.getResult()) + ".recast";
        Location loc =
            NameLoc::get(builder.getStringAttr(name), copy.cast.getLoc());
        auto again = CastOp::create(builder, loc, copy.cast.getType(),
                                    copy.cast.getInput());
        for (Operation *user : copy.backwardUsers)
          user->replaceUsesOfWith(copy.cast.getResult(), again.getResult());
      }

    Builder builder(&getContext());
    std::string decision = recast ? "recast" : "keep";
    function->setAttr(
        "memopt.weight_casts",
        builder.getDictionaryAttr({
            builder.getNamedAttr("policy", builder.getStringAttr(policy)),
            builder.getNamedAttr("decision", builder.getStringAttr(decision)),
            builder.getNamedAttr("copies",
                                 builder.getI64IntegerAttr(copies.size())),
            builder.getNamedAttr("recast", builder.getI64IntegerAttr(
                                               recast ? copies.size() : 0)),
            builder.getNamedAttr("held_bytes",
                                 builder.getI64IntegerAttr(heldBytes)),
            builder.getNamedAttr("boundary_bytes",
                                 builder.getI64IntegerAttr(boundaryBytes)),
            builder.getNamedAttr("recast_seconds",
                                 builder.getF64FloatAttr(recastSeconds)),
            builder.getNamedAttr("step_seconds",
                                 builder.getF64FloatAttr(stepSeconds)),
        }));
    if (!report)
      return;
    llvm::outs() << "memopt-weight-casts @" << function.getSymName() << ": "
                 << copies.size() << " parameter copies read by the backward, "
                 << heldBytes << " bytes ("
                 << llvm::format("%.1f", 100.0 * bytesShare) << "% of the "
                 << boundaryBytes
                 << " bytes held across the step); casting them again costs "
                 << llvm::format("%.1f", 1e6 * recastSeconds) << " us ("
                 << llvm::format("%.2f", 100.0 * timeShare)
                 << "% of the estimated step): " << decision
                 << (policy == "auto" ? "" : " (forced)") << "\n";
  }
};

} // namespace
