//===- WeightConversion.h - a weight's conversion by windows ---*- C++ -*-===//
//
// The conversions the compiler applies to a weight (an f32 -> f16 / bf16
// cast for inference in low precision, the NHWC transpose of a convolution's
// filter) as a small descriptor that produces any window of the converted
// tensor on demand from the source bytes. The weight stays where it was
// imported (the ONNX external-data file, mapped) and the converted bytes
// exist only in the bounded buffer of whoever asks for them: the weight-file
// writer, or a pass that scans the values.
//
// Taken from: XLA's and onnxruntime's element conversions (round to nearest
// even, NaN kept quiet) and onnxconverter-common's float16 converter (values
// beyond the range clamped to the largest finite value, tiny non-zero values
// kept non-zero), which memopt's mixed precision already followed; the
// transposing copy is the index walk of a strided view (numpy's nditer, one
// odometer over the result). Further than those: a window starts at any
// element, so a caller converts a tensor of any size through a fixed buffer.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_WEIGHTCONVERSION_H
#define MEMOPT_DIALECT_MEMOPT_IR_WEIGHTCONVERSION_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstddef>
#include <cstdint>

namespace mlir::memopt {

/// What converting f32 values to a 16-bit float changed, beyond rounding.
struct ConversionCounts {
  /// Finite values beyond the target's range, set to its largest finite value.
  int64_t clamped = 0;
  /// Non-zero values that would round to zero, set to its smallest subnormal.
  int64_t raised = 0;
};

/// f32 bits -> f16 bits, round to nearest even; NaN (quiet) and infinities
/// kept; finite values beyond 65504 clamped, non-zero values below half the
/// smallest subnormal raised to it (both counted in `counts`).
uint16_t convertF32ToHalfBits(uint32_t bits, ConversionCounts &counts);

/// f32 bits -> bf16 bits, round to nearest even, with the same rules.
uint16_t convertF32ToBFloat16Bits(uint32_t bits, ConversionCounts &counts);

/// The element conversion of a weight.
enum class ElementCast { None, F32ToF16, F32ToBF16 };

/// result = cast(transpose(source, permutation)): result axis k is source
/// axis permutation[k] (ONNX Transpose's convention); an empty permutation is
/// the identity. Elements are row-major, of `sourceElementBytes` each in the
/// source (4 when cast is not None).
class WeightConversion {
public:
  WeightConversion(llvm::ArrayRef<int64_t> sourceShape,
                   llvm::ArrayRef<int64_t> permutation,
                   size_t sourceElementBytes, ElementCast cast);

  int64_t getNumElements() const { return numElements; }
  size_t getSourceElementBytes() const { return sourceElementBytes; }
  size_t getResultElementBytes() const {
    return cast == ElementCast::None ? sourceElementBytes : 2;
  }
  bool isPermuted() const { return !resultStrides.empty(); }

  /// Writes result elements [first, first + count) to `out` (count x the
  /// result element size), reading `source` (the whole source tensor).
  void convert(llvm::ArrayRef<char> source, int64_t first, int64_t count,
               char *out, ConversionCounts &counts) const;

  /// The part of `source` that result elements [first, first + count) read:
  /// the same elements without a permutation, the whole source with one.
  llvm::ArrayRef<char> getSourceBytesRead(llvm::ArrayRef<char> source,
                                          int64_t first, int64_t count) const;

private:
  int64_t numElements = 1;
  size_t sourceElementBytes;
  ElementCast cast;
  /// With a permutation: the result's shape and, per result axis, the source
  /// elements one step along it moves over.
  llvm::SmallVector<int64_t> resultShape;
  llvm::SmallVector<int64_t> resultStrides;
};

} // namespace mlir::memopt

#endif // MEMOPT_DIALECT_MEMOPT_IR_WEIGHTCONVERSION_H
