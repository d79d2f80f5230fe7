//===- FuseAttention.cpp - MatMul/Softmax/MatMul -> memopt.attention ------===//
//
// One rewrite pattern, rooted at the softmax, matching attention by what
// each op does to the scores rather than by one exporter's spelling. Between
// MatMul(Q, K^T) and the softmax, every value has exactly one use and each
// op is a step:
// - a scale: Mul / Div by a one-element factor computed from constants
//   (`sqrt(d)` and `Pow(d, -0.25)` are evaluated, not only folded
//   constants), before or after the MatMul, on the scores or on Q and K
//   separately (the sqrt-split scale of torch's SDPA export), before or after
//   a bias (a scale after a term scales that term);
// - a term: Add of anything (a mask, ALiBi, a relative-position bias,
//   DeBERTa's position scores), or Where(mask, fill, scores) /
//   Where(mask, scores, fill) with a masking fill (-inf or below -1e30);
// - a view: a Reshape that regroups the batch axes and keeps the last two
//   (BLOOM's [B*H, S, S] scores viewed as [B, H, S, S], swin's 5-D window
//   view);
// - a float Cast (softmax in f32 over f16 / bf16 scores).
// After the softmax: PyTorch's safe softmax `Where(IsNaN(P), 0, P)`, float
// Casts back to the operands' type, batch views and one training dropout of
// the probabilities (memopt.dropout with its key: its ratio, stream and key
// become the op's `dropout_*`; the mask is memopt's Philox mask of the
// probabilities' row-major index, which no view or cast changes, so the
// fused op draws the unfused graph's mask exactly), then MatMul(P, V). A
// keyless or ratio-0 dropout (inference) is the identity and goes.
// K^T may be a transpose of K (its operand becomes K), the dynamo SDPA's
// Reshape-Transpose-Reshape, or anything else (`key_transposed`); an
// exporter's K^T = Transpose(K_bshd, perm [0, 2, 3, 1]) becomes the same
// transpose with its last two axes swapped (K as [Sk, D], what cuDNN's SDPA
// reads: no per-call transpose of K and dK at run time). K and V
// repeated for grouped-query attention (Expand of a size-1 axis, then a
// Reshape merging it into the heads) are taken before the repeat, broadcast
// in the [B, Hkv, n] view of the heads.
//
// Terms are additive. A Where term becomes `Where(mask, fill, 0)`, the same
// after the softmax because the fill swallows any finite score and has
// weight exactly 0. A term computed from constants alone (a constant, or a
// mask built by ops that no folder reduced: transformers' Range /
// LessOrEqual / Expand at long sequences) is classified by value
// (AttentionMasks.cpp, RowEvaluator.cpp): exactly top-left causal in every
// batch entry becomes `causal = true` (no bias tensor; its ops die and are
// erased), one that masks nothing is dropped, any other (a sliding window, a
// padding mask, a bias) is summed into the `bias` operand, which broadcasts
// over batch and heads. Terms added in different views are moved into one
// view by regrouping their batch axes, and the attention runs in that view,
// its operands and result reshaped (views).
// A fused attention's mask is classified for the report (none, causal,
// padding, causal + padding, sliding window, arbitrary); a softmax that did
// not fuse is matched again to name the node that broke the pattern.
//
// Taken from: onnxruntime's attention fusions (attention_fusion.cc and the
// transformers optimizer's fusion_attention.py match the exporters'
// Q/K/V MatMul-Softmax-MatMul chains with masks and scales into Attention /
// MultiHeadAttention), XLA's cuDNN fused-MHA rewriter (scale, bias and mask
// pulled into the fused call, the causal mask recognised from its pattern),
// torch inductor's SDPA pattern matcher (one pattern per spelling of
// `_sfdp_pattern_N`: scale by mul or div, before or after the MatMul, with
// or without a mask and dropout), TensorRT's MHA fusion. The dropout inside
// the fused op is FlashAttention's and PyTorch SDPA's (flash and
// memory-efficient kernels regenerate a Philox mask per element in the
// backward from (seed, offset) instead of saving it); here the mask is
// memopt.dropout's own, keyed per op stream, so the fused program equals the
// unfused one up to rounding.
// Further: onnxruntime and inductor enumerate spellings (one pattern per
// exporter form, masks recognised by the ops that built them); here each op
// is judged by its effect on the scores, so the steps compose in any order
// and number, masks are judged by value whichever ops built them (folded or
// not), scalar factors are evaluated through their arithmetic, batch views
// and GQA repeats are regrouped instead of matched, an arbitrary mask or
// score bias (ALiBi, disentangled attention) becomes an operand, and every
// softmax that does not fuse is reported with the node that broke it.
//
//===----------------------------------------------------------------------===//

#include "AttentionMasks.h"

#include "memopt/Analysis/MemoryReport.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/IR/ShapeUtils.h"
#include "memopt/Dialect/MemOpt/Transforms/AttentionFusion.h"
#include "memopt/Dialect/MemOpt/Transforms/Passes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/Sequence.h"

#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>

namespace mlir::memopt {
#define GEN_PASS_DEF_MEMOPTFUSEATTENTION
#include "memopt/Dialect/MemOpt/Transforms/Passes.h.inc"
} // namespace mlir::memopt

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::attention;

namespace {

/// Longest score chain (steps between the two MatMuls) that is searched.
constexpr unsigned kMaxChainLength = 16;

/// Longest run of casts and views between the softmax and MatMul(P, V).
constexpr unsigned kMaxProbabilitySteps = 8;

std::string describeOp(Operation *op) {
  return op->getName().getStringRef().str() + " '" + getOpName(op) + "'";
}

/// Why a softmax did not fuse: the op at which the pattern broke and why.
/// Failures in the score walk keep the deepest one (the walk backtracks over
/// operand orders; the deepest attempt got furthest).
struct Diagnosis {
  std::string reason;
  Operation *at = nullptr;
  int depth = -1;

  void note(unsigned atDepth, Operation *op, const Twine &why) {
    if (int(atDepth) < depth)
      return;
    depth = atDepth;
    at = op;
    reason = why.str();
  }
  void fail(Operation *op, const Twine &why) {
    depth = 1 << 20;
    at = op;
    reason = why.str();
  }
};

/// One op between MatMul(Q, K^T) and the softmax.
struct ChainStep {
  enum class Kind { Scale, Add, Where, Reshape, Cast };
  ChainStep(Kind kind, Operation *op) : kind(kind), op(op) {}
  Kind kind;
  Operation *op;
  /// Scale: the factor the scores are multiplied by.
  double factor = 1.0;
  /// Add: the added operand. Where: the condition.
  Value term;
  /// Where: the scalar fill and its value, taken where the condition is
  /// `fillWhenTrue`.
  Value fill;
  double fillValue = 0;
  bool fillWhenTrue = true;
};

bool isFloatCast(Operation *op) {
  auto cast = dyn_cast<CastOp>(op);
  return cast && isa<FloatType>(getElementTypeOrSelf(cast.getInput())) &&
         isa<FloatType>(getElementTypeOrSelf(cast.getOutput()));
}

/// Whether `reshape` keeps the last two axes (a view of the batch axes).
bool keepsLastTwoAxes(ReshapeOp reshape) {
  auto input = cast<RankedTensorType>(reshape.getData().getType());
  auto result = cast<RankedTensorType>(reshape.getType());
  return input.getRank() >= 2 && result.getRank() >= 2 &&
         input.getShape().take_back(2) == result.getShape().take_back(2);
}

/// Walks from `value` back to the MatMul that computes the scores, pushing
/// the steps met on the way (the last applied first). Every value on the
/// chain must have exactly one use.
LogicalResult walkScores(Value value, SmallVectorImpl<ChainStep> &steps,
                         MatMulOp &scores, unsigned depth,
                         Diagnosis &diagnosis) {
  Operation *op = value.getDefiningOp();
  if (!op) {
    diagnosis.note(depth, nullptr,
                   "the scores come from a function argument, not from "
                   "MatMul(Q, K^T)");
    return failure();
  }
  if (depth > kMaxChainLength) {
    diagnosis.note(depth, op, "more than 16 steps from MatMul(Q, K^T)");
    return failure();
  }
  if (!value.hasOneUse()) {
    diagnosis.note(
        depth, op,
        "its result is used " +
            Twine(std::distance(value.use_begin(), value.use_end())) +
            " times (the scores are needed besides the softmax)");
    return failure();
  }
  if (auto matmul = dyn_cast<MatMulOp>(op)) {
    scores = matmul;
    return success();
  }
  auto type = cast<RankedTensorType>(value.getType());
  // Tries `chain` as the scores operand with `step` describing the op.
  auto tryChain = [&](Value chain, ChainStep step) {
    auto chainType = cast<RankedTensorType>(chain.getType());
    if (chainType.getShape() != type.getShape() ||
        (step.kind != ChainStep::Kind::Cast &&
         chainType.getElementType() != type.getElementType()))
      return failure();
    size_t mark = steps.size();
    steps.push_back(step);
    if (succeeded(walkScores(chain, steps, scores, depth + 1, diagnosis)))
      return success();
    steps.truncate(mark);
    return failure();
  };

  if (auto reshape = dyn_cast<ReshapeOp>(op)) {
    if (!keepsLastTwoAxes(reshape)) {
      diagnosis.note(depth, op, "the reshape changes the last two axes");
      return failure();
    }
    size_t mark = steps.size();
    steps.push_back({ChainStep::Kind::Reshape, op});
    if (succeeded(
            walkScores(reshape.getData(), steps, scores, depth + 1, diagnosis)))
      return success();
    steps.truncate(mark);
    return failure();
  }
  if (isFloatCast(op))
    return tryChain(op->getOperand(0), {ChainStep::Kind::Cast, op});
  if (isa<MulOp, DivOp>(op)) {
    bool isDiv = isa<DivOp>(op);
    Value lhs = op->getOperand(0), rhs = op->getOperand(1);
    std::pair<Value, Value> orders[] = {{lhs, rhs}, {rhs, lhs}};
    bool scalarSeen = false;
    for (auto [chain, constant] : orders) {
      if (isDiv && chain != lhs)
        continue;
      std::optional<double> value = evaluateScalar(constant);
      if (!value)
        continue;
      scalarSeen = true;
      double factor = isDiv ? 1.0 / *value : *value;
      if (!std::isfinite(factor) || factor == 0)
        continue;
      ChainStep step{ChainStep::Kind::Scale, op};
      step.factor = factor;
      if (succeeded(tryChain(chain, step)))
        return success();
    }
    if (!scalarSeen)
      diagnosis.note(depth, op,
                     "scales the scores by a factor that is not a "
                     "one-element value computed from constants");
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
    bool fillSeen = false;
    for (const Order &order : orders) {
      std::optional<double> fill = evaluateScalar(order.fill);
      if (!fill || !isMaskingValue(*fill))
        continue;
      fillSeen = true;
      ChainStep step{ChainStep::Kind::Where, op};
      step.term = where.getCondition();
      step.fill = order.fill;
      step.fillValue = *fill;
      step.fillWhenTrue = order.fillWhenTrue;
      if (succeeded(tryChain(order.chain, step)))
        return success();
    }
    if (!fillSeen)
      diagnosis.note(depth, op,
                     "its fill is not a masking constant (-inf or at most "
                     "-1e30)");
    return failure();
  }
  diagnosis.note(depth, op,
                 "not a step between MatMul(Q, K^T) and the softmax (a scale, "
                 "a mask or bias term, a batch view or a float cast)");
  return failure();
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

/// A K or V repeated for grouped-query attention: `[Reshape](Expand(x))`
/// where the Expand only broadcasts batch axes of size 1 and the Reshape
/// keeps the last two axes. The attention can read `x` itself, broadcast in
/// the Expand's batch view (`[B, Hkv, n]`): the repeat is never stored.
struct Repeat {
  Value source;
  SmallVector<int64_t> view;
};

std::optional<Repeat> matchRepeat(Value operand) {
  Value value = operand;
  if (auto reshape = value.getDefiningOp<ReshapeOp>()) {
    if (!keepsLastTwoAxes(reshape))
      return std::nullopt;
    value = reshape.getData();
  }
  auto expand = value.getDefiningOp<ExpandOp>();
  if (!expand)
    return std::nullopt;
  auto input = cast<RankedTensorType>(expand.getInput().getType());
  auto result = cast<RankedTensorType>(expand.getType());
  if (input.getRank() != result.getRank() || input.getRank() < 3 ||
      input.getShape().take_back(2) != result.getShape().take_back(2))
    return std::nullopt;
  return Repeat{expand.getInput(), batchOf(result)};
}

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
  std::optional<double> fill = evaluateScalar(where.getX());
  if (!fill || *fill != 0.0)
    return std::nullopt;
  return SafeSoftmax{isNaN, where};
}

/// Q, K or V as the attention reads it: `value`, seen as `viewType` (a
/// reshape of it) in batch view `view`; `batch` is its batch in the chosen
/// view.
struct Operand {
  Value value;
  RankedTensorType viewType;
  unsigned view = 0;
  SmallVector<int64_t> batch;
};

/// An additive term of the scores: step `step` (Add or Where), scaled by
/// `factor` (scales applied after it), added in batch view `view`.
struct Term {
  unsigned step;
  double factor = 1.0;
  unsigned view = 0;
  SmallVector<int64_t> batch;
};

/// Everything the rewrite needs, found without changing the IR.
struct AttentionMatch {
  SoftmaxOp softmax;
  MatMulOp scores, output;
  std::optional<SafeSoftmax> safe;
  /// The training dropout of the probabilities (keyed, ratio > 0), if any;
  /// it is also in probabilitySteps, as are inference dropouts.
  DropoutOp dropout;
  /// Scores side, program order.
  SmallVector<ChainStep> steps;
  /// Casts, views and dropouts between the softmax (or its safe form) and
  /// MatMul(P, V), program order.
  SmallVector<Operation *> probabilitySteps;
  /// Batch views: the scores' own, one per view step, one per view after the
  /// softmax, one per GQA repeat.
  SmallVector<SmallVector<int64_t>> views;
  unsigned chosenView = 0;
  double scale = 1.0;
  bool causal = false;
  bool keyTransposed = true;
  Operand query, key, value;
  SmallVector<Term> terms;
  /// Ops on Q and K^T that the attention replaces (scales, transposes).
  SmallVector<Operation *> absorbed;
};

/// Tries every candidate view (the softmax's first, then MatMul(P, V)'s,
/// then the rest) for one that Q, K, V and every term can be regrouped into;
/// fills in the batches.
bool chooseView(AttentionMatch &match, unsigned softmaxView,
                unsigned outputView) {
  SmallVector<unsigned> candidates = {softmaxView};
  if (outputView != softmaxView)
    candidates.push_back(outputView);
  for (unsigned view = 0; view < match.views.size(); ++view)
    if (view != softmaxView && view != outputView)
      candidates.push_back(view);
  for (unsigned candidate : candidates) {
    ArrayRef<int64_t> to = match.views[candidate];
    bool fits = true;
    for (Operand *operand : {&match.query, &match.key, &match.value}) {
      auto batch = regroupBatch(batchOf(operand->viewType),
                                match.views[operand->view], to);
      fits &= batch.has_value();
      if (!fits)
        break;
      operand->batch = *batch;
    }
    for (Term &term : match.terms) {
      if (!fits)
        break;
      auto termType =
          cast<RankedTensorType>(match.steps[term.step].term.getType());
      // A term of rank <= 2 broadcasts over every batch axis.
      SmallVector<int64_t> batch =
          termType.getRank() > 2 ? batchOf(termType) : SmallVector<int64_t>();
      auto regrouped = regroupBatch(batch, match.views[term.view], to);
      fits &= regrouped.has_value();
      if (fits)
        term.batch = *regrouped;
    }
    if (!fits)
      continue;
    auto qk = broadcastShapes(match.query.batch, match.key.batch);
    auto qkv = qk ? broadcastShapes(*qk, match.value.batch) : std::nullopt;
    if (!qkv || ArrayRef<int64_t>(*qkv) != to)
      continue;
    match.chosenView = candidate;
    return true;
  }
  return false;
}

/// Matches the attention rooted at `softmax`; on failure, `diagnosis` says
/// where the pattern broke.
std::optional<AttentionMatch> matchAttention(SoftmaxOp softmax,
                                             int64_t maxHeadSize,
                                             MaskClassifier &classifier,
                                             Diagnosis &diagnosis) {
  AttentionMatch match;
  match.softmax = softmax;
  auto probsType = cast<RankedTensorType>(softmax.getType());
  int64_t rank = probsType.getRank();
  if (rank < 2 || normalizeAxis(softmax.getAxis(), rank) != rank - 1) {
    diagnosis.fail(softmax, "the softmax is not over the last axis");
    return std::nullopt;
  }

  // After the softmax: safe softmax, casts, views, then MatMul(P, V).
  Value probs = softmax.getResult();
  SmallVector<SmallVector<int64_t>> probabilityViews;
  Operation *user = nullptr;
  for (unsigned step = 0;; ++step) {
    if (!match.safe) {
      if ((match.safe = matchSafeSoftmax(probs))) {
        probs = match.safe->where.getResult();
        continue;
      }
    }
    if (!probs.hasOneUse()) {
      // Name a user that is not the attention's own next step.
      Operation *other = nullptr;
      for (Operation *candidate : probs.getUsers()) {
        auto matmul = dyn_cast<MatMulOp>(candidate);
        bool onChain = isa<IsNaNOp, WhereOp>(candidate) ||
                       (matmul && matmul.getA() == probs);
        if (!other || !onChain)
          other = candidate;
        if (!onChain)
          break;
      }
      diagnosis.fail(
          other ? other : probs.getDefiningOp(),
          "the probabilities are used " +
              Twine(std::distance(probs.use_begin(), probs.use_end())) +
              " times (they are needed besides MatMul(P, V))");
      return std::nullopt;
    }
    user = *probs.getUsers().begin();
    if (step >= kMaxProbabilitySteps)
      break;
    if (auto reshape = dyn_cast<ReshapeOp>(user);
        reshape && keepsLastTwoAxes(reshape)) {
      match.probabilitySteps.push_back(user);
      probabilityViews.push_back(batchOf(reshape.getType()));
      probs = reshape.getResult();
      continue;
    }
    if (isFloatCast(user)) {
      match.probabilitySteps.push_back(user);
      probs = user->getResult(0);
      continue;
    }
    if (auto drop = dyn_cast<DropoutOp>(user)) {
      // Elementwise on the probabilities (same shape, same row-major order
      // as every view of them): the op draws the same mask. One keyed
      // dropout; a keyless or ratio-0 one is the identity.
      bool keyed = drop.getKey() && !drop.getRatio().isZero();
      if (keyed && match.dropout) {
        diagnosis.fail(user, "a second dropout of the probabilities (the "
                             "fused op applies one mask)");
        return std::nullopt;
      }
      if (keyed)
        match.dropout = drop;
      match.probabilitySteps.push_back(user);
      probs = drop.getY();
      continue;
    }
    break;
  }
  match.output = dyn_cast<MatMulOp>(user);
  if (!match.output || match.output.getA() != probs ||
      match.output.getB() == probs) {
    diagnosis.fail(user, "the probabilities go to it, not to MatMul(P, V)");
    return std::nullopt;
  }
  Value valueOperand = match.output.getB();
  if (cast<RankedTensorType>(valueOperand.getType()).getRank() < 2 ||
      batchOf(match.output.getType()) != batchOf(probs.getType())) {
    diagnosis.fail(match.output, "V is 1-D or widens the batch of P");
    return std::nullopt;
  }

  // Before the softmax: the steps back to MatMul(Q, K^T).
  if (failed(walkScores(softmax.getInput(), match.steps, match.scores, 0,
                        diagnosis))) {
    if (!diagnosis.at)
      diagnosis.at = softmax;
    return std::nullopt;
  }
  std::reverse(match.steps.begin(), match.steps.end()); // program order

  // Views, scale and terms in program order: a scale after a term scales it.
  match.views = {batchOf(match.scores.getType())};
  for (auto [index, step] : llvm::enumerate(match.steps)) {
    switch (step.kind) {
    case ChainStep::Kind::Reshape:
      match.views.push_back(batchOf(step.op->getResult(0).getType()));
      break;
    case ChainStep::Kind::Cast:
      break;
    case ChainStep::Kind::Scale:
      // (s + b) c = c s + c b.
      match.scale *= step.factor;
      for (Term &term : match.terms)
        term.factor *= step.factor;
      break;
    case ChainStep::Kind::Add:
    case ChainStep::Kind::Where:
      match.terms.push_back(
          {unsigned(index), 1.0, unsigned(match.views.size() - 1), {}});
      break;
    }
  }
  unsigned softmaxView = match.views.size() - 1;
  for (SmallVector<int64_t> &view : probabilityViews)
    match.views.push_back(view);
  unsigned outputView = match.views.size() - 1;
  for (const Term &term : match.terms) {
    const ChainStep &step = match.steps[term.step];
    if (step.kind == ChainStep::Kind::Where &&
        (term.factor <= 0 || !isMaskingValue(step.fillValue * term.factor))) {
      diagnosis.fail(step.op, "a scale after this mask makes its fill stop "
                              "masking (above -1e30)");
      return std::nullopt;
    }
  }

  // Scalar factors on Q or K before the first MatMul join the scale.
  auto absorbScale = [&](Value operand) {
    while (operand.hasOneUse()) {
      Operation *op = operand.getDefiningOp();
      if (!op || !isa<MulOp, DivOp>(op))
        break;
      bool isDiv = isa<DivOp>(op);
      Value lhs = op->getOperand(0), rhs = op->getOperand(1);
      std::optional<double> factor;
      Value next;
      if (auto constant = evaluateScalar(rhs);
          constant && lhs.getType() == operand.getType()) {
        factor = isDiv ? 1.0 / *constant : *constant;
        next = lhs;
      } else if (auto constant = evaluateScalar(lhs);
                 !isDiv && constant && rhs.getType() == operand.getType()) {
        factor = *constant;
        next = rhs;
      }
      if (!factor || !std::isfinite(*factor) || *factor == 0)
        break;
      match.scale *= *factor;
      match.absorbed.push_back(op);
      operand = next;
    }
    return operand;
  };
  Value query = absorbScale(match.scores.getA());
  Value key = absorbScale(match.scores.getB());
  if (!std::isfinite(match.scale) || match.scale == 0) {
    diagnosis.fail(match.scores, "the scale is not finite and non-zero");
    return std::nullopt;
  }
  auto queryType = cast<RankedTensorType>(query.getType());
  auto valueType = cast<RankedTensorType>(valueOperand.getType());
  Type elementType = queryType.getElementType();
  if (queryType.getRank() < 2 ||
      cast<RankedTensorType>(key.getType()).getRank() < 2) {
    diagnosis.fail(match.scores, "Q or K^T is 1-D");
    return std::nullopt;
  }
  if (getElementTypeOrSelf(key.getType()) != elementType ||
      valueType.getElementType() != elementType ||
      getElementTypeOrSelf(match.output.getType()) != elementType ||
      !isa<FloatType>(elementType)) {
    diagnosis.fail(match.output, "Q, K, V and the result differ in element "
                                 "type");
    return std::nullopt;
  }
  if (queryType.getShape().back() > maxHeadSize ||
      valueType.getShape().back() > maxHeadSize) {
    diagnosis.fail(match.scores,
                   "head size " +
                       Twine(std::max(queryType.getShape().back(),
                                      valueType.getShape().back())) +
                       " is above max-head-size " + Twine(maxHeadSize));
    return std::nullopt;
  }

  // K^T = Transpose(K) over the last two axes: use K itself (through a
  // view with K^T's batch axes, `keyView`, when they differ).
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
      match.absorbed.push_back(transpose);
      key = transpose.getData();
      match.keyTransposed = false;
    }
  } else if (std::optional<SmallVector<Operation *>> flatViews =
                 matchFlatKeyTranspose(key)) {
    // onnxscript's K^T: Reshape(Transpose(Reshape(K, [-1, Sk, D]),
    // [0, 2, 1]), [..., D, Sk]) with K's own batch axes.
    match.absorbed.append(flatViews->begin(), flatViews->end());
    key = flatViews->back()->getOperand(0);
    match.keyTransposed = false;
    keyView = withBatch(key.getType(),
                        batchOf(flatViews->front()->getResult(0).getType()));
  }

  // Terms computed from constants, by value: causal, nothing, or a bias
  // like any other.
  int64_t queries = probsType.getDimSize(rank - 2);
  int64_t keys = probsType.getDimSize(rank - 1);
  SmallVector<Term> kept;
  for (const Term &term : match.terms) {
    const ChainStep &step = match.steps[term.step];
    std::optional<MaskPattern> pattern =
        step.kind == ChainStep::Kind::Where
            ? classifier.classify(step.term, queries, keys,
                                  step.fillWhenTrue
                                      ? MaskReading::MaskWhenTrue
                                      : MaskReading::MaskWhenFalse)
            : classifier.classify(step.term, queries, keys,
                                  MaskReading::Additive, term.factor);
    if (pattern == MaskPattern::Causal)
      match.causal = true;
    else if (pattern != MaskPattern::Nothing)
      kept.push_back(term);
  }
  match.terms = std::move(kept);

  // Q, K, V in their views; GQA's repeated K and V are read before the
  // repeat where some view takes them (else as they are).
  match.query = {query, queryType, 0, {}};
  Operand plainKey = {
      key, keyView ? keyView : cast<RankedTensorType>(key.getType()), 0, {}};
  Operand plainValue = {valueOperand, valueType, outputView, {}};
  std::optional<Repeat> keyRepeat =
      match.keyTransposed ? std::nullopt : matchRepeat(key);
  std::optional<Repeat> valueRepeat = matchRepeat(valueOperand);
  if (keyRepeat || valueRepeat) {
    size_t viewCount = match.views.size();
    match.key = plainKey;
    match.value = plainValue;
    if (keyRepeat) {
      match.views.push_back(keyRepeat->view);
      match.key = {keyRepeat->source,
                   cast<RankedTensorType>(keyRepeat->source.getType()),
                   unsigned(match.views.size() - 1),
                   {}};
    }
    if (valueRepeat) {
      match.views.push_back(valueRepeat->view);
      match.value = {valueRepeat->source,
                     cast<RankedTensorType>(valueRepeat->source.getType()),
                     unsigned(match.views.size() - 1),
                     {}};
    }
    if (chooseView(match, softmaxView, outputView))
      return match;
    match.views.truncate(viewCount);
  }
  match.key = plainKey;
  match.value = plainValue;
  if (!chooseView(match, softmaxView, outputView)) {
    diagnosis.fail(softmax, "no batch view in which Q, K, V and every mask "
                            "or bias term can be regrouped");
    return std::nullopt;
  }
  return match;
}

/// A scalar constant of `type`.
Value createScalar(PatternRewriter &rewriter, Location loc, Type type,
                   double value) {
  auto scalar = RankedTensorType::get({}, type);
  return ConstantOp::create(
      rewriter, loc,
      DenseElementsAttr::get(scalar, rewriter.getFloatAttr(type, value)));
}

/// Replaces the matched ops by one memopt.attention.
void buildAttention(AttentionMatch &match, PatternRewriter &rewriter) {
  rewriter.setInsertionPoint(match.output);
  // The scores MatMul first (it names the op), the softmax last (it names
  // the attention site in the report).
  SmallVector<Location> locations = {match.scores.getLoc()};
  for (const ChainStep &step : match.steps)
    locations.push_back(step.op->getLoc());
  for (Operation *op : match.probabilitySteps)
    locations.push_back(op->getLoc());
  locations.append({match.output.getLoc(), match.softmax.getLoc()});
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
  auto place = [&](const Operand &operand) {
    return regroup(reshapeTo(operand.value, operand.viewType), operand.batch);
  };

  Type elementType = getElementTypeOrSelf(match.query.value.getType());
  Value bias;
  for (const Term &term : match.terms) {
    const ChainStep &step = match.steps[term.step];
    Value value = step.term;
    if (step.kind == ChainStep::Kind::Where) {
      Value zero = createScalar(rewriter, loc, elementType, 0.0);
      Value fill = step.fill;
      if (term.factor != 1.0 ||
          getElementTypeOrSelf(fill.getType()) != elementType ||
          cast<RankedTensorType>(fill.getType()).getRank() != 0) {
        // A finite fill stays finite in a narrower type (finfo.min of f32
        // becomes f16's lowest, not -inf), so a fully masked row is still
        // uniform as in the unfused graph.
        double fillValue = step.fillValue * term.factor;
        APFloat lowest = APFloat::getLargest(
            cast<FloatType>(elementType).getFloatSemantics(),
            /*Negative=*/true);
        bool losesInfo = false;
        lowest.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven,
                       &losesInfo);
        if (std::isfinite(fillValue))
          fillValue = std::max(fillValue, lowest.convertToDouble());
        fill = createScalar(rewriter, loc, elementType, fillValue);
      }
      value = step.fillWhenTrue
                  ? rewriter.createOrFold<WhereOp>(loc, value, fill, zero)
                  : rewriter.createOrFold<WhereOp>(loc, value, zero, fill);
    } else {
      Type termElement = getElementTypeOrSelf(value.getType());
      if (term.factor != 1.0)
        value = rewriter.createOrFold<MulOp>(
            loc, value, createScalar(rewriter, loc, termElement, term.factor));
      if (termElement != elementType)
        value = rewriter.createOrFold<CastOp>(
            loc,
            RankedTensorType::get(
                cast<RankedTensorType>(value.getType()).getShape(),
                elementType),
            value);
    }
    if (cast<RankedTensorType>(value.getType()).getRank() > 2)
      value = regroup(value, term.batch);
    bias = bias ? rewriter.createOrFold<AddOp>(loc, bias, value) : value;
  }
  // The dropout's key, ratio and stream: the op draws its mask.
  Value dropoutKey;
  FloatAttr dropoutRatio = rewriter.getF32FloatAttr(0.0f);
  IntegerAttr dropoutStream = rewriter.getI64IntegerAttr(0);
  if (match.dropout) {
    dropoutKey = match.dropout.getKey();
    dropoutRatio = match.dropout.getRatioAttr();
    dropoutStream = match.dropout.getStreamAttr();
  }
  auto attention = AttentionOp::create(
      rewriter, loc, place(match.query), place(match.key), place(match.value),
      bias, dropoutKey, rewriter.getF32FloatAttr(match.scale),
      rewriter.getBoolAttr(match.causal),
      rewriter.getBoolAttr(match.keyTransposed),
      rewriter.getBoolAttr(match.safe.has_value()),
      /*return_lse=*/rewriter.getBoolAttr(false), dropoutRatio, dropoutStream,
      /*dropout_cudnn_rng=*/UnitAttr());
  Value result = reshapeTo(attention.getY(),
                           cast<RankedTensorType>(match.output.getType()));

  // The chain dies with the output MatMul; erase it back to front so that
  // every op is unused when it goes.
  rewriter.replaceOp(match.output, result);
  for (Operation *op : llvm::reverse(match.probabilitySteps))
    rewriter.eraseOp(op);
  if (match.safe) {
    rewriter.eraseOp(match.safe->where);
    rewriter.eraseOp(match.safe->isNaN);
  }
  rewriter.eraseOp(match.softmax);
  for (const ChainStep &step : llvm::reverse(match.steps))
    rewriter.eraseOp(step.op);
  rewriter.eraseOp(match.scores);
  for (Operation *op : match.absorbed)
    rewriter.eraseOp(op);
}

struct FusionStatistics {
  int64_t fused = 0, causal = 0, safe = 0, dropout = 0, scoreBytes = 0;
};

struct FuseAttentionPattern : public OpRewritePattern<SoftmaxOp> {
  FuseAttentionPattern(MLIRContext *context, int64_t maxHeadSize,
                       MaskClassifier &classifier, FusionStatistics &statistics)
      : OpRewritePattern(context), maxHeadSize(maxHeadSize),
        classifier(classifier), statistics(statistics) {}

  LogicalResult matchAndRewrite(SoftmaxOp softmax,
                                PatternRewriter &rewriter) const override {
    Diagnosis diagnosis;
    std::optional<AttentionMatch> match =
        matchAttention(softmax, maxHeadSize, classifier, diagnosis);
    if (!match)
      return rewriter.notifyMatchFailure(softmax, diagnosis.reason);
    ++statistics.fused;
    statistics.causal += match->causal;
    statistics.safe += match->safe.has_value();
    statistics.dropout += bool(match->dropout);
    statistics.scoreBytes += 2 * getTensorBytes(softmax.getType());
    buildAttention(*match, rewriter);
    return success();
  }

  int64_t maxHeadSize;
  MaskClassifier &classifier;
  FusionStatistics &statistics;
};

/// Drops what the classifier knows of erased ops: a new op may take the
/// address of one (the rewrite erases the mask terms it absorbs).
struct ForgetErasedOps : public RewriterBase::Listener {
  explicit ForgetErasedOps(MaskClassifier &classifier)
      : classifier(classifier) {}
  void notifyOperationErased(Operation *op) override { classifier.forget(op); }
  MaskClassifier &classifier;
};

//===----------------------------------------------------------------------===//
// The report
//===----------------------------------------------------------------------===//

/// The name of a location: its NameLoc, else `line:column`.
std::string locationName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location inner : fused.getLocations())
      if (isa<NameLoc>(inner))
        return locationName(inner);
    if (!fused.getLocations().empty())
      return locationName(fused.getLocations().front());
  }
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return "line " + std::to_string(file.getLine());
  return "?";
}

/// The site an attention came from: the softmax's location, which the
/// fusion puts last.
std::string attentionSiteName(AttentionOp attention) {
  if (auto fused = dyn_cast<FusedLoc>(attention.getLoc()))
    return locationName(fused.getLocations().back());
  return locationName(attention.getLoc());
}

/// Whether `value` is computed from a MatMul through at most `depth` ops
/// that keep its last two axes (scores, however they were reached).
bool reachesMatMul(Value value, unsigned depth) {
  Operation *op = value.getDefiningOp();
  if (!op || depth > kMaxChainLength)
    return false;
  if (isa<MatMulOp>(op))
    return true;
  if (isa<ConstantOp>(op))
    return false;
  auto type = cast<RankedTensorType>(value.getType());
  for (Value operand : op->getOperands()) {
    auto operandType = dyn_cast<RankedTensorType>(operand.getType());
    if (operandType && operandType.getRank() >= 2 && type.getRank() >= 2 &&
        operandType.getShape().back() == type.getShape().back() &&
        reachesMatMul(operand, depth + 1))
      return true;
  }
  return false;
}

/// Whether a softmax is over attention scores: fed by a MatMul or feeding
/// one (through casts, views and the safe softmax), over whichever axis.
bool isScoresSoftmax(SoftmaxOp softmax) {
  if (cast<RankedTensorType>(softmax.getType()).getRank() < 2)
    return false;
  if (reachesMatMul(softmax.getInput(), 0))
    return true;
  SmallVector<std::pair<Value, unsigned>> worklist = {{softmax, 0}};
  while (!worklist.empty()) {
    auto [value, depth] = worklist.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (auto matmul = dyn_cast<MatMulOp>(user);
          matmul && matmul.getA() == value)
        return true;
      if (depth < 4 &&
          isa<CastOp, ReshapeOp, WhereOp, IsNaNOp, IdentityOp, DropoutOp>(user))
        worklist.push_back({user->getResult(0), depth + 1});
    }
  }
  return false;
}

std::string shapeString(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "[";
  llvm::interleave(cast<RankedTensorType>(type).getShape(), os, ", ");
  os << "]";
  return text;
}

std::string describeFused(AttentionOp attention, MaskClassifier &classifier) {
  MaskSummary mask = classifyAttentionMask(attention, classifier);
  std::string text = "fused, mask " + mask.maskClass();
  if (mask.causalInKernel)
    text += "; causal in the kernel";
  if (Value bias = attention.getBias()) {
    bool maskInBias = mask.padding || mask.otherMask || mask.slidingWindow ||
                      (mask.causal && !mask.causalInKernel);
    text += "; bias operand " + shapeString(bias.getType()) + " (";
    // Neither a mask nor a score bias was recognised in it: say where it
    // comes from.
    text += maskInBias       ? (mask.scoreBias ? "mask + score bias" : "mask")
            : mask.scoreBias ? "score bias"
            : isa_and_nonnull<ConstantOp>(bias.getDefiningOp()) ? "constant"
                                                                : "computed";
    text += ")";
  }
  if (attention.getSafeSoftmax())
    text += "; safe softmax";
  if (attention.hasDropout()) {
    char ratio[32];
    std::snprintf(ratio, sizeof(ratio), "%g",
                  double(attention.getDropoutRatio().convertToFloat()));
    text += "; dropout " + std::string(ratio) + " (stream " +
            std::to_string(attention.getDropoutStream()) + ")";
  }
  return text;
}

/// K stored [D, Sk] that an exporter's transpose produced
/// (`Transpose(K_bshd, perm [0, 2, 3, 1])`, BERT and GPT-2): the same
/// transpose with its last two axes swapped gives K as [Sk, D] (`perm
/// [0, 2, 1, 3]`), for the same bytes moved, and the attention then takes
/// `key_transposed = false`, the layout cuDNN's SDPA reads (it would
/// otherwise transpose K into its workspace first, and dK back, on every
/// call). A permutation that becomes the identity leaves K itself. Returns
/// the attentions changed.
int64_t takeKeysBeforeTranspose(func::FuncOp function) {
  int64_t changed = 0;
  function.walk([&](AttentionOp attention) {
    Value key = attention.getK();
    auto transpose = key.getDefiningOp<TransposeOp>();
    if (!attention.getKeyTransposed() || !transpose || !key.hasOneUse())
      return;
    SmallVector<int64_t> perm(transpose.getPermutation());
    size_t rank = perm.size();
    if (rank < 2)
      return;
    std::swap(perm[rank - 2], perm[rank - 1]);
    Value source = transpose.getData();
    Value plain = source;
    if (!llvm::equal(perm, llvm::seq<int64_t>(0, int64_t(rank)))) {
      auto sourceType = cast<RankedTensorType>(source.getType());
      SmallVector<int64_t> shape;
      for (int64_t axis : perm)
        shape.push_back(sourceType.getDimSize(axis));
      OpBuilder builder(transpose);
      plain = TransposeOp::create(
          builder, transpose.getLoc(),
          RankedTensorType::get(shape, sourceType.getElementType()), source,
          builder.getDenseI64ArrayAttr(perm));
    }
    attention.getKMutable().assign(plain);
    attention.setKeyTransposed(false);
    transpose.erase();
    ++changed;
  });
  return changed;
}

struct MemOptFuseAttentionPass
    : public mlir::memopt::impl::MemOptFuseAttentionBase<
          MemOptFuseAttentionPass> {
  using MemOptFuseAttentionBase::MemOptFuseAttentionBase;

  void runOnOperation() override {
    FusionStatistics fusion;
    MaskClassifier classifier;
    ForgetErasedOps forgetErased(classifier);
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseAttentionPattern>(&getContext(), maxHeadSize, classifier,
                                       fusion);
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    config.setListener(&forgetErased);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      return signalPassFailure();
    takeKeysBeforeTranspose(getOperation());
    if (!report)
      return;
    llvm::outs() << "memopt-fuse-attention @" << getOperation().getSymName()
                 << ": " << fusion.fused << " attentions fused ("
                 << fusion.causal << " causal, " << fusion.safe
                 << " safe softmax"
                 << (fusion.dropout
                         ? ", " + std::to_string(fusion.dropout) + " dropout"
                         : std::string())
                 << "), " << fusion.scoreBytes
                 << " bytes of scores and probabilities removed\n";
    for (const AttentionSite &site :
         describeAttentionSites(getOperation(), maxHeadSize))
      llvm::outs() << "  " << formatAttentionSite(site) << "\n";
  }
};

} // namespace

SmallVector<AttentionSite>
mlir::memopt::describeAttentionSites(func::FuncOp function,
                                     int64_t maxHeadSize) {
  SmallVector<AttentionSite> sites;
  MaskClassifier classifier;
  function.walk([&](Operation *op) {
    if (auto attention = dyn_cast<AttentionOp>(op)) {
      sites.push_back({attentionSiteName(attention), true,
                       describeFused(attention, classifier)});
      return;
    }
    auto softmax = dyn_cast<SoftmaxOp>(op);
    if (!softmax || !isScoresSoftmax(softmax))
      return;
    AttentionSite site{locationName(softmax.getLoc()), false, ""};
    Diagnosis diagnosis;
    if (matchAttention(softmax, maxHeadSize, classifier, diagnosis))
      site.detail = "not fused (it matches: the pass has not run here)";
    else
      site.detail = "not fused at " +
                    (diagnosis.at ? describeOp(diagnosis.at)
                                  : std::string("a function argument")) +
                    ": " + diagnosis.reason;
    sites.push_back(std::move(site));
  });
  return sites;
}

std::string mlir::memopt::formatAttentionSite(const AttentionSite &site) {
  return "'" + site.name + "': " + site.detail;
}
