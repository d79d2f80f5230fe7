//===- ElementwiseOps.cpp - unary, binary, compare, where, cast -----------===//
//
// Broadcasting follows ONNX (numpy) rules. Folders work on small dense
// constants only, in the spirit of the arith dialect's CommonFolders, but
// with ONNX broadcasting of both operands and ONNX integer semantics
// (division truncates toward zero; unsigned types compare unsigned).
//
//===----------------------------------------------------------------------===//

#include "OpUtils.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::impl;

//===----------------------------------------------------------------------===//
// Buffer behavior of elementwise ops
//===----------------------------------------------------------------------===//

#define MEMOPT_UNARY_ELEMENTWISE(OpClass)                                      \
  bool OpClass::isElementwise() { return true; }                               \
  bool OpClass::canWriteInPlace(unsigned operandIndex) {                       \
    return operandIndex == 0;                                                  \
  }

MEMOPT_UNARY_ELEMENTWISE(ReluOp)
MEMOPT_UNARY_ELEMENTWISE(ExpOp)
MEMOPT_UNARY_ELEMENTWISE(LogOp)
MEMOPT_UNARY_ELEMENTWISE(SqrtOp)
MEMOPT_UNARY_ELEMENTWISE(ReciprocalOp)
MEMOPT_UNARY_ELEMENTWISE(NegOp)
MEMOPT_UNARY_ELEMENTWISE(AbsOp)
MEMOPT_UNARY_ELEMENTWISE(SigmoidOp)
MEMOPT_UNARY_ELEMENTWISE(TanhOp)
MEMOPT_UNARY_ELEMENTWISE(ErfOp)
MEMOPT_UNARY_ELEMENTWISE(SinOp)
MEMOPT_UNARY_ELEMENTWISE(CosOp)
MEMOPT_UNARY_ELEMENTWISE(NotOp)
MEMOPT_UNARY_ELEMENTWISE(LeakyReluOp)
MEMOPT_UNARY_ELEMENTWISE(GeluOp)
MEMOPT_UNARY_ELEMENTWISE(HardSwishOp)
MEMOPT_UNARY_ELEMENTWISE(HardSigmoidOp)
MEMOPT_UNARY_ELEMENTWISE(ClipOp)
#undef MEMOPT_UNARY_ELEMENTWISE

/// Checks shared by the broadcasting binary ops. Arithmetic needs one element
/// type; `pow` allows any numeric exponent; logic ops need i1.
static LogicalResult verifyBinaryOperands(Operation *op, bool sameElementType,
                                          bool requireBool) {
  Type lhs = op->getOperand(0).getType();
  Type rhs = op->getOperand(1).getType();
  Type lhsElement = cast<ShapedType>(lhs).getElementType();
  Type rhsElement = cast<ShapedType>(rhs).getElementType();
  if (requireBool && (!lhsElement.isInteger(1) || !rhsElement.isInteger(1)))
    return op->emitOpError("operands must be i1 tensors, got ")
           << lhs << " and " << rhs;
  if (sameElementType && lhsElement != rhsElement)
    return op->emitOpError("operand element types differ: ")
           << lhs << " vs " << rhs;
  return success();
}

/// A binary op may write into operand `i` when that operand already has the
/// result's type (no broadcast along it, same element type).
#define MEMOPT_BINARY_ELEMENTWISE_COMMON(OpClass, ResultElement)               \
  bool OpClass::isElementwise() { return true; }                               \
  bool OpClass::canWriteInPlace(unsigned operandIndex) {                       \
    return operandIndex < 2 &&                                                 \
           getOperand(operandIndex).getType() == getType();                    \
  }                                                                            \
  LogicalResult OpClass::inferReturnTypes(                                     \
      MLIRContext *context, std::optional<Location> loc,                       \
      OpClass::Adaptor adaptor, SmallVectorImpl<Type> &results) {              \
    (void)context;                                                             \
    if (failed(requireOperands<OpClass>(loc, adaptor.getOperands())))          \
      return failure();                                                        \
    return inferBroadcastType(                                                 \
        loc, getOperationName(), adaptor.getA().getType(),                     \
        adaptor.getB().getType(), ResultElement, results);                     \
  }
#define MEMOPT_BINARY_ELEMENTWISE(OpClass, ResultElement, SameElement, Bool)   \
  MEMOPT_BINARY_ELEMENTWISE_COMMON(OpClass, ResultElement)                     \
  LogicalResult OpClass::verify() {                                            \
    return verifyBinaryOperands(*this, SameElement, Bool);                     \
  }

#define MEMOPT_I1 IntegerType::get(context, 1)
MEMOPT_BINARY_ELEMENTWISE(AddOp, Type(), true, false)
MEMOPT_BINARY_ELEMENTWISE(SubOp, Type(), true, false)
MEMOPT_BINARY_ELEMENTWISE(MulOp, Type(), true, false)
MEMOPT_BINARY_ELEMENTWISE(DivOp, Type(), true, false)
MEMOPT_BINARY_ELEMENTWISE(PowOp, Type(), true, false)
MEMOPT_BINARY_ELEMENTWISE_COMMON(ModOp, Type())
MEMOPT_BINARY_ELEMENTWISE(MinOp, Type(), true, false)
MEMOPT_BINARY_ELEMENTWISE(MaxOp, Type(), true, false)
MEMOPT_BINARY_ELEMENTWISE_COMMON(ReluGradOp, Type())
MEMOPT_BINARY_ELEMENTWISE(EqualOp, MEMOPT_I1, true, false)
MEMOPT_BINARY_ELEMENTWISE(LessOp, MEMOPT_I1, true, false)
MEMOPT_BINARY_ELEMENTWISE(GreaterOp, MEMOPT_I1, true, false)
MEMOPT_BINARY_ELEMENTWISE(AndOp, MEMOPT_I1, true, true)
MEMOPT_BINARY_ELEMENTWISE(OrOp, MEMOPT_I1, true, true)
#undef MEMOPT_I1
#undef MEMOPT_BINARY_ELEMENTWISE
#undef MEMOPT_BINARY_ELEMENTWISE_COMMON

/// Float operands of one element type.
LogicalResult ReluGradOp::verify() {
  if (failed(verifyBinaryOperands(*this, /*sameElementType=*/true,
                                  /*requireBool=*/false)))
    return failure();
  if (!isa<FloatType>(cast<ShapedType>(getA().getType()).getElementType()))
    return emitOpError("needs float operands, got ") << getA().getType();
  return success();
}

/// ONNX Mod: numeric operands of one element type; `fmod` is 0 or 1, and 1
/// for floats (the spec requires it; onnxruntime rejects fmod = 0 on floats).
LogicalResult ModOp::verify() {
  if (failed(verifyBinaryOperands(*this, /*sameElementType=*/true,
                                  /*requireBool=*/false)))
    return failure();
  Type element = getA().getType().getElementType();
  if (element.isInteger(1))
    return emitOpError("operands must be numeric, got ") << getA().getType();
  if (getFmod() != 0 && getFmod() != 1)
    return emitOpError("fmod must be 0 or 1, got ") << getFmod();
  if (isa<FloatType>(element) && getFmod() != 1)
    return emitOpError("fmod must be 1 for floating-point operands (")
           << element << "), as ONNX requires";
  return success();
}

//===----------------------------------------------------------------------===//
// Unary folders and verifiers
//===----------------------------------------------------------------------===//

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getType(), adaptor.getOperands(),
      [](ArrayRef<APInt> x, bool) -> std::optional<APInt> { return -x[0]; },
      [](ArrayRef<APFloat> x) -> std::optional<APFloat> { return -x[0]; });
}

OpFoldResult NotOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getType(), adaptor.getOperands(),
      [](ArrayRef<APInt> x, bool) -> std::optional<APInt> { return ~x[0]; },
      [](ArrayRef<APFloat>) -> std::optional<APFloat> { return {}; });
}

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError("approximate must be 'none' or 'tanh', got '")
           << getApproximate() << "'";
  return success();
}

LogicalResult ClipOp::verify() {
  if (getMin() && getMax() &&
      getMin()->compare(*getMax()) == llvm::APFloat::cmpGreaterThan)
    return emitOpError("min ")
           << getMin()->convertToDouble() << " is greater than max "
           << getMax()->convertToDouble();
  return success();
}

//===----------------------------------------------------------------------===//
// IsNaNOp
//===----------------------------------------------------------------------===//

bool IsNaNOp::isElementwise() { return true; }

LogicalResult IsNaNOp::inferReturnTypes(MLIRContext *context,
                                        std::optional<Location> loc,
                                        IsNaNOp::Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  if (failed(requireOperands<IsNaNOp>(loc, adaptor.getOperands())))
    return failure();
  auto type = cast<RankedTensorType>(adaptor.getX().getType());
  results.push_back(
      RankedTensorType::get(type.getShape(), IntegerType::get(context, 1)));
  return success();
}

//===----------------------------------------------------------------------===//
// Binary folders
//===----------------------------------------------------------------------===//

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getType(), adaptor.getOperands(),
      [](ArrayRef<APInt> x, bool) -> std::optional<APInt> {
        return x[0] + x[1];
      },
      [](ArrayRef<APFloat> x) -> std::optional<APFloat> {
        return x[0] + x[1];
      });
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getType(), adaptor.getOperands(),
      [](ArrayRef<APInt> x, bool) -> std::optional<APInt> {
        return x[0] - x[1];
      },
      [](ArrayRef<APFloat> x) -> std::optional<APFloat> {
        return x[0] - x[1];
      });
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getType(), adaptor.getOperands(),
      [](ArrayRef<APInt> x, bool) -> std::optional<APInt> {
        return x[0] * x[1];
      },
      [](ArrayRef<APFloat> x) -> std::optional<APFloat> {
        return x[0] * x[1];
      });
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getType(), adaptor.getOperands(),
      [](ArrayRef<APInt> x, bool isUnsigned) -> std::optional<APInt> {
        if (x[1].isZero())
          return std::nullopt;
        // ONNX integer division truncates toward zero, like C.
        return isUnsigned ? x[0].udiv(x[1]) : x[0].sdiv(x[1]);
      },
      [](ArrayRef<APFloat> x) -> std::optional<APFloat> {
        return x[0] / x[1];
      });
}

/// ONNX Mod on constants. Integers: `fmod = 1` truncates (C `%`), `fmod = 0`
/// floors (the remainder takes the divisor's sign, as Python's `%` and
/// onnxruntime's Mod); a zero divisor stops folding. Floats: C `fmod`
/// (APFloat::mod), the only mode ONNX allows for them.
OpFoldResult ModOp::fold(FoldAdaptor adaptor) {
  bool truncate = getFmod() != 0;
  return foldElementwise(
      getType(), adaptor.getOperands(),
      [&](ArrayRef<APInt> x, bool isUnsigned) -> std::optional<APInt> {
        if (x[1].isZero())
          return std::nullopt;
        if (isUnsigned)
          return x[0].urem(x[1]);
        APInt remainder = x[0].srem(x[1]);
        if (!truncate && !remainder.isZero() &&
            remainder.isNegative() != x[1].isNegative())
          remainder += x[1];
        return remainder;
      },
      [](ArrayRef<APFloat> x) -> std::optional<APFloat> {
        APFloat remainder = x[0];
        remainder.mod(x[1]);
        return remainder;
      });
}

/// Folds a comparison: `holds(ordering)` says whether the relation holds
/// for the ordering of the two elements (-1, 0, 1); unordered floats (NaN)
/// compare false.
template <typename Predicate>
static OpFoldResult foldComparison(ShapedType resultType,
                                   ArrayRef<Attribute> operands,
                                   Predicate holds) {
  return foldElementwise(
      resultType, operands,
      [&](ArrayRef<APInt> x, bool isUnsigned) -> std::optional<APInt> {
        int ordering = isUnsigned ? (x[0].ult(x[1]) ? -1 : x[0].ugt(x[1]))
                                  : (x[0].slt(x[1]) ? -1 : x[0].sgt(x[1]));
        return APInt(1, holds(ordering));
      },
      [&](ArrayRef<APFloat> x) -> std::optional<APInt> {
        APFloat::cmpResult result = x[0].compare(x[1]);
        if (result == APFloat::cmpUnordered)
          return APInt(1, 0);
        int ordering = result == APFloat::cmpLessThan      ? -1
                       : result == APFloat::cmpGreaterThan ? 1
                                                           : 0;
        return APInt(1, holds(ordering));
      });
}

OpFoldResult EqualOp::fold(FoldAdaptor adaptor) {
  return foldComparison(getType(), adaptor.getOperands(),
                        [](int ordering) { return ordering == 0; });
}

OpFoldResult LessOp::fold(FoldAdaptor adaptor) {
  return foldComparison(getType(), adaptor.getOperands(),
                        [](int ordering) { return ordering < 0; });
}

OpFoldResult GreaterOp::fold(FoldAdaptor adaptor) {
  return foldComparison(getType(), adaptor.getOperands(),
                        [](int ordering) { return ordering > 0; });
}

OpFoldResult AndOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getType(), adaptor.getOperands(),
      [](ArrayRef<APInt> x, bool) -> std::optional<APInt> {
        return x[0] & x[1];
      },
      [](ArrayRef<APFloat>) -> std::optional<APFloat> { return {}; });
}

OpFoldResult OrOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      getType(), adaptor.getOperands(),
      [](ArrayRef<APInt> x, bool) -> std::optional<APInt> {
        return x[0] | x[1];
      },
      [](ArrayRef<APFloat>) -> std::optional<APFloat> { return {}; });
}

//===----------------------------------------------------------------------===//
// WhereOp
//===----------------------------------------------------------------------===//

bool WhereOp::isElementwise() { return true; }

bool WhereOp::canWriteInPlace(unsigned operandIndex) {
  return (operandIndex == 1 || operandIndex == 2) &&
         getOperand(operandIndex).getType() == getType();
}

LogicalResult WhereOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        WhereOp::Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  if (failed(requireOperands<WhereOp>(loc, adaptor.getOperands())))
    return failure();
  auto condition = cast<RankedTensorType>(adaptor.getCondition().getType());
  auto x = cast<RankedTensorType>(adaptor.getX().getType());
  auto y = cast<RankedTensorType>(adaptor.getY().getType());
  if (x.getElementType() != y.getElementType())
    return inferError(loc, getOperationName(),
                      "X and Y element types differ: ", x, " vs ", y);
  std::optional<SmallVector<int64_t>> shape =
      broadcastShapes(condition.getShape(), x.getShape());
  if (shape)
    shape = broadcastShapes(*shape, y.getShape());
  if (!shape)
    return inferError(loc, getOperationName(), "operands ", condition, ", ", x,
                      " and ", y, " do not broadcast");
  results.push_back(RankedTensorType::get(*shape, x.getElementType()));
  return success();
}

OpFoldResult WhereOp::fold(FoldAdaptor adaptor) {
  // X == Y: the condition does not matter.
  if (getX() == getY() && getX().getType() == getType())
    return getX();
  // A condition that is one value everywhere (any size: a splat stores
  // one) picks one operand, when that operand is already the result.
  if (auto splat =
          dyn_cast_or_null<SplatElementsAttr>(adaptor.getCondition())) {
    Value taken = splat.getSplatValue<bool>() ? getX() : getY();
    if (taken.getType() == getType())
      return taken;
  }
  DenseElementsAttr condition = broadcastDense(
      getSmallDense(adaptor.getCondition()), getType().getShape());
  DenseElementsAttr x =
      broadcastDense(getSmallDense(adaptor.getX()), getType().getShape());
  DenseElementsAttr y =
      broadcastDense(getSmallDense(adaptor.getY()), getType().getShape());
  if (!condition || !x || !y)
    return {};
  SmallVector<Attribute> values;
  values.reserve(getType().getNumElements());
  for (auto [take, xValue, yValue] :
       llvm::zip(condition.getValues<bool>(), x.getValues<Attribute>(),
                 y.getValues<Attribute>()))
    values.push_back(take ? xValue : yValue);
  return DenseElementsAttr::get(getType(), values);
}

//===----------------------------------------------------------------------===//
// CastOp
//===----------------------------------------------------------------------===//

bool CastOp::isElementwise() { return true; }

/// Each element is read before it is written at the same byte offset, so the
/// cast may reuse its operand's storage when both element types have the same
/// width (f32 <-> i32, f16 <-> bf16, i8 <-> ui8); otherwise offsets differ.
bool CastOp::canWriteInPlace(unsigned operandIndex) {
  return operandIndex == 0 &&
         getTensorBytes(getInput().getType()) == getTensorBytes(getType());
}

/// Converts one element; nullopt when the value does not fit (NaN or out of
/// range for an integer target), which stops folding.
static std::optional<Attribute> castElement(Attribute value, Type target) {
  auto targetInt = dyn_cast<IntegerType>(target);
  auto targetFloat = dyn_cast<FloatType>(target);
  if (auto integer = dyn_cast<IntegerAttr>(value)) {
    APInt source = integer.getValue();
    bool sourceUnsigned = isUnsignedInteger(integer.getType());
    if (targetInt) {
      if (targetInt.getWidth() == 1)
        return IntegerAttr::get(target, APInt(1, !source.isZero()));
      return IntegerAttr::get(
          target, sourceUnsigned ? source.zextOrTrunc(targetInt.getWidth())
                                 : source.sextOrTrunc(targetInt.getWidth()));
    }
    if (targetFloat) {
      APFloat result(targetFloat.getFloatSemantics());
      result.convertFromAPInt(source, !sourceUnsigned,
                              APFloat::rmNearestTiesToEven);
      return FloatAttr::get(target, result);
    }
    return std::nullopt;
  }
  if (auto floating = dyn_cast<FloatAttr>(value)) {
    APFloat source = floating.getValue();
    if (targetInt) {
      if (targetInt.getWidth() == 1)
        return IntegerAttr::get(target, APInt(1, !source.isZero()));
      if (source.isNaN() || source.isInfinity())
        return std::nullopt;
      APSInt result(targetInt.getWidth(), isUnsignedInteger(targetInt));
      bool isExact = false;
      if (source.convertToInteger(result, APFloat::rmTowardZero, &isExact) &
          APFloat::opInvalidOp)
        return std::nullopt;
      return IntegerAttr::get(target, result);
    }
    if (targetFloat) {
      bool losesInfo = false;
      source.convert(targetFloat.getFloatSemantics(),
                     APFloat::rmNearestTiesToEven, &losesInfo);
      return FloatAttr::get(target, source);
    }
  }
  return std::nullopt;
}

/// Whether every value of `from` survives a cast to `to` unchanged, so that
/// casting back restores it (f16 -> f32, bf16 -> f32, i32 -> i64, i1 -> any).
static bool isLosslessCast(Type from, Type to) {
  if (from.isInteger(1))
    return isa<IntegerType, FloatType>(to);
  auto fromFloat = dyn_cast<FloatType>(from);
  auto toFloat = dyn_cast<FloatType>(to);
  if (fromFloat && toFloat)
    return APFloat::isRepresentableBy(fromFloat.getFloatSemantics(),
                                      toFloat.getFloatSemantics());
  auto fromInt = dyn_cast<IntegerType>(from);
  auto toInt = dyn_cast<IntegerType>(to);
  return fromInt && toInt && fromInt.getWidth() < toInt.getWidth() &&
         (fromInt.isUnsigned() == toInt.isUnsigned() || fromInt.isUnsigned());
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // cast(cast(x : A -> B) : B -> A) -> x when A -> B loses nothing: the
  // round trips that mixed precision leaves behind (f16 -> f32 -> f16).
  if (auto producer = getInput().getDefiningOp<CastOp>();
      producer && producer.getInput().getType() == getType() &&
      isLosslessCast(getType().getElementType(),
                     producer.getType().getElementType()))
    return producer.getInput();
  DenseElementsAttr input = getSmallDense(adaptor.getInput());
  if (!input || input.getNumElements() != getType().getNumElements())
    return {};
  Type target = getType().getElementType();
  if (input.isSplat()) {
    std::optional<Attribute> value =
        castElement(input.getSplatValue<Attribute>(), target);
    if (!value)
      return {};
    return DenseElementsAttr::get(getType(), *value);
  }
  SmallVector<Attribute> values;
  for (Attribute element : input.getValues<Attribute>()) {
    std::optional<Attribute> value = castElement(element, target);
    if (!value)
      return {};
    values.push_back(*value);
  }
  return DenseElementsAttr::get(getType(), values);
}

//===----------------------------------------------------------------------===//
// FusedElementwiseOp
//===----------------------------------------------------------------------===//

bool FusedElementwiseOp::isUnaryStep(StringRef name) {
  return llvm::is_contained({"relu", "exp", "log", "sqrt", "reciprocal", "neg",
                             "abs", "sigmoid", "tanh", "erf", "sin", "cos",
                             "hard_swish", "leaky_relu", "hard_sigmoid", "gelu",
                             "gelu_tanh", "clip"},
                            name);
}

bool FusedElementwiseOp::isBinaryStep(StringRef name) {
  return llvm::is_contained(
      {"add", "sub", "mul", "div", "pow", "min", "max", "relu_grad"}, name);
}

bool FusedElementwiseOp::isElementwise() { return true; }

/// In place over an input that already has the result's type: element e of
/// the result reads only element e of that input.
bool FusedElementwiseOp::canWriteInPlace(unsigned operandIndex) {
  return operandIndex < getNumOperands() &&
         getOperand(operandIndex).getType() == getType();
}

int64_t FusedElementwiseOp::getFlops() {
  return int64_t(getOps().size()) * getType().getNumElements();
}

LogicalResult FusedElementwiseOp::verify() {
  int64_t numInputs = getInputs().size();
  int64_t numSteps = getOps().size();
  if (numInputs < 1 || numInputs > kMaxInputs || numSteps < 1 ||
      numSteps > kMaxSteps)
    return emitOpError("needs 1 to ")
           << kMaxInputs << " inputs and 1 to " << kMaxSteps << " steps, got "
           << numInputs << " and " << numSteps;
  if (int64_t(getRegisters().size()) != 2 * numSteps ||
      int64_t(getAlphas().size()) != numSteps ||
      int64_t(getBetas().size()) != numSteps)
    return emitOpError("needs two operand registers, one alpha and one beta "
                       "per step");
  // The inputs share one element type; the result may convert the last
  // step's value to another float type (a fused cast).
  Type element = getElementTypeOrSelf(getInputs()[0]);
  if (!isa<FloatType>(element) || !isa<FloatType>(getType().getElementType()))
    return emitOpError("needs float inputs and result");
  SmallVector<int64_t> shape;
  for (Value input : getInputs()) {
    auto type = cast<RankedTensorType>(input.getType());
    if (type.getElementType() != element)
      return emitOpError("input ") << type << " does not have the element type "
                                   << element << " of the first input";
    std::optional<SmallVector<int64_t>> joined =
        broadcastShapes(shape, type.getShape());
    if (!joined)
      return emitOpError("inputs do not broadcast together");
    shape = *joined;
  }
  if (ArrayRef<int64_t>(shape) != getType().getShape())
    return emitOpError("result ")
           << getType() << " is not the broadcast shape of the inputs";
  ArrayRef<int64_t> registers = getRegisters();
  for (int64_t i = 0; i < numSteps; ++i) {
    StringRef name = cast<StringAttr>(getOps()[i]).getValue();
    bool binary = isBinaryStep(name);
    if (!binary && !isUnaryStep(name))
      return emitOpError("unknown step '") << name << "'";
    int64_t a = registers[2 * i], b = registers[2 * i + 1];
    int64_t available = numInputs + i;
    if (a < 0 || a >= available || (binary && (b < 0 || b >= available)) ||
        (!binary && b != -1))
      return emitOpError("step ")
             << i << " ('" << name << "') reads registers " << a << ", " << b
             << "; registers 0.." << available - 1 << " exist"
             << (binary ? "" : " and a unary step's second is -1");
  }
  return success();
}
