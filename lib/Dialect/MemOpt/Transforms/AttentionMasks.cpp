//===- AttentionMasks.cpp - constants and masks of attention fusion -------===//
//
// The constant evaluation and mask classification behind
// --memopt-fuse-attention (AttentionMasks.h). Masks are classified by value,
// whichever ops built them: a constant, or a tensor computed from constants
// alone that canonicalize did not fold (transformers' Range / LessOrEqual /
// Expand causal mask beyond the folders' element limit), read row by row
// (RowEvaluator.h) and compared with the causal and sliding-window bands.
// XLA's cuDNN fused-MHA rewriter recognises the causal mask by its ops
// (a select over a compare of iotas), onnxruntime's fusion_attention.py and
// torch inductor's SDPA patterns by the ops an exporter used; evaluating the
// ops judges any formula by what it masks, at any sequence length. A fused
// attention's mask is read back from its operands for the report: the
// boolean leaves of a Where mask (graph inputs are padding, what is computed
// from constants causal / windowed / other) and the kinds of additive terms.
//
//===----------------------------------------------------------------------===//

#include "AttentionMasks.h"
#include "RowEvaluator.h"

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

/// Masks are read up to this many elements (their batch axes that only
/// broadcast are read once): a [1, 1, 32768, 32768] mask, about 4 s.
constexpr int64_t kMaxReadElements = int64_t(1) << 30;

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

} // namespace

std::optional<double> attention::evaluateScalar(Value value) {
  return ::evaluateScalar(value, 0);
}

//===----------------------------------------------------------------------===//
// Masks by value
//===----------------------------------------------------------------------===//

namespace {

/// Whether an element read as `reading` masks its score; nullopt: the
/// element is not a mask's (an additive bias value).
std::optional<bool> elementMasks(MaskReading reading, double factor,
                                 double value) {
  switch (reading) {
  case MaskReading::Additive:
    if (value == 0)
      return false;
    if (isMaskingValue(value * factor))
      return true;
    return std::nullopt;
  case MaskReading::MaskingElements:
    return isMaskingValue(value * factor);
  case MaskReading::MaskWhenTrue:
    return value != 0;
  case MaskReading::MaskWhenFalse:
    return value == 0;
  }
  return std::nullopt;
}

/// The row of `shape` at `index` (over every axis but the last).
int64_t rowOf(ArrayRef<int64_t> shape, ArrayRef<int64_t> index) {
  int64_t row = 0;
  for (auto [axis, position] : llvm::enumerate(index))
    row = row * shape[axis] + position;
  return row;
}

/// The pattern of `rows` over [..., queries, keys] scores. Every row along
/// which the mask may differ is read once (batch axes that broadcast, once);
/// the window is the one the first batch entry's last row keeps.
template <typename Masked>
MaskPattern scanPattern(RowEvaluator &rows, int64_t queries, int64_t keys,
                        Masked masked) {
  ArrayRef<int64_t> shape = rows.getType().getShape();
  int64_t rank = shape.size();
  int64_t length = rows.getRowLength();
  // Causal and windowed masks vary along both last axes, so the mask must
  // hold them whole (its batch axes may broadcast or repeat).
  bool whole = rank >= 2 && shape[rank - 2] == queries &&
               shape[rank - 1] == keys && queries >= 1 && keys >= 1;
  SmallVector<int64_t> counts;
  int64_t rowsToRead = 1;
  for (int64_t axis = 0; axis + 1 < rank; ++axis) {
    bool read = rows.mayVary(axis) || (whole && axis == rank - 2);
    counts.push_back(read ? shape[axis] : 1);
    rowsToRead *= counts.back();
  }
  if (rowsToRead > kMaxReadElements / length)
    return MaskPattern::Other;

  int64_t window = queries + keys; // causal: no key is too far back
  bool windowed = false;
  if (whole) {
    SmallVector<int64_t> index(rank - 1, 0);
    index.back() = queries - 1;
    ArrayRef<double> last = rows.getRow(rowOf(shape, index));
    int64_t firstKept = keys;
    for (int64_t key = 0; key < keys; ++key) {
      std::optional<bool> masks = masked(last[key]);
      if (!masks)
        return MaskPattern::Bias;
      if (!*masks) {
        firstKept = key;
        break;
      }
    }
    windowed = firstKept > 0 && queries - firstKept >= 1;
    if (windowed)
      window = queries - firstKept;
  }

  bool masksAny = false, causal = whole;
  SmallVector<int64_t> index(counts.size(), 0);
  for (int64_t read = 0; read < rowsToRead; ++read) {
    ArrayRef<double> row = rows.getRow(rowOf(shape, index));
    int64_t query = whole ? index.back() : 0;
    for (int64_t key = 0; key < length; ++key) {
      std::optional<bool> masks = masked(row[key]);
      if (!masks)
        return MaskPattern::Bias;
      masksAny |= *masks;
      if (whole) {
        bool future = key > query;
        causal &= *masks == future;
        windowed &= *masks == (future || key <= query - window);
      }
    }
    for (int64_t axis = int64_t(counts.size()) - 1; axis >= 0; --axis) {
      if (++index[axis] < counts[axis])
        break;
      index[axis] = 0;
    }
  }
  if (!masksAny)
    return MaskPattern::Nothing;
  if (causal)
    return MaskPattern::Causal;
  if (windowed)
    return MaskPattern::SlidingWindow;
  return MaskPattern::Other;
}

} // namespace

std::optional<MaskPattern> MaskClassifier::classify(Value mask, int64_t queries,
                                                    int64_t keys,
                                                    MaskReading reading,
                                                    double factor) {
  if (reading == MaskReading::MaskWhenTrue ||
      reading == MaskReading::MaskWhenFalse)
    factor = 1.0;
  auto matches = [&](const Entry &entry) {
    return entry.queries == queries && entry.keys == keys &&
           entry.reading == reading && entry.factor == factor;
  };
  if (auto found = known.find(mask); found != known.end())
    for (const Entry &entry : found->second)
      if (matches(entry))
        return entry.pattern;
  std::optional<MaskPattern> pattern =
      evaluate(mask, queries, keys, reading, factor);
  known[mask].push_back({queries, keys, reading, factor, pattern});
  return pattern;
}

std::optional<MaskPattern> MaskClassifier::evaluate(Value mask, int64_t queries,
                                                    int64_t keys,
                                                    MaskReading reading,
                                                    double factor) {
  // Where(c, x, y) with one-element x and y, one masking and one keeping:
  // the pattern of c, which the layers of a model share (each has its own
  // Where).
  auto where = mask.getDefiningOp<WhereOp>();
  if (where && (reading == MaskReading::Additive ||
                reading == MaskReading::MaskingElements)) {
    std::optional<double> x = evaluateScalar(where.getX());
    std::optional<double> y = evaluateScalar(where.getY());
    std::optional<bool> xMasks =
        x ? elementMasks(reading, factor, *x) : std::nullopt;
    std::optional<bool> yMasks =
        y ? elementMasks(reading, factor, *y) : std::nullopt;
    auto condition = cast<RankedTensorType>(where.getCondition().getType());
    auto result = cast<RankedTensorType>(where.getType());
    if (xMasks && yMasks && *xMasks != *yMasks && condition.getRank() >= 2 &&
        result.getRank() >= 2 &&
        condition.getShape().take_back(2) == result.getShape().take_back(2))
      return classify(where.getCondition(), queries, keys,
                      *xMasks ? MaskReading::MaskWhenTrue
                              : MaskReading::MaskWhenFalse);
  }
  std::unique_ptr<RowEvaluator> rows = RowEvaluator::create(mask);
  if (!rows)
    return std::nullopt;
  // One loop per reading: the reading is not decided per element.
  auto read = [&](auto reading) {
    return scanPattern(*rows, queries, keys, [&](double value) {
      return elementMasks(decltype(reading)::value, factor, value);
    });
  };
  switch (reading) {
  case MaskReading::Additive:
    return read(std::integral_constant<MaskReading, MaskReading::Additive>());
  case MaskReading::MaskingElements:
    return read(
        std::integral_constant<MaskReading, MaskReading::MaskingElements>());
  case MaskReading::MaskWhenTrue:
    return read(
        std::integral_constant<MaskReading, MaskReading::MaskWhenTrue>());
  case MaskReading::MaskWhenFalse:
    return read(
        std::integral_constant<MaskReading, MaskReading::MaskWhenFalse>());
  }
  return std::nullopt;
}

void MaskClassifier::forget(Operation *op) {
  for (Value result : op->getResults())
    known.erase(result);
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
/// (attention_mask); a boolean computed from constants alone is judged by
/// its pattern in either polarity (a Not may sit between it and the Where),
/// as a whole (transformers' causal mask And all-true ones). A mask that
/// reads no input and could not be read is arbitrary.
void classifyComputedCondition(Value condition, int64_t queries, int64_t keys,
                               MaskClassifier &classifier,
                               MaskSummary &summary) {
  SmallVector<Value> worklist = {condition};
  llvm::SmallPtrSet<Operation *, 16> visited;
  bool read = false;
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
    if (getElementTypeOrSelf(value.getType()).isInteger(1)) {
      // Masks keep where true as a rule: the other polarity is read only
      // when this one is neither causal nor a window.
      std::optional<MaskPattern> keep =
          classifier.classify(value, queries, keys, MaskReading::MaskWhenFalse);
      std::optional<MaskPattern> mask = keep;
      if (keep && keep != MaskPattern::Causal &&
          keep != MaskPattern::SlidingWindow)
        mask = classifier.classify(value, queries, keys,
                                   MaskReading::MaskWhenTrue);
      if (keep && mask) {
        read = true;
        if (keep == MaskPattern::Causal || mask == MaskPattern::Causal)
          summary.causal = true;
        else if (keep == MaskPattern::SlidingWindow ||
                 mask == MaskPattern::SlidingWindow)
          summary.slidingWindow = true;
        else if (keep != MaskPattern::Nothing && mask != MaskPattern::Nothing)
          summary.otherMask = true;
        continue;
      }
    }
    if (isa<ConstantOp>(op))
      continue;
    for (Value operand : op->getOperands())
      worklist.push_back(operand);
  }
  if (!read && !summary.padding)
    summary.otherMask = true;
}

/// Whether `value` is computed from a function argument (or from more ops
/// than are traced).
bool readsArgument(Value value) {
  SmallVector<Value> worklist = {value};
  llvm::SmallPtrSet<Operation *, 16> visited;
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val().getDefiningOp();
    if (!op)
      return true;
    if (!visited.insert(op).second)
      continue;
    if (visited.size() > kMaxTracedOps)
      return true;
    for (Value operand : op->getOperands())
      worklist.push_back(operand);
  }
  return false;
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

MaskSummary attention::classifyAttentionMask(AttentionOp attention,
                                             MaskClassifier &classifier) {
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
        if (std::optional<MaskPattern> pattern =
                classifier.classify(condition, queries, keys,
                                    *maskWhen ? MaskReading::MaskWhenTrue
                                              : MaskReading::MaskWhenFalse))
          addPattern(*pattern, summary);
        else
          classifyComputedCondition(condition, queries, keys, classifier,
                                    summary);
        continue;
      }
    }
    if (std::optional<MaskPattern> masking = classifier.classify(
            term, queries, keys, MaskReading::MaskingElements)) {
      // The fusion may have folded a mask and a bias into one constant:
      // its masking elements are the mask, the other non-zero ones a bias.
      summary.scoreBias |=
          classifier.classify(term, queries, keys, MaskReading::Additive) ==
          MaskPattern::Bias;
      addPattern(*masking, summary);
      continue;
    }
    // Computed from inputs, or from constants by ops the classifier cannot
    // read (then neither: the report says the bias is computed).
    if (isComputedScoreBias(term))
      summary.scoreBias = true;
    else if (readsArgument(term))
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
