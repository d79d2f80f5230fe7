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
namespace mo = mlir::memopt;

namespace memopt::fuzz {

std::unique_ptr<MLIRContext> makeQuietContext() {
  DialectRegistry registry;
  mo::registerImportDialects(registry);
  registry.insert<func::FuncDialect, mo::MemOptDialect>();
  // No thread pool: one context per fuzz input, and the passes run on one
  // thread anyway.
  auto context =
      std::make_unique<MLIRContext>(registry, MLIRContext::Threading::DISABLED);
  context->loadAllAvailableDialects();
  context->printOpOnDiagnostic(false);
  context->getDiagEngine().registerHandler(
      [](Diagnostic &) { return success(); });
  return context;
}

bool runGraphPipeline(ModuleOp module) {
  if (failed(verify(module)))
    return false;
  PassManager passes(module.getContext());
  passes.enableVerifier(true);
  passes.addPass(createCanonicalizerPass());
  passes.addNestedPass<func::FuncOp>(mo::createMemOptFuseAttention());
  passes.addNestedPass<func::FuncOp>(mo::createMemOptFuseEpilogues());
  passes.addNestedPass<func::FuncOp>(mo::createMemOptFuseElementwise());
  passes.addNestedPass<func::FuncOp>(mo::createMemOptSchedule());
  passes.addNestedPass<func::FuncOp>(mo::createMemOptBufferize());
  mo::MemOptPlanMemoryOptions planOptions;
  planOptions.printReport = false;
  passes.addPass(mo::createMemOptPlanMemory(planOptions));
  return succeeded(passes.run(module));
}

} // namespace memopt::fuzz
