//===- MemOptOps.cpp - memopt operations ----------------------------------===//
//
// Verifiers, result-type inference (the ONNX shape rules), folders and the
// memory-behavior interface of each op.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/IR/ShapeUtils.h"
#include "mlir/Dialect/CommonFolders.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::memopt;

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

/// Constants with at most this many elements are folded at compile time; the
/// limit keeps folding to shape arithmetic and away from weights.
static constexpr int64_t kMaxFoldElements = 1 << 16;

static bool isSmallDense(Attribute attr) {
  auto dense = dyn_cast_if_present<DenseElementsAttr>(attr);
  return dense && dense.getNumElements() <= kMaxFoldElements;
}

/// Result type of a broadcasting binary op, or failure with a diagnostic.
static LogicalResult inferBroadcastType(std::optional<Location> loc,
                                        StringRef opName, Type lhsType,
                                        Type rhsType, Type resultElementType,
                                        SmallVectorImpl<Type> &results) {
  auto lhs = cast<RankedTensorType>(lhsType);
  auto rhs = cast<RankedTensorType>(rhsType);
  std::optional<SmallVector<int64_t>> shape =
      broadcastShapes(lhs.getShape(), rhs.getShape());
  if (!shape)
    return emitOptionalError(loc, "'", opName, "' operands ", lhsType, " and ",
                             rhsType, " do not broadcast");
  results.push_back(RankedTensorType::get(
      *shape, resultElementType ? resultElementType : lhs.getElementType()));
  return success();
}

/// Folds a broadcasting binary op whose operands are both small constants of
/// the result's shape (the case of shape arithmetic after import).
template <typename IntFn, typename FloatFn>
static OpFoldResult foldBinary(Operation *op, ArrayRef<Attribute> operands,
                               IntFn intFn, FloatFn floatFn) {
  if (!isSmallDense(operands[0]) || !isSmallDense(operands[1]))
    return {};
  auto resultType = cast<ShapedType>(op->getResult(0).getType());
  auto lhs = cast<DenseElementsAttr>(operands[0]);
  auto rhs = cast<DenseElementsAttr>(operands[1]);
  auto broadcastTo = [&](DenseElementsAttr attr) -> DenseElementsAttr {
    if (attr.getType().getShape() == resultType.getShape())
      return attr;
    if (attr.isSplat())
      return DenseElementsAttr::get(
          RankedTensorType::get(resultType.getShape(),
                                attr.getElementType()),
          attr.getSplatValue<Attribute>());
    return {};
  };
  lhs = broadcastTo(lhs);
  rhs = broadcastTo(rhs);
  if (!lhs || !rhs)
    return {};
  return constFoldBinaryOp<IntegerAttr, APInt, void>(
             {lhs, rhs},
             [&](const APInt &a, const APInt &b) { return intFn(a, b); })
             ?: constFoldBinaryOp<FloatAttr, APFloat, void>(
                    {lhs, rhs}, [&](const APFloat &a, const APFloat &b) {
                      return floatFn(a, b);
                    });
}

//===----------------------------------------------------------------------===//
// Elementwise interface implementations
//===----------------------------------------------------------------------===//

#define MEMOPT_UNARY_ELEMENTWISE(OpClass)                                      \
  bool OpClass::isElementwise() { return true; }                               \
  bool OpClass::canWriteInPlace(unsigned operandIndex) {                       \
    return operandIndex == 0;                                                  \
  }

MEMOPT_UNARY_ELEMENTWISE(ReluOp)
MEMOPT_UNARY_ELEMENTWISE(ExpOp)
#undef MEMOPT_UNARY_ELEMENTWISE

/// A binary op may write into operand `i` when that operand already has the
/// result's type (no broadcast along it).
#define MEMOPT_BINARY_ELEMENTWISE(OpClass)                                     \
  bool OpClass::isElementwise() { return true; }                               \
  bool OpClass::canWriteInPlace(unsigned operandIndex) {                       \
    return getOperand(operandIndex).getType() == getType();                    \
  }                                                                            \
  LogicalResult OpClass::inferReturnTypes(                                     \
      MLIRContext *, std::optional<Location> loc, OpClass::Adaptor adaptor,    \
      SmallVectorImpl<Type> &results) {                                        \
    return inferBroadcastType(loc, getOperationName(),                         \
                              adaptor.getA().getType(),                        \
                              adaptor.getB().getType(), {}, results);          \
  }                                                                            \
  LogicalResult OpClass::verify() {                                            \
    if (getA().getType().getElementType() !=                                   \
        getB().getType().getElementType())                                     \
      return emitOpError("operand element types differ: ")                     \
             << getA().getType() << " vs " << getB().getType();                \
    return success();                                                          \
  }

MEMOPT_BINARY_ELEMENTWISE(AddOp)
MEMOPT_BINARY_ELEMENTWISE(MulOp)
#undef MEMOPT_BINARY_ELEMENTWISE

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// AddOp / MulOp
//===----------------------------------------------------------------------===//

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      *this, adaptor.getOperands(),
      [](const APInt &a, const APInt &b) { return a + b; },
      [](const APFloat &a, const APFloat &b) { return a + b; });
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  return foldBinary(
      *this, adaptor.getOperands(),
      [](const APInt &a, const APInt &b) { return a * b; },
      [](const APFloat &a, const APFloat &b) { return a * b; });
}

//===----------------------------------------------------------------------===//
// ShapeOp
//===----------------------------------------------------------------------===//

/// The [start, end) slice of the shape that ONNX's Shape returns.
static std::pair<int64_t, int64_t> shapeSliceBounds(int64_t rank,
                                                    int64_t start,
                                                    std::optional<int64_t> end) {
  auto clampIndex = [rank](int64_t index) {
    if (index < 0)
      index += rank;
    return std::clamp<int64_t>(index, 0, rank);
  };
  int64_t first = clampIndex(start);
  int64_t last = clampIndex(end.value_or(rank));
  return {first, std::max(first, last)};
}

LogicalResult ShapeOp::inferReturnTypes(MLIRContext *context,
                                        std::optional<Location>,
                                        ShapeOp::Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  auto type = cast<RankedTensorType>(adaptor.getData().getType());
  auto [first, last] =
      shapeSliceBounds(type.getRank(), adaptor.getStart(), adaptor.getEnd());
  results.push_back(
      RankedTensorType::get({last - first}, IntegerType::get(context, 64)));
  return success();
}

OpFoldResult ShapeOp::fold(FoldAdaptor) {
  auto type = getData().getType();
  auto [first, last] = shapeSliceBounds(type.getRank(), getStart(), getEnd());
  return DenseElementsAttr::get(getType(),
                                type.getShape().slice(first, last - first));
}

//===----------------------------------------------------------------------===//
// ReshapeOp
//===----------------------------------------------------------------------===//

bool ReshapeOp::isAliasingView() { return true; }

LogicalResult ReshapeOp::verify() {
  auto input = getData().getType();
  auto result = getType();
  if (input.getElementType() != result.getElementType())
    return emitOpError("changes the element type from ")
           << input.getElementType() << " to " << result.getElementType();
  if (input.getNumElements() != result.getNumElements())
    return emitOpError("cannot reshape ")
           << input << " (" << input.getNumElements() << " elements) to "
           << result << " (" << result.getNumElements() << " elements)";
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getData().getType() == getType())
    return getData();
  if (auto dense = dyn_cast_if_present<DenseElementsAttr>(adaptor.getData());
      dense && isSmallDense(dense))
    return dense.reshape(getType());
  // reshape(reshape(x)) -> reshape(x)
  if (auto producer = getData().getDefiningOp<ReshapeOp>()) {
    getDataMutable().assign(producer.getData());
    return getResult();
  }
  return {};
}

//===----------------------------------------------------------------------===//
// MatMulOp
//===----------------------------------------------------------------------===//

LogicalResult MatMulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         MatMulOp::Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  auto lhs = cast<RankedTensorType>(adaptor.getA().getType());
  auto rhs = cast<RankedTensorType>(adaptor.getB().getType());
  if (lhs.getRank() == 0 || rhs.getRank() == 0)
    return emitOptionalError(loc, "'memopt.matmul' operands must not be scalars");
  // numpy rule: 1-D operands are promoted and the added dimension removed.
  SmallVector<int64_t> lhsShape(lhs.getShape()), rhsShape(rhs.getShape());
  bool lhsVector = lhsShape.size() == 1, rhsVector = rhsShape.size() == 1;
  if (lhsVector)
    lhsShape.insert(lhsShape.begin(), 1);
  if (rhsVector)
    rhsShape.push_back(1);
  int64_t k = lhsShape.back();
  if (k != rhsShape[rhsShape.size() - 2])
    return emitOptionalError(loc, "'memopt.matmul' contraction sizes differ: ",
                             lhs, " x ", rhs);
  std::optional<SmallVector<int64_t>> batch =
      broadcastShapes(ArrayRef(lhsShape).drop_back(2),
                      ArrayRef(rhsShape).drop_back(2));
  if (!batch)
    return emitOptionalError(loc, "'memopt.matmul' batch dimensions of ", lhs,
                             " and ", rhs, " do not broadcast");
  SmallVector<int64_t> shape = *batch;
  if (!lhsVector)
    shape.push_back(lhsShape[lhsShape.size() - 2]);
  if (!rhsVector)
    shape.push_back(rhsShape.back());
  results.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

int64_t MatMulOp::getFlops() {
  int64_t k = getA().getType().getShape().back();
  return 2 * k * getType().getNumElements();
}

#define GET_OP_CLASSES
#include "memopt/Dialect/MemOpt/IR/MemOptOps.cpp.inc"
