//===- ShapeOps.cpp - shape, data movement and constant-producing ops -----===//
//
// ONNX shape rules (onnx/defs/*/defs.cc shape inference) for static shapes,
// and folders that let the importer collapse PyTorch's Shape -> Gather ->
// Unsqueeze -> Concat chains into constants. Slice clamping follows the
// ONNX specification text, as onnx-mlir's ONNXSliceOp shape helper does.
//
//===----------------------------------------------------------------------===//

#include "OpUtils.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <numeric>

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::impl;

/// Views share their operand's bytes and `shape` reads only the type: none of
/// them computes or moves anything.
#define MEMOPT_ZERO_COST(OpClass)                                              \
  int64_t OpClass::getFlops() { return 0; }                                    \
  int64_t OpClass::getBytesMoved() { return 0; }

MEMOPT_ZERO_COST(ShapeOp)
MEMOPT_ZERO_COST(ReshapeOp)
MEMOPT_ZERO_COST(FlattenOp)
MEMOPT_ZERO_COST(SqueezeOp)
MEMOPT_ZERO_COST(UnsqueezeOp)
MEMOPT_ZERO_COST(IdentityOp)
#undef MEMOPT_ZERO_COST

/// Folds ops that only change the shape: same elements in row-major order.
static OpFoldResult foldReshapeOfConstant(Attribute operand,
                                          ShapedType resultType) {
  // The counts may differ in an op not yet verified (createOrFold).
  DenseElementsAttr dense = getSmallDense(operand);
  if (!dense || dense.getNumElements() != resultType.getNumElements() ||
      dense.getElementType() != resultType.getElementType())
    return {};
  return dense.reshape(resultType);
}

//===----------------------------------------------------------------------===//
// ShapeOp
//===----------------------------------------------------------------------===//

/// The [start, end) slice of the shape that ONNX's Shape returns.
static std::pair<int64_t, int64_t>
shapeSliceBounds(int64_t rank, int64_t start, std::optional<int64_t> end) {
  auto clampIndex = [rank](int64_t index) {
    if (index < 0)
      index += rank;
    return std::clamp<int64_t>(index, 0, rank);
  };
  int64_t first = clampIndex(start);
  int64_t last = clampIndex(end.value_or(rank));
  return {first, std::max(first, last)};
}

static std::optional<int64_t> toSigned(std::optional<uint64_t> value) {
  if (!value)
    return std::nullopt;
  return static_cast<int64_t>(*value);
}

LogicalResult ShapeOp::inferReturnTypes(MLIRContext *context,
                                        std::optional<Location> loc,
                                        ShapeOp::Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  if (failed(requireOperands<ShapeOp>(loc, adaptor.getOperands())))
    return failure();
  auto type = cast<RankedTensorType>(adaptor.getData().getType());
  auto [first, last] = shapeSliceBounds(type.getRank(), adaptor.getStart(),
                                        toSigned(adaptor.getEnd()));
  results.push_back(
      RankedTensorType::get({last - first}, IntegerType::get(context, 64)));
  return success();
}

OpFoldResult ShapeOp::fold(FoldAdaptor) {
  auto type = getData().getType();
  auto [first, last] =
      shapeSliceBounds(type.getRank(), getStart(), toSigned(getEnd()));
  return DenseElementsAttr::get(getType(),
                                type.getShape().slice(first, last - first));
}

//===----------------------------------------------------------------------===//
// ReshapeOp
//===----------------------------------------------------------------------===//

bool ReshapeOp::isAliasingView() { return true; }

LogicalResult ReshapeOp::verify() {
  auto input = getData().getType();
  auto result = getType();
  if (input.getElementType() != result.getElementType())
    return emitOpError("changes the element type from ")
           << input.getElementType() << " to " << result.getElementType();
  if (input.getNumElements() != result.getNumElements())
    return emitOpError("cannot reshape ")
           << input << " (" << input.getNumElements() << " elements) to "
           << result << " (" << result.getNumElements() << " elements)";
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getData().getType() == getType())
    return getData();
  if (OpFoldResult folded = foldReshapeOfConstant(adaptor.getData(), getType()))
    return folded;
  // reshape(view(x)) -> reshape(x): every view keeps the row-major order of
  // the elements, so only the last shape matters.
  Operation *producer = getData().getDefiningOp();
  if (isa_and_present<ReshapeOp, FlattenOp, SqueezeOp, UnsqueezeOp>(producer)) {
    getDataMutable().assign(producer->getOperand(0));
    return getResult();
  }
  return {};
}

//===----------------------------------------------------------------------===//
// FlattenOp
//===----------------------------------------------------------------------===//

bool FlattenOp::isAliasingView() { return true; }

LogicalResult FlattenOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          FlattenOp::Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  if (failed(requireOperands<FlattenOp>(loc, adaptor.getOperands())))
    return failure();
  auto type = cast<RankedTensorType>(adaptor.getInput().getType());
  int64_t rank = type.getRank();
  int64_t axis = static_cast<int64_t>(adaptor.getAxis());
  // Flatten's axis may equal the rank (everything goes to the first factor).
  if (axis < -rank || axis > rank)
    return inferError(loc, getOperationName(), "axis ", axis,
                      " is out of range for rank ", rank);
  if (axis < 0)
    axis += rank;
  ArrayRef<int64_t> shape = type.getShape();
  int64_t outer = std::accumulate(shape.begin(), shape.begin() + axis,
                                  int64_t{1}, std::multiplies<int64_t>());
  int64_t inner = std::accumulate(shape.begin() + axis, shape.end(), int64_t{1},
                                  std::multiplies<int64_t>());
  results.push_back(
      RankedTensorType::get({outer, inner}, type.getElementType()));
  return success();
}

OpFoldResult FlattenOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return foldReshapeOfConstant(adaptor.getInput(), getType());
}

//===----------------------------------------------------------------------===//
// TransposeOp
//===----------------------------------------------------------------------===//

static SmallVector<int64_t>
permutationOrReverse(std::optional<ArrayRef<int64_t>> perm, int64_t rank) {
  if (perm)
    return SmallVector<int64_t>(*perm);
  SmallVector<int64_t> reversed(rank);
  for (int64_t i = 0; i < rank; ++i)
    reversed[i] = rank - 1 - i;
  return reversed;
}

SmallVector<int64_t> TransposeOp::getPermutation() {
  return permutationOrReverse(getPerm(), getData().getType().getRank());
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            TransposeOp::Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  if (failed(requireOperands<TransposeOp>(loc, adaptor.getOperands())))
    return failure();
  auto type = cast<RankedTensorType>(adaptor.getData().getType());
  int64_t rank = type.getRank();
  SmallVector<int64_t> perm = permutationOrReverse(adaptor.getPerm(), rank);
  if (static_cast<int64_t>(perm.size()) != rank)
    return inferError(loc, getOperationName(), "perm has ", perm.size(),
                      " entries for an operand of rank ", rank);
  SmallVector<bool> seen(rank, false);
  SmallVector<int64_t> shape;
  for (int64_t axis : perm) {
    if (axis < 0 || axis >= rank || seen[axis])
      return inferError(loc, getOperationName(), "perm [", perm,
                        "] is not a permutation of [0, ", rank, ")");
    seen[axis] = true;
    shape.push_back(type.getDimSize(axis));
  }
  results.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  SmallVector<int64_t> perm = getPermutation();
  bool isIdentity = llvm::all_of(llvm::enumerate(perm), [](auto entry) {
    return static_cast<int64_t>(entry.index()) == entry.value();
  });
  if (isIdentity)
    return getData();
  DenseElementsAttr data = getSmallDense(adaptor.getData());
  if (!data)
    return {};
  if (data.isSplat())
    return DenseElementsAttr::get(getType(), data.getSplatValue<Attribute>());
  SmallVector<int64_t> strides = computeStrides(getData().getType().getShape());
  return rearrangeDense(data, getType(), [&](ArrayRef<int64_t> index) {
    int64_t linear = 0;
    for (auto [resultAxis, sourceAxis] : llvm::enumerate(perm))
      linear += index[resultAxis] * strides[sourceAxis];
    return linear;
  });
}

//===----------------------------------------------------------------------===//
// SqueezeOp / UnsqueezeOp
//===----------------------------------------------------------------------===//

/// Normalizes `axes` against `rank`; fails naming the bad or repeated axis.
static FailureOr<SmallVector<bool>>
normalizeAxisSet(std::optional<Location> loc, StringRef opName,
                 ArrayRef<int64_t> axes, int64_t rank) {
  SmallVector<bool> selected(rank, false);
  for (int64_t axis : axes) {
    std::optional<int64_t> normalized = normalizeAxis(axis, rank);
    if (!normalized)
      return inferError(loc, opName, "axis ", axis,
                        " is out of range for rank ", rank);
    if (selected[*normalized])
      return inferError(loc, opName, "axis ", axis, " is repeated");
    selected[*normalized] = true;
  }
  return selected;
}

bool SqueezeOp::isAliasingView() { return true; }

LogicalResult SqueezeOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          SqueezeOp::Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  if (failed(requireOperands<SqueezeOp>(loc, adaptor.getOperands())))
    return failure();
  auto type = cast<RankedTensorType>(adaptor.getData().getType());
  SmallVector<int64_t> shape;
  if (std::optional<ArrayRef<int64_t>> axes = adaptor.getAxes()) {
    FailureOr<SmallVector<bool>> selected =
        normalizeAxisSet(loc, getOperationName(), *axes, type.getRank());
    if (failed(selected))
      return failure();
    for (auto [axis, size] : llvm::enumerate(type.getShape())) {
      if (!(*selected)[axis]) {
        shape.push_back(size);
        continue;
      }
      if (size != 1)
        return inferError(loc, getOperationName(), "cannot squeeze axis ", axis,
                          " of size ", size, " in ", type);
    }
  } else {
    for (int64_t size : type.getShape())
      if (size != 1)
        shape.push_back(size);
  }
  results.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

OpFoldResult SqueezeOp::fold(FoldAdaptor adaptor) {
  if (getData().getType() == getType())
    return getData();
  return foldReshapeOfConstant(adaptor.getData(), getType());
}

bool UnsqueezeOp::isAliasingView() { return true; }

LogicalResult UnsqueezeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            UnsqueezeOp::Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  if (failed(requireOperands<UnsqueezeOp>(loc, adaptor.getOperands())))
    return failure();
  if (failed(requireAttributes(loc, getOperationName(),
                               {{"axes", adaptor.getAxesAttr()}})))
    return failure();
  auto type = cast<RankedTensorType>(adaptor.getData().getType());
  int64_t resultRank = type.getRank() + adaptor.getAxes().size();
  FailureOr<SmallVector<bool>> inserted =
      normalizeAxisSet(loc, getOperationName(), adaptor.getAxes(), resultRank);
  if (failed(inserted))
    return failure();
  SmallVector<int64_t> shape;
  ArrayRef<int64_t> sizes = type.getShape();
  for (int64_t axis = 0; axis < resultRank; ++axis) {
    if ((*inserted)[axis]) {
      shape.push_back(1);
    } else {
      shape.push_back(sizes.front());
      sizes = sizes.drop_front();
    }
  }
  results.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

OpFoldResult UnsqueezeOp::fold(FoldAdaptor adaptor) {
  return foldReshapeOfConstant(adaptor.getData(), getType());
}

//===----------------------------------------------------------------------===//
// ConcatOp
//===----------------------------------------------------------------------===//

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         ConcatOp::Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  if (failed(requireOperands<ConcatOp>(loc, adaptor.getOperands())))
    return failure();
  if (failed(requireAttributes(loc, getOperationName(),
                               {{"axis", adaptor.getAxisAttr()}})))
    return failure();
  if (adaptor.getInputs().empty())
    return inferError(loc, getOperationName(), "needs at least one input");
  auto first = cast<RankedTensorType>(adaptor.getInputs().front().getType());
  std::optional<int64_t> axis =
      normalizeAxis(static_cast<int64_t>(adaptor.getAxis()), first.getRank());
  if (!axis)
    return inferError(loc, getOperationName(), "axis ",
                      static_cast<int64_t>(adaptor.getAxis()),
                      " is out of range for rank ", first.getRank());
  SmallVector<int64_t> shape(first.getShape());
  shape[*axis] = 0;
  for (Value input : adaptor.getInputs()) {
    auto type = cast<RankedTensorType>(input.getType());
    if (type.getElementType() != first.getElementType() ||
        type.getRank() != first.getRank())
      return inferError(loc, getOperationName(), "input ", type,
                        " does not match ", first, " in rank or element type");
    for (int64_t i = 0; i < type.getRank(); ++i)
      if (i != *axis && type.getDimSize(i) != first.getDimSize(i))
        return inferError(loc, getOperationName(), "input ", type,
                          " differs from ", first, " in dimension ", i,
                          " (not the concat axis)");
    shape[*axis] += type.getDimSize(*axis);
  }
  results.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (getInputs().size() == 1 && getInputs().front().getType() == getType())
    return getInputs().front();
  SmallVector<SmallVector<Attribute>> inputs;
  for (Attribute operand : adaptor.getInputs()) {
    DenseElementsAttr dense = getSmallDense(operand);
    if (!dense)
      return {};
    inputs.emplace_back(dense.getValues<Attribute>());
  }
  if (getType().getNumElements() > kMaxFoldElements)
    return {};
  int64_t axis = *normalizeAxis(getAxis(), getType().getRank());
  ArrayRef<int64_t> shape = getType().getShape();
  int64_t outer = std::accumulate(shape.begin(), shape.begin() + axis,
                                  int64_t{1}, std::multiplies<int64_t>());
  SmallVector<Attribute> values;
  for (int64_t block = 0; block < outer; ++block) {
    for (auto [input, inputValues] : llvm::zip(getInputs(), inputs)) {
      int64_t blockSize = cast<ShapedType>(input.getType()).getNumElements() /
                          std::max<int64_t>(outer, 1);
      auto begin = inputValues.begin() + block * blockSize;
      values.append(begin, begin + blockSize);
    }
  }
  return DenseElementsAttr::get(getType(), values);
}

//===----------------------------------------------------------------------===//
// SplitOp
//===----------------------------------------------------------------------===//

LogicalResult SplitOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        SplitOp::Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  if (failed(requireOperands<SplitOp>(loc, adaptor.getOperands())))
    return failure();
  if (failed(requireAttributes(loc, getOperationName(),
                               {{"split", adaptor.getSplitAttr()}})))
    return failure();
  auto type = cast<RankedTensorType>(adaptor.getInput().getType());
  int64_t rawAxis = static_cast<int64_t>(adaptor.getAxis());
  std::optional<int64_t> axis = normalizeAxis(rawAxis, type.getRank());
  if (!axis)
    return inferError(loc, getOperationName(), "axis ", rawAxis,
                      " is out of range for rank ", type.getRank());
  ArrayRef<int64_t> sizes = adaptor.getSplit();
  if (sizes.empty())
    return inferError(loc, getOperationName(), "split sizes are empty");
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size < 0)
      return inferError(loc, getOperationName(), "split size ", size,
                        " is negative");
    total += size;
  }
  if (total != type.getDimSize(*axis))
    return inferError(loc, getOperationName(), "split sizes [", sizes,
                      "] sum to ", total, " but axis ", *axis, " of ", type,
                      " has size ", type.getDimSize(*axis));
  for (int64_t size : sizes) {
    SmallVector<int64_t> shape(type.getShape());
    shape[*axis] = size;
    results.push_back(RankedTensorType::get(shape, type.getElementType()));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// SliceOp
//===----------------------------------------------------------------------===//

namespace {
/// One sliced axis after ONNX clamping: elements start, start + step, ...
struct AxisSlice {
  int64_t start = 0;
  int64_t step = 1;
  int64_t count = 0;
};
} // namespace

/// ceil(span / |step|) for span > 0, without overflow for any step
/// (INT64_MIN and INT64_MAX included).
static int64_t ceilDivide(int64_t span, int64_t step) {
  uint64_t magnitude =
      step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
  return static_cast<int64_t>((static_cast<uint64_t>(span) - 1) / magnitude +
                              1);
}

/// Per-axis (start, step, count) of a slice; axes that are not sliced keep
/// (0, 1, dim). Fails with a diagnostic on malformed attributes.
static FailureOr<SmallVector<AxisSlice>>
computeSlice(std::optional<Location> loc, StringRef opName,
             ArrayRef<int64_t> shape, ArrayRef<int64_t> starts,
             ArrayRef<int64_t> ends, ArrayRef<int64_t> axes,
             ArrayRef<int64_t> steps) {
  int64_t rank = shape.size();
  if (starts.size() != ends.size() || starts.size() != axes.size() ||
      starts.size() != steps.size())
    return inferError(loc, opName, "starts, ends, axes and steps have ",
                      starts.size(), ", ", ends.size(), ", ", axes.size(),
                      " and ", steps.size(), " entries; they must be equal");
  SmallVector<AxisSlice> slices;
  for (int64_t dim : shape)
    slices.push_back({0, 1, dim});
  SmallVector<bool> seen(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    std::optional<int64_t> axis = normalizeAxis(axes[i], rank);
    if (!axis)
      return inferError(loc, opName, "axis ", axes[i],
                        " is out of range for rank ", rank);
    if (seen[*axis])
      return inferError(loc, opName, "axis ", axes[i], " is repeated");
    seen[*axis] = true;
    int64_t step = steps[i];
    if (step == 0)
      return inferError(loc, opName, "step for axis ", axes[i], " is zero");
    int64_t dim = shape[*axis];
    int64_t start = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t end = ends[i] < 0 ? ends[i] + dim : ends[i];
    int64_t count;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      count = end > start ? ceilDivide(end - start, step) : 0;
    } else if (dim == 0) {
      start = 0;
      count = 0;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      count = start > end ? ceilDivide(start - end, step) : 0;
    }
    slices[*axis] = {start, step, count};
  }
  return slices;
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        SliceOp::Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  if (failed(requireOperands<SliceOp>(loc, adaptor.getOperands())))
    return failure();
  if (failed(requireAttributes(loc, getOperationName(),
                               {{"starts", adaptor.getStartsAttr()},
                                {"ends", adaptor.getEndsAttr()},
                                {"axes", adaptor.getAxesAttr()},
                                {"steps", adaptor.getStepsAttr()}})))
    return failure();
  auto type = cast<RankedTensorType>(adaptor.getData().getType());
  FailureOr<SmallVector<AxisSlice>> slices = computeSlice(
      loc, getOperationName(), type.getShape(), adaptor.getStarts(),
      adaptor.getEnds(), adaptor.getAxes(), adaptor.getSteps());
  if (failed(slices))
    return failure();
  SmallVector<int64_t> shape;
  for (const AxisSlice &slice : *slices)
    shape.push_back(slice.count);
  results.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  if (getData().getType() == getType() &&
      llvm::all_of(getSteps(), [](int64_t step) { return step == 1; }))
    return getData();
  DenseElementsAttr data = getSmallDense(adaptor.getData());
  if (!data)
    return {};
  if (data.isSplat())
    return DenseElementsAttr::get(getType(), data.getSplatValue<Attribute>());
  ArrayRef<int64_t> shape = getData().getType().getShape();
  FailureOr<SmallVector<AxisSlice>> slices =
      computeSlice(std::nullopt, getOperationName(), shape, getStarts(),
                   getEnds(), getAxes(), getSteps());
  if (failed(slices))
    return {};
  SmallVector<int64_t> strides = computeStrides(shape);
  return rearrangeDense(data, getType(), [&](ArrayRef<int64_t> index) {
    int64_t linear = 0;
    for (auto [axis, slice] : llvm::enumerate(*slices))
      linear += (slice.start + index[axis] * slice.step) * strides[axis];
    return linear;
  });
}

//===----------------------------------------------------------------------===//
// GatherOp / GatherElementsOp
//===----------------------------------------------------------------------===//

LogicalResult GatherOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         GatherOp::Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  if (failed(requireOperands<GatherOp>(loc, adaptor.getOperands())))
    return failure();
  auto data = cast<RankedTensorType>(adaptor.getData().getType());
  auto indices = cast<RankedTensorType>(adaptor.getIndices().getType());
  int64_t rawAxis = static_cast<int64_t>(adaptor.getAxis());
  std::optional<int64_t> axis = normalizeAxis(rawAxis, data.getRank());
  if (!axis)
    return inferError(loc, getOperationName(), "axis ", rawAxis,
                      " is out of range for data of rank ", data.getRank());
  SmallVector<int64_t> shape(data.getShape().take_front(*axis));
  llvm::append_range(shape, indices.getShape());
  llvm::append_range(shape, data.getShape().drop_front(*axis + 1));
  results.push_back(RankedTensorType::get(shape, data.getElementType()));
  return success();
}

namespace {
/// An unbind: `data` read only by gathers of one scalar constant index each
/// along one axis, every index of the axis once (PyTorch's `unbind` and
/// `qkv[0], qkv[1], qkv[2]` as the exporters write them: torchvision's
/// ViT attention splits its packed projection this way). One split whose
/// pieces are reshaped to the gathers' results replaces them: one kernel
/// instead of one per index, and a gradient that is one concat, where each
/// gather's gradient scattered into a zero table of the whole input and the
/// tables were summed (ViT-B/16's fp16 step spent 6 ms of 32 on those).
struct GatherUnbindToSplit : OpRewritePattern<GatherOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GatherOp op,
                                PatternRewriter &rewriter) const override {
    Value data = op.getData();
    auto dataType = dyn_cast<RankedTensorType>(data.getType());
    if (!dataType || !dataType.hasStaticShape())
      return failure();
    int64_t rank = dataType.getRank();
    std::optional<int64_t> axis = normalizeAxis(op.getAxis(), rank);
    if (!axis)
      return failure();
    int64_t count = dataType.getDimSize(*axis);
    if (count < 2 || count > 64)
      return failure();
    SmallVector<GatherOp> byIndex(size_t(count), nullptr);
    for (Operation *user : data.getUsers()) {
      auto gather = dyn_cast<GatherOp>(user);
      DenseIntElementsAttr index;
      if (!gather || gather.getData() != data ||
          normalizeAxis(gather.getAxis(), rank) != axis ||
          !matchPattern(gather.getIndices(), m_Constant(&index)) ||
          cast<ShapedType>(index.getType()).getRank() != 0)
        return failure();
      int64_t value = (*index.getValues<APInt>().begin()).getSExtValue();
      if (value < 0)
        value += count;
      if (value < 0 || value >= count || byIndex[size_t(value)])
        return failure();
      byIndex[size_t(value)] = gather;
    }
    if (llvm::is_contained(byIndex, nullptr))
      return failure();
    SmallVector<int64_t> pieceShape(dataType.getShape());
    pieceShape[size_t(*axis)] = 1;
    auto pieceType =
        RankedTensorType::get(pieceShape, dataType.getElementType());
    rewriter.setInsertionPointAfterValue(data);
    auto split = SplitOp::create(
        rewriter, byIndex.front().getLoc(),
        SmallVector<Type>(size_t(count), pieceType), data,
        rewriter.getI64IntegerAttr(*axis),
        rewriter.getDenseI64ArrayAttr(SmallVector<int64_t>(size_t(count), 1)));
    for (auto [gather, piece] : llvm::zip(byIndex, split.getResults())) {
      rewriter.setInsertionPoint(gather);
      rewriter.replaceOpWithNewOp<ReshapeOp>(gather, gather.getType(), piece);
    }
    return success();
  }
};
} // namespace

void GatherOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                           MLIRContext *context) {
  patterns.add<GatherUnbindToSplit>(context);
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr data = getSmallDense(adaptor.getData());
  DenseElementsAttr indices = getSmallDense(adaptor.getIndices());
  if (!data || !indices || getType().getNumElements() > kMaxFoldElements)
    return {};
  ArrayRef<int64_t> dataShape = getData().getType().getShape();
  int64_t axis = *normalizeAxis(getAxis(), dataShape.size());
  int64_t axisSize = dataShape[axis];
  SmallVector<int64_t> indexValues;
  for (const APInt &index : indices.getValues<APInt>()) {
    int64_t value = index.getSExtValue();
    if (value < 0)
      value += axisSize;
    if (value < 0 || value >= axisSize)
      return {};
    indexValues.push_back(value);
  }
  if (data.isSplat())
    return DenseElementsAttr::get(getType(), data.getSplatValue<Attribute>());
  SmallVector<int64_t> dataStrides = computeStrides(dataShape);
  ArrayRef<int64_t> indicesShape = getIndices().getType().getShape();
  SmallVector<int64_t> indexStrides = computeStrides(indicesShape);
  int64_t indicesRank = indicesShape.size();
  return rearrangeDense(data, getType(), [&](ArrayRef<int64_t> index) {
    int64_t linear = 0;
    for (int64_t i = 0; i < axis; ++i)
      linear += index[i] * dataStrides[i];
    int64_t position = 0;
    for (int64_t i = 0; i < indicesRank; ++i)
      position += index[axis + i] * indexStrides[i];
    linear += indexValues[position] * dataStrides[axis];
    for (int64_t i = axis + 1; i < static_cast<int64_t>(dataShape.size()); ++i)
      linear += index[i - 1 + indicesRank] * dataStrides[i];
    return linear;
  });
}

LogicalResult
GatherElementsOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                   GatherElementsOp::Adaptor adaptor,
                                   SmallVectorImpl<Type> &results) {
  if (failed(requireOperands<GatherElementsOp>(loc, adaptor.getOperands())))
    return failure();
  auto data = cast<RankedTensorType>(adaptor.getData().getType());
  auto indices = cast<RankedTensorType>(adaptor.getIndices().getType());
  if (data.getRank() != indices.getRank())
    return inferError(loc, getOperationName(), "data ", data, " and indices ",
                      indices, " must have the same rank");
  int64_t rawAxis = static_cast<int64_t>(adaptor.getAxis());
  if (!normalizeAxis(rawAxis, data.getRank()))
    return inferError(loc, getOperationName(), "axis ", rawAxis,
                      " is out of range for data of rank ", data.getRank());
  results.push_back(
      RankedTensorType::get(indices.getShape(), data.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// ScatterNDOp
//
// Shape rule and reduction semantics from the ONNX specification (opsets 13,
// 16 and 18); negative indices are accepted as onnxruntime's ScatterND does.
//===----------------------------------------------------------------------===//

LogicalResult ScatterNDOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            ScatterNDOp::Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  if (failed(requireOperands<ScatterNDOp>(loc, adaptor.getOperands())))
    return failure();
  results.push_back(adaptor.getData().getType());
  return success();
}

static bool isScatterReduction(StringRef reduction) {
  return llvm::is_contained({"none", "add", "mul", "max", "min"}, reduction);
}

LogicalResult ScatterNDOp::verify() {
  RankedTensorType data = getData().getType();
  RankedTensorType indices = getIndices().getType();
  RankedTensorType updates = getUpdates().getType();
  if (!isScatterReduction(getReduction()))
    return emitOpError("reduction must be 'none', 'add', 'mul', 'max' or "
                       "'min', got '")
           << getReduction() << "'";
  if (getReduction() != "none" && data.getElementType().isInteger(1))
    return emitOpError("reduction '")
           << getReduction() << "' needs a numeric element type, got " << data;
  if (indices.getRank() < 1)
    return emitOpError("indices must have rank >= 1, got ") << indices;
  int64_t k = indices.getShape().back();
  if (k > data.getRank())
    return emitOpError("indices ")
           << indices << " address " << k << " axes, but data " << data
           << " has rank " << data.getRank();
  if (updates.getElementType() != data.getElementType())
    return emitOpError("updates element type differs from data: ")
           << updates << " vs " << data;
  SmallVector<int64_t> expected(indices.getShape().drop_back());
  llvm::append_range(expected, data.getShape().drop_front(k));
  if (ArrayRef<int64_t>(expected) != updates.getShape())
    return emitOpError("updates ")
           << updates << " must be "
           << RankedTensorType::get(expected, data.getElementType())
           << " (indices.shape[:-1] + data.shape[k:] for data " << data
           << " and indices " << indices << ")";
  return success();
}

/// The value an aliasing view (reshape, flatten, squeeze, unsqueeze,
/// identity) chain starts from: views share their operand's storage.
static Value getViewRoot(Value value) {
  while (Operation *producer = value.getDefiningOp()) {
    auto behavior = dyn_cast<BufferBehaviorOpInterface>(producer);
    if (!behavior || !behavior.isAliasingView())
      break;
    value = producer->getOperand(0);
  }
  return value;
}

/// The result may take `data`'s storage (the kernel then skips the copy and
/// writes the updates over it, as onnxruntime does when it reuses the input
/// buffer), unless `indices` or `updates` share that storage: the kernel
/// would then read what it has already overwritten.
bool ScatterNDOp::canWriteInPlace(unsigned operandIndex) {
  Value root = getViewRoot(getData());
  return operandIndex == 0 && getViewRoot(getIndices()) != root &&
         getViewRoot(getUpdates()) != root;
}

/// One read-combine-write per update element; the copy of `data` (absent
/// when in place) is data movement only.
int64_t ScatterNDOp::getFlops() {
  return getUpdates().getType().getNumElements();
}

/// Combines the current element with an update for `reduction` (not
/// "none"); integers compare signed unless the type is unsigned.
static Attribute combineScatterElement(StringRef reduction, Attribute current,
                                       Attribute update) {
  if (auto integer = dyn_cast<IntegerAttr>(current)) {
    APInt a = integer.getValue();
    APInt b = cast<IntegerAttr>(update).getValue();
    bool isUnsigned = isUnsignedInteger(integer.getType());
    APInt result = a;
    if (reduction == "add")
      result = a + b;
    else if (reduction == "mul")
      result = a * b;
    else if (reduction == "max")
      result = (isUnsigned ? a.ult(b) : a.slt(b)) ? b : a;
    else
      result = (isUnsigned ? b.ult(a) : b.slt(a)) ? b : a;
    return IntegerAttr::get(integer.getType(), result);
  }
  auto floating = cast<FloatAttr>(current);
  APFloat a = floating.getValue();
  APFloat b = cast<FloatAttr>(update).getValue();
  APFloat result = a;
  if (reduction == "add")
    result.add(b, APFloat::rmNearestTiesToEven);
  else if (reduction == "mul")
    result.multiply(b, APFloat::rmNearestTiesToEven);
  else if (reduction == "max") // std::max(a, b)
    result = a.compare(b) == APFloat::cmpLessThan ? b : a;
  else // std::min(a, b)
    result = b.compare(a) == APFloat::cmpLessThan ? b : a;
  return FloatAttr::get(floating.getType(), result);
}

OpFoldResult ScatterNDOp::fold(FoldAdaptor adaptor) {
  ArrayRef<int64_t> indicesShape = getIndices().getType().getShape();
  int64_t numTuples = ShapedType::getNumElements(indicesShape.drop_back());
  // Nothing to scatter: the result is `data`.
  if (numTuples == 0)
    return getData();
  DenseElementsAttr data = getSmallDense(adaptor.getData());
  DenseElementsAttr indices = getSmallDense(adaptor.getIndices());
  DenseElementsAttr updates = getSmallDense(adaptor.getUpdates());
  if (!data || !indices || !updates ||
      getType().getNumElements() > kMaxFoldElements)
    return {};
  ArrayRef<int64_t> dataShape = getType().getShape();
  int64_t k = indicesShape.back();
  int64_t sliceSize = ShapedType::getNumElements(dataShape.drop_front(k));
  SmallVector<int64_t> strides = computeStrides(dataShape);
  SmallVector<int64_t> indexValues;
  for (const APInt &index : indices.getValues<APInt>())
    indexValues.push_back(index.getSExtValue());
  SmallVector<Attribute> values(data.getValues<Attribute>());
  SmallVector<Attribute> updateValues(updates.getValues<Attribute>());
  StringRef reduction = getReduction();
  // Tuples apply in order, so with reduction "none" a repeated index takes
  // the last update (ONNX leaves that case undefined).
  for (int64_t tuple = 0; tuple < numTuples; ++tuple) {
    int64_t base = 0;
    for (int64_t axis = 0; axis < k; ++axis) {
      int64_t index = indexValues[tuple * k + axis];
      if (index < 0)
        index += dataShape[axis];
      // Out of range: left to the runtime, which reports it.
      if (index < 0 || index >= dataShape[axis])
        return {};
      base += index * strides[axis];
    }
    for (int64_t j = 0; j < sliceSize; ++j) {
      Attribute update = updateValues[tuple * sliceSize + j];
      Attribute &current = values[base + j];
      current = reduction == "none"
                    ? update
                    : combineScatterElement(reduction, current, update);
    }
  }
  return DenseElementsAttr::get(getType(), values);
}

//===----------------------------------------------------------------------===//
// ExpandOp
//===----------------------------------------------------------------------===//

LogicalResult ExpandOp::verify() {
  auto input = getInput().getType();
  auto result = getType();
  if (input.getElementType() != result.getElementType())
    return emitOpError("changes the element type from ")
           << input.getElementType() << " to " << result.getElementType();
  std::optional<SmallVector<int64_t>> shape =
      broadcastShapes(input.getShape(), result.getShape());
  if (!shape || ArrayRef<int64_t>(*shape) != result.getShape())
    return emitOpError("cannot broadcast ") << input << " to " << result;
  return success();
}

OpFoldResult ExpandOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return broadcastDense(getSmallDense(adaptor.getInput()),
                        getType().getShape());
}

//===----------------------------------------------------------------------===//
// PadOp
//===----------------------------------------------------------------------===//

LogicalResult PadOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      PadOp::Adaptor adaptor,
                                      SmallVectorImpl<Type> &results) {
  if (failed(requireOperands<PadOp>(loc, adaptor.getOperands())))
    return failure();
  if (failed(requireAttributes(loc, getOperationName(),
                               {{"pads", adaptor.getPadsAttr()}})))
    return failure();
  auto type = cast<RankedTensorType>(adaptor.getData().getType());
  int64_t rank = type.getRank();
  ArrayRef<int64_t> pads = adaptor.getPads();
  if (static_cast<int64_t>(pads.size()) != 2 * rank)
    return inferError(loc, getOperationName(), "pads has ", pads.size(),
                      " entries; rank ", rank, " needs ", 2 * rank);
  StringRef mode = adaptor.getMode();
  if (mode != "constant" && mode != "reflect" && mode != "edge" &&
      mode != "wrap")
    return inferError(loc, getOperationName(), "unknown mode '", mode, "'");
  SmallVector<int64_t> shape;
  for (int64_t axis = 0; axis < rank; ++axis) {
    int64_t size = type.getDimSize(axis);
    if (llvm::AddOverflow(size, pads[axis], size) ||
        llvm::AddOverflow(size, pads[axis + rank], size))
      return inferError(loc, getOperationName(), "pads on axis ", axis,
                        " overflow 64 bits");
    if (size < 0)
      return inferError(loc, getOperationName(), "pads crop axis ", axis,
                        " of ", type, " to a negative size");
    shape.push_back(size);
  }
  results.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// ResizeOp
//===----------------------------------------------------------------------===//

LogicalResult ResizeOp::verify() {
  auto input = getX().getType();
  auto result = getType();
  if (input.getRank() != result.getRank() ||
      input.getElementType() != result.getElementType())
    return emitOpError("result ")
           << result << " must have the rank and element type of " << input;
  if (getMode() != "nearest" && getMode() != "linear")
    return emitOpError("mode must be 'nearest' or 'linear', got '")
           << getMode() << "'";
  StringRef transform = getCoordinateTransformationMode();
  if (!llvm::is_contained({"half_pixel", "half_pixel_symmetric",
                           "pytorch_half_pixel", "align_corners", "asymmetric",
                           "tf_crop_and_resize"},
                          transform))
    return emitOpError("unknown coordinate_transformation_mode '")
           << transform << "'";
  if (!llvm::is_contained(
          {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"},
          getNearestMode()))
    return emitOpError("unknown nearest_mode '") << getNearestMode() << "'";
  return success();
}

//===----------------------------------------------------------------------===//
// IdentityOp
//===----------------------------------------------------------------------===//

bool IdentityOp::isAliasingView() { return true; }

OpFoldResult IdentityOp::fold(FoldAdaptor) { return getInput(); }

//===----------------------------------------------------------------------===//
// ConstantOfShapeOp
//===----------------------------------------------------------------------===//

LogicalResult ConstantOfShapeOp::verify() {
  auto input = getInput().getType();
  auto result = getType();
  if (input.getRank() != 1 || input.getDimSize(0) != result.getRank())
    return emitOpError("shape operand ")
           << input << " does not have one entry per dimension of " << result;
  if (std::optional<ElementsAttr> value = getValue()) {
    if (value->getNumElements() != 1)
      return emitOpError("value must have exactly one element, got ")
             << value->getNumElements();
    if (value->getElementType() != result.getElementType())
      return emitOpError("value element type ")
             << value->getElementType() << " differs from the result's "
             << result.getElementType();
  }
  return success();
}

OpFoldResult ConstantOfShapeOp::fold(FoldAdaptor) {
  if (getType().getNumElements() > kMaxFoldElements)
    return {};
  Type elementType = getType().getElementType();
  if (std::optional<ElementsAttr> value = getValue()) {
    auto dense = dyn_cast<DenseElementsAttr>(*value);
    if (!dense || dense.getNumElements() != 1 ||
        dense.getElementType() != elementType)
      return {};
    return DenseElementsAttr::get(getType(),
                                  *dense.getValues<Attribute>().begin());
  }
  if (isa<FloatType>(elementType))
    return DenseElementsAttr::get(getType(), FloatAttr::get(elementType, 0.0));
  if (isa<IntegerType>(elementType))
    return DenseElementsAttr::get(getType(), IntegerAttr::get(elementType, 0));
  return {};
}

//===----------------------------------------------------------------------===//
// RangeOp
//===----------------------------------------------------------------------===//

LogicalResult RangeOp::verify() {
  auto result = getType();
  if (result.getRank() != 1)
    return emitOpError("result must be 1-D, got ") << result;
  for (Value operand : {getStart(), getLimit(), getDelta()}) {
    auto type = cast<RankedTensorType>(operand.getType());
    if (type.getRank() != 0 || type.getElementType() != result.getElementType())
      return emitOpError("start, limit and delta must be scalars of ")
             << result.getElementType() << ", got " << type;
  }
  return success();
}

OpFoldResult RangeOp::fold(FoldAdaptor adaptor) {
  DenseElementsAttr start = getSmallDense(adaptor.getStart());
  DenseElementsAttr limit = getSmallDense(adaptor.getLimit());
  DenseElementsAttr delta = getSmallDense(adaptor.getDelta());
  if (!start || !limit || !delta)
    return {};
  // An op not yet verified (createOrFold) may mix element types.
  Type elementType = getType().getElementType();
  if (getType().getRank() != 1 ||
      llvm::any_of(ArrayRef<DenseElementsAttr>{start, limit, delta},
                   [&](DenseElementsAttr scalar) {
                     return scalar.getNumElements() != 1 ||
                            scalar.getElementType() != elementType;
                   }))
    return {};
  int64_t count = getType().getDimSize(0);
  if (count > kMaxFoldElements)
    return {};
  if (isa<IntegerType>(elementType)) {
    APInt first = start.getSplatValue<APInt>();
    APInt step = delta.getSplatValue<APInt>();
    APInt last = limit.getSplatValue<APInt>();
    if (step.isZero())
      return {};
    // The length the result type claims must be ONNX's.
    int64_t expected = std::max<int64_t>(
        0, llvm::divideCeilSigned(last.getSExtValue() - first.getSExtValue(),
                                  step.getSExtValue()));
    if (expected != count)
      return {};
    SmallVector<APInt> values;
    for (int64_t i = 0; i < count; ++i)
      values.push_back(first + step * APInt(step.getBitWidth(), i));
    return DenseElementsAttr::get(getType(), values);
  }
  if (auto floatType = dyn_cast<FloatType>(elementType)) {
    double first = start.getSplatValue<APFloat>().convertToDouble();
    double step = delta.getSplatValue<APFloat>().convertToDouble();
    double last = limit.getSplatValue<APFloat>().convertToDouble();
    if (step == 0.0)
      return {};
    int64_t expected = std::max<int64_t>(
        0, static_cast<int64_t>(std::ceil((last - first) / step)));
    if (expected != count)
      return {};
    SmallVector<Attribute> values;
    for (int64_t i = 0; i < count; ++i)
      values.push_back(FloatAttr::get(floatType, first + i * step));
    return DenseElementsAttr::get(getType(), values);
  }
  return {};
}
