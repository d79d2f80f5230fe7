//===- FuseAttention.cpp - MatMul/Softmax/MatMul -> memopt.attention ------===//
//
// One rewrite pattern, rooted at the softmax: its only user must be the
// MatMul with V, and its input must lead back to the MatMul(Q, K^T) through
// steps that each have exactly one use: scalar-constant Mul/Div (the scale),
// Add of a bias or mask term, Where(mask, fill, scores) with a masking fill,
// and Reshapes that regroup the batch axes but keep the last two. After the
// softmax, PyTorch's safe softmax `Where(IsNaN(P), 0, P)` (the dynamo
// exporter's spelling of SDPA with a boolean mask) becomes `safe_softmax`:
// the fused kernels give a fully masked row zeros instead of 0 / 0. The steps
// become attributes and operands of one `memopt.attention`; the intermediates
// die and the greedy driver removes them.
//
// Terms are additive. A Where term becomes `Where(mask, fill, 0)`, which is
// the same after the softmax because the fill (-inf, or below -1e30 like
// HuggingFace's finfo.min) swallows any finite score and has weight exactly
// 0. A constant term that is exactly the top-left causal pattern becomes
// `causal = true` (no bias tensor at all), one that masks nothing is
// dropped. Terms added in different views of the batch axes (swin's
// shifted-window mask is added in a [B/nW, nW, H, N, N] view of the
// [B, H, N, N] scores) are moved into one view by regrouping their batch
// axes, and the attention runs in that view, its operands and result
// reshaped (views, no copies).
//
// Taken from: onnxruntime's attention fusions (transformers optimizer:
// fusion_attention.py matches the exporters' Q/K/V MatMul-Softmax-MatMul
// chains with masks and scales into Attention / MultiHeadAttention), XLA's
// cuDNN fused-MHA rewriter (scale, bias and mask pulled into the fused call,
// the causal mask recognised from its pattern), TensorRT's MHA fusion.
// Different: exact pattern-only matching of the memopt dialect, a view
// search for batch-regrouped masks, and constant masks classified by value.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/IR/ShapeUtils.h"
#include "memopt/Dialect/MemOpt/Transforms/Passes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstring>

namespace mlir::memopt {
#define GEN_PASS_DEF_MEMOPTFUSEATTENTION
#include "memopt/Dialect/MemOpt/Transforms/Passes.h.inc"
} // namespace mlir::memopt

using namespace mlir;
using namespace mlir::memopt;

namespace {

/// A fill at or below this masks a score out: exp underflows to exactly 0,
/// and adding any score of a sane magnitude leaves it unchanged (the score
/// is below half an ulp), so Where(mask, fill, s) == s + Where(mask, fill, 0)
/// after the softmax. -inf qualifies.
constexpr double kMaskingFill = -1e30;

/// Longest score chain (steps between the two MatMuls) that is searched.
constexpr unsigned kMaxChainLength = 16;

/// Constant masks are read up to this many elements.
constexpr int64_t kMaxMaskElements = int64_t(1) << 24;

bool isMaskingValue(double value) { return value <= kMaskingFill; }

double toDouble(APFloat value) {
  bool losesInfo = false;
  value.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven,
                &losesInfo);
  return value.convertToDouble();
}

/// The value of a one-element float constant.
std::optional<double> getScalarConstant(Value value) {
  auto constant = value.getDefiningOp<ConstantOp>();
  if (!constant)
    return std::nullopt;
  auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!dense || dense.getNumElements() != 1 ||
      !isa<FloatType>(dense.getElementType()))
    return std::nullopt;
  return toDouble(*dense.getValues<APFloat>().begin());
}

/// Every element of a constant as a double: dense floats or i1, and
/// dense_resource blobs of f32 / f16 / bf16 (how the importer stores large
/// float initializers).
std::optional<SmallVector<double>> getConstantValues(Value value) {
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

/// One op between MatMul(Q, K^T) and the softmax.
struct ChainStep {
  enum class Kind { Scale, Add, Where, Reshape };
  Kind kind;
  Operation *op;
  /// Scale: the factor the scores are multiplied by.
  double factor = 1.0;
  /// Add: the added operand. Where: the condition.
  Value term;
  /// Where: the scalar fill, taken where the condition is `fillWhenTrue`.
  Value fill;
  bool fillWhenTrue = true;
  /// Add, Where: index of the batch view the term is applied in.
  unsigned view = 0;
};

/// Walks from `value` back to the MatMul that computes the scores, pushing
/// the steps met on the way (the last applied first). Every value on the
/// chain must have exactly one use.
LogicalResult walkScores(Value value, SmallVectorImpl<ChainStep> &steps,
                         MatMulOp &scores, unsigned depth) {
  if (depth > kMaxChainLength || !value.hasOneUse())
    return failure();
  Operation *op = value.getDefiningOp();
  if (!op)
    return failure();
  if (auto matmul = dyn_cast<MatMulOp>(op)) {
    scores = matmul;
    return success();
  }
  auto type = cast<RankedTensorType>(value.getType());
  // Tries `chain` as the scores operand with `step` describing the op.
  auto tryChain = [&](Value chain, ChainStep step) {
    if (chain.getType() != type)
      return failure();
    size_t mark = steps.size();
    steps.push_back(step);
    if (succeeded(walkScores(chain, steps, scores, depth + 1)))
      return success();
    steps.truncate(mark);
    return failure();
  };

  if (auto reshape = dyn_cast<ReshapeOp>(op)) {
    auto input = cast<RankedTensorType>(reshape.getData().getType());
    if (input.getRank() < 2 || type.getRank() < 2 ||
        input.getShape().take_back(2) != type.getShape().take_back(2))
      return failure();
    size_t mark = steps.size();
    steps.push_back({ChainStep::Kind::Reshape, op});
    if (succeeded(walkScores(reshape.getData(), steps, scores, depth + 1)))
      return success();
    steps.truncate(mark);
    return failure();
  }
  if (isa<MulOp, DivOp>(op)) {
    bool isDiv = isa<DivOp>(op);
    Value lhs = op->getOperand(0), rhs = op->getOperand(1);
    std::pair<Value, Value> orders[] = {{lhs, rhs}, {rhs, lhs}};
    for (auto [chain, constant] : orders) {
      if (isDiv && chain != lhs)
        continue;
      std::optional<double> value = getScalarConstant(constant);
      if (!value)
        continue;
      double factor = isDiv ? 1.0 / *value : *value;
      if (!std::isfinite(factor) || factor == 0)
        continue;
      ChainStep step{ChainStep::Kind::Scale, op};
      step.factor = factor;
      if (succeeded(tryChain(chain, step)))
        return success();
    }
    return failure();
  }
  if (auto add = dyn_cast<AddOp>(op)) {
    std::pair<Value, Value> orders[] = {{add.getA(), add.getB()},
                                        {add.getB(), add.getA()}};
    for (auto [chain, term] : orders) {
      if (cast<RankedTensorType>(term.getType()).getElementType() !=
          type.getElementType())
        continue;
      ChainStep step{ChainStep::Kind::Add, op};
      step.term = term;
      if (succeeded(tryChain(chain, step)))
        return success();
    }
    return failure();
  }
  if (auto where = dyn_cast<WhereOp>(op)) {
    // Where(mask, fill, scores) or Where(mask, scores, fill).
    struct Order {
      Value chain, fill;
      bool fillWhenTrue;
    };
    Order orders[] = {{where.getY(), where.getX(), true},
                      {where.getX(), where.getY(), false}};
    for (const Order &order : orders) {
      std::optional<double> fill = getScalarConstant(order.fill);
      if (!fill || !isMaskingValue(*fill))
        continue;
      ChainStep step{ChainStep::Kind::Where, op};
      step.term = where.getCondition();
      step.fill = order.fill;
      step.fillWhenTrue = order.fillWhenTrue;
      if (succeeded(tryChain(order.chain, step)))
        return success();
    }
    return failure();
  }
  return failure();
}

/// What a constant term does to the scores.
enum class ConstantMask { MasksNothing, Causal, Other };

/// Classifies an Add or Where term whose mask is a constant. The scores are
/// [..., S, Sk]; a causal term has all leading axes 1 and masks exactly the
/// keys j > i of row i.
ConstantMask classifyTerm(const ChainStep &step, int64_t queries,
                          int64_t keys) {
  std::optional<SmallVector<double>> values = getConstantValues(step.term);
  if (!values)
    return ConstantMask::Other;
  auto type = cast<RankedTensorType>(step.term.getType());
  bool causalShape = type.getRank() >= 2 &&
                     type.getDimSize(type.getRank() - 2) == queries &&
                     type.getDimSize(type.getRank() - 1) == keys &&
                     type.getNumElements() == queries * keys;
  bool causal = causalShape, masksAny = false;
  for (auto [index, value] : llvm::enumerate(*values)) {
    bool masked;
    if (step.kind == ChainStep::Kind::Where) {
      masked = (value != 0) == step.fillWhenTrue;
    } else if (value == 0) {
      masked = false;
    } else if (isMaskingValue(value)) {
      masked = true;
    } else {
      return ConstantMask::Other; // a real bias, not a mask
    }
    masksAny |= masked;
    if (causal) {
      int64_t row = int64_t(index) / keys, column = int64_t(index) % keys;
      causal = masked == (column > row);
    }
  }
  if (!masksAny)
    return ConstantMask::MasksNothing;
  return causal ? ConstantMask::Causal : ConstantMask::Other;
}

/// The batch axes of `shape` (all but the last two).
SmallVector<int64_t> batchOf(Type type) {
  return SmallVector<int64_t>(
      cast<RankedTensorType>(type).getShape().drop_back(2));
}

/// Moves an operand's batch axes `batch` (which broadcast to `from`) into the
/// view `to` of the same batch (a regrouping: `from` and `to` have the same
/// element count). Axes are matched group by group (a group is a run of
/// `from` axes and a run of `to` axes with equal products); in each group
/// the operand must either be broadcast (all 1) or complete. Nullopt when
/// the operand cannot be regrouped.
std::optional<SmallVector<int64_t>> regroupBatch(ArrayRef<int64_t> batch,
                                                 ArrayRef<int64_t> from,
                                                 ArrayRef<int64_t> to) {
  if (batch.size() > from.size())
    return std::nullopt;
  SmallVector<int64_t> padded(from.size() - batch.size(), 1);
  padded.append(batch.begin(), batch.end());
  if (from == to)
    return padded;
  if (llvm::is_contained(from, 0) || llvm::is_contained(to, 0))
    return std::nullopt;
  SmallVector<int64_t> result(to.size(), 1);
  size_t i = 0, j = 0;
  while (i < from.size() || j < to.size()) {
    if (i == from.size()) {
      if (to[j++] != 1)
        return std::nullopt;
      continue;
    }
    if (j == to.size()) {
      if (from[i++] != 1)
        return std::nullopt;
      continue;
    }
    size_t fromBegin = i, toBegin = j;
    int64_t fromProduct = from[i++], toProduct = to[j++];
    while (fromProduct != toProduct) {
      if (fromProduct < toProduct) {
        if (i == from.size())
          return std::nullopt;
        fromProduct *= from[i++];
      } else {
        if (j == to.size())
          return std::nullopt;
        toProduct *= to[j++];
      }
    }
    ArrayRef<int64_t> part =
        ArrayRef<int64_t>(padded).slice(fromBegin, i - fromBegin);
    if (part == from.slice(fromBegin, i - fromBegin)) {
      for (size_t axis = toBegin; axis < j; ++axis)
        result[axis] = to[axis];
    } else if (!llvm::all_of(part, [](int64_t d) { return d == 1; })) {
      return std::nullopt;
    }
  }
  return result;
}

/// `batch` + the last two axes of `type`.
RankedTensorType withBatch(Type type, ArrayRef<int64_t> batch) {
  auto ranked = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(batch);
  shape.append(ranked.getShape().take_back(2).begin(),
               ranked.getShape().take_back(2).end());
  return RankedTensorType::get(shape, ranked.getElementType());
}

/// `Reshape(Transpose(Reshape(K, [N, Sk, D]), [0, 2, 1]), [b..., D, Sk])`
/// where K is `[c..., Sk, D]` with N = prod(b) = prod(c) (so the result is K
/// viewed with batch b and its last two axes swapped), each value used once:
/// the three ops, outermost first (K is the last one's operand). The dynamo
/// exporter's SDPA transposes K this way; c differs from b where GQA's
/// repeat_kv reshape folded into the inner one.
std::optional<SmallVector<Operation *>> matchFlatKeyTranspose(Value keyT) {
  auto outer = keyT.getDefiningOp<ReshapeOp>();
  if (!outer || !keyT.hasOneUse() || !outer.getData().hasOneUse())
    return std::nullopt;
  auto transpose = outer.getData().getDefiningOp<TransposeOp>();
  if (!transpose || !transpose.getData().hasOneUse() ||
      transpose.getPermutation() != SmallVector<int64_t>{0, 2, 1})
    return std::nullopt;
  auto inner = transpose.getData().getDefiningOp<ReshapeOp>();
  if (!inner)
    return std::nullopt;
  auto key = cast<RankedTensorType>(inner.getData().getType());
  auto swapped = cast<RankedTensorType>(keyT.getType());
  int64_t rank = key.getRank(), swappedRank = swapped.getRank();
  if (rank < 2 || swappedRank < 2 ||
      key.getNumElements() != swapped.getNumElements() ||
      key.getDimSize(rank - 2) != swapped.getDimSize(swappedRank - 1) ||
      key.getDimSize(rank - 1) != swapped.getDimSize(swappedRank - 2) ||
      inner.getType().getShape().take_back(2) != key.getShape().take_back(2))
    return std::nullopt;
  return SmallVector<Operation *>{outer, transpose, inner};
}

struct FusionStatistics {
  int64_t fused = 0, causal = 0, safe = 0, scoreBytes = 0;
};

/// `Where(IsNaN(P), 0, P)` over the probabilities P: the row of a fully
/// masked query (all scores -inf, so 0 / 0 in the softmax) becomes zeros.
struct SafeSoftmax {
  IsNaNOp isNaN;
  WhereOp where;
};

/// The safe-softmax ops on `probs`, which must be their only users (P used
/// exactly twice: by the IsNaN and by the Where).
std::optional<SafeSoftmax> matchSafeSoftmax(Value probs) {
  if (!llvm::hasNItems(probs.getUses(), 2))
    return std::nullopt;
  IsNaNOp isNaN;
  WhereOp where;
  for (Operation *user : probs.getUsers()) {
    if (auto op = dyn_cast<IsNaNOp>(user))
      isNaN = op;
    else if (auto op = dyn_cast<WhereOp>(user))
      where = op;
  }
  if (!isNaN || !where || !isNaN.getResult().hasOneUse() ||
      where.getCondition() != isNaN.getResult() || where.getY() != probs ||
      where.getX() == probs || where.getType() != probs.getType())
    return std::nullopt;
  std::optional<double> fill = getScalarConstant(where.getX());
  if (!fill || *fill != 0.0)
    return std::nullopt;
  return SafeSoftmax{isNaN, where};
}

struct FuseAttentionPattern : public OpRewritePattern<SoftmaxOp> {
  FuseAttentionPattern(MLIRContext *context, int64_t maxHeadSize,
                       FusionStatistics &statistics)
      : OpRewritePattern(context), maxHeadSize(maxHeadSize),
        statistics(statistics) {}

  LogicalResult matchAndRewrite(SoftmaxOp softmax,
                                PatternRewriter &rewriter) const override {
    auto probsType = cast<RankedTensorType>(softmax.getType());
    int64_t rank = probsType.getRank();
    if (rank < 2 || normalizeAxis(softmax.getAxis(), rank) != rank - 1)
      return rewriter.notifyMatchFailure(softmax, "not over the last axis");
    Value probs = softmax.getResult();
    // PyTorch's safe softmax (a fully masked row gives zeros, not NaN), as
    // the dynamo exporter writes it: Where(IsNaN(P), 0, P).
    std::optional<SafeSoftmax> safe = matchSafeSoftmax(probs);
    if (safe)
      probs = safe->where.getResult();
    if (!probs.hasOneUse())
      return rewriter.notifyMatchFailure(softmax, "probabilities used twice");
    auto output = dyn_cast<MatMulOp>(*probs.getUsers().begin());
    if (!output || output.getA() != probs || output.getB() == probs)
      return rewriter.notifyMatchFailure(softmax, "no MatMul(P, V) follows");
    Value value = output.getB();
    if (cast<RankedTensorType>(value.getType()).getRank() < 2 ||
        batchOf(output.getType()) != batchOf(probsType))
      return rewriter.notifyMatchFailure(softmax, "V is 1-D or widens P");

    SmallVector<ChainStep> steps;
    MatMulOp scores;
    if (failed(walkScores(softmax.getInput(), steps, scores, 0)))
      return rewriter.notifyMatchFailure(softmax, "no MatMul(Q, K^T) chain");
    std::reverse(steps.begin(), steps.end()); // program order

    // Batch views: the scores' own, then one per reshape.
    SmallVector<SmallVector<int64_t>> views = {batchOf(scores.getType())};
    double scale = 1.0;
    bool termSeen = false;
    for (ChainStep &step : steps) {
      switch (step.kind) {
      case ChainStep::Kind::Reshape:
        views.push_back(batchOf(step.op->getResult(0).getType()));
        break;
      case ChainStep::Kind::Scale:
        // (s + b) * c would scale the bias too.
        if (termSeen)
          return rewriter.notifyMatchFailure(softmax, "scaled after a bias");
        scale *= step.factor;
        break;
      case ChainStep::Kind::Add:
      case ChainStep::Kind::Where:
        termSeen = true;
        step.view = views.size() - 1;
        break;
      }
    }

    // Scalar factors on Q or K before the first MatMul join the scale.
    SmallVector<Operation *> absorbed;
    auto absorbScale = [&](Value operand) {
      while (operand.hasOneUse()) {
        Operation *op = operand.getDefiningOp();
        if (!op || !isa<MulOp, DivOp>(op))
          break;
        bool isDiv = isa<DivOp>(op);
        Value lhs = op->getOperand(0), rhs = op->getOperand(1);
        std::optional<double> factor;
        Value next;
        if (auto constant = getScalarConstant(rhs);
            constant && lhs.getType() == operand.getType()) {
          factor = isDiv ? 1.0 / *constant : *constant;
          next = lhs;
        } else if (auto constant = getScalarConstant(lhs);
                   !isDiv && constant && rhs.getType() == operand.getType()) {
          factor = *constant;
          next = rhs;
        }
        if (!factor || !std::isfinite(*factor) || *factor == 0)
          break;
        scale *= *factor;
        absorbed.push_back(op);
        operand = next;
      }
      return operand;
    };
    Value query = absorbScale(scores.getA());
    Value key = absorbScale(scores.getB());
    if (!std::isfinite(scale) || scale == 0)
      return rewriter.notifyMatchFailure(softmax, "scale is not finite");
    auto queryType = cast<RankedTensorType>(query.getType());
    auto valueType = cast<RankedTensorType>(value.getType());
    if (queryType.getRank() < 2 ||
        cast<RankedTensorType>(key.getType()).getRank() < 2)
      return rewriter.notifyMatchFailure(softmax, "1-D Q or K^T");
    if (queryType.getShape().back() > maxHeadSize ||
        valueType.getShape().back() > maxHeadSize)
      return rewriter.notifyMatchFailure(softmax, "head size too large");

    // K^T = Transpose(K) over the last two axes: use K itself (through a
    // view with K^T's batch axes, `keyView`, when they differ).
    bool keyTransposed = true;
    RankedTensorType keyView;
    if (auto transpose = key.getDefiningOp<TransposeOp>();
        transpose && key.hasOneUse()) {
      SmallVector<int64_t> perm = transpose.getPermutation();
      int64_t keyRank = perm.size();
      bool swapsLastTwo = keyRank >= 2 && perm[keyRank - 2] == keyRank - 1 &&
                          perm[keyRank - 1] == keyRank - 2;
      for (int64_t axis = 0; axis + 2 < keyRank; ++axis)
        swapsLastTwo &= perm[axis] == axis;
      if (swapsLastTwo) {
        absorbed.push_back(transpose);
        key = transpose.getData();
        keyTransposed = false;
      }
    } else if (std::optional<SmallVector<Operation *>> views =
                   matchFlatKeyTranspose(key)) {
      // onnxscript's K^T: Reshape(Transpose(Reshape(K, [-1, Sk, D]),
      // [0, 2, 1]), [..., D, Sk]) with K's own batch axes.
      absorbed.append(views->begin(), views->end());
      key = views->back()->getOperand(0);
      keyTransposed = false;
      auto flat = cast<RankedTensorType>(key.getType());
      keyView =
          withBatch(flat, batchOf(views->front()->getResult(0).getType()));
      if (keyView == flat)
        keyView = nullptr;
    }

    // Constant masks: causal, nothing, or a bias like any other.
    int64_t queries = probsType.getDimSize(rank - 2);
    int64_t keys = probsType.getDimSize(rank - 1);
    bool causal = false;
    SmallVector<const ChainStep *> terms;
    for (const ChainStep &step : steps) {
      if (step.kind != ChainStep::Kind::Add &&
          step.kind != ChainStep::Kind::Where)
        continue;
      switch (classifyTerm(step, queries, keys)) {
      case ConstantMask::MasksNothing:
        break;
      case ConstantMask::Causal:
        causal = true;
        break;
      case ConstantMask::Other:
        terms.push_back(&step);
        break;
      }
    }

    // The view the attention runs in: the softmax's if every operand and
    // term can be regrouped into it, else the first that works.
    unsigned finalView = views.size() - 1;
    SmallVector<unsigned> candidates = {finalView};
    for (unsigned view = 0; view < finalView; ++view)
      candidates.push_back(view);
    std::optional<unsigned> chosen;
    SmallVector<int64_t> queryBatch, keyBatch, valueBatch;
    SmallVector<SmallVector<int64_t>> termBatches;
    for (unsigned candidate : candidates) {
      ArrayRef<int64_t> to = views[candidate];
      auto q = regroupBatch(batchOf(query.getType()), views[0], to);
      auto k = regroupBatch(batchOf(keyView ? keyView : key.getType()),
                            views[0], to);
      auto v = regroupBatch(batchOf(value.getType()), views[finalView], to);
      if (!q || !k || !v)
        continue;
      termBatches.clear();
      bool termsFit = true;
      for (const ChainStep *step : terms) {
        auto termType = cast<RankedTensorType>(step->term.getType());
        // A term of rank <= 2 broadcasts over every batch axis.
        SmallVector<int64_t> batch =
            termType.getRank() > 2 ? batchOf(termType) : SmallVector<int64_t>();
        auto regrouped = regroupBatch(batch, views[step->view], to);
        if (!regrouped) {
          termsFit = false;
          break;
        }
        termBatches.push_back(*regrouped);
      }
      auto qk = broadcastShapes(*q, *k);
      auto qkv = qk ? broadcastShapes(*qk, *v) : std::nullopt;
      if (!termsFit || !qkv || ArrayRef<int64_t>(*qkv) != to)
        continue;
      chosen = candidate;
      queryBatch = *q;
      keyBatch = *k;
      valueBatch = *v;
      break;
    }
    if (!chosen)
      return rewriter.notifyMatchFailure(softmax, "no common batch view");

    // Build the attention in the chosen view.
    rewriter.setInsertionPoint(output);
    SmallVector<Location> locations = {scores.getLoc()};
    for (const ChainStep &step : steps)
      locations.push_back(step.op->getLoc());
    locations.append({softmax.getLoc(), output.getLoc()});
    Location loc = rewriter.getFusedLoc(locations);
    auto reshapeTo = [&](Value operand, RankedTensorType type) -> Value {
      if (operand.getType() == type)
        return operand;
      return rewriter.createOrFold<ReshapeOp>(loc, type, operand);
    };
    // An operand whose batch axes only lack leading 1s broadcasts as it is.
    auto regroup = [&](Value operand, ArrayRef<int64_t> batch) -> Value {
      auto type = cast<RankedTensorType>(operand.getType());
      ArrayRef<int64_t> own = type.getShape().drop_back(2);
      if (own.size() <= batch.size() && batch.take_back(own.size()) == own &&
          llvm::all_of(batch.drop_back(own.size()),
                       [](int64_t d) { return d == 1; }))
        return operand;
      return reshapeTo(operand, withBatch(type, batch));
    };
    Type elementType = probsType.getElementType();
    Value bias;
    for (auto [step, batch] : llvm::zip_equal(terms, termBatches)) {
      Value term = step->term;
      if (step->kind == ChainStep::Kind::Where) {
        auto scalar = RankedTensorType::get({}, elementType);
        Value zero = ConstantOp::create(
            rewriter, loc,
            DenseElementsAttr::get(scalar,
                                   rewriter.getFloatAttr(elementType, 0.0)));
        term =
            step->fillWhenTrue
                ? rewriter.createOrFold<WhereOp>(loc, term, step->fill, zero)
                : rewriter.createOrFold<WhereOp>(loc, term, zero, step->fill);
      }
      if (cast<RankedTensorType>(term.getType()).getRank() > 2)
        term = regroup(term, batch);
      bias = bias ? rewriter.createOrFold<AddOp>(loc, bias, term) : term;
    }
    Value q = regroup(query, queryBatch);
    if (keyView)
      key = reshapeTo(key, keyView);
    Value k = regroup(key, keyBatch);
    Value v = regroup(value, valueBatch);
    auto attention = AttentionOp::create(
        rewriter, loc, q, k, v, bias, rewriter.getF32FloatAttr(scale),
        rewriter.getBoolAttr(causal), rewriter.getBoolAttr(keyTransposed),
        rewriter.getBoolAttr(safe.has_value()),
        /*return_lse=*/rewriter.getBoolAttr(false));
    Value result =
        reshapeTo(attention.getY(), cast<RankedTensorType>(output.getType()));

    ++statistics.fused;
    statistics.causal += causal;
    statistics.safe += safe.has_value();
    statistics.scoreBytes += 2 * getTensorBytes(probsType);
    // The chain dies with the output MatMul; erase it back to front so that
    // every op is unused when it goes.
    rewriter.replaceOp(output, result);
    if (safe) {
      rewriter.eraseOp(safe->where);
      rewriter.eraseOp(safe->isNaN);
    }
    rewriter.eraseOp(softmax);
    for (const ChainStep &step : llvm::reverse(steps))
      rewriter.eraseOp(step.op);
    rewriter.eraseOp(scores);
    for (Operation *op : absorbed)
      rewriter.eraseOp(op);
    return success();
  }

  int64_t maxHeadSize;
  FusionStatistics &statistics;
};

struct MemOptFuseAttentionPass
    : public mlir::memopt::impl::MemOptFuseAttentionBase<
          MemOptFuseAttentionPass> {
  using MemOptFuseAttentionBase::MemOptFuseAttentionBase;

  void runOnOperation() override {
    FusionStatistics fusion;
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseAttentionPattern>(&getContext(), maxHeadSize, fusion);
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      return signalPassFailure();
    if (report)
      llvm::outs() << "memopt-fuse-attention @" << getOperation().getSymName()
                   << ": " << fusion.fused << " attentions fused ("
                   << fusion.causal << " causal, " << fusion.safe
                   << " safe softmax), " << fusion.scoreBytes
                   << " bytes of scores and probabilities removed\n";
  }
};

} // namespace
