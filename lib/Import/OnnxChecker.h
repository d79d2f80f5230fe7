//===- OnnxChecker.h - ONNX model validation before import ------*- C++ -*-===//
//
// Private to the importer: the structural checks of ONNX's own checker
// (libonnx) run on the whole model before any node is imported, so a node
// that does not match its operator's schema is refused with a message naming
// it instead of reaching the dialect.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_IMPORT_ONNXCHECKER_H
#define MEMOPT_LIB_IMPORT_ONNXCHECKER_H

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/LLVM.h"

#include "onnx/onnx_pb.h"

namespace mlir::memopt::onnx_import {

/// Checks `model` with libonnx's checker: every initializer (check_tensor),
/// every attribute (check_attribute), every node against its operator schema
/// at the model's opset (arity, empty required inputs, attribute names and
/// types), topological order and single assignment of every name. `path` is
/// the model file (locations and the folder of external data). Reports the
/// first problem, naming the node or value, at a location in `path`.
LogicalResult checkOnnxModel(const onnx::ModelProto &model, StringRef path,
                             MLIRContext &context);

} // namespace mlir::memopt::onnx_import

#endif // MEMOPT_LIB_IMPORT_ONNXCHECKER_H
