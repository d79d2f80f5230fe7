//===- HostUpdates.h - what an offloaded optimizer update stages --*- C++
//-*-===//
//
// --offload optimizer (docs/offload.md) gives an update a host master; the
// lowering copies one tensor of the device into the update's staging slot
// for the CPU: the gradient, or with --offload-accumulators device the f32
// gradient accumulator the device summed it into. The planner (the staging
// slot's size, the gradient's live range), the lowering and --fit's time
// model ask here, so they agree on what crosses to the host.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_HOSTUPDATES_H
#define MEMOPT_DIALECT_MEMOPT_IR_HOSTUPDATES_H

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"

#include "mlir/IR/TypeUtilities.h"

namespace mlir::memopt {

/// The parts of an SGD or AdamW update that offloading reads; all null for
/// any other op.
struct HostUpdateOperands {
  Value master, grad, accumulator, foundInf, param;
};
inline HostUpdateOperands getHostUpdateOperands(Operation *op) {
  HostUpdateOperands operands;
  if (auto sgd = dyn_cast<SGDUpdateOp>(op))
    operands = {sgd.getMaster(), sgd.getGrad(), sgd.getAccumulator(),
                sgd.getFoundInf(), sgd.getParam()};
  else if (auto adamw = dyn_cast<AdamWUpdateOp>(op))
    operands = {adamw.getMaster(), adamw.getGrad(), adamw.getAccumulator(),
                adamw.getFoundInf(), adamw.getParam()};
  return operands;
}

/// True for an update --offload optimizer sent to the host (it has a master).
inline bool isHostUpdate(Operation *op) {
  return bool(getHostUpdateOperands(op).master);
}

/// True when the offloaded update's gradient accumulator stayed on the
/// device (--offload-accumulators device): the device sums the gradient
/// into it and the update stages the sum.
inline bool accumulatesOnDevice(Operation *op) {
  HostUpdateOperands operands = getHostUpdateOperands(op);
  return operands.master && operands.accumulator &&
         !isHostPlaced(operands.accumulator);
}

/// The device tensor an offloaded update copies to its staging slot: the
/// device accumulator, or the gradient. Null for other ops.
inline Value getStagedValue(Operation *op) {
  HostUpdateOperands operands = getHostUpdateOperands(op);
  if (!operands.master)
    return Value();
  return accumulatesOnDevice(op) ? operands.accumulator : operands.grad;
}

/// True when the offloaded update's device parameter is a low working copy
/// (f16 / bf16, MemOpt_MasterArg): the CPU rounds the master into the
/// staging slot and that is what the copy back carries.
inline bool hasLowWorkingParameter(Operation *op) {
  HostUpdateOperands operands = getHostUpdateOperands(op);
  return operands.master && operands.param &&
         !getElementTypeOrSelf(operands.param.getType()).isF32();
}

/// The bytes of an offloaded update's staging slot: kHostStagingScalarBytes
/// of scalars, the staged value, and for a low working parameter its
/// rounded copy at kHostStagingScalarBytes + the staged bytes rounded up to
/// kHostStagingScalarBytes (the runtime's getHostLowCopyOffset). The
/// staged part is rewritten every run; the low copy only by the CPU, so it
/// holds the master's rounding from one step to the next. 0 for other ops.
inline int64_t getStagingSlotBytes(Operation *op) {
  Value staged = getStagedValue(op);
  if (!staged)
    return 0;
  int64_t stagedBytes = getTensorBytes(staged.getType());
  if (!hasLowWorkingParameter(op))
    return kHostStagingScalarBytes + stagedBytes;
  int64_t rounded = (stagedBytes + kHostStagingScalarBytes - 1) /
                    kHostStagingScalarBytes * kHostStagingScalarBytes;
  return kHostStagingScalarBytes + rounded +
         getTensorBytes(getHostUpdateOperands(op).param.getType());
}

/// The arena gradient whose copy out the compute stream waits for only at
/// the next offloaded update (or the step's end), so its live range extends
/// to there (BufferLiveness). Null for any other op, for a device
/// accumulator (a weight-region variable, not rewritten before the step's
/// end), and under dynamic loss scaling (the copy is waited for at once:
/// update_loss_scale rewrites the scalars it carries).
inline Value getDeferredOffloadGradient(Operation *op) {
  HostUpdateOperands operands = getHostUpdateOperands(op);
  if (!operands.master || operands.foundInf || accumulatesOnDevice(op))
    return Value();
  return operands.grad;
}

} // namespace mlir::memopt

#endif // MEMOPT_DIALECT_MEMOPT_IR_HOSTUPDATES_H
