//===- CostModel.cpp - estimated op times on a roofline -------------------===//

#include "memopt/Analysis/CostModel.h"
#include "memopt/Analysis/MemoryReport.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::memopt;

Roofline Roofline::h100() {
  Roofline roofline;
  roofline.name = "H100 SXM (67 TFLOP/s f32, 495 TFLOP/s tf32, 989 TFLOP/s "
                  "f16/bf16, 3.35 TB/s, 2 us per kernel)";
  roofline.f32FlopsPerSecond = 67e12;
  roofline.tf32FlopsPerSecond = 494.7e12;
  roofline.lowFlopsPerSecond = 989e12;
  roofline.bytesPerSecond = 3.35e12;
  roofline.kernelSeconds = 2e-6;
  return roofline;
}

FailureOr<KernelTimes> mlir::memopt::readKernelTimes(StringRef path,
                                                     std::string &error) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    error = "cannot read kernel times '" + path.str() +
            "': " + buffer.getError().message();
    return failure();
  }
  llvm::Expected<llvm::json::Value> parsed =
      llvm::json::parse((*buffer)->getBuffer());
  if (!parsed) {
    error = "kernel times '" + path.str() +
            "' is not JSON: " + llvm::toString(parsed.takeError());
    return failure();
  }
  const llvm::json::Object *object = parsed->getAsObject();
  if (!object) {
    error = "kernel times '" + path.str() +
            "' must be an object {\"NODE\": seconds, ...}";
    return failure();
  }
  KernelTimes times;
  for (const auto &[name, value] : *object) {
    std::optional<double> seconds = value.getAsNumber();
    if (!seconds || !std::isfinite(*seconds) || *seconds < 0) {
      error = "kernel times '" + path.str() + "': the time of '" + name.str() +
              "' must be a number of seconds >= 0";
      return failure();
    }
    times[name.str()] = *seconds;
  }
  return times;
}

int64_t mlir::memopt::getOpFlops(Operation *op) {
  auto cost = dyn_cast<CostOpInterface>(op);
  return cost ? cost.getFlops() : 0;
}

bool mlir::memopt::isTensorCoreContraction(Operation *op) {
  return isa<MatMulOp, GemmOp, ConvOp, ConvTransposeOp, ConvBackwardFilterOp,
             NormReluConvOp, NormReluConvBackwardFilterOp, AttentionOp,
             AttentionGradOp, LinearCrossEntropyOp, LinearCrossEntropyGradOp>(
      op);
}

/// True for an f32 contraction of a function compiled with TF32.
static bool computesInTf32(Operation *op) {
  if (!isTensorCoreContraction(op) || op->getNumOperands() == 0 ||
      !getElementTypeOrSelf(op->getOperand(0).getType()).isF32())
    return false;
  auto function = op->getParentOfType<FunctionOpInterface>();
  auto precision = function
                       ? function->getAttrOfType<StringAttr>("memopt.precision")
                       : StringAttr();
  return precision && precision.getValue() == "tf32";
}

/// True if the op computes in a 16-bit float type (tensor cores).
static bool computesInLowPrecision(Operation *op) {
  auto isLow = [](Type type) {
    Type element = getElementTypeOrSelf(type);
    return element.isF16() || element.isBF16();
  };
  return llvm::any_of(op->getOperandTypes(), isLow) ||
         llvm::any_of(op->getResultTypes(), isLow);
}

std::string mlir::memopt::kernelTimeKey(StringRef name, StringRef kind) {
  return (name + " @ " + kind).str();
}

double mlir::memopt::estimateOpSeconds(Operation *op, const Roofline &roofline,
                                       const KernelTimes *times) {
  auto cost = dyn_cast<CostOpInterface>(op);
  if (!cost)
    return 0;
  if (times && !times->empty()) {
    std::string name = getOpName(op);
    if (auto it =
            times->find(kernelTimeKey(name, op->getName().getStringRef()));
        it != times->end())
      return it->second;
    if (auto it = times->find(name); it != times->end())
      return it->second;
  }
  int64_t flops = cost.getFlops();
  int64_t bytes = cost.getBytesMoved();
  if (flops == 0 && bytes == 0)
    return 0;
  double peak = computesInLowPrecision(op) ? roofline.lowFlopsPerSecond
                : computesInTf32(op)       ? roofline.tf32FlopsPerSecond
                                           : roofline.f32FlopsPerSecond;
  return std::max(double(flops) / peak,
                  double(bytes) / roofline.bytesPerSecond) +
         roofline.kernelSeconds;
}
