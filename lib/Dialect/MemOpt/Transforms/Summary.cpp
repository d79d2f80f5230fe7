//===- Summary.cpp - per-op counts and bytes ------------------------------===//

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

namespace mlir::memopt {
#define GEN_PASS_DEF_MEMOPTSUMMARY
#include "memopt/Dialect/MemOpt/Transforms/Passes.h.inc"
} // namespace mlir::memopt

using namespace mlir;
using namespace mlir::memopt;

namespace {
struct FunctionSummary {
  std::map<std::string, int64_t> opCounts;
  int64_t numOps = 0;
  int64_t numConstants = 0;
  int64_t numActivations = 0;
  int64_t weightBytes = 0;
  int64_t activationBytes = 0;
  int64_t inputBytes = 0;
  int64_t outputBytes = 0;
};

FunctionSummary summarize(func::FuncOp function) {
  FunctionSummary summary;
  for (BlockArgument argument : function.getArguments())
    summary.inputBytes += getTensorBytes(argument.getType());
  for (Type type : function.getResultTypes())
    summary.outputBytes += getTensorBytes(type);
  function.walk([&](Operation *op) {
    if (op->getDialect() != op->getContext()->getLoadedDialect<MemOptDialect>())
      return;
    ++summary.numOps;
    ++summary.opCounts[op->getName().stripDialect().str()];
    int64_t bytes = 0;
    for (Type type : op->getResultTypes())
      bytes += getTensorBytes(type);
    if (isWeightRegionOp(op)) {
      ++summary.numConstants;
      summary.weightBytes += bytes;
    } else {
      summary.numActivations += op->getNumResults();
      summary.activationBytes += bytes;
    }
  });
  return summary;
}

void print(func::FuncOp function, const FunctionSummary &summary,
           raw_ostream &os) {
  os << "memopt summary of @" << function.getSymName() << "\n";
  os << "  ops: " << summary.numOps << " (" << summary.opCounts.size()
     << " kinds)\n";
  for (const auto &[name, count] : summary.opCounts)
    os << "    " << llvm::left_justify(name, 24) << count << "\n";
  os << "  tensors: " << summary.numConstants << " constants, "
     << summary.numActivations << " activations\n";
  os << "  weights_bytes: " << summary.weightBytes << "\n";
  os << "  activation_bytes: " << summary.activationBytes
     << " (sum of all intermediate results, no reuse)\n";
  os << "  io_bytes: " << summary.inputBytes + summary.outputBytes
     << " (inputs " << summary.inputBytes << ", outputs " << summary.outputBytes
     << ")\n";
}

struct MemOptSummaryPass
    : public mlir::memopt::impl::MemOptSummaryBase<MemOptSummaryPass> {
  using MemOptSummaryBase::MemOptSummaryBase;

  void runOnOperation() override {
    std::string errorMessage;
    std::unique_ptr<llvm::ToolOutputFile> output =
        openOutputFile(outputFile, &errorMessage);
    if (!output) {
      getOperation().emitError("cannot open summary output: ") << errorMessage;
      return signalPassFailure();
    }
    getOperation().walk([&](func::FuncOp function) {
      print(function, summarize(function), output->os());
    });
    output->keep();
    markAllAnalysesPreserved();
  }
};
} // namespace
