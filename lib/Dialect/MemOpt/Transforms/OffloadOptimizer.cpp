//===- OffloadOptimizer.cpp - masters and optimizer state on the host -----===//
//
// --offload optimizer: every optimizer update gets an f32 master on the host,
// and its state (momentum buffer or Adam moments, gradient accumulator)
// moves to the host too. The device keeps the working parameter; the
// lowering streams the gradient out, runs the update on the CPU and streams
// the master back (docs/offload.md).
//
// Taken from ZeRO-Offload (Ren et al., USENIX ATC 2021; DeepSpeed's
// DeepSpeedCPUAdam): fp32 masters and Adam state in pinned host memory, the
// update on the CPU. torchao's CPUOffloadOptimizer does the same per
// parameter from PyTorch hooks. Where memopt differs: the host state is a
// region planned at compile time (fixed offsets, like the weight region), and
// the placement is an IR attribute, so the memory report and the planner see
// exactly which bytes left the device. With --offload-accumulators device
// the gradient accumulators stay on the device (ZeRO-Offload sums on the
// CPU every micro-batch; here the GPU sums, and the CPU sees one gradient a
// step), which --fit chooses where the device has the room.
//
// Low working parameters (`low-parameters`): ZeRO-Offload keeps fp16
// parameters on the GPU and copies the CPU's fp16 result back; here a
// parameter becomes f16 / bf16 only where that changes no number: every
// device reader already cast it to that one type (mixed precision's
// policy), so the casts go, and the CPU writes round-to-nearest-even of the
// new f32 master, which is what the cast computed. Parameters read in f32
// (normalization scales) stay f32. An embedding table counts as cast when
// every row its gather takes is cast (casting commutes with the gather).
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::memopt {
#define GEN_PASS_DEF_MEMOPTOFFLOADOPTIMIZER
#include "memopt/Dialect/MemOpt/Transforms/Passes.h.inc"
} // namespace mlir::memopt

using namespace mlir;
using namespace mlir::memopt;

namespace {

/// The one f16 / bf16 element type that every user of `value` casts it to,
/// merged into `low`; false when a user is not such a cast or disagrees.
bool mergeCastType(Value value, Type &low) {
  for (Operation *user : value.getUsers()) {
    auto castOp = dyn_cast<CastOp>(user);
    Type element = castOp ? getElementTypeOrSelf(castOp.getType()) : Type();
    if (!element || !(element.isF16() || element.isBF16()) ||
        (low && low != element))
      return false;
    low = element;
  }
  return true;
}

/// The f16 / bf16 element type that every reader of `variable` but `update`
/// casts it to, or null: a reader in f32 or in another type, no reader, or
/// a single element (nothing to save, and its initial value is embedded in
/// the program). A gather of the table whose every user casts its rows
/// counts as a cast too (an embedding): casting commutes with taking rows,
/// so gathering rows of the rounded table gives the same bits.
Type getLowReadType(VariableOp variable, Operation *update) {
  if (cast<RankedTensorType>(variable.getType()).getNumElements() < 2)
    return {};
  Type low;
  for (OpOperand &use : variable.getResult().getUses()) {
    Operation *user = use.getOwner();
    if (user == update) {
      if (use.getOperandNumber() != 0) // read as something but the param
        return {};
      continue;
    }
    if (auto gather = dyn_cast<GatherOp>(user)) {
      if (gather.getData() != variable.getResult() ||
          gather.getIndices() == variable.getResult() ||
          gather.getOutput().use_empty() ||
          !mergeCastType(gather.getOutput(), low))
        return {};
      continue;
    }
    auto castOp = dyn_cast<CastOp>(user);
    Type element = castOp ? getElementTypeOrSelf(castOp.getType()) : Type();
    if (!element || !(element.isF16() || element.isBF16()) ||
        (low && low != element))
      return {};
    low = element;
  }
  return low;
}

/// Replaces every cast among the users of `value` by `value` itself.
void dropCasts(Value value) {
  for (Operation *user : llvm::make_early_inc_range(value.getUsers()))
    if (auto castOp = dyn_cast<CastOp>(user)) {
      castOp.getResult().replaceAllUsesWith(value);
      castOp.erase();
    }
}

/// Makes `variable` its low read type: the casts go, their readers read
/// the variable (a gather reads it and gives low rows). Its initial value
/// is the master's (the runtime rounds it at load). Returns the device
/// bytes saved (0 when it stays f32).
int64_t makeLowParameter(VariableOp variable, Operation *update) {
  Type low = getLowReadType(variable, update);
  if (!low)
    return 0;
  int64_t before = getTensorBytes(variable.getType());
  variable.getResult().setType(
      cast<RankedTensorType>(variable.getType()).clone(low));
  variable.removeInitialValueAttr();
  for (Operation *user : variable.getResult().getUsers())
    if (auto gather = dyn_cast<GatherOp>(user)) {
      gather.getOutput().setType(
          cast<RankedTensorType>(gather.getOutput().getType()).clone(low));
      dropCasts(gather.getOutput());
    }
  dropCasts(variable.getResult());
  return before - getTensorBytes(variable.getType());
}

struct OffloadOptimizerPass
    : public mlir::memopt::impl::MemOptOffloadOptimizerBase<
          OffloadOptimizerPass> {
  using MemOptOffloadOptimizerBase::MemOptOffloadOptimizerBase;

  void runOnOperation() override {
    func::FuncOp function = getOperation();
    if (function.isExternal())
      return;
    Block &entry = function.getBody().front();
    // The overflow check of a loss-scaled step with accumulation reads the
    // accumulators on the device (they carry the earlier micro-batches'
    // overflow); they would live on the host, unless they stay.
    WalkResult refused = function.walk([&](FoundInfOp check) {
      if (!check.getAccumulators().empty() && !accumulatorsOnDevice) {
        check.emitError("--offload optimizer with dynamic loss scaling and "
                        "--accumulate is not supported: the overflow check "
                        "reads the gradient accumulators, which would live "
                        "on the host (use --offload-accumulators device, "
                        "--precision bf16, or no accumulation)");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (refused.wasInterrupted())
      return signalPassFailure();

    OpBuilder builder(function.getContext());
    int64_t masterBytes = 0, stateBytes = 0, updates = 0;
    int64_t lowParameterCount = 0, savedBytes = 0;
    llvm::DenseSet<Operation *> placed;
    auto placeOnHost = [&](Value value) {
      auto variable = value ? value.getDefiningOp<VariableOp>() : VariableOp();
      if (variable && placed.insert(variable).second) {
        variable->setAttr(kPlacementAttrName, builder.getStringAttr("host"));
        stateBytes += getTensorBytes(variable.getType());
      }
    };
    auto offload = [&](Operation *update, Value param, int64_t shards,
                       ArrayRef<Value> state,
                       Value accumulator) -> LogicalResult {
      if (shards > 1) {
        update->emitError("--offload optimizer cannot offload a sharded "
                          "update (--shard): the host update needs the whole "
                          "parameter");
        return failure();
      }
      auto variable = param.getDefiningOp<VariableOp>();
      if (!variable) {
        update->emitError("the parameter of an offloaded update must be a "
                          "memopt.variable");
        return failure();
      }
      // Other users of the state (the overflow check of the accumulators is
      // refused above) would read host memory from the device.
      for (Value value : state) {
        if (!value)
          continue;
        // A device accumulator is read by the device (the accumulation
        // pass, the overflow check).
        if (accumulatorsOnDevice && value == accumulator)
          continue;
        auto stateVariable = value.getDefiningOp<VariableOp>();
        if (!stateVariable) {
          update->emitError("optimizer state of an offloaded update must be "
                            "memopt.variables");
          return failure();
        }
        for (Operation *user : value.getUsers())
          if (user != update) {
            user->emitError("'")
                << user->getName() << "' reads the optimizer state '"
                << stateVariable.getName()
                << "', which --offload optimizer places on the host";
            return failure();
          }
      }
      builder.setInsertionPointAfter(variable);
      auto master = VariableOp::create(
          builder, variable.getLoc(), variable.getType(),
          builder.getStringAttr(variable.getName() + ".master"),
          builder.getStringAttr("master"), variable.getInitialValueAttr());
      master->setAttr(kPlacementAttrName, builder.getStringAttr("host"));
      masterBytes += getTensorBytes(variable.getType());
      for (Value value : state)
        if (!accumulatorsOnDevice || value != accumulator)
          placeOnHost(value);
      if (auto sgd = dyn_cast<SGDUpdateOp>(update))
        sgd.getMasterMutable().assign(master.getValue());
      else
        cast<AdamWUpdateOp>(update).getMasterMutable().assign(
            master.getValue());
      if (lowParameters) {
        int64_t saved = makeLowParameter(variable, update);
        lowParameterCount += saved > 0;
        savedBytes += saved;
      }
      ++updates;
      return success();
    };
    for (Operation &op : llvm::make_early_inc_range(entry)) {
      LogicalResult result = success();
      if (auto sgd = dyn_cast<SGDUpdateOp>(op)) {
        if (!sgd.getMaster())
          result = offload(sgd, sgd.getParam(), sgd.getShards(),
                           {sgd.getMomentumBuffer(), sgd.getAccumulator()},
                           sgd.getAccumulator());
      } else if (auto adamw = dyn_cast<AdamWUpdateOp>(op)) {
        if (!adamw.getMaster())
          result = offload(
              adamw, adamw.getParam(), adamw.getShards(),
              {adamw.getExpAvg(), adamw.getExpAvgSq(), adamw.getAccumulator()},
              adamw.getAccumulator());
      }
      if (failed(result))
        return signalPassFailure();
    }
    if (updates == 0) {
      function.emitError("--offload optimizer: the function has no optimizer "
                         "update to offload (compile with --train)");
      return signalPassFailure();
    }
    if (report)
      llvm::outs() << "[offload] " << updates
                   << " optimizer updates on the host: masters " << masterBytes
                   << " bytes, optimizer state " << stateBytes
                   << " bytes in pinned host memory; " << lowParameterCount
                   << " working parameters in f16 / bf16 on the device ("
                   << savedBytes << " bytes fewer)\n";
  }
};

} // namespace
