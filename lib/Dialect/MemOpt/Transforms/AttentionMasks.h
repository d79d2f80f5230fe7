//===- AttentionMasks.h - constants and masks of attention fusion -*- C++ -*-=//
//
// What --memopt-fuse-attention asks of constants and masks: the value of a
// one-element factor computed from constants (`sqrt(d)`, `d^-0.25`), the
// pattern a mask computed from constants makes over the [S, Sk] scores
// (nothing, causal, a sliding window, anything else), and the
// classification of a fused attention's mask for the report. Private to the
// pass (FuseAttention.cpp, AttentionMasks.cpp, RowEvaluator.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_DIALECT_MEMOPT_TRANSFORMS_ATTENTIONMASKS_H
#define MEMOPT_LIB_DIALECT_MEMOPT_TRANSFORMS_ATTENTIONMASKS_H

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"

#include "llvm/ADT/DenseMap.h"
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

/// What a mask does to [..., S, Sk] scores.
enum class MaskPattern {
  /// Masks no score.
  Nothing,
  /// Masks exactly the keys j > i of row i, the same in every batch entry.
  Causal,
  /// Masks j > i and j <= i - window, the same in every batch entry.
  SlidingWindow,
  /// Masks some other set of scores, or is too large to read.
  Other,
  /// Not a mask: values that are neither 0 nor masking (a real bias).
  Bias,
};

/// How the elements of a mask are read.
enum class MaskReading {
  /// An additive term: 0 keeps, a masking value masks, any other value makes
  /// it a Bias.
  Additive,
  /// Only the masking elements count; any other value keeps.
  MaskingElements,
  /// A boolean condition that masks where it is true / where it is false.
  MaskWhenTrue,
  MaskWhenFalse,
};

/// Classifies masks by value: constants, and tensors computed from constants
/// alone that canonicalize did not fold (RowEvaluator.h), whatever their
/// size up to 2^30 elements read. Results are kept per value: the layers of
/// a model share one mask, and each asks. forget() drops what is known of an
/// op's results; the fusion calls it when an op is erased, since a new op
/// may take its address.
class MaskClassifier {
public:
  /// The pattern `mask` makes over scores whose last two axes are `queries`
  /// x `keys`, each element multiplied by `factor` first (additive readings).
  /// A mask is whole when its last two axes are the scores' (its batch axes
  /// may broadcast or repeat); causal and windowed masks must be whole.
  /// Nullopt when `mask` reads a function argument, an op or a constant the
  /// evaluator does not know; Other when it is too large to read.
  std::optional<MaskPattern> classify(Value mask, int64_t queries, int64_t keys,
                                      MaskReading reading, double factor = 1.0);

  void forget(Operation *op);

private:
  struct Entry {
    int64_t queries, keys;
    MaskReading reading;
    double factor;
    std::optional<MaskPattern> pattern;
  };
  std::optional<MaskPattern> evaluate(Value mask, int64_t queries, int64_t keys,
                                      MaskReading reading, double factor);
  llvm::DenseMap<Value, SmallVector<Entry, 1>> known;
};

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

MaskSummary classifyAttentionMask(AttentionOp attention,
                                  MaskClassifier &classifier);

} // namespace mlir::memopt::attention

#endif // MEMOPT_LIB_DIALECT_MEMOPT_TRANSFORMS_ATTENTIONMASKS_H
