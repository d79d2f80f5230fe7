//===- memopt-translate.cpp - ONNX -> memopt translation driver -----------===//
//
// Registers `--import-onnx` (lib/Import) as an MLIR translation and hands
// over to mlirTranslateMain, like mlir-translate.
//
//===----------------------------------------------------------------------===//

#include "memopt/Import/OnnxImporter.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

static llvm::cl::list<std::string> inputShapes(
    "input-shape",
    llvm::cl::desc("Static shape of a graph input: NAME=DIMxDIMx... "
                   "(repeatable, comma-separable; NAME= for a scalar)"),
    llvm::cl::value_desc("name=shape"), llvm::cl::CommaSeparated);

static llvm::cl::opt<std::string>
    functionName("function-name",
                 llvm::cl::desc("Name of the imported function"),
                 llvm::cl::init("main"));

static OwningOpRef<Operation *> importOnnx(llvm::SourceMgr &sourceMgr,
                                           MLIRContext *context) {
  memopt::ImportOptions options;
  options.functionName = functionName;
  for (const std::string &spec : inputShapes) {
    std::string message;
    if (failed(memopt::parseInputShapeSpec(spec, options, message))) {
      emitError(UnknownLoc::get(context)) << message;
      return nullptr;
    }
  }
  const llvm::MemoryBuffer *buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  auto module = memopt::importOnnxModelFromBuffer(
      buffer->getBuffer(), buffer->getBufferIdentifier(), *context, options);
  if (failed(module))
    return nullptr;
  return OwningOpRef<Operation *>(module->release());
}

int main(int argc, char **argv) {
  TranslateToMLIRRegistration importRegistration(
      "import-onnx",
      "Import an ONNX model (binary .onnx or text .onnxtext) into the memopt "
      "dialect",
      importOnnx, memopt::registerImportDialects);
  return failed(
      mlirTranslateMain(argc, argv, "memopt ONNX translation driver\n"));
}
