//===- MemOptOps.cpp - memopt operations ----------------------------------===//
//
// The generated op classes and the constant op. The other ops live next to
// their family: ElementwiseOps.cpp, ShapeOps.cpp, NeuralNetOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::memopt;

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

#define GET_OP_CLASSES
#include "memopt/Dialect/MemOpt/IR/MemOptOps.cpp.inc"
