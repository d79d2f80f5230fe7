//===- ShapeUtils.h - ONNX shape rules shared by ops and importer -*- C++
//-*-===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_SHAPEUTILS_H
#define MEMOPT_DIALECT_MEMOPT_IR_SHAPEUTILS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Support/LLVM.h"

#include <optional>

namespace mlir::memopt {

/// ONNX multidirectional (numpy) broadcasting of static shapes. Returns
/// std::nullopt when the shapes are incompatible.
std::optional<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> lhs,
                                                    ArrayRef<int64_t> rhs);

/// Normalizes an ONNX axis in [-rank, rank) to [0, rank); std::nullopt when
/// out of range.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);

} // namespace mlir::memopt

#endif // MEMOPT_DIALECT_MEMOPT_IR_SHAPEUTILS_H
