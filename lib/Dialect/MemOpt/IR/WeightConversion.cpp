//===- WeightConversion.cpp - a weight's conversion, window by window -----===//
//
// include/memopt/Dialect/MemOpt/IR/WeightConversion.h says what and why.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/MemOpt/IR/WeightConversion.h"

#include <cassert>
#include <cstring>

using namespace mlir::memopt;

uint16_t mlir::memopt::convertF32ToHalfBits(uint32_t bits,
                                            ConversionCounts &counts) {
  uint16_t sign = uint16_t((bits >> 16) & 0x8000);
  uint32_t magnitude = bits & 0x7fffffff;
  if (magnitude > 0x7f800000) // NaN: keep it quiet
    return sign | 0x7e00;
  if (magnitude == 0x7f800000)
    return sign | 0x7c00;
  if (magnitude >= 0x477ff000) { // rounds to 65520 or more: infinity in f16
    ++counts.clamped;
    return sign | 0x7bff; // 65504
  }
  if (magnitude == 0)
    return sign;
  if (magnitude >= 0x38800000) { // a normal f16 (2^-14 and above)
    uint32_t value = (magnitude >> 13) - (112u << 10);
    uint32_t rest = magnitude & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (value & 1)))
      ++value;
    return uint16_t(sign | value);
  }
  // Subnormal f16: units of 2^-24. Below 2^-25 everything rounds to zero.
  uint32_t exponent = magnitude >> 23;
  uint32_t value = 0;
  if (exponent >= 102) {
    uint32_t mantissa = (magnitude & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - exponent; // 14..24
    value = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (value & 1)))
      ++value;
  }
  if (value == 0) {
    ++counts.raised;
    value = 1;
  }
  return uint16_t(sign | value);
}

uint16_t mlir::memopt::convertF32ToBFloat16Bits(uint32_t bits,
                                                ConversionCounts &counts) {
  uint16_t sign = uint16_t((bits >> 16) & 0x8000);
  uint32_t magnitude = bits & 0x7fffffff;
  if (magnitude > 0x7f800000)
    return uint16_t((bits >> 16) | 0x40);
  if (magnitude == 0x7f800000 || magnitude == 0)
    return uint16_t(bits >> 16);
  uint32_t rounded = (magnitude + 0x7fff + ((magnitude >> 16) & 1)) >> 16;
  if (rounded >= 0x7f80) {
    ++counts.clamped;
    rounded = 0x7f7f;
  } else if (rounded == 0) {
    ++counts.raised;
    rounded = 1;
  }
  return uint16_t(sign | rounded);
}

WeightConversion::WeightConversion(llvm::ArrayRef<int64_t> sourceShape,
                                   llvm::ArrayRef<int64_t> permutation,
                                   size_t sourceElementBytes, ElementCast cast)
    : sourceElementBytes(sourceElementBytes), cast(cast) {
  assert((cast == ElementCast::None || sourceElementBytes == 4) &&
         "a cast reads f32");
  for (int64_t size : sourceShape)
    numElements *= size;
  bool identity = true;
  for (size_t axis = 0; axis < permutation.size(); ++axis)
    identity &= permutation[axis] == int64_t(axis);
  if (identity)
    return;
  assert(permutation.size() == sourceShape.size() && "one axis per axis");
  llvm::SmallVector<int64_t> sourceStrides(sourceShape.size(), 1);
  for (int64_t axis = int64_t(sourceShape.size()) - 2; axis >= 0; --axis)
    sourceStrides[axis] = sourceStrides[axis + 1] * sourceShape[axis + 1];
  for (int64_t axis : permutation) {
    resultShape.push_back(sourceShape[axis]);
    resultStrides.push_back(sourceStrides[axis]);
  }
}

/// Converts one element at `from` (source bytes) to `to`.
static inline void convertElement(const char *from, char *to, size_t bytes,
                                  ElementCast cast, ConversionCounts &counts) {
  if (cast == ElementCast::None) {
    std::memcpy(to, from, bytes);
    return;
  }
  uint32_t bits;
  std::memcpy(&bits, from, 4);
  uint16_t converted = cast == ElementCast::F32ToF16
                           ? convertF32ToHalfBits(bits, counts)
                           : convertF32ToBFloat16Bits(bits, counts);
  std::memcpy(to, &converted, 2);
}

void WeightConversion::convert(llvm::ArrayRef<char> source, int64_t first,
                               int64_t count, char *out,
                               ConversionCounts &counts) const {
  assert(first >= 0 && count >= 0 && first + count <= numElements &&
         int64_t(source.size()) == numElements * int64_t(sourceElementBytes) &&
         "a window inside the tensor");
  size_t resultBytes = getResultElementBytes();
  if (!isPermuted()) {
    const char *from = source.data() + first * int64_t(sourceElementBytes);
    if (cast == ElementCast::None) {
      std::memcpy(out, from, size_t(count) * sourceElementBytes);
      return;
    }
    for (int64_t i = 0; i < count; ++i)
      convertElement(from + i * 4, out + i * 2, 4, cast, counts);
    return;
  }
  // An odometer over the result's index, starting at `first`, with the
  // source element it reads kept up to date step by step.
  int64_t rank = int64_t(resultShape.size());
  llvm::SmallVector<int64_t> index(rank, 0);
  int64_t sourceElement = 0;
  for (int64_t axis = rank - 1, rest = first; axis >= 0; --axis) {
    index[axis] = rest % resultShape[axis];
    rest /= resultShape[axis];
    sourceElement += index[axis] * resultStrides[axis];
  }
  for (int64_t i = 0; i < count; ++i) {
    convertElement(source.data() + sourceElement * int64_t(sourceElementBytes),
                   out + i * int64_t(resultBytes), sourceElementBytes, cast,
                   counts);
    for (int64_t axis = rank - 1; axis >= 0; --axis) {
      sourceElement += resultStrides[axis];
      if (++index[axis] < resultShape[axis])
        break;
      sourceElement -= index[axis] * resultStrides[axis];
      index[axis] = 0;
    }
  }
}

llvm::ArrayRef<char>
WeightConversion::getSourceBytesRead(llvm::ArrayRef<char> source, int64_t first,
                                     int64_t count) const {
  if (isPermuted())
    return source;
  return source.slice(size_t(first) * sourceElementBytes,
                      size_t(count) * sourceElementBytes);
}
