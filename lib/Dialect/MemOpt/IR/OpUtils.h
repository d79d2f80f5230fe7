//===- OpUtils.h - helpers shared by the op implementations -----*- C++ -*-===//
//
// Private to lib/Dialect/MemOpt/IR: constant-folding helpers over small
// DenseElementsAttrs and diagnostics for result-type inference.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_DIALECT_MEMOPT_IR_OPUTILS_H
#define MEMOPT_LIB_DIALECT_MEMOPT_IR_OPUTILS_H

#include "memopt/Dialect/MemOpt/IR/ShapeUtils.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/TypeRange.h"
#include "mlir/IR/ValueRange.h"
#include "llvm/ADT/APSInt.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <utility>

namespace mlir::memopt::impl {

/// Constants with at most this many elements are folded at compile time; the
/// limit keeps folding to shape arithmetic and away from weights.
constexpr int64_t kMaxFoldElements = 1 << 16;

/// `attr` as a DenseElementsAttr when it is one with at most
/// kMaxFoldElements elements; null otherwise (absent, resource blob, big).
DenseElementsAttr getSmallDense(Attribute attr);

/// True if `value` is computed from a trainable parameter (a `parameter`
/// memopt.variable).
bool dependsOnParameter(Value value);

/// `type` with its last axis moved to position 1: the channels-first view
/// of a channels-last tensor ([N, spatial..., C] -> [N, C, spatial...]).
inline RankedTensorType channelsFirstView(RankedTensorType type) {
  SmallVector<int64_t> shape(type.getShape());
  if (shape.size() >= 3)
    std::rotate(shape.begin() + 1, shape.end() - 1, shape.end());
  return RankedTensorType::get(shape, type.getElementType());
}

/// The inverse of channelsFirstView: [N, C, spatial...] -> [N, spatial..., C].
inline RankedTensorType channelsLastView(RankedTensorType type) {
  SmallVector<int64_t> shape(type.getShape());
  if (shape.size() >= 3)
    std::rotate(shape.begin() + 1, shape.begin() + 2, shape.end());
  return RankedTensorType::get(shape, type.getElementType());
}

/// Row-major strides of `shape`.
SmallVector<int64_t> computeStrides(ArrayRef<int64_t> shape);

/// Builds a constant of `resultType` (same element type as `source`) whose
/// element at each multi-index is `source`'s element at the linear index
/// `sourceIndex(index)`. Null when an index falls outside `source`.
DenseElementsAttr
rearrangeDense(DenseElementsAttr source, ShapedType resultType,
               function_ref<int64_t(ArrayRef<int64_t>)> sourceIndex);

/// `source` broadcast (numpy rules, one direction) to `shape`; null when it
/// does not broadcast or when the result would exceed kMaxFoldElements.
DenseElementsAttr broadcastDense(DenseElementsAttr source,
                                 ArrayRef<int64_t> shape);

/// Whether integer arithmetic on `type` is unsigned (ui* and i1).
inline bool isUnsignedInteger(Type type) {
  auto integer = dyn_cast<IntegerType>(type);
  return integer && (integer.isUnsigned() || integer.getWidth() == 1);
}

/// Emits "'<opName>' <message>" at `loc` (if any) and returns failure: the
/// diagnostics of inferReturnTypes, which double as the op's verifier.
template <typename... Args>
LogicalResult inferError(std::optional<Location> loc, StringRef opName,
                         Args &&...args) {
  return emitOptionalError(loc, "'", opName, "' ", std::forward<Args>(args)...);
}

/// Fails with a diagnostic unless every operand is a statically shaped ranked
/// tensor; inferReturnTypes calls it first, so it can cast freely (the
/// importer may call inference before the op exists to verify it).
LogicalResult requireStaticTensors(std::optional<Location> loc,
                                   StringRef opName, ValueRange operands);

/// The operand counts `OpT`'s ODS signature allows, read from its traits:
/// {minimum, maximum}; the maximum of ops with optional or variadic operands
/// is unbounded.
template <typename OpT>
constexpr std::pair<size_t, size_t> operandCountRange() {
  constexpr size_t unbounded = std::numeric_limits<size_t>::max();
  if constexpr (OpT::template hasTrait<OpTrait::ZeroOperands>())
    return {0, 0};
  else if constexpr (OpT::template hasTrait<OpTrait::OneOperand>())
    return {1, 1};
  else if constexpr (OpT::template hasTrait<OpTrait::NOperands<2>::Impl>())
    return {2, 2};
  else if constexpr (OpT::template hasTrait<OpTrait::NOperands<3>::Impl>())
    return {3, 3};
  else if constexpr (OpT::template hasTrait<OpTrait::NOperands<4>::Impl>())
    return {4, 4};
  else if constexpr (OpT::template hasTrait<OpTrait::NOperands<5>::Impl>())
    return {5, 5};
  else if constexpr (OpT::template hasTrait<OpTrait::NOperands<6>::Impl>())
    return {6, 6};
  else if constexpr (OpT::template hasTrait<
                         OpTrait::AtLeastNOperands<1>::Impl>())
    return {1, unbounded};
  else if constexpr (OpT::template hasTrait<
                         OpTrait::AtLeastNOperands<2>::Impl>())
    return {2, unbounded};
  else if constexpr (OpT::template hasTrait<
                         OpTrait::AtLeastNOperands<3>::Impl>())
    return {3, unbounded};
  else if constexpr (OpT::template hasTrait<
                         OpTrait::AtLeastNOperands<4>::Impl>())
    return {4, unbounded};
  else if constexpr (OpT::template hasTrait<
                         OpTrait::AtLeastNOperands<6>::Impl>())
    return {6, unbounded};
  else if constexpr (OpT::template hasTrait<OpTrait::VariadicOperands>())
    return {0, unbounded};
  else
    static_assert(sizeof(OpT) == 0, "operandCountRange: an operand-count "
                                    "trait is missing from the list");
}

/// Fails with a diagnostic unless `operands` fit `OpT`'s ODS signature (count,
/// no null value) and are statically shaped ranked tensors. Every
/// inferReturnTypes calls it first: the importer creates ops by name from
/// ONNX nodes and infers their types before the verifier has checked the
/// operand count, and the adaptor's getters read past a short operand list.
template <typename OpT>
LogicalResult requireOperands(std::optional<Location> loc,
                              ValueRange operands) {
  StringRef name = OpT::getOperationName();
  auto [minimum, maximum] = operandCountRange<OpT>();
  size_t count = operands.size();
  if (count < minimum || count > maximum) {
    if (minimum == maximum)
      return inferError(loc, name, "expects ", minimum, " operand(s), got ",
                        count);
    return inferError(loc, name, "expects at least ", minimum,
                      " operand(s), got ", count);
  }
  for (auto [index, operand] : llvm::enumerate(operands))
    if (!operand)
      return inferError(loc, name, "operand #", index, " is null");
  return requireStaticTensors(loc, name, operands);
}

/// Fails with a diagnostic naming the first absent attribute. The verifier
/// already rejects ops without their required attributes, but the importer
/// calls inference on an OperationState before any verification, and the
/// adaptor's getters must not see a null attribute.
LogicalResult
requireAttributes(std::optional<Location> loc, StringRef opName,
                  ArrayRef<std::pair<StringRef, Attribute>> attributes);

/// Result type of a broadcasting op, or failure with a diagnostic. A null
/// `resultElementType` keeps the element type of `lhsType`.
LogicalResult inferBroadcastType(std::optional<Location> loc, StringRef opName,
                                 Type lhsType, Type rhsType,
                                 Type resultElementType,
                                 SmallVectorImpl<Type> &results);

/// Folds an elementwise op over small constants broadcast to `resultType`.
/// `intFn(values, isUnsigned)` and `floatFn(values)` get one element of each
/// operand and return the result element (APInt or APFloat), or nullopt to
/// give up (division by zero). Which one runs depends on the element type of
/// operand 0.
template <typename IntFn, typename FloatFn>
Attribute foldElementwise(ShapedType resultType, ArrayRef<Attribute> operands,
                          IntFn intFn, FloatFn floatFn) {
  if (resultType.getNumElements() > kMaxFoldElements)
    return {};
  SmallVector<DenseElementsAttr> dense;
  for (Attribute operand : operands) {
    DenseElementsAttr value =
        broadcastDense(getSmallDense(operand), resultType.getShape());
    if (!value)
      return {};
    dense.push_back(value);
  }
  int64_t numElements = resultType.getNumElements();
  Type elementType = dense.front().getElementType();
  if (isa<IntegerType>(elementType)) {
    bool isUnsigned = isUnsignedInteger(elementType);
    SmallVector<SmallVector<APInt>> values;
    for (DenseElementsAttr value : dense)
      values.emplace_back(value.getValues<APInt>());
    using Result = std::decay_t<decltype(*intFn(ArrayRef<APInt>(), false))>;
    SmallVector<Result> results;
    SmallVector<APInt> element;
    for (int64_t i = 0; i < numElements; ++i) {
      element.clear();
      for (auto &operandValues : values)
        element.push_back(operandValues[i]);
      std::optional<Result> result =
          intFn(ArrayRef<APInt>(element), isUnsigned);
      if (!result)
        return {};
      results.push_back(*result);
    }
    return DenseElementsAttr::get(resultType, results);
  }
  if (isa<FloatType>(elementType)) {
    SmallVector<SmallVector<APFloat>> values;
    for (DenseElementsAttr value : dense)
      values.emplace_back(value.getValues<APFloat>());
    using Result = std::decay_t<decltype(*floatFn(ArrayRef<APFloat>()))>;
    SmallVector<Result> results;
    SmallVector<APFloat> element;
    for (int64_t i = 0; i < numElements; ++i) {
      element.clear();
      for (auto &operandValues : values)
        element.push_back(operandValues[i]);
      std::optional<Result> result = floatFn(ArrayRef<APFloat>(element));
      if (!result)
        return {};
      results.push_back(*result);
    }
    return DenseElementsAttr::get(resultType, results);
  }
  return {};
}

} // namespace mlir::memopt::impl

#endif // MEMOPT_LIB_DIALECT_MEMOPT_IR_OPUTILS_H
