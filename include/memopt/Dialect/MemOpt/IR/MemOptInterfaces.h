//===- MemOptInterfaces.h - what memory passes ask of ops -------*- C++ -*-===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTINTERFACES_H
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTINTERFACES_H

#include "mlir/IR/OpDefinition.h"

namespace mlir::memopt {
namespace detail {
/// One flop per result element.
int64_t defaultFlops(Operation *op);
/// Every operand read once plus every result written once, in bytes.
int64_t defaultBytesMoved(Operation *op);
/// The library-call workspace policy (cuDNN convolutions, cuBLASLt GEMMs): as
/// many bytes as the largest operand or result, at most 32 MiB (cuBLASLt's
/// recommendation on Hopper; enough for cuDNN's implicit-GEMM and most
/// Winograd/FFT-tiled algorithms on inference shapes). It is a maximum: the
/// planner promises a 1 MiB floor and grows the rest into free arena bytes
/// (planner::growIntoFreeSpace), so a workspace never raises the arena by
/// more than the floor.
int64_t convolutionWorkspaceBytes(Operation *op);
} // namespace detail

/// Size in bytes of a statically shaped tensor (i1 is stored as one byte).
int64_t getTensorBytes(Type type);
} // namespace mlir::memopt

#include "memopt/Dialect/MemOpt/IR/MemOptInterfaces.h.inc"

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTINTERFACES_H
