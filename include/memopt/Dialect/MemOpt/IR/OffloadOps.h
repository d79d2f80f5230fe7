//===- OffloadOps.h - activation offload ops --------------------*- C++ -*-===//
//
// memopt.offload, offload_wait, reload and reload_wait (OffloadOps.td).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_OFFLOADOPS_H
#define MEMOPT_DIALECT_MEMOPT_IR_OFFLOADOPS_H

#include "memopt/Dialect/MemOpt/IR/MemOptDialect.h"
#include "memopt/Dialect/MemOpt/IR/MemOptInterfaces.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::memopt {
/// The side-effect resource of activation offload: the copy streams.
struct CopyStreamResource
    : public SideEffects::Resource::Base<CopyStreamResource> {
  StringRef getName() override { return "CopyStream"; }
};
} // namespace mlir::memopt

#define GET_OP_CLASSES
#include "memopt/Dialect/MemOpt/IR/OffloadOps.h.inc"

#endif // MEMOPT_DIALECT_MEMOPT_IR_OFFLOADOPS_H
