//===- Gradients.cpp - vector-Jacobian products of memopt ops -------------===//
//
// One rule per op, attached as GradientOpInterface external models when the
// dialect loads. Each rule builds the operands' gradients from memopt ops, so
// every later pass (fusion, scheduling, bufferization, planning, remat) sees
// ordinary ops and ordinary live ranges.
//
// Taken from PyTorch's tools/autograd/derivatives.yaml (which tensors each
// backward reads: relu, sigmoid, tanh and softmax read their output, so the
// input may die early) and JAX's linear transpose rules (broadcasting
// gradients are summed back to the operand's shape, matmul transposes become
// transpose flags of gemm). Where we differ: rules read the output whenever
// that saves the input, the data gradient of a convolution is a
// `conv_transpose` with the forward filter (no new op), and a rule that is
// not defined for an op's attributes is a clear error naming the ONNX node.
// The fused attention's rule is FlashAttention-2's backward: its forward
// returns the row statistics (prepareForGradient, JAX's custom_vjp
// residuals) and `attention_grad` recomputes the probabilities from them, so
// no [S, Sk] tensor is saved.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"

#include "OpUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/TypeUtilities.h"

#include <cmath>
#include <numeric>

using namespace mlir;
using namespace mlir::memopt;

namespace {

/// Small builders for the gradient formulas, all at one location.
struct GradientBuilder {
  OpBuilder &b;
  Location loc;

  /// A rank-0 constant of `elementType` (broadcasts against any tensor).
  Value scalar(Type elementType, double value) {
    auto type = RankedTensorType::get({}, elementType);
    Attribute element;
    if (auto floatType = dyn_cast<FloatType>(elementType))
      element = FloatAttr::get(floatType, value);
    else
      element = IntegerAttr::get(elementType, int64_t(value));
    return ConstantOp::create(b, loc, DenseElementsAttr::get(type, element));
  }
  Value scalarLike(Value like, double value) {
    return scalar(getElementTypeOrSelf(like.getType()), value);
  }
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value mul(Value x, double factor) { return mul(x, scalarLike(x, factor)); }
  Value neg(Value x) { return NegOp::create(b, loc, x); }
  Value greater(Value x, Value y) { return GreaterOp::create(b, loc, x, y); }
  Value less(Value x, Value y) { return LessOp::create(b, loc, x, y); }
  Value select(Value condition, Value x, Value y) {
    return WhereOp::create(b, loc, condition, x, y);
  }
  Value reshape(Value x, Type type) {
    if (x.getType() == type)
      return x;
    return ReshapeOp::create(b, loc, type, x);
  }
  Value expand(Value x, Type type) {
    if (x.getType() == type)
      return x;
    return ExpandOp::create(b, loc, type, x);
  }
  /// alpha * op(x) op(y) of `type`, transposes as flags (no copies).
  Value gemm(Value x, Value y, bool transX, bool transY, Type type,
             float alpha = 1.0f) {
    return GemmOp::create(b, loc, type, x, y, Value(), b.getF32FloatAttr(alpha),
                          b.getF32FloatAttr(1.0f), b.getI64IntegerAttr(transX),
                          b.getI64IntegerAttr(transY), b.getStringAttr("none"));
  }
  Value transpose(Value x, ArrayRef<int64_t> perm) {
    return TransposeOp::create(b, loc, x, b.getDenseI64ArrayAttr(perm));
  }
  Value reduceSum(Value x, ArrayRef<int64_t> axes, bool keepdims) {
    return ReduceSumOp::create(b, loc, x, b.getDenseI64ArrayAttr(axes),
                               b.getI64IntegerAttr(keepdims));
  }
  Value reduceMean(Value x, ArrayRef<int64_t> axes, bool keepdims) {
    return ReduceMeanOp::create(b, loc, x, b.getDenseI64ArrayAttr(axes),
                                b.getI64IntegerAttr(keepdims));
  }
  /// A tensor of `type` filled with zeros (an expand of a scalar: no weight
  /// bytes, one arena buffer).
  Value zeros(Type type) {
    return expand(scalar(getElementTypeOrSelf(type), 0.0), type);
  }

  /// Sums `gradient` (of a broadcast result) back to `target`'s shape:
  /// leading axes that broadcasting added and axes where the operand had
  /// size 1 are reduced.
  Value sumToShape(Value gradient, Type target) {
    auto gradType = cast<RankedTensorType>(gradient.getType());
    auto targetType = cast<RankedTensorType>(target);
    if (gradType.getShape() == targetType.getShape())
      return gradient;
    int64_t lead = gradType.getRank() - targetType.getRank();
    SmallVector<int64_t> axes;
    for (int64_t axis = 0; axis < gradType.getRank(); ++axis)
      if (axis < lead || (targetType.getDimSize(axis - lead) == 1 &&
                          gradType.getDimSize(axis) != 1))
        axes.push_back(axis);
    Value reduced = axes.empty() ? gradient : reduceSum(gradient, axes, true);
    return reshape(reduced, RankedTensorType::get(
                                targetType.getShape(),
                                getElementTypeOrSelf(reduced.getType())));
  }
};

bool isFloatTensor(Value value) {
  return isa<FloatType>(getElementTypeOrSelf(value.getType()));
}

/// An error on `op` that names its ONNX node, as every training error does.
InFlightDiagnostic gradientError(Operation *op) {
  return op->emitError() << describeNode(op) << ": ";
}

/// A gradient rule as a free function per op; the model forwards to it.
template <typename OpT>
struct GradientModel
    : public GradientOpInterface::ExternalModel<GradientModel<OpT>, OpT> {
  LogicalResult buildGradient(Operation *op, OpBuilder &builder,
                              ArrayRef<Value> resultGradients,
                              SmallVectorImpl<Value> &operandGradients) const {
    operandGradients.assign(op->getNumOperands(), Value());
    GradientBuilder g{builder, op->getLoc()};
    return vjp(cast<OpT>(op), g, resultGradients, operandGradients);
  }
  Operation *prepareForGradient(Operation *op, OpBuilder &builder) const {
    GradientBuilder g{builder, op->getLoc()};
    return prepare(cast<OpT>(op), g);
  }
};

/// Most rules read only the forward's operands and results.
template <typename OpT> Operation *prepare(OpT op, GradientBuilder &) {
  return op;
}

using Grads = SmallVectorImpl<Value>;

//===----------------------------------------------------------------------===//
// Unary elementwise
//===----------------------------------------------------------------------===//

LogicalResult vjp(ReluOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  // From the output (derivatives.yaml: threshold_backward(grad, result, 0)),
  // one float op that fuses with its neighbours.
  dx[0] = ReluGradOp::create(g.b, g.loc, dy[0], op.getY());
  return success();
}

LogicalResult vjp(LeakyReluOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  Value zero = g.scalarLike(op.getX(), 0.0);
  dx[0] = g.select(g.greater(op.getX(), zero), dy[0],
                   g.mul(dy[0], op.getAlpha().convertToDouble()));
  return success();
}

LogicalResult vjp(SigmoidOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  Value y = op.getY();
  dx[0] = g.mul(dy[0], g.mul(y, g.sub(g.scalarLike(y, 1.0), y)));
  return success();
}

LogicalResult vjp(TanhOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  Value y = op.getY();
  dx[0] = g.mul(dy[0], g.sub(g.scalarLike(y, 1.0), g.mul(y, y)));
  return success();
}

LogicalResult vjp(ExpOp op, GradientBuilder &g, ArrayRef<Value> dy, Grads &dx) {
  dx[0] = g.mul(dy[0], op.getY());
  return success();
}

LogicalResult vjp(LogOp op, GradientBuilder &g, ArrayRef<Value> dy, Grads &dx) {
  dx[0] = g.div(dy[0], op.getX());
  return success();
}

LogicalResult vjp(SqrtOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  dx[0] = g.div(g.mul(dy[0], 0.5), op.getY());
  return success();
}

LogicalResult vjp(ReciprocalOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  Value y = op.getY();
  dx[0] = g.neg(g.mul(dy[0], g.mul(y, y)));
  return success();
}

LogicalResult vjp(NegOp op, GradientBuilder &g, ArrayRef<Value> dy, Grads &dx) {
  if (isFloatTensor(op.getX()))
    dx[0] = g.neg(dy[0]);
  return success();
}

LogicalResult vjp(AbsOp op, GradientBuilder &g, ArrayRef<Value> dy, Grads &dx) {
  if (!isFloatTensor(op.getX()))
    return success();
  Value zero = g.scalarLike(op.getX(), 0.0);
  dx[0] = g.select(g.less(op.getX(), zero), g.neg(dy[0]), dy[0]);
  return success();
}

LogicalResult vjp(ErfOp op, GradientBuilder &g, ArrayRef<Value> dy, Grads &dx) {
  Value x = op.getX();
  Value gauss = ExpOp::create(g.b, g.loc, g.neg(g.mul(x, x)));
  dx[0] = g.mul(dy[0], g.mul(gauss, 2.0 / std::sqrt(M_PI)));
  return success();
}

LogicalResult vjp(SinOp op, GradientBuilder &g, ArrayRef<Value> dy, Grads &dx) {
  dx[0] = g.mul(dy[0], CosOp::create(g.b, g.loc, op.getX()));
  return success();
}

LogicalResult vjp(CosOp op, GradientBuilder &g, ArrayRef<Value> dy, Grads &dx) {
  dx[0] = g.neg(g.mul(dy[0], SinOp::create(g.b, g.loc, op.getX())));
  return success();
}

LogicalResult vjp(GeluOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  Value x = op.getX();
  Value half = g.scalarLike(x, 0.5), one = g.scalarLike(x, 1.0);
  if (op.getApproximate() == "tanh") {
    // u = sqrt(2/pi) (x + 0.044715 x^3), gelu = x/2 (1 + tanh u).
    const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
    Value x2 = g.mul(x, x);
    Value u = g.mul(g.mul(x, g.add(one, g.mul(x2, c))), k);
    Value t = TanhOp::create(g.b, g.loc, u);
    Value du = g.mul(g.add(one, g.mul(x2, 3 * c)), k);
    Value sech2 = g.sub(one, g.mul(t, t));
    Value derivative = g.add(g.mul(half, g.add(one, t)),
                             g.mul(g.mul(half, x), g.mul(sech2, du)));
    dx[0] = g.mul(dy[0], derivative);
    return success();
  }
  // Phi(x) + x phi(x).
  Value cdf =
      g.mul(half, g.add(one, ErfOp::create(g.b, g.loc, g.mul(x, M_SQRT1_2))));
  Value pdf = g.mul(ExpOp::create(g.b, g.loc, g.mul(g.mul(x, x), -0.5)),
                    1.0 / std::sqrt(2.0 * M_PI));
  dx[0] = g.mul(dy[0], g.add(cdf, g.mul(x, pdf)));
  return success();
}

LogicalResult vjp(HardSwishOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  // PyTorch's hardswish_backward: 0 below -3, x / 3 + 1/2 up to 3, 1 above.
  Value x = op.getX();
  Value inner = g.mul(dy[0], g.add(g.mul(x, 1.0 / 3.0), g.scalarLike(x, 0.5)));
  Value upper = g.select(g.greater(x, g.scalarLike(x, 3.0)), dy[0], inner);
  dx[0] =
      g.select(g.less(x, g.scalarLike(x, -3.0)), g.scalarLike(x, 0.0), upper);
  return success();
}

LogicalResult vjp(HardSigmoidOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  Value x = op.getX();
  double alpha = op.getAlpha().convertToDouble();
  double beta = op.getBeta().convertToDouble();
  // Slope alpha strictly inside the linear part (PyTorch's rule).
  Value lower = g.scalarLike(x, -beta / alpha);
  Value upper = g.scalarLike(x, (1.0 - beta) / alpha);
  Value zero = g.scalarLike(x, 0.0);
  Value inside = g.select(g.less(x, upper), g.mul(dy[0], alpha), zero);
  dx[0] = g.select(g.greater(x, lower), inside, zero);
  return success();
}

LogicalResult vjp(ClipOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  if (!isFloatTensor(op.getX()))
    return success();
  // Gradient flows where min <= x <= max (PyTorch's clamp_backward).
  Value x = op.getX(), zero = g.scalarLike(x, 0.0), grad = dy[0];
  if (auto max = op.getMaxAttr())
    grad = g.select(g.greater(x, g.scalarLike(x, max.getValueAsDouble())), zero,
                    grad);
  if (auto min = op.getMinAttr())
    grad = g.select(g.less(x, g.scalarLike(x, min.getValueAsDouble())), zero,
                    grad);
  dx[0] = grad;
  return success();
}

LogicalResult vjp(IdentityOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  dx[0] = dy[0];
  return success();
}

LogicalResult vjp(DropoutOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  // The same dropout (key, stream, ratio) applied to dY regenerates the
  // forward's mask and scale: nothing is saved for backward (PyTorch's
  // native_dropout keeps a bool mask of X's shape).
  dx[0] = DropoutOp::create(g.b, g.loc, dy[0].getType(), dy[0], op.getKey(),
                            op.getRatioAttr(), op.getStreamAttr());
  return success();
}

LogicalResult vjp(CastOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  if (!isFloatTensor(op.getInput()) || !isFloatTensor(op.getOutput()))
    return success();
  dx[0] = CastOp::create(g.b, g.loc, op.getInput().getType(), dy[0]);
  return success();
}

//===----------------------------------------------------------------------===//
// Binary elementwise (numpy broadcasting: gradients summed back)
//===----------------------------------------------------------------------===//

LogicalResult vjp(AddOp op, GradientBuilder &g, ArrayRef<Value> dy, Grads &dx) {
  if (!isFloatTensor(op.getC()))
    return success();
  dx[0] = g.sumToShape(dy[0], op.getA().getType());
  dx[1] = g.sumToShape(dy[0], op.getB().getType());
  return success();
}

LogicalResult vjp(SubOp op, GradientBuilder &g, ArrayRef<Value> dy, Grads &dx) {
  if (!isFloatTensor(op.getC()))
    return success();
  dx[0] = g.sumToShape(dy[0], op.getA().getType());
  dx[1] = g.sumToShape(g.neg(dy[0]), op.getB().getType());
  return success();
}

LogicalResult vjp(MulOp op, GradientBuilder &g, ArrayRef<Value> dy, Grads &dx) {
  if (!isFloatTensor(op.getC()))
    return success();
  dx[0] = g.sumToShape(g.mul(dy[0], op.getB()), op.getA().getType());
  dx[1] = g.sumToShape(g.mul(dy[0], op.getA()), op.getB().getType());
  return success();
}

LogicalResult vjp(DivOp op, GradientBuilder &g, ArrayRef<Value> dy, Grads &dx) {
  if (!isFloatTensor(op.getC()))
    return success();
  Value quotient = g.div(dy[0], op.getB());
  dx[0] = g.sumToShape(quotient, op.getA().getType());
  // d(a/b)/db = -(a/b)/b: read the result, not a.
  dx[1] = g.sumToShape(g.neg(g.mul(quotient, op.getC())), op.getB().getType());
  return success();
}

LogicalResult vjp(PowOp op, GradientBuilder &g, ArrayRef<Value> dy, Grads &dx) {
  if (!isFloatTensor(op.getC()))
    return success();
  Value a = op.getA(), exponent = op.getB();
  Value lowered = PowOp::create(g.b, g.loc, a,
                                g.sub(exponent, g.scalarLike(exponent, 1.0)));
  dx[0] = g.sumToShape(g.mul(dy[0], g.mul(exponent, lowered)), a.getType());
  dx[1] =
      g.sumToShape(g.mul(dy[0], g.mul(op.getC(), LogOp::create(g.b, g.loc, a))),
                   op.getB().getType());
  return success();
}

/// max / min: the gradient goes to the operand that was chosen (`a` on ties).
template <typename OpT>
LogicalResult minMaxGradient(OpT op, GradientBuilder &g, ArrayRef<Value> dy,
                             Grads &dx, bool isMax) {
  if (!isFloatTensor(op.getC()))
    return success();
  Value a = op.getA(), b = op.getB();
  Value bWins = isMax ? g.less(a, b) : g.greater(a, b);
  Value zero = g.scalarLike(dy[0], 0.0);
  dx[0] = g.sumToShape(g.select(bWins, zero, dy[0]), a.getType());
  dx[1] = g.sumToShape(g.select(bWins, dy[0], zero), b.getType());
  return success();
}
LogicalResult vjp(MaxOp op, GradientBuilder &g, ArrayRef<Value> dy, Grads &dx) {
  return minMaxGradient(op, g, dy, dx, /*isMax=*/true);
}
LogicalResult vjp(MinOp op, GradientBuilder &g, ArrayRef<Value> dy, Grads &dx) {
  return minMaxGradient(op, g, dy, dx, /*isMax=*/false);
}

LogicalResult vjp(WhereOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  if (!isFloatTensor(op.getOutput()))
    return success();
  Value zero = g.scalarLike(dy[0], 0.0);
  dx[1] = g.sumToShape(g.select(op.getCondition(), dy[0], zero),
                       op.getX().getType());
  dx[2] = g.sumToShape(g.select(op.getCondition(), zero, dy[0]),
                       op.getY().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// Matrix products and convolution
//===----------------------------------------------------------------------===//

LogicalResult vjp(GemmOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  if (op.getActivation() != "none")
    return gradientError(op)
           << "has a fused '" << op.getActivation()
           << "' epilogue; differentiate before --memopt-fuse-epilogues";
  bool transA = op.getTransA() != 0, transB = op.getTransB() != 0;
  float alpha = op.getAlpha().convertToFloat();
  Value a = op.getA(), b = op.getB(), grad = dy[0];
  auto gemm = [&](Value x, Value y, bool tx, bool ty, Type type) {
    return g.gemm(x, y, tx, ty, type, alpha);
  };
  // Y = op(A) op(B): dop(A) = dY op(B)^T, dop(B) = op(A)^T dY, and a
  // transposed operand takes the transposed product (no transpose op).
  dx[0] = transA ? gemm(b, grad, transB, true, a.getType())
                 : gemm(grad, b, false, !transB, a.getType());
  dx[1] = transB ? gemm(grad, a, true, transA, b.getType())
                 : gemm(a, grad, !transA, false, b.getType());
  if (Value c = op.getC()) {
    Value summed = g.sumToShape(grad, c.getType());
    float beta = op.getBeta().convertToFloat();
    dx[2] = beta == 1.0f ? summed : g.mul(summed, beta);
  }
  return success();
}

LogicalResult vjp(MatMulOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  Value a = op.getA(), b = op.getB(), grad = dy[0];
  auto aType = cast<RankedTensorType>(a.getType());
  auto bType = cast<RankedTensorType>(b.getType());
  if (op.getY().getType() != grad.getType() ||
      aType.getElementType() != op.getY().getType().getElementType())
    return gradientError(op)
           << "a matmul with a widened (f32) result has no gradient";
  Type element = aType.getElementType();
  // 1-D operands are matrices [1, K] / [K, 1] whose extra axis the result
  // dropped: put it back, differentiate, drop it again.
  Value a2 = a, b2 = b, grad2 = grad;
  SmallVector<int64_t> gradShape(cast<ShapedType>(grad.getType()).getShape());
  if (aType.getRank() == 1) {
    a2 = g.reshape(a, RankedTensorType::get({1, aType.getDimSize(0)}, element));
    gradShape.insert(gradShape.end() - (bType.getRank() == 1 ? 0 : 1), 1);
  }
  if (bType.getRank() == 1) {
    b2 = g.reshape(b, RankedTensorType::get({bType.getDimSize(0), 1}, element));
    gradShape.push_back(1);
  }
  grad2 = g.reshape(grad, RankedTensorType::get(gradShape, element));
  auto swapLast = [&](Value x) {
    int64_t rank = cast<ShapedType>(x.getType()).getRank();
    SmallVector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[rank - 1], perm[rank - 2]);
    return g.transpose(x, perm);
  };
  auto a2Type = cast<RankedTensorType>(a2.getType());
  auto b2Type = cast<RankedTensorType>(b2.getType());
  Value da, db;
  if (a2Type.getRank() == 2 && b2Type.getRank() == 2) {
    da = g.gemm(grad2, b2, false, true, a2Type);
    db = g.gemm(a2, grad2, true, false, b2Type);
  } else if (b2Type.getRank() == 2) {
    // A Linear layer on [..., M, K] x [K, N]: the batch axes are rows of one
    // gemm (no transposed copy of A, no per-batch dB summed afterwards).
    int64_t rows = ShapedType::getNumElements(a2Type.getShape().drop_back());
    int64_t k = a2Type.getShape().back(), n = b2Type.getDimSize(1);
    auto flatA = RankedTensorType::get({rows, k}, element);
    Value a3 = g.reshape(a2, flatA);
    Value grad3 = g.reshape(grad2, RankedTensorType::get({rows, n}, element));
    da = g.reshape(g.gemm(grad3, b2, false, true, flatA), a2Type);
    db = g.gemm(a3, grad3, true, false, b2Type);
  } else {
    da = MatMulOp::create(g.b, g.loc, grad2, swapLast(b2));
    db = MatMulOp::create(g.b, g.loc, swapLast(a2), grad2);
    // Broadcast batch axes are summed back (and a 2-D operand keeps none).
    da = g.sumToShape(da, a2Type);
    db = g.sumToShape(db, b2Type);
  }
  dx[0] = g.reshape(da, aType);
  dx[1] = g.reshape(db, bType);
  return success();
}

LogicalResult vjp(ConvOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  if (op.getActivation() != "none")
    return gradientError(op)
           << "has a fused '" << op.getActivation()
           << "' epilogue; differentiate before --memopt-fuse-epilogues";
  auto xType = cast<RankedTensorType>(op.getX().getType());
  auto yType = cast<RankedTensorType>(op.getY().getType());
  int64_t spatialRank = xType.getRank() - 2;
  ArrayRef<int64_t> kernel = op.getKernelShape(), strides = op.getStrides(),
                    pads = op.getPads(), dilations = op.getDilations();
  // The data gradient is the transposed convolution of dY with the same
  // filter; output_padding restores the rows a strided forward skipped.
  SmallVector<int64_t> outputPadding;
  for (int64_t i = 0; i < spatialRank; ++i) {
    int64_t covered = strides[i] * (yType.getDimSize(i + 2) - 1) +
                      dilations[i] * (kernel[i] - 1) + 1 - pads[i] -
                      pads[i + spatialRank];
    outputPadding.push_back(xType.getDimSize(i + 2) - covered);
  }
  dx[0] = ConvTransposeOp::create(
      g.b, g.loc, dy[0], op.getW(), Value(), op.getKernelShapeAttr(),
      op.getStridesAttr(), op.getPadsAttr(), op.getDilationsAttr(),
      g.b.getDenseI64ArrayAttr(outputPadding), op.getGroupAttr());
  if (dx[0].getType() != xType)
    return gradientError(op) << "data gradient shape " << dx[0].getType()
                             << " does not match the input " << xType;
  dx[1] = ConvBackwardFilterOp::create(
      g.b, g.loc, op.getW().getType(), op.getX(), dy[0],
      op.getKernelShapeAttr(), op.getStridesAttr(), op.getPadsAttr(),
      op.getDilationsAttr(), op.getGroupAttr());
  if (Value bias = op.getB()) {
    SmallVector<int64_t> axes = {0};
    for (int64_t i = 0; i < spatialRank; ++i)
      axes.push_back(i + 2);
    dx[2] = g.reshape(g.reduceSum(dy[0], axes, false), bias.getType());
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Pooling and normalization
//===----------------------------------------------------------------------===//

template <typename PoolOpT>
LogicalResult poolGradient(PoolOpT op, GradientBuilder &g, ArrayRef<Value> dy,
                           Grads &dx, StringRef kind, int64_t includePad) {
  dx[0] = PoolGradOp::create(g.b, g.loc, op.getX().getType(), op.getX(), dy[0],
                             g.b.getStringAttr(kind), op.getKernelShapeAttr(),
                             op.getStridesAttr(), op.getPadsAttr(),
                             op.getDilationsAttr(), op.getCeilModeAttr(),
                             g.b.getI64IntegerAttr(includePad));
  return success();
}
LogicalResult vjp(MaxPoolOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  return poolGradient(op, g, dy, dx, "max", 0);
}
LogicalResult vjp(AveragePoolOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  return poolGradient(op, g, dy, dx, "average", op.getCountIncludePad());
}

LogicalResult vjp(GlobalAveragePoolOp op, GradientBuilder &g,
                  ArrayRef<Value> dy, Grads &dx) {
  auto xType = cast<RankedTensorType>(op.getX().getType());
  int64_t window = ShapedType::getNumElements(xType.getShape().drop_front(2));
  dx[0] = g.expand(g.mul(dy[0], 1.0 / double(window)), xType);
  return success();
}

LogicalResult vjp(BatchNormalizationOp op, GradientBuilder &g,
                  ArrayRef<Value> dy, Grads &dx) {
  // Inference semantics (running statistics are constants): y = (x - mean) *
  // scale / sqrt(var + eps) + B, an affine map per channel.
  auto xType = cast<RankedTensorType>(op.getX().getType());
  SmallVector<int64_t> channelShape(xType.getRank(), 1);
  channelShape[1] = xType.getDimSize(1);
  auto perChannel = [&](Value v) {
    return g.reshape(v, RankedTensorType::get(
                            channelShape, getElementTypeOrSelf(v.getType())));
  };
  Value var = perChannel(op.getInputVar());
  Value invStd = ReciprocalOp::create(
      g.b, g.loc,
      SqrtOp::create(
          g.b, g.loc,
          g.add(var, g.scalarLike(var, op.getEpsilon().convertToDouble()))));
  SmallVector<int64_t> axes = {0};
  for (int64_t axis = 2; axis < xType.getRank(); ++axis)
    axes.push_back(axis);
  dx[0] = g.mul(dy[0], g.mul(perChannel(op.getScale()), invStd));
  Value normalized =
      g.mul(g.sub(op.getX(), perChannel(op.getInputMean())), invStd);
  dx[1] = g.reshape(g.reduceSum(g.mul(dy[0], normalized), axes, false),
                    op.getScale().getType());
  dx[2] = g.reshape(g.reduceSum(dy[0], axes, false), op.getB().getType());
  return success();
}

LogicalResult vjp(BatchNormTrainingOp op, GradientBuilder &g,
                  ArrayRef<Value> dy, Grads &dx) {
  if (!dy[0])
    return success();
  if (op.getActivation() != "none")
    return gradientError(op)
           << "has a fused '" << op.getActivation()
           << "' epilogue; differentiate before --memopt-fuse-epilogues";
  if (op.getZ())
    return gradientError(op) << "has a fused residual; differentiate before "
                                "--memopt-fuse-norm-conv";
  // PyTorch's batch_norm_backward: reads x and the saved mean and 1/std, so
  // the forward's output need not live until the backward.
  auto grad = BatchNormTrainingGradOp::create(
      g.b, g.loc,
      TypeRange{op.getX().getType(), op.getScale().getType(),
                op.getB().getType()},
      op.getX(), dy[0], op.getScale(), op.getMean(), op.getInvStd());
  dx[0] = grad.getDX();
  dx[1] = grad.getDscale();
  dx[2] = grad.getDB();
  return success();
}

LogicalResult vjp(LayerNormalizationOp op, GradientBuilder &g,
                  ArrayRef<Value> dy, Grads &dx) {
  Value x = op.getX();
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t rank = xType.getRank();
  int64_t axis = int64_t(op.getAxis()) < 0 ? int64_t(op.getAxis()) + rank
                                           : int64_t(op.getAxis());
  // One op (a row kernel and a column reduction) when Scale (and B) hold
  // exactly the normalized elements in f32: mean and 1/std are recomputed
  // from x inside it, so only x is saved, as PyTorch saves x (with the two
  // statistics). x may be f16 / bf16 (mixed-precision training keeps Scale
  // and B f32, so their gradients are f32 too).
  auto scaleType = cast<RankedTensorType>(op.getScale().getType());
  int64_t cols = ShapedType::getNumElements(xType.getShape().drop_front(axis));
  Value bias = op.getB();
  Type xElement = xType.getElementType();
  if ((xElement.isF32() || xElement.isF16() || xElement.isBF16()) &&
      scaleType.getElementType().isF32() &&
      scaleType.getNumElements() == cols &&
      (!bias || bias.getType() == scaleType)) {
    auto grad = LayerNormalizationGradOp::create(
        g.b, g.loc, TypeRange{xType, scaleType, scaleType}, x, dy[0],
        op.getScale(), g.b.getI64IntegerAttr(axis), op.getEpsilonAttr());
    dx[0] = grad.getDX();
    dx[1] = grad.getDScale();
    if (bias)
      dx[2] = grad.getDB();
    return success();
  }
  // Otherwise (broadcast Scale / B): mean and 1/std are recomputed from x
  // with two reductions.
  SmallVector<int64_t> axes;
  for (int64_t i = axis; i < rank; ++i)
    axes.push_back(i);
  Value mean = g.reduceMean(x, axes, true);
  Value centered = g.sub(x, mean);
  Value var = g.reduceMean(g.mul(centered, centered), axes, true);
  Value invStd = ReciprocalOp::create(
      g.b, g.loc,
      SqrtOp::create(
          g.b, g.loc,
          g.add(var, g.scalarLike(var, op.getEpsilon().convertToDouble()))));
  Value normalized = g.mul(centered, invStd);
  Value scaled = g.mul(dy[0], op.getScale());
  Value meanScaled = g.reduceMean(scaled, axes, true);
  Value meanProjected = g.reduceMean(g.mul(scaled, normalized), axes, true);
  dx[0] = g.mul(invStd, g.sub(g.sub(scaled, meanScaled),
                              g.mul(normalized, meanProjected)));
  dx[1] = g.sumToShape(g.mul(dy[0], normalized), op.getScale().getType());
  if (Value bias = op.getB())
    dx[2] = g.sumToShape(dy[0], bias.getType());
  return success();
}

LogicalResult vjp(SoftmaxOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  // From the output: dx = y * (dy - sum(dy * y)).
  Value y = op.getOutput();
  int64_t rank = cast<ShapedType>(y.getType()).getRank();
  int64_t axis = int64_t(op.getAxis()) < 0 ? int64_t(op.getAxis()) + rank
                                           : int64_t(op.getAxis());
  Value dot = g.reduceSum(g.mul(dy[0], y), {axis}, true);
  dx[0] = g.mul(y, g.sub(dy[0], dot));
  return success();
}

//===----------------------------------------------------------------------===//
// Attention (FlashAttention-2's backward)
//===----------------------------------------------------------------------===//

/// The backward reads the row statistics (max, log-sum) instead of the
/// probabilities: the forward returns them (JAX's custom_vjp residuals).
Operation *prepare(AttentionOp op, GradientBuilder &g) {
  if (op.getReturnLse())
    return op;
  g.b.setInsertionPoint(op);
  auto withLse = AttentionOp::create(
      g.b, op.getLoc(), op.getQ(), op.getK(), op.getV(), op.getBias(),
      op.getDropoutKey(), op.getScaleAttr(), op.getCausalAttr(),
      op.getKeyTransposedAttr(), op.getSafeSoftmaxAttr(), g.b.getBoolAttr(true),
      op.getDropoutRatioAttr(), op.getDropoutStreamAttr(),
      op.getDropoutCudnnRngAttr());
  withLse->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  op.getY().replaceAllUsesWith(withLse.getY());
  op.erase();
  return withLse;
}

LogicalResult vjp(AttentionOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  if (!op.getLse())
    return gradientError(op) << "an attention without its row statistics "
                                "(return_lse) has no gradient";
  if (!dy[0])
    return success(); // only the statistics reach the loss: nothing flows
  // Bias gradients (dS summed over the bias's broadcast axes) only for a bias
  // that is trained, e.g. swin's relative-position table.
  Value bias = op.getBias();
  bool biasGradient = bias && mlir::memopt::impl::dependsOnParameter(bias);
  // f16 / bf16 Q, K, V take the low-precision kernels (f32 accumulation); a
  // trained bias's gradient is summed with f32 atomics only (a training
  // compilation runs such an attention in f32: hasLowPrecisionGradient).
  Type element = getElementTypeOrSelf(op.getY().getType());
  if (biasGradient && !element.isF32())
    return gradientError(op)
           << "the gradient of a trained bias of a " << element
           << " attention is not supported (f32 only)";
  // Grouped-query K and V (the fusion's [B, Hkv, n] view): the kernels sum
  // dK and dV over each group, so they come in K's and V's own shapes and
  // the sums below are nothing.
  bool grouped = AttentionGradOp::getGradientGroup(op.getY().getType(),
                                                   op.getK().getType(),
                                                   op.getV().getType()) > 0;
  // A dropout of the probabilities: the backward regenerates the forward's
  // mask from the same key, stream and ratio (nothing is saved for it).
  auto grad = AttentionGradOp::create(
      g.b, g.loc, op.getQ(), op.getK(), op.getV(), op.getY(), dy[0],
      op.getLse(), bias, op.getDropoutKey(), op.getScaleAttr(),
      op.getCausalAttr(), op.getKeyTransposedAttr(), op.getSafeSoftmaxAttr(),
      g.b.getBoolAttr(biasGradient), g.b.getBoolAttr(grouped),
      op.getDropoutRatioAttr(), op.getDropoutStreamAttr(),
      op.getDropoutCudnnRngAttr());
  dx[0] = g.sumToShape(grad.getDQ(), op.getQ().getType());
  dx[1] = g.sumToShape(grad.getDK(), op.getK().getType());
  dx[2] = g.sumToShape(grad.getDV(), op.getV().getType());
  if (biasGradient)
    dx[3] = grad.getDbias();
  return success();
}

LogicalResult vjp(SoftmaxCrossEntropyOp op, GradientBuilder &g,
                  ArrayRef<Value> dy, Grads &dx) {
  dx[0] = SoftmaxCrossEntropyGradOp::create(
      g.b, g.loc, op.getLogits().getType(), op.getLogits(), op.getLabels(),
      dy[0], op.getIgnoreIndexAttr());
  return success();
}

/// The fused head + loss: x and w get their gradients from one op that
/// recomputes the logits chunk by chunk (no [rows, classes] tensor either).
LogicalResult vjp(LinearCrossEntropyOp op, GradientBuilder &g,
                  ArrayRef<Value> dy, Grads &dx) {
  if (dy[1])
    return gradientError(op) << "the row statistics (lse) of a linear "
                                "cross-entropy have no gradient";
  if (!dy[0])
    return success();
  auto grad = LinearCrossEntropyGradOp::create(
      g.b, g.loc, TypeRange{op.getX().getType(), op.getW().getType()},
      op.getX(), op.getW(), op.getLabels(), op.getLse(), dy[0],
      op.getIgnoreIndexAttr());
  dx[0] = grad.getDx();
  dx[1] = grad.getDw();
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// The gradient of a reduction brought back to the input's shape: the
/// reduced axes are re-inserted (keepdims) and broadcast.
Value broadcastBack(GradientBuilder &g, Value grad, Value input,
                    ArrayRef<int64_t> axes) {
  auto inputType = cast<RankedTensorType>(input.getType());
  SmallVector<int64_t> kept(inputType.getShape());
  for (int64_t axis : axes)
    kept[axis] = 1;
  Value reshaped =
      g.reshape(grad, RankedTensorType::get(kept, inputType.getElementType()));
  return g.expand(reshaped, inputType);
}

LogicalResult vjp(ReduceSumOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  if (isFloatTensor(op.getData()))
    dx[0] = broadcastBack(g, dy[0], op.getData(), op.getAxes());
  return success();
}

LogicalResult vjp(ReduceMeanOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  if (!isFloatTensor(op.getData()))
    return success();
  auto shape = cast<ShapedType>(op.getData().getType()).getShape();
  int64_t count = 1;
  for (int64_t axis : op.getAxes())
    count *= shape[axis];
  dx[0] = broadcastBack(g, g.mul(dy[0], 1.0 / double(count)), op.getData(),
                        op.getAxes());
  return success();
}

LogicalResult vjp(ReduceMaxOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  if (!isFloatTensor(op.getData()))
    return success();
  Value x = op.getData();
  Value isMax = EqualOp::create(
      g.b, g.loc, x, broadcastBack(g, op.getReduced(), x, op.getAxes()));
  dx[0] = g.select(isMax, broadcastBack(g, dy[0], x, op.getAxes()),
                   g.scalarLike(x, 0.0));
  return success();
}

/// x[j] reaches y[i] for j <= i (j < i when exclusive): its gradient sums
/// dy[i] over i >= j (i > j), the same scan run the other way.
LogicalResult vjp(CumSumOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  if (!isFloatTensor(op.getX()))
    return success();
  dx[0] = CumSumOp::create(g.b, g.loc, dy[0], op.getAxisAttr(),
                           g.b.getI64IntegerAttr(op.getExclusive()),
                           g.b.getI64IntegerAttr(op.getReverse() ? 0 : 1));
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

template <typename ViewOpT>
LogicalResult viewGradient(ViewOpT op, GradientBuilder &g, ArrayRef<Value> dy,
                           Grads &dx) {
  if (isFloatTensor(op->getOperand(0)))
    dx[0] = g.reshape(dy[0], op->getOperand(0).getType());
  return success();
}
LogicalResult vjp(ReshapeOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  return viewGradient(op, g, dy, dx);
}
LogicalResult vjp(FlattenOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  return viewGradient(op, g, dy, dx);
}
LogicalResult vjp(SqueezeOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  return viewGradient(op, g, dy, dx);
}
LogicalResult vjp(UnsqueezeOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  return viewGradient(op, g, dy, dx);
}

LogicalResult vjp(TransposeOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  if (!isFloatTensor(op.getData()))
    return success();
  SmallVector<int64_t> perm = op.getPermutation(), inverse(perm.size());
  for (auto [index, axis] : llvm::enumerate(perm))
    inverse[axis] = index;
  dx[0] = g.transpose(dy[0], inverse);
  return success();
}

LogicalResult vjp(ExpandOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  if (isFloatTensor(op.getInput()))
    dx[0] = g.sumToShape(dy[0], op.getInput().getType());
  return success();
}

LogicalResult vjp(ConcatOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  if (!isFloatTensor(op.getConcatResult()))
    return success();
  int64_t rank = cast<ShapedType>(op.getType()).getRank();
  int64_t axis = int64_t(op.getAxis()) < 0 ? int64_t(op.getAxis()) + rank
                                           : int64_t(op.getAxis());
  SmallVector<int64_t> sizes;
  SmallVector<Type> types;
  for (Value input : op.getInputs()) {
    sizes.push_back(cast<ShapedType>(input.getType()).getDimSize(axis));
    types.push_back(input.getType());
  }
  auto split =
      SplitOp::create(g.b, g.loc, types, dy[0], g.b.getI64IntegerAttr(axis),
                      g.b.getDenseI64ArrayAttr(sizes));
  for (auto [index, result] : llvm::enumerate(split.getResults()))
    dx[index] = result;
  return success();
}

LogicalResult vjp(SplitOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  if (!isFloatTensor(op.getInput()))
    return success();
  SmallVector<Value> pieces;
  for (auto [index, result] : llvm::enumerate(op.getResults()))
    pieces.push_back(dy[index] ? dy[index] : g.zeros(result.getType()));
  dx[0] = ConcatOp::create(g.b, g.loc, pieces, op.getAxisAttr());
  return success();
}

LogicalResult vjp(SliceOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  if (!isFloatTensor(op.getData()))
    return success();
  auto inputType = cast<RankedTensorType>(op.getData().getType());
  ArrayRef<int64_t> inputShape = inputType.getShape();
  int64_t rank = inputShape.size();
  // dY is put back axis by axis: a strided axis first spreads its n rows
  // over n * step rows (each row followed by step - 1 zero rows: unsqueeze,
  // pad, reshape), then every axis is padded (or cropped) back to the
  // input's extent around the start.
  Value grad = dy[0];
  SmallVector<int64_t> pads(2 * rank, 0);
  for (auto [index, axisValue] : llvm::enumerate(op.getAxes())) {
    int64_t axis = axisValue < 0 ? axisValue + rank : axisValue;
    int64_t step = op.getSteps()[index];
    if (step < 1)
      return gradientError(op) << "a slice with step " << step
                               << " has no gradient yet (positive steps only)";
    int64_t dim = inputShape[axis];
    int64_t start = op.getStarts()[index];
    start = std::clamp<int64_t>(start < 0 ? start + dim : start, 0, dim);
    auto gradType = cast<RankedTensorType>(grad.getType());
    int64_t count = gradType.getDimSize(axis);
    if (step > 1 && count > 0) {
      SmallVector<int64_t> split(gradType.getShape());
      split.insert(split.begin() + axis + 1, 1);
      Value expanded = g.reshape(
          grad, RankedTensorType::get(split, gradType.getElementType()));
      SmallVector<int64_t> spread(2 * (rank + 1), 0);
      spread[rank + 1 + axis + 1] = step - 1;
      expanded = PadOp::create(
          g.b, g.loc, expanded, g.b.getDenseI64ArrayAttr(spread),
          g.b.getStringAttr("constant"), g.b.getF64FloatAttr(0.0));
      SmallVector<int64_t> merged(gradType.getShape());
      merged[axis] = count * step;
      grad = g.reshape(
          expanded, RankedTensorType::get(merged, gradType.getElementType()));
    }
    int64_t extent = cast<RankedTensorType>(grad.getType()).getDimSize(axis);
    pads[axis] = start;
    pads[axis + rank] = dim - start - extent;
  }
  if (llvm::any_of(pads, [](int64_t pad) { return pad != 0; }))
    grad =
        PadOp::create(g.b, g.loc, grad, g.b.getDenseI64ArrayAttr(pads),
                      g.b.getStringAttr("constant"), g.b.getF64FloatAttr(0.0));
  dx[0] = grad;
  return success();
}

LogicalResult vjp(PadOp op, GradientBuilder &g, ArrayRef<Value> dy, Grads &dx) {
  if (!isFloatTensor(op.getData()))
    return success();
  if (op.getMode() != "constant")
    return gradientError(op) << "a pad in mode '" << op.getMode()
                             << "' has no gradient yet (constant mode only)";
  auto inputShape = cast<ShapedType>(op.getData().getType()).getShape();
  int64_t rank = inputShape.size();
  SmallVector<int64_t> starts, ends, axes, steps;
  for (int64_t axis = 0; axis < rank; ++axis) {
    int64_t begin = op.getPads()[axis];
    if (begin < 0 || op.getPads()[axis + rank] < 0)
      return gradientError(op)
             << "a pad with negative pads has no gradient yet";
    starts.push_back(begin);
    ends.push_back(begin + inputShape[axis]);
    axes.push_back(axis);
    steps.push_back(1);
  }
  dx[0] = SliceOp::create(g.b, g.loc, dy[0], g.b.getDenseI64ArrayAttr(starts),
                          g.b.getDenseI64ArrayAttr(ends),
                          g.b.getDenseI64ArrayAttr(axes),
                          g.b.getDenseI64ArrayAttr(steps));
  return success();
}

LogicalResult vjp(GatherOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  if (!isFloatTensor(op.getData()))
    return success();
  // Embedding backward: scatter-add the slices of dY into a zero table. A
  // gather on another axis is moved to axis 0 by transposes.
  auto dataType = cast<RankedTensorType>(op.getData().getType());
  int64_t rank = dataType.getRank();
  int64_t axis = int64_t(op.getAxis()) < 0 ? int64_t(op.getAxis()) + rank
                                           : int64_t(op.getAxis());
  auto indicesType = cast<RankedTensorType>(op.getIndices().getType());
  int64_t indexRank = indicesType.getRank();
  Value grad = dy[0];
  SmallVector<int64_t> dataPerm, gradPerm;
  if (axis != 0) {
    // data: [axis, 0..axis-1, axis+1..]; dY: [index dims, 0..axis-1, rest].
    dataPerm.push_back(axis);
    for (int64_t i = 0; i < rank; ++i)
      if (i != axis)
        dataPerm.push_back(i);
    for (int64_t i = 0; i < indexRank; ++i)
      gradPerm.push_back(axis + i);
    for (int64_t i = 0; i < axis; ++i)
      gradPerm.push_back(i);
    int64_t gradRank = cast<RankedTensorType>(grad.getType()).getRank();
    for (int64_t i = axis + indexRank; i < gradRank; ++i)
      gradPerm.push_back(i);
    grad = g.transpose(grad, gradPerm);
  }
  SmallVector<int64_t> tableShape;
  for (int64_t i : dataPerm.empty()
                       ? llvm::to_vector(llvm::seq<int64_t>(0, rank))
                       : dataPerm)
    tableShape.push_back(dataType.getDimSize(i));
  auto tableType = RankedTensorType::get(tableShape, dataType.getElementType());
  SmallVector<int64_t> tupleShape(indicesType.getShape());
  tupleShape.push_back(1);
  Value tuples = g.reshape(
      op.getIndices(),
      RankedTensorType::get(tupleShape, indicesType.getElementType()));
  Value table = ScatterNDOp::create(g.b, g.loc, g.zeros(tableType), tuples,
                                    grad, g.b.getStringAttr("add"));
  if (!dataPerm.empty()) {
    SmallVector<int64_t> inverse(rank);
    for (auto [index, source] : llvm::enumerate(dataPerm))
      inverse[source] = index;
    table = g.transpose(table, inverse);
  }
  dx[0] = table;
  return success();
}

LogicalResult vjp(ScatterNDOp op, GradientBuilder &g, ArrayRef<Value> dy,
                  Grads &dx) {
  if (!isFloatTensor(op.getData()))
    return success();
  if (op.getReduction() != "none")
    return gradientError(op) << "a scatter with reduction '"
                             << op.getReduction() << "' has no gradient yet";
  // The replaced slices of `data` get nothing back: dY with zeros scattered
  // over them.
  dx[0] = ScatterNDOp::create(g.b, g.loc, dy[0], op.getIndices(),
                              g.zeros(op.getUpdates().getType()),
                              g.b.getStringAttr("none"));
  // updates[i...] = data[indices[i...]] for one-element index tuples: the
  // updates' gradient gathers those rows of dY.
  auto indicesType = cast<RankedTensorType>(op.getIndices().getType());
  if (indicesType.getShape().back() != 1)
    return gradientError(op) << "the updates' gradient of a scatter with "
                             << indicesType.getShape().back()
                             << "-element index tuples is not supported yet";
  Value rows = g.reshape(
      op.getIndices(), RankedTensorType::get(indicesType.getShape().drop_back(),
                                             indicesType.getElementType()));
  dx[2] = GatherOp::create(g.b, g.loc, dy[0], rows, g.b.getI64IntegerAttr(0));
  return success();
}

/// Registers the model of each listed op.
template <typename... OpTs> void attach(MLIRContext &context) {
  (OpTs::template attachInterface<GradientModel<OpTs>>(context), ...);
}

} // namespace

void mlir::memopt::attachGradientModels(MLIRContext &context) {
  attach<ReluOp, LeakyReluOp, SigmoidOp, TanhOp, ExpOp, LogOp, SqrtOp,
         ReciprocalOp, NegOp, AbsOp, ErfOp, SinOp, CosOp, GeluOp, HardSwishOp,
         HardSigmoidOp, ClipOp, IdentityOp, DropoutOp, CastOp, AddOp, SubOp,
         MulOp, DivOp, PowOp, MaxOp, MinOp, WhereOp, GemmOp, MatMulOp, ConvOp,
         MaxPoolOp, AveragePoolOp, GlobalAveragePoolOp, BatchNormalizationOp,
         BatchNormTrainingOp, LayerNormalizationOp, SoftmaxOp, AttentionOp,
         SoftmaxCrossEntropyOp, LinearCrossEntropyOp, ReduceSumOp, ReduceMeanOp,
         ReduceMaxOp, CumSumOp, ReshapeOp, FlattenOp, SqueezeOp, UnsqueezeOp,
         TransposeOp, ExpandOp, ConcatOp, SplitOp, SliceOp, PadOp, GatherOp,
         ScatterNDOp>(context);
}
