//===- AttentionMasks.h - constants and masks of attention fusion -*- C++ -*-=//
//
// What --memopt-fuse-attention asks of constants and masks: the value of a
// one-element factor computed from constants (`sqrt(d)`, `d^-0.25`), the
// elements of a constant mask, the pattern such a mask makes over the
// [S, Sk] scores (nothing, causal, a sliding window, anything else), and the
// classification of a fused attention's mask for the report. Private to the
// pass (FuseAttention.cpp, AttentionMasks.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_DIALECT_MEMOPT_TRANSFORMS_ATTENTIONMASKS_H
#define MEMOPT_LIB_DIALECT_MEMOPT_TRANSFORMS_ATTENTIONMASKS_H

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace mlir::memopt::attention {

/// A fill at or below this masks a score out: exp underflows to exactly 0,
/// and adding any score of a sane magnitude leaves it unchanged (the score
/// is below half an ulp), so Where(mask, fill, s) == s + Where(mask, fill, 0)
/// after the softmax. -inf qualifies.
constexpr double kMaskingFill = -1e30;

inline bool isMaskingValue(double value) { return value <= kMaskingFill; }

/// The value of a one-element float tensor computed from constants only:
/// constants, and Sqrt / Reciprocal / Neg / Pow / Mul / Div / Add / Sub,
/// float Casts and shape ops of such values (the exporters' `sqrt(d)` and
/// `Pow(d, -0.25)`, which canonicalize does not fold).
std::optional<double> evaluateScalar(Value value);

/// Every element of a constant as a double: dense floats or i1, and
/// dense_resource blobs of f32 / f16 / bf16 (how the importer stores large
/// float initializers). Nullopt beyond 2^24 elements.
std::optional<SmallVector<double>> getConstantValues(Value value);

/// What a constant mask does to [..., S, Sk] scores.
enum class MaskPattern {
  /// Masks no score.
  Nothing,
  /// Masks exactly the keys j > i of row i, the same in every batch entry.
  Causal,
  /// Masks j > i and j <= i - window, the same in every batch entry.
  SlidingWindow,
  /// Masks some other set of scores.
  Other,
  /// Not a mask: values that are neither 0 nor masking (a real bias).
  Bias,
};

/// The pattern of a constant `values` of `type` over scores whose last two
/// axes are `queries` x `keys`. `masked(value)` says whether an element
/// masks its score; it returns nullopt for a value that is not a mask.
MaskPattern
classifyPattern(ArrayRef<double> values, RankedTensorType type, int64_t queries,
                int64_t keys,
                llvm::function_ref<std::optional<bool>(double)> masked);

/// The pattern of an additive constant term (0 keeps, a masking value
/// masks), each element multiplied by `factor` first.
MaskPattern classifyAdditive(ArrayRef<double> values, RankedTensorType type,
                             int64_t queries, int64_t keys, double factor);

/// The pattern of a boolean condition that masks where it is `maskWhen`.
MaskPattern classifyCondition(ArrayRef<double> values, RankedTensorType type,
                              int64_t queries, int64_t keys, bool maskWhen);

/// The mask and bias of a fused attention, read back from its `causal`
/// attribute and its bias operand (a sum of terms: Where(cond, fill, 0)
/// masks, constants, and computed score biases).
struct MaskSummary {
  bool causal = false;        // top-left causal, in the kernel or the bias
  bool slidingWindow = false; // causal with a window, in the bias
  bool padding = false;       // a mask computed from a graph input
  bool otherMask = false;     // any other masking pattern
  bool scoreBias = false;     // a real bias (ALiBi, relative positions, ...)
  bool causalInKernel = false;

  /// "none", "causal", "padding", "causal + padding", "sliding window",
  /// "sliding window + padding" or "arbitrary".
  std::string maskClass() const;
};

MaskSummary classifyAttentionMask(AttentionOp attention);

} // namespace mlir::memopt::attention

#endif // MEMOPT_LIB_DIALECT_MEMOPT_TRANSFORMS_ATTENTIONMASKS_H
