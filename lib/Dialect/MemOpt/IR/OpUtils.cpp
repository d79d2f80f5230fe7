//===- OpUtils.cpp - helpers shared by the op implementations -------------===//

#include "OpUtils.h"
#include "memopt/Dialect/MemOpt/IR/MemOptInterfaces.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"

#include "llvm/ADT/DenseSet.h"

using namespace mlir;
using namespace mlir::memopt;

DenseElementsAttr memopt::impl::getSmallDense(Attribute attr) {
  auto dense = dyn_cast_if_present<DenseElementsAttr>(attr);
  if (!dense || dense.getNumElements() > kMaxFoldElements)
    return {};
  return dense;
}

bool memopt::impl::dependsOnParameter(Value value) {
  SmallVector<Value> worklist = {value};
  llvm::DenseSet<Value> seen;
  while (!worklist.empty()) {
    Value current = worklist.pop_back_val();
    if (!seen.insert(current).second)
      continue;
    Operation *def = current.getDefiningOp();
    if (!def)
      continue;
    if (auto variable = dyn_cast<VariableOp>(def)) {
      if (variable.getRole() == "parameter")
        return true;
      continue;
    }
    worklist.append(def->operand_begin(), def->operand_end());
  }
  return false;
}

SmallVector<int64_t> memopt::impl::computeStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

DenseElementsAttr memopt::impl::rearrangeDense(
    DenseElementsAttr source, ShapedType resultType,
    function_ref<int64_t(ArrayRef<int64_t>)> sourceIndex) {
  if (resultType.getNumElements() > kMaxFoldElements)
    return {};
  SmallVector<Attribute> values(source.getValues<Attribute>());
  ArrayRef<int64_t> shape = resultType.getShape();
  int64_t numElements = resultType.getNumElements();
  SmallVector<Attribute> results;
  results.reserve(numElements);
  SmallVector<int64_t> index(shape.size(), 0);
  for (int64_t i = 0; i < numElements; ++i) {
    int64_t from = sourceIndex(index);
    if (from < 0 || from >= static_cast<int64_t>(values.size()))
      return {};
    results.push_back(values[from]);
    for (int64_t axis = static_cast<int64_t>(shape.size()) - 1; axis >= 0;
         --axis) {
      if (++index[axis] < shape[axis])
        break;
      index[axis] = 0;
    }
  }
  return DenseElementsAttr::get(resultType, results);
}

DenseElementsAttr memopt::impl::broadcastDense(DenseElementsAttr source,
                                               ArrayRef<int64_t> shape) {
  if (!source)
    return {};
  ArrayRef<int64_t> sourceShape = source.getType().getShape();
  if (sourceShape == shape)
    return source;
  // A folded constant lives for the whole program, so a large broadcast is
  // better computed when needed: fold only small results, splats included.
  if (ShapedType::getNumElements(shape) > kMaxFoldElements)
    return {};
  std::optional<SmallVector<int64_t>> broadcast =
      broadcastShapes(sourceShape, shape);
  if (!broadcast || ArrayRef<int64_t>(*broadcast) != shape)
    return {};
  auto resultType = RankedTensorType::get(shape, source.getElementType());
  if (source.isSplat())
    return DenseElementsAttr::get(resultType,
                                  source.getSplatValue<Attribute>());
  SmallVector<int64_t> strides = computeStrides(sourceShape);
  size_t offset = shape.size() - sourceShape.size();
  return rearrangeDense(source, resultType, [&](ArrayRef<int64_t> index) {
    int64_t linear = 0;
    for (size_t axis = 0; axis < sourceShape.size(); ++axis)
      if (sourceShape[axis] != 1)
        linear += index[axis + offset] * strides[axis];
    return linear;
  });
}

LogicalResult memopt::impl::inferBroadcastType(std::optional<Location> loc,
                                               StringRef opName, Type lhsType,
                                               Type rhsType,
                                               Type resultElementType,
                                               SmallVectorImpl<Type> &results) {
  auto lhs = cast<RankedTensorType>(lhsType);
  auto rhs = cast<RankedTensorType>(rhsType);
  std::optional<SmallVector<int64_t>> shape =
      broadcastShapes(lhs.getShape(), rhs.getShape());
  if (!shape)
    return inferError(loc, opName, "operands ", lhsType, " and ", rhsType,
                      " do not broadcast");
  results.push_back(RankedTensorType::get(
      *shape, resultElementType ? resultElementType : lhs.getElementType()));
  return success();
}

LogicalResult memopt::impl::requireStaticTensors(std::optional<Location> loc,
                                                 StringRef opName,
                                                 ValueRange operands) {
  for (auto [index, operand] : llvm::enumerate(operands)) {
    auto type = dyn_cast<RankedTensorType>(operand.getType());
    if (!type || !type.hasStaticShape())
      return inferError(loc, opName, "operand #", index,
                        " must be a statically shaped tensor, got ",
                        operand.getType());
    if (!isBoundedTensorType(type))
      return inferError(loc, opName, "operand #", index, " (", type,
                        ") is larger than memopt's limit of 2^50 bytes");
  }
  return success();
}

LogicalResult memopt::impl::requireAttributes(
    std::optional<Location> loc, StringRef opName,
    ArrayRef<std::pair<StringRef, Attribute>> attributes) {
  for (auto [name, attribute] : attributes)
    if (!attribute)
      return inferError(loc, opName, "requires attribute '", name, "'");
  return success();
}
