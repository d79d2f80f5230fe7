//===- FuzzPipeline.cpp - the graph pipeline, for the fuzz targets --------===//

#include "FuzzPipeline.h"

#include "memopt/Dialect/MemOpt/IR/MemOptDialect.h"
#include "memopt/Dialect/MemOpt/Transforms/Passes.h"
#include "memopt/Import/OnnxImporter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::memopt;

std::unique_ptr<MLIRContext> memopt::fuzz::makeQuietContext() {
  DialectRegistry registry;
  registerImportDialects(registry);
  registry.insert<func::FuncDialect, MemOptDialect>();
  auto context = std::make_unique<MLIRContext>(registry);
  context->loadAllAvailableDialects();
  context->printOpOnDiagnostic(false);
  context->getDiagEngine().registerHandler(
      [](Diagnostic &) { return success(); });
  return context;
}

bool memopt::fuzz::runGraphPipeline(ModuleOp module) {
  if (failed(verify(module)))
    return false;
  PassManager passes(module.getContext());
  passes.enableVerifier(true);
  passes.addPass(createCanonicalizerPass());
  passes.addNestedPass<func::FuncOp>(createMemOptFuseAttention());
  passes.addNestedPass<func::FuncOp>(createMemOptFuseEpilogues());
  passes.addNestedPass<func::FuncOp>(createMemOptFuseElementwise());
  passes.addNestedPass<func::FuncOp>(createMemOptSchedule());
  passes.addNestedPass<func::FuncOp>(createMemOptBufferize());
  MemOptPlanMemoryOptions planOptions;
  planOptions.printReport = false;
  passes.addPass(createMemOptPlanMemory(planOptions));
  return succeeded(passes.run(module));
}
