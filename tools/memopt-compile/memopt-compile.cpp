//===- memopt-compile.cpp - ONNX model -> executable ----------------------===//
//
//   memopt-compile model.onnx -o OUT [--target cuda|host] [--train] ...
//
// Thin: the flags are the lines of CompileOptions.def, bound to llvm::cl by
// CompileCommandLine; the pipeline is in lib/Conversion (CompileDriver.cpp).
// `--help` lists them by category; docs/cli.md is their reference
// (`--print-options-markdown` prints it).
//
//===----------------------------------------------------------------------===//

#include "memopt/Conversion/CompileCommandLine.h"
#include "memopt/Conversion/CompileDriver.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"

using namespace mlir::memopt;
namespace cl = llvm::cl;

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // Printing the reference needs no model: handled before the parser
  // requires one.
  for (int index = 1; index < argc; ++index)
    if (llvm::StringRef(argv[index]) == "--print-options-markdown") {
      printCompileOptionsMarkdown(llvm::outs());
      return 0;
    }
  CompileOptions options;
  CompileCommandLine commandLine(options);
  cl::OptionCategory toolCategory("memopt-compile");
  cl::opt<bool> printMarkdown(
      "print-options-markdown",
      cl::desc("Print the flag reference of docs/cli.md (Markdown) and exit"),
      cl::cat(toolCategory));
  llvm::SmallVector<const cl::OptionCategory *> categories =
      commandLine.getCategories();
  categories.push_back(&toolCategory);
  cl::HideUnrelatedOptions(categories);
  cl::ParseCommandLineOptions(argc, argv, "memopt ONNX compiler\n");
  std::string message;
  if (mlir::failed(commandLine.apply(message))) {
    llvm::errs() << "memopt-compile: error: " << message << "\n";
    return 1;
  }
  return runCompile(options, llvm::outs());
}
