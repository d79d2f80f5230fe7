//===- MemOptInterfaces.cpp - what memory passes ask of ops ---------------===//

#include "memopt/Dialect/MemOpt/IR/MemOptInterfaces.h"
#include "memopt/Runtime/Workspace.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;

bool mlir::memopt::isBoundedTensorType(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasStaticShape())
    return false;
  int64_t bitWidth = shaped.getElementTypeBitWidth();
  int64_t bytes = bitWidth < 8 ? 1 : bitWidth / 8;
  for (int64_t dim : shaped.getShape())
    if (dim < 0 || llvm::MulOverflow(bytes, dim, bytes) ||
        bytes > kMaxTensorBytes)
      return false;
  return true;
}

int64_t mlir::memopt::getTensorBytes(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasStaticShape())
    return 0;
  int64_t bitWidth = shaped.getElementTypeBitWidth();
  int64_t elementBytes = bitWidth < 8 ? 1 : bitWidth / 8;
  return shaped.getNumElements() * elementBytes;
}

int64_t mlir::memopt::detail::defaultFlops(Operation *op) {
  int64_t flops = 0;
  for (Type type : op->getResultTypes())
    if (auto shaped = dyn_cast<ShapedType>(type);
        shaped && shaped.hasStaticShape())
      flops += shaped.getNumElements();
  return flops;
}

int64_t mlir::memopt::detail::defaultBytesMoved(Operation *op) {
  int64_t bytes = 0;
  for (Type type : op->getOperandTypes())
    bytes += getTensorBytes(type);
  for (Type type : op->getResultTypes())
    bytes += getTensorBytes(type);
  return bytes;
}

/// The largest operand or result of `op`, in bytes.
static int64_t largestTensorBytes(Operation *op) {
  using mlir::memopt::getTensorBytes;
  int64_t largest = 0;
  for (Type type : op->getOperandTypes())
    largest = std::max(largest, getTensorBytes(type));
  for (Type type : op->getResultTypes())
    largest = std::max(largest, getTensorBytes(type));
  return largest;
}

int64_t mlir::memopt::detail::libraryWorkspaceBytes(Operation *op) {
  return ::memopt::workspace::libraryBytes(largestTensorBytes(op));
}

int64_t mlir::memopt::detail::convWorkspaceBytes(Operation *op) {
  return ::memopt::workspace::convBytes(largestTensorBytes(op),
                                        defaultBytesMoved(op));
}

int64_t mlir::memopt::detail::convWorkspaceFloor(Operation *op,
                                                 bool channelsLast) {
  constexpr int64_t kFloorBytes = int64_t(1) << 20;
  auto x = dyn_cast<ShapedType>(op->getOperand(0).getType());
  if (channelsLast || !x ||
      !isa<Float16Type, BFloat16Type>(x.getElementType()) ||
      libraryWorkspaceBytes(op) < kFloorBytes)
    return -1;
  return std::min(defaultBytesMoved(op) + defaultBytesMoved(op) / 10,
                  convWorkspaceBytes(op));
}

#include "memopt/Dialect/MemOpt/IR/MemOptInterfaces.cpp.inc"
