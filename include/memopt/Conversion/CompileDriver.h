//===- CompileDriver.h - the memopt-compile driver --------------*- C++ -*-===//
//
// The library behind `memopt-compile`: import an ONNX model (or read MLIR),
// run the compile pipeline (memopt/Dialect/MemOpt/Transforms/
// CompilePipeline.h: the registered `--memopt-compile-pipeline`), lower the
// planned function to a C++ program (EmitProgram.h) and, on request, build it
// with the system compiler against a runtime backend. The tool only parses
// flags into CompileOptions (CompileOptions.h;
// its fields are the lines of CompileOptions.def).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_CONVERSION_COMPILEDRIVER_H
#define MEMOPT_CONVERSION_COMPILEDRIVER_H

#include "memopt/Conversion/CompileOptions.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::memopt {

/// Imports the model and runs the compile pipeline up to the plan (no
/// emission, no report): what --fit measures each candidate with. Errors go
/// to the context's diagnostics and `errors`.
FailureOr<OwningOpRef<ModuleOp>> planModule(const CompileOptions &options,
                                            MLIRContext &context,
                                            llvm::raw_ostream &errors);

/// Runs the whole pipeline. Returns 0 on success; on failure one clear
/// message is printed on `errors` (stderr by default) and the result is
/// non-zero. Phase lines, the reports and the build command go to `log`
/// (unless CompileOptions::quiet).
int runCompile(const CompileOptions &options, llvm::raw_ostream &log);
int runCompile(const CompileOptions &options, llvm::raw_ostream &log,
               llvm::raw_ostream &errors);

} // namespace mlir::memopt

#endif // MEMOPT_CONVERSION_COMPILEDRIVER_H
