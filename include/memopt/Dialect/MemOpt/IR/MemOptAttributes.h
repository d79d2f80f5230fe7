//===- MemOptAttributes.h - memopt attributes -------------------*- C++ -*-===//
//
// `#memopt.converted`: a weight whose conversion (an f32 -> f16 / bf16 cast,
// a transpose) is recorded, not applied. Mixed precision and the NHWC layout
// used to convert a weight into a new heap blob, so a bf16 inference compile
// held half the model's fp32 bytes again; now they make this attribute over
// the weight's own `dense_resource` handle and the bytes are produced window
// by window where they are needed (the weight-file writer, WeightImage.h;
// passes through `readWeightElements`, WeightBlobs.h).
//
// Taken from: IREE's lazily materialized constants (`#util.byte_pattern`,
// `#stream.parameter.named`: an attribute implementing ElementsAttr that
// names its bytes instead of holding them, materialized by whoever
// serializes the module) and MLIR's `DenseResourceElementsAttr` (the handle
// this attribute wraps). Further: the descriptor composes (a cast then a
// transpose is one attribute over the original file bytes), and every reader
// converts through one bounded window.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTATTRIBUTES_H
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTATTRIBUTES_H

#include "memopt/Dialect/MemOpt/IR/WeightConversion.h"

#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"

#define GET_ATTRDEF_CLASSES
#include "memopt/Dialect/MemOpt/IR/MemOptAttributes.h.inc"

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTATTRIBUTES_H
