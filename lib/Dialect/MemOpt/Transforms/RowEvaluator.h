//===- RowEvaluator.h - tensors computed from constants, row by row -*- C++
//-*-//
//
// Reads a tensor that is a function of constants alone, one row (its last
// axis) at a time, in memory bounded by a row per op. The attention fusion
// judges a mask by value (AttentionMasks.h); a mask that canonicalize did not
// fold (the dialect's folders stop at kMaxFoldElements, and transformers'
// causal mask at 4 x 1024 is [4, 1, 1024, 1024]) is still a function of no
// input, and this reads it as it reads a constant. Private to the attention
// fusion.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_DIALECT_MEMOPT_TRANSFORMS_ROWEVALUATOR_H
#define MEMOPT_LIB_DIALECT_MEMOPT_TRANSFORMS_ROWEVALUATOR_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Value.h"

#include "llvm/ADT/DenseMap.h"

#include <memory>
#include <optional>
#include <vector>

namespace mlir::memopt::attention {

/// A tensor computed from constants by elementwise arithmetic, comparisons
/// and logic, casts, Where, Range, broadcasts (Expand), views (Reshape,
/// Squeeze, Unsqueeze, Flatten, Identity), Transpose, Slice, Concat and
/// CumSum over the last axis. Elements are doubles: integers exactly (below
/// 2^53), i1 as 0 / 1, f32 results rounded to f32; f16 and bf16 results keep
/// f32 precision and overflow to infinity where those types do (what a mask
/// needs: its zeros, its masking fill and whether other values occur).
class RowEvaluator {
public:
  /// The evaluator of `value`; null when it reads a function argument, an op
  /// not listed above, a constant it cannot decode or an empty tensor.
  static std::unique_ptr<RowEvaluator> create(Value value);
  ~RowEvaluator();
  RowEvaluator(const RowEvaluator &) = delete;
  RowEvaluator &operator=(const RowEvaluator &) = delete;

  RankedTensorType getType() const { return type; }
  /// The last axis's size (1 for a scalar).
  int64_t getRowLength() const;
  /// False when the tensor is the same at every index of `axis` (a
  /// broadcast); true when it may differ.
  bool mayVary(int64_t axis) const;
  /// Row `row` (row-major over every axis but the last). Valid until the
  /// next call.
  ArrayRef<double> getRow(int64_t row);

private:
  struct Node;
  explicit RowEvaluator(RankedTensorType type);
  std::optional<unsigned> addNode(Value value,
                                  llvm::DenseMap<Value, unsigned> &built);
  const double *compute(unsigned index, int64_t row);
  static double leafElement(const Node &node, int64_t flat);
  const double *computeLeaf(Node &node, int64_t row);
  const double *computeArithmetic(Node &node, int64_t row);
  const double *computeView(Node &node, int64_t row);

  RankedTensorType type;
  /// Operands before their users; the tensor is the last node.
  std::vector<Node> nodes;
};

} // namespace mlir::memopt::attention

#endif // MEMOPT_LIB_DIALECT_MEMOPT_TRANSFORMS_ROWEVALUATOR_H
