//===- MemOptOps.h - memopt operations --------------------------*- C++ -*-===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_H
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_H

#include "memopt/Dialect/MemOpt/IR/MemOptDialect.h"
#include "memopt/Dialect/MemOpt/IR/MemOptInterfaces.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h.inc"

namespace mlir {
class OpBuilder;
namespace memopt {
/// `a [..., K] x b` as one 2-D `gemm` between aliasing reshapes: the leading
/// dims of `a` fold into M (a view), `b` is [K, N] ([N, K] with `transB`), and
/// the product is reshaped to `resultType` when that is not 2-D. `a` must have
/// rank >= 2 and K > 0. Used by the matmul-of-transpose canonicalization and
/// by --memopt-fuse-epilogues.
Value createFlattenedGemm(OpBuilder &builder, Location loc, Value a, Value b,
                          bool transB, Type resultType);
} // namespace memopt
} // namespace mlir

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_H
