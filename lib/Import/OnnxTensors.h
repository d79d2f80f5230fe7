//===- OnnxTensors.h - ONNX tensors and types -> MLIR -----------*- C++ -*-===//
//
// Private to the importer: element types, TensorProto payloads (raw_data,
// typed fields, external data files) and the choice between inline `dense`
// and `dense_resource` attributes.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_IMPORT_ONNXTENSORS_H
#define MEMOPT_LIB_IMPORT_ONNXTENSORS_H

#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"

#include "onnx/onnx_pb.h"

namespace mlir::memopt::onnx_import {

/// Tensors with at most this many elements become inline `dense<...>`
/// attributes (shapes, scalars, small biases) so folders can read them;
/// larger ones become `dense_resource` blobs.
inline constexpr int64_t kMaxInlineElements = 1024;

/// The MLIR element type of an ONNX `TensorProto::DataType`, or a null type
/// when memopt does not support it.
Type convertElementType(int32_t onnxType, MLIRContext *context);

/// A readable name of an ONNX data type ("FLOAT16", "STRING", ...).
StringRef onnxTypeName(int32_t onnxType);

/// The ONNX data type of an MLIR element type (for Cast's `to` round trip).
/// Returns 0 (UNDEFINED) when there is none.
int32_t onnxTypeOf(Type elementType);

/// Converts an ONNX tensor (initializer or Constant node value) into an
/// elements attribute. `modelFolder` is where external data is looked up.
/// Reports an error at `loc` that names the tensor and returns null on
/// failure.
/// Moves external data of `tensor` into its raw_data (for a self-contained
/// copy of the model); a tensor without external data is left alone.
LogicalResult inlineExternalData(onnx::TensorProto &tensor,
                                 StringRef modelFolder, Location loc);

ElementsAttr convertTensor(const onnx::TensorProto &tensor,
                           StringRef modelFolder, Location loc);

} // namespace mlir::memopt::onnx_import

#endif // MEMOPT_LIB_IMPORT_ONNXTENSORS_H
