//===- MemOptDialect.td - memopt graph dialect -------------*- tablegen -*-===//
//
// The `memopt` dialect holds tensor operations with ONNX semantics and static
// shapes. It is what the ONNX importer produces and what the memory passes
// (scheduling, rematerialization, mixed precision, in-place reuse, planning)
// rewrite.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTDIALECT_TD
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTDIALECT_TD

include "mlir/IR/OpBase.td"

def MemOpt_Dialect : Dialect {
  let name = "memopt";
  let summary = "Tensor operations with ONNX semantics and static shapes";
  let description = [{
    Every value is a ranked tensor with a static shape. Operations follow the
    ONNX operator of the same name; inputs that ONNX allows to be computed at
    run time but which decide shapes (Reshape's shape, Slice's starts, the
    axes of reductions, ...) are compile-time attributes here: the importer
    folds the sub-graph that produces them. Weights are `memopt.constant`
    operations holding `dense_resource` blobs, so large tensors never appear
    as text; a weight converted by a pass (a cast, a transpose) is a
    `#memopt.converted` attribute over its blob (MemOptAttributes.td).
  }];
  let cppNamespace = "::mlir::memopt";
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    /// Adds MemOptAttributes.td's attributes (MemOptAttributes.cpp).
    void registerAttributes();
  }];
  let hasConstantMaterializer = 1;
}

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTDIALECT_TD
