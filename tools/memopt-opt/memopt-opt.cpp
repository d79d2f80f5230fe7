//===- memopt-opt.cpp - memopt pass runner --------------------------------===//
//
// Registers the memopt dialect, the upstream dialects its pipeline uses and
// every memopt pass and the compile pipeline
// (--memopt-compile-pipeline), then hands over to MlirOptMain.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/MemOpt/IR/MemOptDialect.h"
#include "memopt/Dialect/MemOpt/Transforms/CompilePipeline.h"
#include "memopt/Dialect/MemOpt/Transforms/Passes.h"
#include "memopt/Evaluate/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerTransformsPasses();
  mlir::memopt::registerMemOptPasses();
  mlir::memopt::registerMemOptEvaluatePasses();
  mlir::memopt::registerCompilePipeline();

  mlir::DialectRegistry registry;
  registry.insert<mlir::memopt::MemOptDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::memref::MemRefDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "memopt optimizer driver\n", registry));
}
