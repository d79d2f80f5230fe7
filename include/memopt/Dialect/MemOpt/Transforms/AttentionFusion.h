//===- AttentionFusion.h - what attention fusion did, per site --*- C++ -*-===//
//
// The report of --memopt-fuse-attention, shared by the pass (its `report`
// option) and memopt-compile's phase line: every softmax over attention
// scores, whether it became a memopt.attention, with which mask, and if not,
// the node at which the pattern broke.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_TRANSFORMS_ATTENTIONFUSION_H
#define MEMOPT_DIALECT_MEMOPT_TRANSFORMS_ATTENTIONFUSION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/SmallVector.h"

#include <string>

namespace mlir::memopt {

/// One softmax over Q·Kᵀ scores (one attention of one layer).
struct AttentionSite {
  /// The softmax's ONNX node name (or its location where it has none).
  std::string name;
  bool fused = false;
  /// Fused: the mask class ("none", "causal", "padding", "causal + padding",
  /// "sliding window", "sliding window + padding" or "arbitrary") and where
  /// mask and bias live. Not fused: the op at which the pattern broke, its
  /// node name, and why.
  std::string detail;
};

/// The attention sites of `function` in program order: each memopt.attention
/// and each softmax that is fed by or feeds a MatMul. An unfused softmax is
/// matched again (without rewriting) to say what broke the pattern.
SmallVector<AttentionSite> describeAttentionSites(func::FuncOp function,
                                                  int64_t maxHeadSize = 128);

/// "'NAME': fused, mask causal" / "'NAME': not fused at OP 'NODE': WHY".
std::string formatAttentionSite(const AttentionSite &site);

} // namespace mlir::memopt

#endif // MEMOPT_DIALECT_MEMOPT_TRANSFORMS_ATTENTIONFUSION_H
