//===- MemOptDialect.cpp - memopt dialect ---------------------------------===//

#include "memopt/Dialect/MemOpt/IR/MemOptDialect.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/IR/OffloadOps.h"

using namespace mlir;
using namespace mlir::memopt;

#include "memopt/Dialect/MemOpt/IR/MemOptOpsDialect.cpp.inc"

void MemOptDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "memopt/Dialect/MemOpt/IR/MemOptOps.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "memopt/Dialect/MemOpt/IR/OffloadOps.cpp.inc"
      >();
  registerAttributes();
  attachGradientModels(*getContext());
}

Operation *MemOptDialect::materializeConstant(OpBuilder &builder,
                                              Attribute value, Type type,
                                              Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}
