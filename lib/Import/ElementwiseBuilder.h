//===- ElementwiseBuilder.h - element-wise chains for compositions -*- C++
//-*-===//
//
// Private to the importer: builds chains of memopt element-wise ops over
// values of one float type for the composed ops (OnnxComposedMath.cpp,
// OnnxComposedSampling.cpp). A null value propagates, so a chain is checked
// once at its end.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_IMPORT_ELEMENTWISEBUILDER_H
#define MEMOPT_LIB_IMPORT_ELEMENTWISEBUILDER_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <cmath>

namespace mlir::memopt::onnx_import {

/// Builds element-wise chains over values of one float type; a null value
/// propagates, so a chain is checked once at its end.
struct ElementwiseBuilder {
  /// Builds `name` from the operands with the given result type (null:
  /// inferred).
  function_ref<Value(StringRef, ArrayRef<Value>, Type)> typedOp;
  function_ref<Value(double)> constant;

  Value op(StringRef name, ArrayRef<Value> operands) {
    return typedOp(name, operands, Type());
  }

  Value unary(StringRef name, Value x) { return op(name, {x}); }
  Value add(Value a, Value b) { return op("memopt.add", {a, b}); }
  Value sub(Value a, Value b) { return op("memopt.sub", {a, b}); }
  Value mul(Value a, Value b) { return op("memopt.mul", {a, b}); }
  Value div(Value a, Value b) { return op("memopt.div", {a, b}); }
  Value add(Value a, double b) { return add(a, constant(b)); }
  Value mul(Value a, double b) { return mul(a, constant(b)); }
  Value less(Value a, Value b) { return op("memopt.less", {a, b}); }
  Value greater(Value a, Value b) { return op("memopt.greater", {a, b}); }
  Value less(Value a, double b) { return less(a, constant(b)); }
  Value greater(Value a, double b) { return greater(a, constant(b)); }
  Value equal(Value a, double b) {
    return op("memopt.equal", {a, constant(b)});
  }
  Value select(Value condition, Value a, Value b) {
    return op("memopt.where", {condition, a, b});
  }
  Value select(Value condition, Value a, double b) {
    return select(condition, a, constant(b));
  }
  Value select(Value condition, double a, Value b) {
    return select(condition, constant(a), b);
  }
  Value exp(Value x) { return unary("memopt.exp", x); }
  Value log(Value x) { return unary("memopt.log", x); }
  Value abs(Value x) { return unary("memopt.abs", x); }
  Value neg(Value x) { return unary("memopt.neg", x); }
  Value sqrt(Value x) { return unary("memopt.sqrt", x); }

  /// log(1 + u) without cancellation for small u (Goldberg).
  Value log1p(Value u) {
    Value w = add(u, 1.0);
    Value denominator = add(w, -1.0);
    Value ratio = div(mul(log(w), u), denominator);
    return select(op("memopt.equal", {denominator, constant(0)}), u, ratio);
  }
  /// Softplus: max(x, 0) + log1p(e^-|x|), finite for large |x|.
  Value softplus(Value x) {
    return add(unary("memopt.relu", x), log1p(exp(neg(abs(x)))));
  }
  /// -x where x < 0: applies the sign of `x` to a result of |x|.
  Value withSignOf(Value x, Value magnitude) {
    return select(less(x, 0.0), neg(magnitude), magnitude);
  }
  /// atan(x): Cephes' atanf (range reduction to |x| <= tan(pi/8), then a
  /// degree-9 odd polynomial).
  Value atan(Value x) {
    Value t = abs(x);
    Value big = greater(t, 2.414213562373095);
    Value mid = greater(t, 0.4142135623730950);
    Value reduced = select(big, div(constant(-1), t),
                           select(mid, div(add(t, -1.0), add(t, 1.0)), t));
    Value offset =
        select(big, M_PI_2, select(mid, constant(M_PI_4), constant(0)));
    Value z = mul(reduced, reduced);
    Value poly = add(mul(z, 8.05374449538e-2), -1.38776856032e-1);
    poly = add(mul(poly, z), 1.99777106478e-1);
    poly = add(mul(poly, z), -3.33329491539e-1);
    poly = add(mul(mul(poly, z), reduced), reduced);
    return withSignOf(x, add(offset, poly));
  }
  /// floor(x) through an i64 cast where |x| < 2^23 (every f32 beyond is an
  /// integer; NaN and inf pass through).
  Value floor(Value x) {
    if (!x)
      return {};
    auto type = cast<RankedTensorType>(x.getType());
    Value integer = castTo(
        x, RankedTensorType::get(type.getShape(),
                                 IntegerType::get(type.getContext(), 64)));
    Value truncated = castTo(integer, type);
    Value floored =
        select(greater(truncated, x), add(truncated, -1.0), truncated);
    return select(less(abs(x), 8388608.0), floored, x);
  }
  /// Rounds halves to even (numpy's rint): floor, plus one above the half,
  /// plus the floor's parity at exactly one half.
  Value roundHalfEven(Value x) {
    Value floored = floor(x);
    Value fraction = sub(x, floored);
    // 0 or 1, also for negative floors.
    Value parity = sub(floored, mul(floor(mul(floored, 0.5)), 2.0));
    Value rounded =
        select(greater(fraction, 0.5), add(floored, 1.0),
               select(less(fraction, 0.5), floored, add(floored, parity)));
    return select(less(abs(x), 8388608.0), rounded, x);
  }
  Value castTo(Value x, Type type) {
    return x ? typedOp("memopt.cast", {x}, type) : Value();
  }
};

} // namespace mlir::memopt::onnx_import

#endif // MEMOPT_LIB_IMPORT_ELEMENTWISEBUILDER_H
