//===- PrecisionPolicies.cpp - which ops may run in f16 / bf16 ------------===//
//
// Every op whose mixed-precision policy is not `Promote`, in one place, each
// with the reason. The lists start from PyTorch autocast (CUDA): its
// lower_precision_fp list (matmul, linear, conv*) and its fp32 list (exp,
// log, pow, reciprocal, sum, softmax, layer_norm, ...). Where memopt departs
// from autocast it is because of how memopt's runtime kernels compute
// (include/memopt/Runtime/Runtime.h): every float kernel of both backends
// loads f16 / bf16 elements, computes and accumulates in f32 (CUDA) or double
// (host) and rounds once on store. An op with a fused kernel therefore only
// risks what its *stored result* cannot hold, which is what TensorRT's
// precision advice says as well (a fused normalization layer is safe in FP16,
// the same normalization spelled as Pow / ReduceMean overflows).
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"

#include "OpUtils.h"

using namespace mlir;
using namespace mlir::memopt;

#define MEMOPT_PRECISION(OpClass, Policy)                                      \
  PrecisionPolicy OpClass::getPrecisionPolicy() {                              \
    return PrecisionPolicy::Policy;                                            \
  }

// Compute-bound (autocast's lower_precision_fp list). cuBLASLt runs with
// CUBLAS_COMPUTE_32F and cuDNN with a float compute type, so f16 / bf16 halve
// the bytes without an f16 accumulator.
MEMOPT_PRECISION(MatMulOp, LowPrecision)
MEMOPT_PRECISION(GemmOp, LowPrecision)
MEMOPT_PRECISION(ConvOp, LowPrecision)
MEMOPT_PRECISION(ConvResidualOp, LowPrecision)
MEMOPT_PRECISION(ConvTransposeOp, LowPrecision)
// Fused attention: two GEMMs with the softmax statistics and the output
// accumulator in f32 (online softmax); the result is a convex combination of
// V's rows, so it has V's range. f16 / bf16 take the tensor-core (WMMA) kernels
// on the GPU. An additive mask in `bias` converts like any constant (HF's
// finfo.min clamps to -65504, which softmax still turns into 0).
MEMOPT_PRECISION(AttentionOp, LowPrecision)

// cuBLASLt takes an f32 C/D with f16 / bf16 A/B under CUBLAS_COMPUTE_32F (the
// host loops store any type), so a matmul can write the f32 output of the
// function itself; that saves the low copy of, say, a language model's
// logits in the arena. A gemm with C would need C in f32 as well: not done.
bool MatMulOp::acceptsF32Result() { return true; }
bool GemmOp::acceptsF32Result() { return !getC(); }

// Results that f16 cannot hold (autocast's fp32 list). exp overflows f16 above
// x = 11.1; pow(x, 2) above |x| = 256 and pow(x, 3) above 40; a sum over many
// elements (sum of squares in a decomposed norm) exceeds 65504 although the
// kernel accumulates in f32, because the *result* is stored in the low type;
// reciprocal overflows for |x| < 1.5e-5; log is kept because its consumers
// (log-probabilities, losses) need the absolute precision near zero. A
// running sum grows like a sum (autocast lists cumsum as fp32 too), and its
// f16 result would also lose the small differences between neighbours.
MEMOPT_PRECISION(ExpOp, Float32)
MEMOPT_PRECISION(PowOp, Float32)
MEMOPT_PRECISION(ReduceSumOp, Float32)
MEMOPT_PRECISION(CumSumOp, Float32)
MEMOPT_PRECISION(ReciprocalOp, Float32)
MEMOPT_PRECISION(LogOp, Float32)
// Not an overflow but a discontinuity: a float remainder jumps by a whole
// divisor when rounding an operand moves the quotient across an integer, so
// fmod of f16-rounded operands can be off by |b| (measured 13% of the output's
// range on test_e2e_host's Mod model). Integer mod is never touched.
MEMOPT_PRECISION(ModOp, Float32)

// Bounded results. autocast lists softmax and layer_norm as fp32 ops; memopt's
// kernels already compute them in f32 (max, exp and sum, mean and variance in
// registers), and the stored result is a probability or a normalized value
// (|y| <= sqrt(N) * |scale| + |bias|), so the low type holds it. tanh,
// sigmoid, hard_sigmoid and erf lie in [-1, 1]; sin and cos too (their
// argument's precision is the producer's business).
MEMOPT_PRECISION(SoftmaxOp, BoundedResult)
MEMOPT_PRECISION(LayerNormalizationOp, BoundedResult)
MEMOPT_PRECISION(TanhOp, BoundedResult)
MEMOPT_PRECISION(SigmoidOp, BoundedResult)
MEMOPT_PRECISION(HardSigmoidOp, BoundedResult)
MEMOPT_PRECISION(ErfOp, BoundedResult)
MEMOPT_PRECISION(SinOp, BoundedResult)
MEMOPT_PRECISION(CosOp, BoundedResult)

// Training-mode batch normalization: y is bounded like layer_normalization's;
// the batch statistics it saves for the backward (mean, 1/std) are f32
// whatever x is (cuDNN's BatchNormalizationForwardTraining and PyTorch's
// native kernel save them in f32 for f16 input too), and the kernels read
// the scale and bias in f32, so a trained scale needs no low copy and gets
// an f32 gradient.
MEMOPT_PRECISION(BatchNormTrainingOp, BoundedResult)
bool BatchNormTrainingOp::acceptsF32Operand(unsigned index) {
  return index == 1 || index == 2;
}
bool BatchNormTrainingOp::hasF32Result(unsigned index) {
  return index == 1 || index == 2;
}
// layer_normalization reads Scale and B in any float type; with exactly the
// normalized elements (the case layer_normalization_grad covers) they may
// stay f32 in a training compilation.
bool LayerNormalizationOp::acceptsF32Operand(unsigned index) {
  if (index != 1 && index != 2)
    return false;
  auto x = cast<ShapedType>(getX().getType());
  int64_t axis = int64_t(getAxis());
  if (axis < 0)
    axis += x.getRank();
  int64_t cols = ShapedType::getNumElements(x.getShape().drop_front(axis));
  return cast<ShapedType>(getScale().getType()).getNumElements() == cols;
}
// attention_grad (FlashAttention-2's backward) takes f16 / bf16 Q, K, V, O
// and dO with f32 accumulation, but sums a trained bias's gradient with f32
// atomics only: a training compilation runs an attention whose bias depends
// on a parameter (swin's relative-position table) in f32, and says so.
bool AttentionOp::hasLowPrecisionGradient() {
  Value bias = getBias();
  return !bias || !mlir::memopt::impl::dependsOnParameter(bias);
}

// In-place updates of training state: their operands are state variables
// (and the f32 statistics above), never cast.
MEMOPT_PRECISION(AssignOp, AnyOperandType)
MEMOPT_PRECISION(BatchNormRunningUpdateOp, AnyOperandType)

// Ops that read any element type: a cast converts from whatever it is given
// (a cast's f32 result from an integer is a value mixed precision may narrow
// later), shape reads no data, is_nan gives i1 for any float.
MEMOPT_PRECISION(CastOp, AnyOperandType)
MEMOPT_PRECISION(ShapeOp, AnyOperandType)
MEMOPT_PRECISION(IsNaNOp, AnyOperandType)

// Explicit result types that carry meaning: range's positions stop being exact
// integers above 2048 in f16 (onnxconverter-common keeps Range in f32 too);
// constant_of_shape's `value` has the result's type (and always folds).
MEMOPT_PRECISION(RangeOp, Unchanged)
MEMOPT_PRECISION(ConstantOfShapeOp, Unchanged)

#undef MEMOPT_PRECISION
