//===- Layout.cpp - channels-last regions around convolutions -------------===//
//
// Chooses the tensor layout of convolution regions. A convolution chosen
// channels-last becomes
//
//   transpose(x -> NHWC) -> conv {channels_last} (filter KRSC, transposed at
//   compile time) -> transpose(NHWC -> NCHW)
//
// and the NHWC -> NCHW transposes are then pushed down through the ops that
// can follow the layout: elementwise ops (a broadcast operand is permuted:
// a constant at compile time, a [N, C, 1, 1] vector by a free reshape),
// pools, global average pooling and batch normalization (which get
// `channels_last`), reductions and concatenations (their axes are
// renumbered), nearest resizes. Where a pushed transpose meets the NCHW ->
// NHWC transpose of the next convolution the two cancel; a transpose that
// only moves axes of size 1 becomes a reshape (a free view). What remains
// are the few transposes at region borders (the network input, a reshape
// into a classifier head), real ops that the planner sizes like any other.
//
// The layout is a property of the tensor, not of the backend: both runtime
// backends implement every channels-last op, so the host runs the same
// program (docs/lowering.md).
//
// Training programs (after autodiff) are laid out the same way: the data
// and filter gradients of a convolution (`conv_transpose`,
// `conv_backward_filter`) are converted like the forward one, and the
// transposes are pushed through the backward's ops too (batch-normalization
// training and its gradient, pooling gradients, relu_grad and the other
// elementwise ops, the broadcast of a global average pool's gradient). The
// filters are variables and keep their ONNX layout [M, C/g, k...]: each step
// transposes a filter once to KRSC (shared by the forward convolution and its
// data gradient) and the KRSC filter gradient once back before the update,
// so saving, loading, optimizer state and sharding see the ONNX layout.
// PyTorch's channels_last training instead keeps the parameters themselves
// channels-last (strided, logical shape unchanged); docs/layout.md weighs
// the two.
//
// Taken from: onnxruntime's transpose optimizer (push transposes through
// layout-agnostic ops and cancel inverse pairs, count the transposes a
// rewrite would add before making it), TensorFlow Grappler's layout
// optimizer and TVM's ConvertLayout (convert the convolutions, insert layout
// transforms at the borders, let the rest follow), PyTorch's channels_last
// memory format and TensorRT's reformat-free I/O (the convolution kernels
// that want NHWC get it). Where this goes further: the decision is made from
// the element type the mixed-precision pass chose, the kinds of convolution
// in the function (depthwise ones run memopt's own channels-last kernel or
// cuDNN's, whichever the runtime measures faster) and the target's measured
// kernels (`auto`, docs/layout.md),
// and it runs
// before scheduling and planning, so the arena holds the transposes that are
// left, at their real sizes.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/MemOpt/IR/MemOptAttributes.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/IR/WeightBlobs.h"
#include "memopt/Dialect/MemOpt/Transforms/Passes.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <vector>

namespace mlir::memopt {
#define GEN_PASS_DEF_MEMOPTLAYOUT
#include "memopt/Dialect/MemOpt/Transforms/Passes.h.inc"
} // namespace mlir::memopt

using namespace mlir;
using namespace mlir::memopt;

namespace {

//===----------------------------------------------------------------------===//
// Permutations
//===----------------------------------------------------------------------===//

/// NCHW -> NHWC for rank r: [0, 2, ..., r-1, 1].
SmallVector<int64_t> toChannelsLast(int64_t rank) {
  SmallVector<int64_t> perm = {0};
  for (int64_t i = 2; i < rank; ++i)
    perm.push_back(i);
  perm.push_back(1);
  return perm;
}

/// NHWC -> NCHW for rank r: [0, r-1, 1, ..., r-2].
SmallVector<int64_t> toChannelsFirst(int64_t rank) {
  SmallVector<int64_t> perm = {0, rank - 1};
  for (int64_t i = 1; i < rank - 1; ++i)
    perm.push_back(i);
  return perm;
}

SmallVector<int64_t> permuteShape(ArrayRef<int64_t> shape,
                                  ArrayRef<int64_t> perm) {
  return llvm::map_to_vector(perm, [&](int64_t axis) { return shape[axis]; });
}

RankedTensorType permuteType(Type type, ArrayRef<int64_t> perm) {
  auto ranked = cast<RankedTensorType>(type);
  return RankedTensorType::get(permuteShape(ranked.getShape(), perm),
                               ranked.getElementType());
}

bool isIdentity(ArrayRef<int64_t> perm) {
  for (auto [index, axis] : llvm::enumerate(perm))
    if (int64_t(index) != axis)
      return false;
  return true;
}

/// True when permuting `shape` by `perm` keeps the order of its axes larger
/// than 1: the transpose only moves 1s and is a reshape.
bool movesOnlyUnitAxes(ArrayRef<int64_t> shape, ArrayRef<int64_t> perm) {
  int64_t last = -1;
  for (int64_t axis : perm) {
    if (shape[axis] == 1)
      continue;
    if (axis < last)
      return false;
    last = axis;
  }
  return true;
}

Value createTranspose(PatternRewriter &rewriter, Location loc, Value value,
                      ArrayRef<int64_t> perm) {
  return TransposeOp::create(rewriter, loc, permuteType(value.getType(), perm),
                             value, rewriter.getDenseI64ArrayAttr(perm));
}

/// The source of `value` when it is the NHWC -> NCHW transpose of a rank-r
/// tensor (r >= 3), else null.
Value channelsFirstSource(Value value) {
  auto transpose = value.getDefiningOp<TransposeOp>();
  if (!transpose)
    return {};
  auto type = cast<RankedTensorType>(transpose.getType());
  if (type.getRank() < 3 ||
      transpose.getPermutation() != toChannelsFirst(type.getRank()))
    return {};
  return transpose.getData();
}

//===----------------------------------------------------------------------===//
// Constants transposed at compile time
//===----------------------------------------------------------------------===//

/// `value` permuted, or null when its bytes cannot be read (bool elements,
/// an elided resource).
ElementsAttr permuteConstant(ElementsAttr value, ArrayRef<int64_t> perm) {
  auto type = cast<RankedTensorType>(value.getType());
  RankedTensorType resultType = permuteType(type, perm);
  unsigned bits = type.getElementType().getIntOrFloatBitWidth();
  if (bits % 8 != 0)
    return {};
  size_t elementBytes = bits / 8;
  if (auto dense = dyn_cast<DenseElementsAttr>(value)) {
    if (dense.isSplat())
      return dense.reshape(resultType);
    ArrayRef<char> raw = dense.getRawData();
    if (raw.size() != size_t(type.getNumElements()) * elementBytes)
      return {};
    std::vector<char> permuted(raw.size());
    ConversionCounts unchanged;
    WeightConversion(type.getShape(), perm, elementBytes, ElementCast::None)
        .convert(raw, 0, type.getNumElements(), permuted.data(), unchanged);
    return DenseElementsAttr::getFromRawBuffer(resultType, permuted);
  }
  // A weight is transposed when it is read (#memopt.converted,
  // MemOptAttributes.h): the permutation is recorded over its resource (and
  // composed with one already recorded), no copy is made.
  DenseResourceElementsAttr source = dyn_cast<DenseResourceElementsAttr>(value);
  SmallVector<int64_t> composed(perm);
  if (auto converted = dyn_cast<ConvertedWeightAttr>(value)) {
    source = converted.getSource();
    if (!converted.getPermutation().empty())
      composed = permuteShape(converted.getPermutation(), perm);
  }
  if (!source || getWeightData(source).size() !=
                     size_t(type.getNumElements()) *
                         (source.getType().getElementTypeBitWidth() / 8))
    return {};
  if (isIdentity(composed)) {
    if (source.getType() == resultType)
      return source;
    composed.clear();
  }
  return ConvertedWeightAttr::get(value.getContext(), resultType, source,
                                  composed);
}

/// transpose(constant) -> the transposed constant (weights included: the
/// dialect's folder only reads small inline constants).
struct FoldTransposeOfConstant : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto constant = op.getData().getDefiningOp<ConstantOp>();
    if (!constant)
      return failure();
    ElementsAttr permuted =
        permuteConstant(constant.getValue(), op.getPermutation());
    if (!permuted)
      return failure();
    auto folded = ConstantOp::create(rewriter, constant.getLoc(), permuted);
    // Keep what other passes read from a constant (memopt.initializer).
    for (NamedAttribute attribute : constant->getDiscardableAttrs())
      folded->setAttr(attribute.getName(), attribute.getValue());
    rewriter.replaceOp(op, folded.getResult());
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Transpose clean-up
//===----------------------------------------------------------------------===//

/// transpose(transpose(x, p), q) -> transpose(x, p[q]), or x.
struct ComposeTransposes : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getData().getDefiningOp<TransposeOp>();
    if (!inner)
      return failure();
    SmallVector<int64_t> p = inner.getPermutation(), q = op.getPermutation();
    SmallVector<int64_t> composed = permuteShape(p, q);
    if (isIdentity(composed)) {
      rewriter.replaceOp(op, inner.getData());
      return success();
    }
    rewriter.replaceOpWithNewOp<TransposeOp>(
        op, op.getType(), inner.getData(),
        rewriter.getDenseI64ArrayAttr(composed));
    return success();
  }
};

/// A transpose that only moves axes of size 1 is a reshape (a free view).
struct UnitAxesTransposeToReshape : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op.getData().getType());
    if (!movesOnlyUnitAxes(type.getShape(), op.getPermutation()))
      return failure();
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(), op.getData());
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Pushing NHWC -> NCHW transposes down
//===----------------------------------------------------------------------===//

/// True when channelsLastOperand gives `value` without a real transpose.
bool isFreeInChannelsLast(Value value, int64_t rank) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getRank() == rank && channelsFirstSource(value))
    return true;
  if (type.getRank() > rank)
    return false;
  // A broadcast of a free operand is broadcast in the channels-last order
  // (a global average pool's gradient: [N, C, 1, 1] -> [N, C, H, W]).
  if (auto expand = value.getDefiningOp<ExpandOp>();
      expand && type.getRank() == rank)
    return isFreeInChannelsLast(expand.getInput(), rank);
  SmallVector<int64_t> shape(rank - type.getRank(), 1);
  llvm::append_range(shape, type.getShape());
  return matchPattern(value, m_Constant()) ||
         movesOnlyUnitAxes(shape, toChannelsLast(rank));
}

/// `value` (an operand of an op whose NCHW result has rank `rank`) in the
/// channels-last order, or null when that would cost a real transpose: the
/// source of its own NHWC -> NCHW transpose, a constant (transposed at
/// compile time by FoldTransposeOfConstant), or a tensor whose permutation
/// only moves 1s (a reshape). Lower-rank operands broadcast from the right,
/// as numpy does: they are first viewed with leading 1s.
Value channelsLastOperand(PatternRewriter &rewriter, Location loc, Value value,
                          int64_t rank) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> perm = toChannelsLast(rank);
  if (type.getRank() == rank)
    if (Value source = channelsFirstSource(value))
      return source;
  if (type.getRank() > rank)
    return {};
  if (auto expand = value.getDefiningOp<ExpandOp>();
      expand && type.getRank() == rank) {
    Value input = channelsLastOperand(rewriter, loc, expand.getInput(), rank);
    if (!input)
      return {};
    return ExpandOp::create(rewriter, loc, permuteType(type, perm), input);
  }
  SmallVector<int64_t> shape(rank - type.getRank(), 1);
  llvm::append_range(shape, type.getShape());
  bool constant = matchPattern(value, m_Constant());
  if (!constant && !movesOnlyUnitAxes(shape, perm))
    return {};
  Value padded = value;
  if (type.getRank() != rank)
    padded = ReshapeOp::create(
        rewriter, loc, RankedTensorType::get(shape, type.getElementType()),
        value);
  if (constant)
    return createTranspose(rewriter, loc, padded, perm);
  return ReshapeOp::create(
      rewriter, loc,
      RankedTensorType::get(permuteShape(shape, perm), type.getElementType()),
      padded);
}

/// True when `op` declares a `channels_last` attribute (the convolutions and
/// their gradients, pools and their gradients, global average pooling,
/// batch normalization in both modes and its gradient).
bool hasChannelsLastForm(Operation *op) {
  return llvm::is_contained(op->getName().getAttributeNames(),
                            StringAttr::get(op->getContext(), "channels_last"));
}

/// The convolutions: converted by the pass itself, never pushed through.
bool isConvolution(Operation *op) {
  return isa<ConvOp, ConvResidualOp, ConvTransposeOp, ConvBackwardFilterOp>(op);
}

/// op(transpose(a), ...) -> transpose(op'(a, ...)) for the ops that can
/// follow the layout; see the file comment.
struct SinkChannelsFirstTranspose : RewritePattern {
  explicit SinkChannelsFirstTranspose(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, context) {}

  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    if (op->getNumResults() < 1 || op->getNumRegions() != 0 ||
        isa<TransposeOp, ConstantOp, ReshapeOp>(op) ||
        !isa<MemOptDialect>(op->getDialect()))
      return failure();
    auto trigger = llvm::find_if(op->getOperands(), [](Value operand) {
      return bool(channelsFirstSource(operand));
    });
    auto resultType = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (trigger == op->getOperands().end() || !resultType)
      return failure();
    int64_t rank = cast<RankedTensorType>((*trigger).getType()).getRank();
    if (hasChannelsLastForm(op) && !isConvolution(op) &&
        !op->hasAttr("channels_last"))
      return sinkChannelsLastForm(op, rank, rewriter);
    if (auto split = dyn_cast<SplitOp>(op))
      return sinkSplit(split, rewriter);
    if (op->getNumResults() != 1)
      return failure();
    if (isa<ReduceMeanOp, ReduceSumOp, ReduceMaxOp>(op))
      return sinkReduce(op, rewriter);
    if (resultType.getRank() != rank)
      return failure();
    auto buffer = dyn_cast<BufferBehaviorOpInterface>(op);
    if (buffer && buffer.isElementwise())
      return sinkElementwise(op, rank, rewriter);
    if (auto concat = dyn_cast<ConcatOp>(op))
      return sinkConcat(concat, rewriter);
    if (auto resize = dyn_cast<ResizeOp>(op))
      if (resize.getMode() == "nearest")
        return sinkElementwise(op, rank, rewriter);
    return failure();
  }

private:
  /// The same op on channels-last operands; `resultTypes` given.
  Operation *recreateOp(Operation *op, ValueRange operands,
                        TypeRange resultTypes, PatternRewriter &rewriter,
                        ArrayRef<NamedAttribute> extra = {}) const {
    NamedAttrList attributes(op->getAttrs());
    for (NamedAttribute attribute : extra)
      attributes.set(attribute.getName(), attribute.getValue());
    OperationState state(op->getLoc(), op->getName());
    state.addOperands(operands);
    state.addTypes(resultTypes);
    state.addAttributes(attributes);
    return rewriter.create(state);
  }
  Value recreate(Operation *op, ValueRange operands, Type resultType,
                 PatternRewriter &rewriter,
                 ArrayRef<NamedAttribute> extra = {}) const {
    return recreateOp(op, operands, TypeRange{resultType}, rewriter, extra)
        ->getResult(0);
  }

  void replaceThroughTranspose(Operation *op, Value channelsLast,
                               PatternRewriter &rewriter) const {
    int64_t rank = cast<RankedTensorType>(channelsLast.getType()).getRank();
    rewriter.replaceOp(op, createTranspose(rewriter, op->getLoc(), channelsLast,
                                           toChannelsFirst(rank)));
  }

  LogicalResult sinkElementwise(Operation *op, int64_t rank,
                                PatternRewriter &rewriter) const {
    // Every operand must come for free, or the rewrite would only move the
    // transpose (onnxruntime's transpose optimizer counts the same way).
    if (!llvm::all_of(op->getOperands(), [&](Value operand) {
          return isFreeInChannelsLast(operand, rank);
        }))
      return failure();
    SmallVector<Value> operands;
    for (Value operand : op->getOperands())
      operands.push_back(
          channelsLastOperand(rewriter, op->getLoc(), operand, rank));
    Value result =
        recreate(op, operands,
                 permuteType(op->getResult(0).getType(), toChannelsLast(rank)),
                 rewriter);
    replaceThroughTranspose(op, result, rewriter);
    return success();
  }

  /// An op with a `channels_last` form (pools, global average pooling,
  /// batch normalization, the pooling and batch-normalization gradients):
  /// every operand of the layout's rank must be the source of an NHWC ->
  /// NCHW transpose (X, and dY for a gradient), the others are per-channel
  /// vectors. Results of that rank are transposed back, the per-channel
  /// ones (statistics, parameter gradients) are used as they are.
  LogicalResult sinkChannelsLastForm(Operation *op, int64_t rank,
                                     PatternRewriter &rewriter) const {
    SmallVector<Value> operands;
    for (Value operand : op->getOperands()) {
      int64_t operandRank = cast<RankedTensorType>(operand.getType()).getRank();
      if (operandRank == rank) {
        Value source = channelsFirstSource(operand);
        if (!source)
          return failure();
        operands.push_back(source);
      } else if (operandRank == 1) {
        operands.push_back(operand);
      } else {
        return failure();
      }
    }
    SmallVector<Type> resultTypes;
    for (Type type : op->getResultTypes()) {
      int64_t resultRank = cast<RankedTensorType>(type).getRank();
      if (resultRank != rank && resultRank != 1)
        return failure();
      resultTypes.push_back(
          resultRank == rank ? permuteType(type, toChannelsLast(rank)) : type);
    }
    Operation *converted = recreateOp(
        op, operands, resultTypes, rewriter,
        {rewriter.getNamedAttr("channels_last", rewriter.getUnitAttr())});
    SmallVector<Value> replacements;
    for (Value result : converted->getResults())
      replacements.push_back(
          cast<RankedTensorType>(result.getType()).getRank() == rank
              ? createTranspose(rewriter, op->getLoc(), result,
                                toChannelsFirst(rank))
              : result);
    rewriter.replaceOp(op, replacements);
    return success();
  }

  LogicalResult sinkReduce(Operation *op, PatternRewriter &rewriter) const {
    Value source = channelsFirstSource(op->getOperand(0));
    if (!source)
      return failure();
    int64_t rank = cast<RankedTensorType>(source.getType()).getRank();
    SmallVector<int64_t> first = toChannelsFirst(rank);
    auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes");
    auto keepdims = op->getAttrOfType<IntegerAttr>("keepdims");
    if (!axes)
      return failure();
    bool keep = !keepdims || keepdims.getInt() != 0;
    // NCHW axis d is axis first[d] of the channels-last source.
    SmallVector<bool> reduced(rank, false);
    SmallVector<int64_t> newAxes;
    for (int64_t axis : axes.asArrayRef()) {
      reduced[first[axis]] = true;
      newAxes.push_back(first[axis]);
    }
    llvm::sort(newAxes);
    auto sourceType = cast<RankedTensorType>(source.getType());
    SmallVector<int64_t> shape;
    SmallVector<int64_t> kept; // source axes that remain, in order
    for (int64_t i = 0; i < rank; ++i) {
      if (reduced[i] && !keep)
        continue;
      shape.push_back(reduced[i] ? 1 : sourceType.getDimSize(i));
      kept.push_back(i);
    }
    auto newType = RankedTensorType::get(shape, sourceType.getElementType());
    Value result =
        recreate(op, {source}, newType, rewriter,
                 {rewriter.getNamedAttr(
                     "axes", rewriter.getDenseI64ArrayAttr(newAxes))});
    // The old result's axes are the NCHW axes that remain, in order; find
    // each among the new result's axes.
    SmallVector<int64_t> perm;
    for (int64_t d = 0; d < rank; ++d) {
      if (reduced[first[d]] && !keep)
        continue;
      perm.push_back(llvm::find(kept, first[d]) - kept.begin());
    }
    if (!isIdentity(perm))
      result = createTranspose(rewriter, op->getLoc(), result, perm);
    rewriter.replaceOp(op, result);
    return success();
  }

  /// A split of a channels-last value (a channel concat's gradient: DenseNet's
  /// backward) splits it in place along the permuted axis; each piece goes
  /// back through a transpose that the next op sinks in turn.
  LogicalResult sinkSplit(SplitOp op, PatternRewriter &rewriter) const {
    Value source = channelsFirstSource(op.getInput());
    if (!source)
      return failure();
    int64_t rank = cast<RankedTensorType>(source.getType()).getRank();
    int64_t axis = op.getAxis();
    if (axis < 0)
      axis += rank;
    int64_t newAxis = toChannelsFirst(rank)[axis];
    SmallVector<Type> resultTypes;
    for (Type type : op.getResultTypes())
      resultTypes.push_back(permuteType(type, toChannelsLast(rank)));
    Operation *split = recreateOp(
        op, source, resultTypes, rewriter,
        {rewriter.getNamedAttr("axis", rewriter.getI64IntegerAttr(newAxis))});
    SmallVector<Value> results;
    for (Value piece : split->getResults())
      results.push_back(
          createTranspose(rewriter, op.getLoc(), piece, toChannelsFirst(rank)));
    rewriter.replaceOp(op, results);
    return success();
  }

  LogicalResult sinkConcat(ConcatOp op, PatternRewriter &rewriter) const {
    auto type = cast<RankedTensorType>(op.getType());
    int64_t rank = type.getRank();
    SmallVector<Value> inputs;
    for (Value input : op.getInputs()) {
      Value source = channelsFirstSource(input);
      if (!source)
        return failure();
      inputs.push_back(source);
    }
    int64_t axis = static_cast<int64_t>(op.getAxis());
    if (axis < 0)
      axis += rank;
    int64_t newAxis = toChannelsFirst(rank)[axis];
    Value result = recreate(
        op, inputs, permuteType(type, toChannelsLast(rank)), rewriter,
        {rewriter.getNamedAttr("axis", rewriter.getI64IntegerAttr(newAxis))});
    replaceThroughTranspose(op, result, rewriter);
    return success();
  }
};

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

/// The `auto` policy for the CUDA target, from whole-model measurements on an
/// H100 with cuDNN 9 at batch 32 (bench/gpu_bench_precision.py, tables in
/// docs/layout.md):
/// - f16, bf16 and TF32 (tensor cores): channels-last, unless the function
///   has a grouped convolution that is not depthwise (group == C_in ==
///   C_out, 1-D or 2-D). Dense nets gain: ResNet-50 f16 14.6 -> 6.9 ms, TF32
///   14.0 -> 3.0; ResNet-18 TF32 6.3 -> 2.0. Depthwise nets lost when
///   cuDNN's channels-last grouped kernels ran their depthwise convolutions,
///   in both precisions: f16 ConvNeXt-T 5.8 -> 12.9 ms, EfficientNet-B0 6.7
///   -> 7.2, MobileNetV3 3.5 -> 3.7, MobileNetV2 3.2 -> 3.3; TF32
///   MobileNetV2 2.7 -> 6.1, EfficientNet-B0 5.1 -> 11.1, ConvNeXt-T 7.0 ->
///   16.5. The CUDA runtime now has its own channels-last depthwise kernel
///   (lib/Runtime/Cuda/DepthwiseKernels.cu) and times it against cuDNN at
///   each call site's first run, keeping the faster, so depthwise nets go
///   channels-last too; their whole-model times with it are not measured
///   yet (docs/layout.md). Other grouped convolutions (ResNeXt's, a channel
///   multiplier above 1, 3-D) still have only cuDNN's channels-last grouped
///   kernels and keep their function NCHW.
/// - f32 (FMA): NCHW (cuDNN's NCHW f32 kernels were as fast or faster in the
///   layer micro-benchmark).
enum class Preference { ChannelsFirst, UnlessSlowGrouped };

Preference preferenceFor(Type element, StringRef precision) {
  if (element.isF16() || element.isBF16() ||
      (element.isF32() && precision == "tf32"))
    return Preference::UnlessSlowGrouped;
  return Preference::ChannelsFirst;
}

/// A grouped convolution that only cuDNN's channels-last grouped kernels
/// would run: anything grouped but a forward depthwise convolution (group ==
/// C_in == C_out) of rank 3 or 4, which memopt's depthwise kernel runs.
bool isSlowGroupedChannelsLast(Operation *op) {
  auto group = op->getAttrOfType<IntegerAttr>("group");
  if (!group || group.getInt() <= 1)
    return false;
  if (!isa<ConvOp, ConvResidualOp>(op))
    return true;
  auto input = cast<RankedTensorType>(op->getOperand(0).getType());
  auto output = cast<RankedTensorType>(op->getResult(0).getType());
  return input.getRank() > 4 || input.getDimSize(1) != group.getInt() ||
         output.getDimSize(1) != group.getInt();
}

struct MemOptLayoutPass
    : public mlir::memopt::impl::MemOptLayoutBase<MemOptLayoutPass> {
  using MemOptLayoutBase::MemOptLayoutBase;

  /// Whether `conv` runs channels-last; `slowGrouped`: the function has a
  /// grouped convolution that is not depthwise (isSlowGroupedChannelsLast);
  /// `grouped`: it has any grouped convolution.
  bool chooseChannelsLast(Operation *conv, StringRef precision,
                          bool slowGrouped, bool grouped, bool training) const {
    if (layout == "nhwc")
      return true;
    if (layout != "auto" || target != "cuda")
      return false;
    Type element =
        cast<RankedTensorType>(conv->getOperand(0).getType()).getElementType();
    // Training steps: channels-last in f16 / bf16 for dense nets, where the
    // channels-last kernels were measured to win on an H200 (2026-11-29,
    // ResNet-50 b64 bf16 SGD, --bn-batch-stats, CUDA graphs): NHWC 22.6 /
    // 26.2 ms a step against NCHW 29.1 / 31.2, once the channels-last batch
    // norm and max-pool gradient ran at bandwidth (48.5 ms before; docs/
    // layout.md, "Training"; f16 runs the same kernels, not measured on its
    // own). Channels-first where it is not measured: f32
    // and TF32 steps, and steps with grouped convolutions (their backward
    // would run cuDNN's grouped NHWC kernels; memopt has only a forward
    // depthwise kernel). `--layout nhwc` lays any step out channels-last.
    if (training)
      return !grouped && (element.isF16() || element.isBF16());
    switch (preferenceFor(element, precision)) {
    case Preference::UnlessSlowGrouped:
      return !slowGrouped;
    case Preference::ChannelsFirst:
      return false;
    }
    return false;
  }

  /// conv -> transpose(conv {channels_last}(transpose(x), W^T [, B,
  /// transpose(Z)])); the same for a convolution's gradients: every operand
  /// of the convolution's rank (activations, filters, filter gradients: one
  /// permutation for all) goes channels-last and the result comes back.
  /// `toLast` keeps one NCHW -> NHWC transpose per value, so a filter shared
  /// by a convolution and its data gradient, or an input read by a
  /// convolution and its filter gradient, is transposed once.
  void convert(Operation *conv, IRRewriter &rewriter,
               DenseMap<Value, Value> &toLast) {
    int64_t rank =
        cast<RankedTensorType>(conv->getOperand(0).getType()).getRank();
    SmallVector<int64_t> last = toChannelsLast(rank);
    Location loc = conv->getLoc();
    auto transpose = [&](Value value) {
      auto [it, inserted] = toLast.try_emplace(value);
      if (!inserted)
        return it->second;
      OpBuilder::InsertionGuard guard(rewriter);
      if (Operation *def = value.getDefiningOp())
        rewriter.setInsertionPointAfter(def);
      else
        rewriter.setInsertionPointToStart(
            cast<BlockArgument>(value).getOwner());
      it->second =
          TransposeOp::create(rewriter, loc, permuteType(value.getType(), last),
                              value, rewriter.getDenseI64ArrayAttr(last))
              .getResult();
      return it->second;
    };
    SmallVector<Value> operands(conv->getOperands());
    for (Value &operand : operands)
      if (cast<RankedTensorType>(operand.getType()).getRank() == rank)
        operand = transpose(operand); // folded for a constant filter
    rewriter.setInsertionPoint(conv);
    OperationState state(loc, conv->getName());
    state.addOperands(operands);
    state.addTypes(permuteType(conv->getResult(0).getType(), last));
    state.addAttributes(conv->getAttrs());
    state.addAttribute("channels_last", rewriter.getUnitAttr());
    Operation *converted = rewriter.create(state);
    Value back = TransposeOp::create(
        rewriter, loc, conv->getResult(0).getType(), converted->getResult(0),
        rewriter.getDenseI64ArrayAttr(toChannelsFirst(rank)));
    rewriter.replaceOp(conv, back);
  }

  void runOnOperation() override {
    func::FuncOp function = getOperation();
    if (layout != "auto" && layout != "nchw" && layout != "nhwc") {
      function.emitError("memopt-layout: layout '")
          << layout << "' is not auto, nchw or nhwc";
      return signalPassFailure();
    }
    if (target != "cuda" && target != "host") {
      function.emitError("memopt-layout: target '")
          << target << "' is not cuda or host";
      return signalPassFailure();
    }
    StringRef precision;
    if (auto attr = function->getAttrOfType<StringAttr>("memopt.precision"))
      precision = attr.getValue();
    bool training = false;
    function.walk([&](VariableOp) { training = true; });
    bool slowGrouped = false, grouped = false;
    function.walk([&](Operation *op) {
      if (!isConvolution(op) || op->hasAttr("channels_last"))
        return;
      slowGrouped |= isSlowGroupedChannelsLast(op);
      auto group = op->getAttrOfType<IntegerAttr>("group");
      grouped |= group && group.getInt() > 1;
    });
    SmallVector<Operation *> chosen;
    int64_t convs = 0;
    function.walk([&](Operation *op) {
      if (!isConvolution(op) || op->hasAttr("channels_last"))
        return;
      ++convs;
      if (chooseChannelsLast(op, precision, slowGrouped, grouped, training))
        chosen.push_back(op);
    });
    if (!chosen.empty()) {
      IRRewriter rewriter(&getContext());
      DenseMap<Value, Value> toLast;
      for (Operation *conv : chosen)
        convert(conv, rewriter, toLast);
      RewritePatternSet patterns(&getContext());
      patterns.add<FoldTransposeOfConstant, ComposeTransposes,
                   UnitAxesTransposeToReshape, SinkChannelsFirstTranspose>(
          &getContext());
      ReshapeOp::getCanonicalizationPatterns(patterns, &getContext());
      if (failed(applyPatternsGreedily(function, std::move(patterns))))
        return signalPassFailure();
    }
    if (convs > 0)
      function->setAttr(
          "memopt.layout",
          StringAttr::get(&getContext(), chosen.empty() ? "nchw" : "nhwc"));
    if (!report)
      return;
    int64_t transposes = 0, transposeBytes = 0;
    function.walk([&](TransposeOp op) {
      auto type = cast<RankedTensorType>(op.getType());
      if (type.getRank() < 3)
        return;
      SmallVector<int64_t> perm = op.getPermutation();
      if (perm != toChannelsFirst(type.getRank()) &&
          perm != toChannelsLast(type.getRank()))
        return;
      ++transposes;
      transposeBytes +=
          type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8);
    });
    llvm::outs() << "memopt-layout @" << function.getSymName() << ": "
                 << chosen.size() << " of " << convs
                 << " convolutions channels-last, " << transposes
                 << " layout transposes left (" << transposeBytes
                 << " bytes)\n";
  }
};

} // namespace
