//===- OnnxComposedMath.cpp - ONNX activations and unary math -------------===//
//
// Handlers of GraphImporter (GraphImporter.h) for ONNX element-wise ops that
// have no memopt op of their own, each imported as a few memopt element-wise
// ops (so both backends, autodiff and the element-wise fusion know them):
//   Elu, Selu, Softplus, Softsign, ThresholdedRelu, Mish, Sign, Tan,
//   Sinh, Cosh, Asinh, Acosh, Atanh, Asin, Acos, Atan, Floor, Ceil, Round,
//   IsInf, PRelu, Mean.
// The formulas are the ONNX operator definitions (onnx/defs/math/defs.cc
// and their function bodies, onnx/reference/ops), written so that f32 keeps
// ONNX's accuracy: log1p and small-argument series where 1 + x or e^x - e^-x
// would cancel (Goldberg's log1p(u) = u log(1 + u) / ((1 + u) - 1), the
// form numpy's reference does not need because it has np.log1p), Cephes'
// atanf polynomial with its range reduction for Atan / Asin / Acos, and
// rounding through an i64 cast only where |x| < 2^23 (above it every f32 is
// an integer already, and NaN / inf pass through).
//
//===----------------------------------------------------------------------===//

#include "ElementwiseBuilder.h"
#include "GraphImporter.h"

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::onnx_import;

FailureOr<SmallVector<Value>> GraphImporter::importUnaryMath(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  Value x = *input;
  RankedTensorType type = typeOf(x);
  Type elementType = type.getElementType();
  if (!isa<FloatType>(elementType))
    return emitError(node.loc)
           << node.describe() << ": expected a floating-point input, got "
           << type;
  auto typedOp = [&](StringRef name, ArrayRef<Value> operands, Type result) {
    return result ? build(node, name, operands, {}, {result})
                  : build(node, name, operands);
  };
  auto constant = [&](double value) {
    return scalarConstant(node.loc, elementType, value);
  };
  ElementwiseBuilder b{typedOp, constant};
  StringRef kind = node.type();
  Value result;
  if (kind == "Elu") {
    double alpha = floatAttr(node, "alpha", 1.0f);
    result = b.select(b.less(x, 0.0), b.mul(b.add(b.exp(x), -1.0), alpha), x);
  } else if (kind == "Selu") {
    double alpha = floatAttr(node, "alpha", 1.67326319217681884765625f);
    double gamma = floatAttr(node, "gamma", 1.05070102214813232421875f);
    Value negative = b.add(b.mul(b.exp(x), alpha), -alpha);
    result = b.mul(b.select(b.greater(x, 0.0), x, negative), gamma);
  } else if (kind == "Softplus") {
    result = b.softplus(x);
  } else if (kind == "Mish") {
    result = b.mul(x, b.unary("memopt.tanh", b.softplus(x)));
  } else if (kind == "Softsign") {
    result = b.div(x, b.add(b.abs(x), 1.0));
  } else if (kind == "ThresholdedRelu") {
    result = b.select(b.greater(x, floatAttr(node, "alpha", 1.0f)), x, 0.0);
  } else if (kind == "Sign") {
    // x * 0 keeps NaN (and gives 0 for zeros).
    result = b.select(b.greater(x, 0.0), 1.0,
                      b.select(b.less(x, 0.0), -1.0, b.mul(x, 0.0)));
  } else if (kind == "Tan") {
    result = b.div(b.unary("memopt.sin", x), b.unary("memopt.cos", x));
  } else if (kind == "Sinh") {
    // Below |x| = 1 the series to x^9 (error under 3e-8); (e^x - e^-x) / 2
    // cancels there.
    Value square = b.mul(x, x);
    Value series = b.add(b.mul(square, 1.0 / 72), 1.0);
    series = b.add(b.mul(b.mul(series, square), 1.0 / 42), 1.0);
    series = b.add(b.mul(b.mul(series, square), 1.0 / 20), 1.0);
    series = b.add(b.mul(b.mul(series, square), 1.0 / 6), 1.0);
    series = b.mul(series, x);
    Value exponential = b.mul(b.sub(b.exp(x), b.exp(b.neg(x))), 0.5);
    result = b.select(b.less(b.abs(x), 1.0), series, exponential);
  } else if (kind == "Cosh") {
    result = b.mul(b.add(b.exp(x), b.exp(b.neg(x))), 0.5);
  } else if (kind == "Asinh") {
    // sign(x) log1p(|x| + x^2 / (1 + sqrt(1 + x^2))).
    Value t = b.abs(x);
    Value square = b.mul(t, t);
    Value root = b.add(b.sqrt(b.add(square, 1.0)), 1.0);
    result = b.withSignOf(x, b.log1p(b.add(t, b.div(square, root))));
  } else if (kind == "Acosh") {
    result = b.log(b.add(x, b.sqrt(b.add(b.mul(x, x), -1.0))));
  } else if (kind == "Atanh") {
    // log1p(2x / (1 - x)) / 2.
    Value ratio = b.div(b.add(x, x), b.sub(constant(1), x));
    result = b.mul(b.log1p(ratio), 0.5);
  } else if (kind == "Atan") {
    result = b.atan(x);
  } else if (kind == "Asin" || kind == "Acos") {
    // asin(x) = atan(x / sqrt(1 - x^2)) (x = +-1 gives atan(+-inf)).
    Value asin = b.atan(b.div(x, b.sqrt(b.sub(constant(1), b.mul(x, x)))));
    result = kind == "Asin" ? asin : b.sub(constant(M_PI_2), asin);
  } else if (kind == "Floor") {
    result = b.floor(x);
  } else if (kind == "Ceil") {
    result = b.neg(b.floor(b.neg(x)));
  } else if (kind == "Round") {
    result = b.roundHalfEven(x);
  } else if (kind == "IsInf") {
    bool positive = intAttr(node, "detect_positive", 1) != 0;
    bool negative = intAttr(node, "detect_negative", 1) != 0;
    double infinity = std::numeric_limits<double>::infinity();
    Value isPositive = positive ? b.equal(x, infinity) : Value();
    Value isNegative = negative ? b.equal(x, -infinity) : Value();
    if (positive && negative)
      result = b.op("memopt.or", {isPositive, isNegative});
    else if (positive || negative)
      result = positive ? isPositive : isNegative;
    else
      result = createConstant(
          node.loc,
          DenseElementsAttr::get(
              RankedTensorType::get(type.getShape(), builder.getI1Type()),
              false));
  } else {
    return emitError(node.loc) << node.describe() << ": not a unary math op";
  }
  if (!result)
    return failure();
  return SmallVector<Value>{result};
}

FailureOr<SmallVector<Value>> GraphImporter::importPRelu(const Node &node) {
  auto x = lookup(node, 0);
  auto slope = lookup(node, 1);
  if (failed(x) || failed(slope))
    return failure();
  if (!*slope)
    return emitError(node.loc) << node.describe() << ": slope is missing";
  Value zero = scalarConstant(node.loc, typeOf(*x).getElementType(), 0);
  Value scaled = build(node, "memopt.mul", {*x, *slope});
  Value result = build(node, "memopt.where",
                       {build(node, "memopt.less", {*x, zero}), scaled, *x});
  if (!result)
    return failure();
  return SmallVector<Value>{result};
}

FailureOr<SmallVector<Value>> GraphImporter::importMean(const Node &node) {
  int count = node.proto.input_size();
  Value sum;
  for (int i = 0; i < count; ++i) {
    auto value = lookup(node, i);
    if (failed(value) || !*value)
      return emitError(node.loc)
             << node.describe() << ": input " << i << " is missing";
    sum = i == 0 ? *value : build(node, "memopt.add", {sum, *value});
  }
  if (!sum)
    return failure();
  Type elementType = typeOf(sum).getElementType();
  if (!isa<FloatType>(elementType))
    return emitError(node.loc)
           << node.describe() << ": expected floating-point inputs";
  Value result =
      count == 1 ? sum
                 : build(node, "memopt.div",
                         {sum, scalarConstant(node.loc, elementType, count)});
  if (!result)
    return failure();
  return SmallVector<Value>{result};
}
