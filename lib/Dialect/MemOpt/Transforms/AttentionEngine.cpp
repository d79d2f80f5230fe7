//===- AttentionEngine.cpp - cuDNN SDPA workspaces planned in the arena ---===//
//
// --memopt-attention-engine: on the CUDA target, each attention and attention
// gradient that cuDNN's fused SDPA can run gets `memopt.cudnn_workspace`, a
// bound of the scratch the runtime needs for it there (include/memopt/
// Runtime/Workspace.h: cuDNN's own workspace, the f32 row statistics, K
// transposed when it is stored [D, Sk]; the backward's f32 dQ accumulator).
// The op's getWorkspaceFloor returns it, so the planner promises those bytes
// like any other workspace: the arena, the memory report and --fit's
// whole-step figure count them, and the runtime's cuDNN path uses the
// planned bytes instead of a buffer of its own.
//
// Taken from XLA's cuDNN fused-MHA path (the custom call's scratch is an
// operand that buffer assignment places like any other buffer) and
// TensorRT's tactic workspaces. Different: cuDNN states its workspace only
// when the plan is built on the GPU, so the compiler plans a bound from the
// shapes (what cudnn-frontend's SDPA nodes allocate, checked against what
// cuDNN 9.19 stated on an H200), and a plan that states more runs memopt's
// kernels at run time, the engine report saying so, instead of allocating.
//
// Attention dropout: an attention with dropout and its gradients draw one
// mask, so they choose together. cuDNN's SDPA draws its mask with its own
// Philox generator (seed and offset tensors, as PyTorch's cuDNN and flash
// SDPA do), which memopt's kernels do not reproduce; memopt's kernels draw
// memopt.dropout's mask, which cuDNN cannot take without a [B, H, S, Sk]
// mask tensor. So the forward and every gradient of one dropout (the same
// Q, K, V, key and stream: a recomputed or duplicated op joins its group)
// get `dropout_cudnn_rng` only where all of them can run on cuDNN, and
// then keep their workspaces; otherwise none gets it and none keeps a
// cuDNN workspace (it would never be used). `dropout-rng=memopt` takes
// memopt's mask everywhere (bit-identical to the host and to the unfused
// graph).
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/Transforms/Passes.h"
#include "memopt/Runtime/Workspace.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <tuple>

namespace mlir::memopt {
#define GEN_PASS_DEF_MEMOPTATTENTIONENGINE
#include "memopt/Dialect/MemOpt/Transforms/Passes.h.inc"
} // namespace mlir::memopt

using namespace mlir;
using namespace mlir::memopt;

namespace {

int64_t batchOf(Value value) {
  int64_t batch = 1;
  for (int64_t dim :
       cast<RankedTensorType>(value.getType()).getShape().drop_back(2))
    batch *= dim;
  return batch;
}

int64_t lastDim(Value value, int fromEnd = 1) {
  auto type = cast<RankedTensorType>(value.getType());
  return type.getDimSize(type.getRank() - fromEnd);
}

/// The shapes both ops share, and whether cuDNN's SDPA may run them.
struct SdpaShape {
  int64_t batch = 0, queries = 0, keys = 0, headSize = 0, valueSize = 0;
  int64_t keyBatch = 0, elementBytes = 0, keyBytes = 0;
  bool planned = false;
};

SdpaShape shapeOf(Value q, Value k, Value v, Value output, Value bias,
                  bool keyTransposed) {
  SdpaShape s;
  s.batch = batchOf(output);
  s.queries = lastDim(q, 2);
  s.headSize = lastDim(q);
  s.valueSize = lastDim(v);
  s.keys = lastDim(k, keyTransposed ? 1 : 2);
  s.keyBatch = batchOf(k);
  auto type = cast<RankedTensorType>(output.getType());
  Type element = type.getElementType();
  s.elementBytes =
      getTensorBytes(type) / std::max<int64_t>(1, type.getNumElements());
  s.keyBytes = keyTransposed ? getTensorBytes(k.getType()) : 0;
  s.planned = ::memopt::workspace::cudnnAttentionPlanned(
      element.isF16() || element.isBF16(), s.headSize, s.valueSize,
      batchOf(q) == s.batch, bool(bias), s.keys);
  return s;
}

/// The bytes to reserve at `op`, or nothing where cuDNN will not run it.
std::optional<int64_t> cudnnBytes(Operation *op) {
  if (auto attention = dyn_cast<AttentionOp>(op)) {
    SdpaShape s = shapeOf(attention.getQ(), attention.getK(), attention.getV(),
                          attention.getY(), attention.getBias(),
                          attention.getKeyTransposed());
    if (!s.planned)
      return std::nullopt;
    // A dropout drawn by cuDNN's generator adds its seed and offset
    // (dropout_cudnn_rng is set by the group decision below, then the bytes
    // are asked again).
    return ::memopt::workspace::cudnnAttentionBytes(
        s.batch * s.queries, bool(attention.getLse()), s.keyBytes,
        attention.getDropoutCudnnRng());
  }
  auto grad = dyn_cast<AttentionGradOp>(op);
  if (!grad)
    return std::nullopt;
  SdpaShape s = shapeOf(grad.getQ(), grad.getK(), grad.getV(), grad.getO(),
                        grad.getBias(), grad.getKeyTransposed());
  bool grouped = s.keyBatch < s.batch;
  // A trained bias's gradient runs on memopt's f32 kernels; a K stored
  // [D, Sk] with grouped heads is refused by the runtime's cuDNN path.
  if (!s.planned || grad.getBiasGradient() ||
      (grad.getKeyTransposed() && grouped))
    return std::nullopt;
  return ::memopt::workspace::cudnnAttentionBackwardBytes(
      s.batch * s.queries, s.headSize, s.valueSize,
      grouped ? s.batch * s.keys : 0, s.elementBytes, s.keyBytes,
      grad.getDropoutCudnnRng());
}

/// The ops that draw one attention dropout mask: a forward and its
/// gradients share Q, K, V, the key and the stream (and the ratio).
using DropoutGroupKey = std::tuple<Value, Value, Value, Value, int64_t>;

/// The dropout group of `op`, or nothing without a dropout.
std::optional<DropoutGroupKey> dropoutGroupOf(Operation *op) {
  if (auto attention = dyn_cast<AttentionOp>(op)) {
    if (!attention.hasDropout())
      return std::nullopt;
    return DropoutGroupKey{attention.getQ(), attention.getK(), attention.getV(),
                           attention.getDropoutKey(),
                           int64_t(attention.getDropoutStream())};
  }
  auto grad = cast<AttentionGradOp>(op);
  if (!grad.hasDropout())
    return std::nullopt;
  return DropoutGroupKey{grad.getQ(), grad.getK(), grad.getV(),
                         grad.getDropoutKey(),
                         int64_t(grad.getDropoutStream())};
}

struct MemOptAttentionEnginePass
    : public mlir::memopt::impl::MemOptAttentionEngineBase<
          MemOptAttentionEnginePass> {
  using MemOptAttentionEngineBase::MemOptAttentionEngineBase;

  void runOnOperation() override {
    func::FuncOp function = getOperation();
    if (target != "cuda" && target != "host") {
      function.emitError("memopt-attention-engine: target '")
          << target << "' is not cuda or host";
      return signalPassFailure();
    }
    if (dropoutRng != "auto" && dropoutRng != "memopt") {
      function.emitError("memopt-attention-engine: dropout-rng '")
          << dropoutRng << "' is not auto or memopt";
      return signalPassFailure();
    }
    if (target != "cuda")
      return;
    // Each op's own eligibility, then the dropout groups decide together.
    SmallVector<std::pair<Operation *, std::optional<int64_t>>> calls;
    llvm::MapVector<DropoutGroupKey, SmallVector<size_t>> groups;
    function.walk([&](Operation *op) {
      if (!isa<AttentionOp, AttentionGradOp>(op))
        return;
      if (std::optional<DropoutGroupKey> group = dropoutGroupOf(op))
        groups[*group].push_back(calls.size());
      calls.push_back({op, cudnnBytes(op)});
    });
    int64_t cudnnRng = 0;
    for (auto &[group, members] : groups) {
      bool together =
          dropoutRng == "auto" && llvm::all_of(members, [&](size_t index) {
            return calls[index].second.has_value();
          });
      for (size_t index : members) {
        Operation *op = calls[index].first;
        if (auto attention = dyn_cast<AttentionOp>(op))
          attention.setDropoutCudnnRng(together);
        else
          cast<AttentionGradOp>(op).setDropoutCudnnRng(together);
        cudnnRng += together;
        if (together)
          calls[index].second = cudnnBytes(op); // with the seed and offset
        else
          calls[index].second.reset();
      }
    }
    int64_t reserved = 0, largest = 0;
    for (auto &[op, bytes] : calls) {
      if (!bytes) {
        op->removeAttr(kCudnnWorkspaceAttrName);
        continue;
      }
      ++reserved;
      largest = std::max(largest, *bytes);
      op->setAttr(
          kCudnnWorkspaceAttrName,
          IntegerAttr::get(IntegerType::get(op->getContext(), 64), *bytes));
    }
    if (report && !calls.empty())
      llvm::outs()
          << "memopt-attention-engine @" << function.getSymName() << ": "
          << reserved << " of " << calls.size()
          << " attention calls reserve cuDNN's SDPA workspace"
          << " (largest " << largest << " bytes)"
          << (groups.empty()
                  ? std::string()
                  : "; " + std::to_string(cudnnRng) + " of " +
                        std::to_string(llvm::count_if(
                            calls,
                            [](auto &call) {
                              return dropoutGroupOf(call.first).has_value();
                            })) +
                        " with dropout draw cuDNN's mask")
          << "\n";
  }
};

} // namespace
