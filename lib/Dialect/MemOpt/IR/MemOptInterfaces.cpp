//===- MemOptInterfaces.cpp - what memory passes ask of ops ---------------===//

#include "memopt/Dialect/MemOpt/IR/MemOptInterfaces.h"
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

int64_t mlir::memopt::detail::libraryWorkspaceBytes(Operation *op) {
  constexpr int64_t kMaxWorkspaceBytes = int64_t(32) << 20;
  int64_t largest = 0;
  for (Type type : op->getOperandTypes())
    largest = std::max(largest, getTensorBytes(type));
  for (Type type : op->getResultTypes())
    largest = std::max(largest, getTensorBytes(type));
  return std::min(largest, kMaxWorkspaceBytes);
}

int64_t mlir::memopt::detail::convWorkspaceBytes(Operation *op) {
  constexpr int64_t kFloorBytes = int64_t(1) << 20;
  constexpr int64_t kMaxConvWorkspaceBytes = int64_t(1) << 30;
  int64_t bytes = libraryWorkspaceBytes(op);
  if (bytes < kFloorBytes)
    return bytes;
  return std::max(bytes,
                  std::min(2 * defaultBytesMoved(op), kMaxConvWorkspaceBytes));
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
