//===- OnnxImporter.h - ONNX model -> memopt dialect ------------*- C++ -*-===//
//
// Entry points of the ONNX importer: a model file (binary protobuf or ONNX's
// text format) becomes a module with one `func.func @main` whose arguments
// are the graph inputs and whose results are the graph outputs, every value a
// statically shaped tensor and every weight a `memopt.constant`.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_IMPORT_ONNXIMPORTER_H
#define MEMOPT_IMPORT_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringMap.h"

#include <cstdint>
#include <string>

namespace mlir::memopt {

/// Options of the importer (the command-line flags of memopt-translate and
/// memopt-compile map onto these fields).
struct ImportOptions {
  /// Static shapes of graph inputs by name; they replace symbolic or unknown
  /// dimensions (and must agree with the dimensions the model fixes).
  llvm::StringMap<SmallVector<int64_t>> inputShapes;
  /// The shapes in inputShapes may also change dimensions the model fixes
  /// (memopt-compile --fit re-batches a model this way; shape inference then
  /// names the node where a batch size is baked in).
  bool replaceFixedDims = false;
  /// Name of the function; empty means `main`.
  std::string functionName;
  /// Ops whose operands are all constants but that no folder folds are
  /// evaluated at import by the host kernels when no operand or result has
  /// more elements than this (docs/import.md); 0 turns that off.
  int64_t foldLimitElements = int64_t(1) << 20;
};

/// Parses `spec` ("NAME=8x3x224x224", several separated by commas; "NAME="
/// for a scalar) into `options.inputShapes`. On failure returns a message
/// saying what is wrong with the text.
LogicalResult parseInputShapeSpec(StringRef spec, ImportOptions &options,
                                  std::string &errorMessage);

/// Imports the model stored at `path`. Files ending in `.onnxtext` are parsed
/// as ONNX's text format, others as a binary ModelProto. External data files
/// are looked up relative to the folder of `path`. Errors are reported
/// through the context's diagnostic engine.
FailureOr<OwningOpRef<ModuleOp>> importOnnxModel(StringRef path,
                                                 MLIRContext &context,
                                                 const ImportOptions &options);

/// As above, with the file's contents already in memory; `path` is used for
/// the format, the locations and the folder of external data.
FailureOr<OwningOpRef<ModuleOp>>
importOnnxModelFromBuffer(StringRef contents, StringRef path,
                          MLIRContext &context, const ImportOptions &options);

/// Writes the model at `path` without the initializers named in `omit` and
/// with every other initializer's external data inlined: the template the
/// training executable completes with its trained parameters (--save). The
/// ONNX text format is written as binary. Errors go to the context.
LogicalResult writeTrainingTemplate(StringRef path, ArrayRef<std::string> omit,
                                    StringRef outputPath, MLIRContext &context);

/// Registers the dialects an imported module uses.
void registerImportDialects(DialectRegistry &registry);

} // namespace mlir::memopt

#endif // MEMOPT_IMPORT_ONNXIMPORTER_H
