//===- AttentionMasks.cpp - constants and masks of attention fusion -------===//
//
// The constant evaluation and mask classification behind
// --memopt-fuse-attention (AttentionMasks.h). Constant masks are classified
// by value, as XLA's cuDNN fused-MHA rewriter recognises the causal mask;
// unlike onnxruntime's fusion_attention.py, which recognises a mask by the
// ops an exporter used to build it, a constant is judged by what it masks,
// whichever ops folded into it. A fused attention's mask is read back from
// its operands for the report: the boolean leaves of a Where mask (graph
// inputs are padding, constants causal / windowed / other) and the kinds of
// additive terms.
//
//===----------------------------------------------------------------------===//

#include "AttentionMasks.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/TypeUtilities.h"

#include "llvm/ADT/SmallPtrSet.h"

#include <cmath>
#include <cstring>

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::attention;

namespace {

/// Constant masks are read up to this many elements.
constexpr int64_t kMaxMaskElements = int64_t(1) << 24;

/// Ops visited when a scalar or a mask is traced back through the graph.
constexpr unsigned kMaxTracedOps = 64;

double toDouble(APFloat value) {
  bool losesInfo = false;
  value.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven,
                &losesInfo);
  return value.convertToDouble();
}

bool isOneElementFloat(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && type.hasStaticShape() && type.getNumElements() == 1 &&
         isa<FloatType>(type.getElementType());
}

std::optional<double> evaluateScalar(Value value, unsigned depth) {
  if (depth > 16 || !isOneElementFloat(value))
    return std::nullopt;
  Operation *op = value.getDefiningOp();
  if (!op)
    return std::nullopt;
  if (auto constant = dyn_cast<ConstantOp>(op)) {
    auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
    if (!dense)
      return std::nullopt;
    return toDouble(*dense.getValues<APFloat>().begin());
  }
  auto operand = [&](Value input) { return evaluateScalar(input, depth + 1); };
  if (isa<ReshapeOp, SqueezeOp, UnsqueezeOp, ExpandOp, IdentityOp, CastOp>(op))
    return operand(op->getOperand(0));
  if (auto sqrt = dyn_cast<SqrtOp>(op)) {
    std::optional<double> x = operand(sqrt.getX());
    return x && *x >= 0 ? std::optional<double>(std::sqrt(*x)) : std::nullopt;
  }
  if (auto reciprocal = dyn_cast<ReciprocalOp>(op)) {
    std::optional<double> x = operand(reciprocal.getX());
    return x ? std::optional<double>(1.0 / *x) : std::nullopt;
  }
  if (auto neg = dyn_cast<NegOp>(op)) {
    std::optional<double> x = operand(neg.getX());
    return x ? std::optional<double>(-*x) : std::nullopt;
  }
  if (!isa<PowOp, MulOp, DivOp, AddOp, SubOp>(op))
    return std::nullopt;
  std::optional<double> a = operand(op->getOperand(0));
  std::optional<double> b = a ? operand(op->getOperand(1)) : std::nullopt;
  if (!b)
    return std::nullopt;
  if (isa<PowOp>(op))
    return std::pow(*a, *b);
  if (isa<MulOp>(op))
    return *a * *b;
  if (isa<DivOp>(op))
    return *a / *b;
  if (isa<AddOp>(op))
    return *a + *b;
  return *a - *b;
}

/// Whether every [queries, keys] slice of `masked` (row-major, slices
/// contiguous) masks exactly `j > i || j <= i - window`.
bool masksBand(ArrayRef<bool> masked, int64_t queries, int64_t keys,
               int64_t window) {
  for (size_t index = 0; index < masked.size(); ++index) {
    int64_t row = int64_t(index / keys) % queries;
    int64_t column = int64_t(index % keys);
    if (masked[index] != (column > row || column <= row - window))
      return false;
  }
  return true;
}

} // namespace

std::optional<double> attention::evaluateScalar(Value value) {
  return ::evaluateScalar(value, 0);
}

std::optional<SmallVector<double>> attention::getConstantValues(Value value) {
  auto constant = value.getDefiningOp<ConstantOp>();
  if (!constant)
    return std::nullopt;
  auto type = cast<RankedTensorType>(constant.getType());
  if (type.getNumElements() > kMaxMaskElements)
    return std::nullopt;
  Type elementType = type.getElementType();
  SmallVector<double> values;
  values.reserve(type.getNumElements());
  Attribute attr = constant.getValue();
  if (auto dense = dyn_cast<DenseElementsAttr>(attr)) {
    if (elementType.isInteger(1)) {
      for (bool element : dense.getValues<bool>())
        values.push_back(element ? 1.0 : 0.0);
      return values;
    }
    if (!isa<FloatType>(elementType))
      return std::nullopt;
    for (APFloat element : dense.getValues<APFloat>())
      values.push_back(toDouble(element));
    return values;
  }
  auto resource = dyn_cast<DenseResourceElementsAttr>(attr);
  AsmResourceBlob *blob =
      resource ? resource.getRawHandle().getBlob() : nullptr;
  if (!blob)
    return std::nullopt;
  ArrayRef<char> raw = blob->getData();
  int64_t count = type.getNumElements();
  if (elementType.isF32()) {
    if (int64_t(raw.size()) != count * 4)
      return std::nullopt;
    for (int64_t i = 0; i < count; ++i) {
      float element;
      std::memcpy(&element, raw.data() + 4 * i, 4);
      values.push_back(element);
    }
    return values;
  }
  if (elementType.isF16() || elementType.isBF16()) {
    if (int64_t(raw.size()) != count * 2)
      return std::nullopt;
    const llvm::fltSemantics &semantics =
        cast<FloatType>(elementType).getFloatSemantics();
    for (int64_t i = 0; i < count; ++i) {
      uint16_t bits;
      std::memcpy(&bits, raw.data() + 2 * i, 2);
      values.push_back(toDouble(APFloat(semantics, APInt(16, bits))));
    }
    return values;
  }
  return std::nullopt;
}

MaskPattern attention::classifyPattern(
    ArrayRef<double> values, RankedTensorType type, int64_t queries,
    int64_t keys, llvm::function_ref<std::optional<bool>(double)> masked) {
  SmallVector<bool> isMasked;
  isMasked.reserve(values.size());
  bool masksAny = false;
  for (double value : values) {
    std::optional<bool> element = masked(value);
    if (!element)
      return MaskPattern::Bias;
    isMasked.push_back(*element);
    masksAny |= *element;
  }
  if (!masksAny)
    return MaskPattern::Nothing;
  // Causal and windowed masks vary along both last axes, so the constant
  // must hold them whole (its batch axes may broadcast or repeat).
  int64_t rank = type.getRank();
  if (rank < 2 || type.getDimSize(rank - 2) != queries ||
      type.getDimSize(rank - 1) != keys || queries < 1 || keys < 1)
    return MaskPattern::Other;
  if (masksBand(isMasked, queries, keys, queries + keys))
    return MaskPattern::Causal;
  // The window from the last row's first key kept.
  ArrayRef<bool> lastRow = ArrayRef<bool>(isMasked).slice(
      size_t((queries - 1) * keys), size_t(keys));
  int64_t firstKept = llvm::find(lastRow, false) - lastRow.begin();
  int64_t window = queries - firstKept;
  if (firstKept > 0 && window >= 1 &&
      masksBand(isMasked, queries, keys, window))
    return MaskPattern::SlidingWindow;
  return MaskPattern::Other;
}

MaskPattern attention::classifyAdditive(ArrayRef<double> values,
                                        RankedTensorType type, int64_t queries,
                                        int64_t keys, double factor) {
  return classifyPattern(values, type, queries, keys,
                         [&](double value) -> std::optional<bool> {
                           if (value == 0)
                             return false;
                           if (isMaskingValue(value * factor))
                             return true;
                           return std::nullopt;
                         });
}

MaskPattern attention::classifyCondition(ArrayRef<double> values,
                                         RankedTensorType type, int64_t queries,
                                         int64_t keys, bool maskWhen) {
  return classifyPattern(values, type, queries, keys,
                         [&](double value) -> std::optional<bool> {
                           return (value != 0) == maskWhen;
                         });
}

//===----------------------------------------------------------------------===//
// The mask of a fused attention, for the report
//===----------------------------------------------------------------------===//

namespace {

/// The additive terms of `value`: Adds are split, views and float casts
/// looked through.
void collectTerms(Value value, SmallVectorImpl<Value> &terms, unsigned depth) {
  Operation *op = value.getDefiningOp();
  if (op && depth < 16) {
    if (auto add = dyn_cast<AddOp>(op)) {
      collectTerms(add.getA(), terms, depth + 1);
      collectTerms(add.getB(), terms, depth + 1);
      return;
    }
    if (isa<ReshapeOp, ExpandOp, UnsqueezeOp, CastOp>(op) &&
        isa<FloatType>(getElementTypeOrSelf(op->getOperand(0).getType()))) {
      collectTerms(op->getOperand(0), terms, depth + 1);
      return;
    }
  }
  terms.push_back(value);
}

void addPattern(MaskPattern pattern, MaskSummary &summary) {
  switch (pattern) {
  case MaskPattern::Nothing:
    break;
  case MaskPattern::Causal:
    summary.causal = true;
    break;
  case MaskPattern::SlidingWindow:
    summary.slidingWindow = true;
    break;
  case MaskPattern::Other:
    summary.otherMask = true;
    break;
  case MaskPattern::Bias:
    summary.scoreBias = true;
    break;
  }
}

/// The leaves a computed boolean mask comes from: graph inputs are padding
/// (attention_mask), boolean constants are judged by their pattern in either
/// polarity (a Not may sit between them and the Where).
void classifyComputedCondition(Value condition, int64_t queries, int64_t keys,
                               MaskSummary &summary) {
  SmallVector<Value> worklist = {condition};
  llvm::SmallPtrSet<Operation *, 16> visited;
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    Operation *op = value.getDefiningOp();
    if (!op) {
      summary.padding = true;
      continue;
    }
    if (!visited.insert(op).second)
      continue;
    if (visited.size() > kMaxTracedOps) {
      summary.otherMask = true;
      return;
    }
    if (isa<ConstantOp>(op)) {
      auto type = cast<RankedTensorType>(value.getType());
      if (!type.getElementType().isInteger(1))
        continue;
      std::optional<SmallVector<double>> values = getConstantValues(value);
      if (!values)
        continue;
      MaskPattern keep =
          classifyCondition(*values, type, queries, keys, /*maskWhen=*/false);
      MaskPattern mask =
          classifyCondition(*values, type, queries, keys, /*maskWhen=*/true);
      if (keep == MaskPattern::Causal || mask == MaskPattern::Causal)
        summary.causal = true;
      else if (keep == MaskPattern::SlidingWindow ||
               mask == MaskPattern::SlidingWindow)
        summary.slidingWindow = true;
      else if (keep != MaskPattern::Nothing && mask != MaskPattern::Nothing)
        summary.otherMask = true;
      continue;
    }
    for (Value operand : op->getOperands())
      worklist.push_back(operand);
  }
}

/// Whether a computed float term is a score bias (it reads a float input or
/// a float table) rather than an additive mask computed from an integer or
/// boolean input alone.
bool isComputedScoreBias(Value term) {
  SmallVector<Value> worklist = {term};
  llvm::SmallPtrSet<Operation *, 16> visited;
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    Type elementType = getElementTypeOrSelf(value.getType());
    Operation *op = value.getDefiningOp();
    if (!op) {
      if (isa<FloatType>(elementType))
        return true;
      continue;
    }
    if (!visited.insert(op).second)
      continue;
    if (visited.size() > kMaxTracedOps)
      return true;
    if (auto constant = dyn_cast<ConstantOp>(op)) {
      if (isa<FloatType>(elementType) &&
          cast<RankedTensorType>(value.getType()).getNumElements() > 1)
        return true;
      continue;
    }
    for (Value operand : op->getOperands())
      worklist.push_back(operand);
  }
  return false;
}

} // namespace

MaskSummary attention::classifyAttentionMask(AttentionOp attention) {
  MaskSummary summary;
  summary.causal = summary.causalInKernel = attention.getCausal();
  Value bias = attention.getBias();
  if (!bias)
    return summary;
  auto queryType = cast<RankedTensorType>(attention.getQ().getType());
  auto keyType = cast<RankedTensorType>(attention.getK().getType());
  int64_t queries = queryType.getDimSize(queryType.getRank() - 2);
  int64_t keys = keyType.getDimSize(keyType.getRank() -
                                    (attention.getKeyTransposed() ? 1 : 2));
  SmallVector<Value> terms;
  collectTerms(bias, terms, 0);
  for (Value term : terms) {
    if (auto where = term.getDefiningOp<WhereOp>()) {
      std::optional<double> x = evaluateScalar(where.getX());
      std::optional<double> y = evaluateScalar(where.getY());
      std::optional<bool> maskWhen;
      if (x && y && isMaskingValue(*x) && *y == 0)
        maskWhen = true;
      else if (x && y && *x == 0 && isMaskingValue(*y))
        maskWhen = false;
      if (maskWhen) {
        Value condition = where.getCondition();
        if (std::optional<SmallVector<double>> values =
                getConstantValues(condition))
          addPattern(classifyCondition(
                         *values, cast<RankedTensorType>(condition.getType()),
                         queries, keys, *maskWhen),
                     summary);
        else
          classifyComputedCondition(condition, queries, keys, summary);
        continue;
      }
    }
    if (std::optional<SmallVector<double>> values = getConstantValues(term)) {
      // The fusion may have folded a mask and a bias into one constant:
      // its masking elements are the mask, the other non-zero ones a bias.
      summary.scoreBias |= llvm::any_of(*values, [](double value) {
        return value != 0 && !isMaskingValue(value);
      });
      addPattern(classifyPattern(*values,
                                 cast<RankedTensorType>(term.getType()),
                                 queries, keys,
                                 [](double value) -> std::optional<bool> {
                                   return isMaskingValue(value);
                                 }),
                 summary);
      continue;
    }
    if (isComputedScoreBias(term))
      summary.scoreBias = true;
    else
      summary.padding = true;
  }
  return summary;
}

std::string MaskSummary::maskClass() const {
  if (otherMask)
    return "arbitrary";
  // A window is causal too: its class is the window.
  std::string shape = slidingWindow ? "sliding window" : causal ? "causal" : "";
  if (!padding)
    return shape.empty() ? "none" : shape;
  return shape.empty() ? "padding" : shape + " + padding";
}
