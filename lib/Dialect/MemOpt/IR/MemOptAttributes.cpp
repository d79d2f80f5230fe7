//===- MemOptAttributes.cpp - memopt attributes ---------------------------===//
//
// include/memopt/Dialect/MemOpt/IR/MemOptAttributes.h says what and why.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/MemOpt/IR/MemOptAttributes.h"

#include "memopt/Dialect/MemOpt/IR/MemOptDialect.h"
#include "memopt/Dialect/MemOpt/IR/WeightBlobs.h"

#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::memopt;

#define GET_ATTRDEF_CLASSES
#include "memopt/Dialect/MemOpt/IR/MemOptAttributes.cpp.inc"

void MemOptDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "memopt/Dialect/MemOpt/IR/MemOptAttributes.cpp.inc"
      >();
}

/// The cast from `source` to `result` elements, if the attribute has one.
static std::optional<ElementCast> getElementCast(Type source, Type result) {
  if (source == result)
    return ElementCast::None;
  if (!source.isF32())
    return std::nullopt;
  if (result.isF16())
    return ElementCast::F32ToF16;
  if (result.isBF16())
    return ElementCast::F32ToBF16;
  return std::nullopt;
}

LogicalResult
ConvertedWeightAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                            ShapedType type, DenseResourceElementsAttr source,
                            ArrayRef<int64_t> permutation) {
  auto sourceType = dyn_cast<RankedTensorType>(source.getType());
  auto resultType = dyn_cast<RankedTensorType>(type);
  if (!sourceType || !resultType || !sourceType.hasStaticShape() ||
      !resultType.hasStaticShape())
    return emitError() << "converts a static tensor into a static tensor, not "
                       << source.getType() << " into " << type;
  Type sourceElement = sourceType.getElementType();
  if (!sourceElement.isIntOrFloat() ||
      sourceElement.getIntOrFloatBitWidth() % 8 != 0)
    return emitError() << "source elements of " << sourceElement
                       << " are not whole bytes";
  if (!getElementCast(sourceElement, resultType.getElementType()))
    return emitError() << "casts " << sourceElement << " to "
                       << resultType.getElementType()
                       << " (only f32 to f16 or bf16)";
  SmallVector<int64_t> shape(sourceType.getShape());
  if (!permutation.empty()) {
    int64_t rank = sourceType.getRank();
    SmallVector<bool> seen(rank, false);
    if (int64_t(permutation.size()) != rank)
      return emitError() << "has a permutation of " << permutation.size()
                         << " axes for a source of rank " << rank;
    shape.clear();
    for (int64_t axis : permutation) {
      if (axis < 0 || axis >= rank || seen[axis])
        return emitError() << "has a permutation that is not one of the "
                           << rank << " source axes";
      seen[axis] = true;
      shape.push_back(sourceType.getDimSize(axis));
    }
  }
  if (ArrayRef<int64_t>(shape) != resultType.getShape())
    return emitError() << "has type " << type << ", but its source "
                       << source.getType() << " permuted has shape [" << shape
                       << "]";
  return success();
}

WeightConversion ConvertedWeightAttr::getConversion() const {
  auto sourceType = cast<RankedTensorType>(getSource().getType());
  Type sourceElement = sourceType.getElementType();
  return WeightConversion(
      sourceType.getShape(), getPermutation(),
      sourceElement.getIntOrFloatBitWidth() / 8,
      *getElementCast(sourceElement, getType().getElementType()));
}

ArrayRef<char> ConvertedWeightAttr::getSourceData() const {
  return getWeightData(getSource());
}

LogicalResult
ConvertedWeightAttr::readElements(int64_t first, int64_t count,
                                  MutableArrayRef<char> out,
                                  ConversionCounts &counts) const {
  WeightConversion conversion = getConversion();
  ArrayRef<char> source = getSourceData();
  if (int64_t(source.size()) !=
          conversion.getNumElements() *
              int64_t(conversion.getSourceElementBytes()) ||
      first < 0 || count < 0 || first + count > conversion.getNumElements() ||
      out.size() < size_t(count) * conversion.getResultElementBytes())
    return failure();
  conversion.convert(source, first, count, out.data(), counts);
  return success();
}
