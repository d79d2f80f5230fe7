//===- MemOptInterfaces.h - what memory passes ask of ops -------*- C++ -*-===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTINTERFACES_H
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTINTERFACES_H

#include "mlir/IR/OpDefinition.h"

namespace mlir::memopt {
namespace detail {
/// One flop per result element.
int64_t defaultFlops(Operation *op);
/// Every operand read once plus every result written once, in bytes.
int64_t defaultBytesMoved(Operation *op);
/// The library-call workspace policy (cuDNN convolutions, cuBLASLt GEMMs): as
/// many bytes as the largest operand or result, at most 32 MiB (cuBLASLt's
/// recommendation on Hopper; enough for cuDNN's implicit-GEMM and most
/// Winograd/FFT-tiled algorithms on inference shapes). It is a maximum: the
/// planner promises a 1 MiB floor and grows the rest into free arena bytes
/// (planner::growIntoFreeSpace), so a workspace never raises the arena by
/// more than the floor.
int64_t libraryWorkspaceBytes(Operation *op);
/// cuDNN convolutions (forward, data and filter gradients): the library-call
/// policy, raised to twice the bytes the call reads and writes (at most
/// 1 GiB) once that policy asks for the 1 MiB floor or more. cuDNN's
/// tensor-core algorithms on channels-first tensors transpose the input and
/// the output into their workspace: on an H100 they asked for 1.0 to 1.74x
/// (x + y) on ResNet-50's f16 and TF32 training convolutions, and without
/// that room the search fell back to CUDA-core kernels (MEMOPT_CONV_LOG,
/// docs/layout.md). Twice the traffic covers them; where the floor stays
/// 1 MiB (convWorkspaceFloor raises it for f16 / bf16 channels-first ones),
/// the larger wish never raises the arena: it only lets the convolutions
/// off the peak take the free bytes around them. Small
/// convolutions keep the library policy (their whole wish counts in the
/// arena, and a tiny model keeps a tiny arena).
int64_t convWorkspaceBytes(Operation *op);
/// The workspace a cuDNN convolution's planner must promise: for f16 / bf16
/// tensors in channels-first layout (a training step's; `channelsLast`
/// false), the room cuDNN's tensor-core algorithms transpose into, 1.1x the
/// bytes the call moves, so that the choice between those and CUDA-core
/// kernels (3-10x slower) no longer depends on which bytes around the op an
/// unrelated change of the plan leaves free: on ResNet-50's fp16 step a plan
/// change that only removed the ReLU gradient's masks left eight call sites
/// (data and filter gradients of four layers, one forward) 1-36 MiB short,
/// and its convolutions took 22.6-25.6 ms against 17.7-20.9. -1
/// (the planner's rule) for channels-last, f32 and small convolutions.
int64_t convWorkspaceFloor(Operation *op, bool channelsLast);
} // namespace detail

/// How an op may run when a model is compiled for a low float type (f16 or
/// bf16) by memopt-mixed-precision. The categories follow PyTorch autocast
/// (lower_precision_fp list, fp32 list, type promotion for everything else);
/// `BoundedResult` and the two "unchanged" kinds are memopt's own.
enum class PrecisionPolicy {
  /// Compute-bound: f32 operands are cast to the low type and the result is
  /// low. The runtime kernels (cuBLASLt, cuDNN, host loops) accumulate in f32
  /// or wider, so only the storage is narrow.
  LowPrecision,
  /// A low-type result may overflow (exp, pow, sums) or lose what the
  /// consumer needs (log, reciprocal): operands and result stay f32, and the
  /// result keeps its consumers in f32 until a LowPrecision op or a
  /// BoundedResult op.
  Float32,
  /// Runs in the widest float type among its operands whose type is not free
  /// to change (results of Float32 ops and of f32 Promote ops); in the low
  /// type when there are none. Elementwise arithmetic and data movement.
  Promote,
  /// As Promote, but the result's magnitude is bounded whatever the input
  /// (tanh, sigmoid, softmax, normalizations) and the kernel computes in f32:
  /// an f32 result may be cast down without overflow, so it does not hold its
  /// consumers in f32.
  BoundedResult,
  /// Operands are taken in whatever type they have (the op reads any type:
  /// cast, shape); result types are left alone.
  AnyOperandType,
  /// Operand and result types are left as imported (ops whose result type is
  /// explicit and whose values would lose meaning in the low type: range).
  Unchanged,
};

/// Size in bytes of a statically shaped tensor (i1 is stored as one byte).
int64_t getTensorBytes(Type type);

/// The largest tensor memopt accepts, in bytes: far below int64's range, so
/// sums of sizes (arena, report, cost) cannot overflow.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 50;

/// On memopt.attention / memopt.attention_grad (an i64, set by
/// --memopt-attention-engine for the CUDA target): the workspace bytes
/// cuDNN's fused SDPA needs there, which the planner promises
/// (CostOpInterface::getWorkspaceFloor).
constexpr llvm::StringLiteral kCudnnWorkspaceAttrName =
    "memopt.cudnn_workspace";

/// Whether `type` is a statically shaped tensor of at most kMaxTensorBytes
/// (its element count computed without overflow). Every memopt operand and
/// result satisfies it (the ODS type constraints).
bool isBoundedTensorType(Type type);
} // namespace mlir::memopt

#include "memopt/Dialect/MemOpt/IR/MemOptInterfaces.h.inc"

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTINTERFACES_H
