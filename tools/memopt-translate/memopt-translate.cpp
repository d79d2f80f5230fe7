//===- memopt-translate.cpp - ONNX -> memopt translation driver -----------===//
//
// A thin main around lib/Import: `memopt-translate --import-onnx model.onnx`
// prints the imported module. It is not built on mlirTranslateMain because
// the importer needs the model's path (external data lives next to it) and
// every failure, a missing file included, must come out as one `error:`
// diagnostic.
//
//===----------------------------------------------------------------------===//

#include "memopt/Import/OnnxImporter.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

static llvm::cl::OptionCategory category("memopt-translate options");

static llvm::cl::opt<std::string> inputFile(llvm::cl::Positional,
                                            llvm::cl::desc("<model>"),
                                            llvm::cl::Required,
                                            llvm::cl::cat(category));

static llvm::cl::opt<bool>
    importOnnx("import-onnx",
               llvm::cl::desc("Import an ONNX model (binary .onnx, or ONNX "
                              "text format .onnxtext) into the memopt "
                              "dialect"),
               llvm::cl::cat(category));

static llvm::cl::list<std::string> inputShapes(
    "input-shape",
    llvm::cl::desc("Static shape of a graph input, NAME=DIMxDIMx... "
                   "(repeatable and comma-separable; NAME= for a scalar)"),
    llvm::cl::value_desc("name=shape"), llvm::cl::CommaSeparated,
    llvm::cl::cat(category));

static llvm::cl::opt<std::string>
    functionName("function-name",
                 llvm::cl::desc("Name of the imported function"),
                 llvm::cl::init("main"), llvm::cl::cat(category));

static llvm::cl::opt<int64_t> foldLimitElements(
    "fold-limit-elements",
    llvm::cl::desc("Evaluate ops of constants that no folder folds with the "
                   "host kernels when no operand or result has more elements "
                   "than this (0: never)"),
    llvm::cl::init(int64_t(1) << 20), llvm::cl::cat(category));

static llvm::cl::opt<std::string> outputFile("o", llvm::cl::desc("Output file"),
                                             llvm::cl::value_desc("filename"),
                                             llvm::cl::init("-"),
                                             llvm::cl::cat(category));

/// "model.onnx" for a location inside the model file, the tool's name for
/// command-line problems, else the location itself.
static std::string describeLocation(Location loc) {
  if (isa<UnknownLoc>(loc))
    return "memopt-translate";
  if (auto fileLoc = loc->findInstanceOf<FileLineColLoc>())
    return fileLoc.getFilename().str();
  std::string text;
  llvm::raw_string_ostream os(text);
  loc.print(os);
  return text;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  llvm::cl::ParseCommandLineOptions(argc, argv,
                                    "memopt ONNX translation driver\n");

  DialectRegistry registry;
  memopt::registerImportDialects(registry);
  MLIRContext context(registry);
  context.getDiagEngine().registerHandler([](Diagnostic &diag) {
    const char *kind = diag.getSeverity() == DiagnosticSeverity::Error ? "error"
                       : diag.getSeverity() == DiagnosticSeverity::Warning
                           ? "warning"
                           : "note";
    llvm::errs() << describeLocation(diag.getLocation()) << ": " << kind << ": "
                 << diag << "\n";
    for (Diagnostic &note : diag.getNotes())
      llvm::errs() << describeLocation(note.getLocation()) << ": note: " << note
                   << "\n";
    return success();
  });

  if (!importOnnx) {
    emitError(UnknownLoc::get(&context))
        << "no translation chosen; pass --import-onnx";
    return 1;
  }
  memopt::ImportOptions options;
  options.functionName = functionName;
  options.foldLimitElements = foldLimitElements;
  for (const std::string &spec : inputShapes) {
    std::string message;
    if (failed(memopt::parseInputShapeSpec(spec, options, message))) {
      emitError(UnknownLoc::get(&context)) << message;
      return 1;
    }
  }

  auto module = memopt::importOnnxModel(inputFile, context, options);
  if (failed(module))
    return 1;

  std::string errorMessage;
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFile, &errorMessage);
  if (!output) {
    emitError(UnknownLoc::get(&context)) << errorMessage;
    return 1;
  }
  (*module)->print(output->os(), OpPrintingFlags());
  output->os() << "\n";
  output->keep();
  return 0;
}
