//===- FuzzPipeline.h - the graph pipeline, for the fuzz targets -*- C++-*-===//
//
// What memopt-compile runs between import and lowering (CompileDriver.cpp):
// canonicalize, attention, epilogue and elementwise fusion, schedule,
// bufferize, plan-memory; and a context whose diagnostics go nowhere, so a
// fuzz run prints only what libFuzzer prints.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_FUZZ_FUZZPIPELINE_H
#define MEMOPT_FUZZ_FUZZPIPELINE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include <memory>

namespace memopt::fuzz {

/// A context with memopt's dialects loaded and diagnostics swallowed.
std::unique_ptr<mlir::MLIRContext> makeQuietContext();

/// Runs the graph pipeline up to and including memory planning on a module
/// that verified; returns whether every pass succeeded.
bool runGraphPipeline(mlir::ModuleOp module);

} // namespace memopt::fuzz

#endif // MEMOPT_FUZZ_FUZZPIPELINE_H
