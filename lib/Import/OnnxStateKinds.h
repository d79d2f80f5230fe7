//===- OnnxStateKinds.h - which initializers are parameters -----*- C++ -*-===//
//
// Private to the importer: classifies a graph's initializers into the
// module's parameters, its buffers and constants (OnnxStateKinds.cpp says
// from what).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_IMPORT_ONNXSTATEKINDS_H
#define MEMOPT_LIB_IMPORT_ONNXSTATEKINDS_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringMap.h"

#include "onnx/onnx_pb.h"

namespace mlir::memopt::onnx_import {

enum class StateKind { Unknown, Parameter, Buffer, Constant };

/// "parameter", "buffer", "constant"; "" for Unknown.
StringRef stateKindName(StateKind kind);

/// The kind of each initializer the model's metadata or naming decides;
/// initializers nothing decides are absent.
llvm::StringMap<StateKind> classifyInitializers(const onnx::GraphProto &graph);

} // namespace mlir::memopt::onnx_import

#endif // MEMOPT_LIB_IMPORT_ONNXSTATEKINDS_H
