//===- OnnxComposedReductions.cpp - ONNX reductions as memopt ops ---------===//
//
// Handlers of GraphImporter (GraphImporter.h) for ONNX ops that reduce along
// axes and have no memopt op of their own:
//   ArgMax / ArgMin     the first (or last, select_last_index) position of the
//                       extreme: where(x == max, position, sentinel) reduced
//                       by reduce_max in f32, cast to i64 (positions up to
//                       2^24 are exact)
//   Det                 Laplace expansion along the first row for n <= 4
//                       (slices, mul, add / sub)
//   TopK                k rounds of ArgMax over the elements not taken yet
//                       (ties: the lower index first), the values gathered
//                       from the input; k is a compile-time constant
//   Hardmax             x == max, keeping the first along the axis
//                       (cum_sum of the matches equals 1), as 0 / 1
//   ReduceProd          a tree of slices and multiplications over the
//                       reduced elements viewed as one trailing axis (exact
//                       for integers, no log / exp)
//   GlobalMaxPool       reduce_max over the spatial axes
//   LpNormalization     x / reduce_sum(|x|) or x / sqrt(reduce_sum(x^2)),
//                       0 where the norm is 0
//   MeanVarianceNormalization   (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9),
//                       its ONNX function body
//   LpPool              (average_pool(|x|^p, pads counted) * kernel size)^(1/p)
//   LayerNormalization  memopt.layer_normalization for Y; the Mean and
//                       InvStdDev outputs, when used, from reduce_mean
//   LRN                 x / (bias + alpha / size * the channel window's sum of
//                       squares)^beta, the sum an average_pool over channels
// onnxruntime has kernels for these; their definitions here are the ONNX
// reference implementation's (onnx/reference/ops/op_argmax.py, ...), built
// from memopt ops at import the way torch-mlir's OnnxToTorch lowers the ops
// it has no single torch op for.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/IR/ShapeUtils.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

#include <cmath>

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::onnx_import;

/// The axis attribute of `node` normalized for `rank`, or an error.
static FailureOr<int64_t> axisOf(const Node &node, int64_t axisAttr,
                                 int64_t rank) {
  std::optional<int64_t> axis = normalizeAxis(axisAttr, rank);
  if (!axis)
    return emitError(node.loc) << node.describe() << ": axis " << axisAttr
                               << " is out of range for rank " << rank;
  return *axis;
}

/// [1, ..., n, ..., 1] (n at `axis`) holding 0..n-1 as f32.
static Value positions(OpBuilder &builder, Location loc, int64_t rank,
                       int64_t axis, int64_t n) {
  SmallVector<int64_t> shape(rank, 1);
  shape[axis] = n;
  SmallVector<float> values;
  for (int64_t i = 0; i < n; ++i)
    values.push_back(static_cast<float>(i));
  auto type = RankedTensorType::get(shape, builder.getF32Type());
  return ConstantOp::create(builder, loc,
                            DenseElementsAttr::get(type, ArrayRef(values)))
      .getResult();
}

FailureOr<SmallVector<Value>>
GraphImporter::importArgExtreme(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  RankedTensorType type = typeOf(*input);
  int64_t rank = type.getRank();
  auto axis = axisOf(node, intAttr(node, "axis", 0), rank);
  if (failed(axis))
    return failure();
  int64_t keepdims = intAttr(node, "keepdims", 1);
  bool last = intAttr(node, "select_last_index", 0) != 0;
  int64_t size = type.getDimSize(*axis);
  if (size > (int64_t{1} << 24))
    return emitError(node.loc) << node.describe() << ": " << size
                               << " positions along the axis (at most 2^24)";
  // The runtime's reductions compute floats: integers compare as f32.
  Value x = *input;
  if (!isa<FloatType>(type.getElementType()))
    x = build(node, "memopt.cast", {x}, {},
              {RankedTensorType::get(type.getShape(), builder.getF32Type())});
  if (node.type() == "ArgMin")
    x = build(node, "memopt.neg", {x});
  Value maximum =
      build(node, "memopt.reduce_max", {x}, reduceAttrs({*axis}, 1));
  Value matches = build(node, "memopt.equal", {x, maximum});
  Value position = positions(builder, node.loc, rank, *axis, size);
  Type f32 = builder.getF32Type();
  // First match: the smallest position, as -max(-position) with `size` for
  // the others; last match: the largest, -1 for the others.
  Value result;
  if (last) {
    Value candidates =
        build(node, "memopt.where",
              {matches, position, scalarConstant(node.loc, f32, -1)});
    result = build(node, "memopt.reduce_max", {candidates},
                   reduceAttrs({*axis}, keepdims));
  } else {
    Value negated = build(node, "memopt.neg", {position});
    Value candidates =
        build(node, "memopt.where",
              {matches, negated, scalarConstant(node.loc, f32, -double(size))});
    result = build(node, "memopt.neg",
                   {build(node, "memopt.reduce_max", {candidates},
                          reduceAttrs({*axis}, keepdims))});
  }
  if (!result)
    return failure();
  result = build(
      node, "memopt.cast", {result}, {},
      {RankedTensorType::get(typeOf(result).getShape(), builder.getI64Type())});
  if (!result)
    return failure();
  return SmallVector<Value>{result};
}

FailureOr<SmallVector<Value>> GraphImporter::importHardmax(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  RankedTensorType type = typeOf(*input);
  if (!isa<FloatType>(type.getElementType()))
    return emitError(node.loc)
           << node.describe() << ": expected a floating-point input";
  auto axis = axisOf(node, intAttr(node, "axis", -1), type.getRank());
  if (failed(axis))
    return failure();
  Value x = *input;
  Value maximum =
      build(node, "memopt.reduce_max", {x}, reduceAttrs({*axis}, 1));
  Value matches = build(node, "memopt.equal", {x, maximum});
  auto countType = RankedTensorType::get(type.getShape(), builder.getF32Type());
  SmallVector<NamedAttribute> scanAttrs;
  setAttr(scanAttrs, "axis", builder.getI64IntegerAttr(*axis));
  Value running = build(
      node, "memopt.cum_sum",
      {build(node, "memopt.cast", {matches}, {}, {countType})}, scanAttrs);
  Value first = build(
      node, "memopt.and",
      {matches,
       build(node, "memopt.equal",
             {running, scalarConstant(node.loc, builder.getF32Type(), 1)})});
  Value result = build(node, "memopt.cast", {first}, {}, {type});
  if (!result)
    return failure();
  return SmallVector<Value>{result};
}

FailureOr<SmallVector<Value>>
GraphImporter::importReduceProd(const Node &node) {
  auto data = lookup(node, 0);
  if (failed(data))
    return failure();
  RankedTensorType type = typeOf(*data);
  auto axes = reduceAxes(node, type);
  if (failed(axes))
    return failure();
  if (!*axes)
    return SmallVector<Value>{*data};
  ArrayRef<int64_t> reduced = (*axes)->first;
  bool keepdims = (*axes)->second != 0;
  SmallVector<int64_t> perm, outShape;
  int64_t kept = 1, count = 1;
  for (int64_t i = 0; i < type.getRank(); ++i) {
    bool isReduced = llvm::is_contained(reduced, i);
    if (!isReduced) {
      perm.push_back(i);
      kept *= type.getDimSize(i);
    } else {
      count *= type.getDimSize(i);
    }
    if (!isReduced || keepdims)
      outShape.push_back(isReduced ? 1 : type.getDimSize(i));
  }
  auto outType = RankedTensorType::get(outShape, type.getElementType());
  if (count == 0) {
    Attribute one =
        isa<FloatType>(type.getElementType())
            ? Attribute(builder.getFloatAttr(type.getElementType(), 1))
            : Attribute(builder.getIntegerAttr(type.getElementType(), 1));
    return SmallVector<Value>{
        createConstant(node.loc, DenseElementsAttr::get(outType, one))};
  }
  perm.append(reduced.begin(), reduced.end());
  Value x = *data;
  if (!llvm::equal(perm, llvm::seq<int64_t>(0, type.getRank()))) {
    SmallVector<NamedAttribute> attrs;
    setAttr(attrs, "perm", builder.getDenseI64ArrayAttr(perm));
    x = build(node, "memopt.transpose", {x}, attrs);
  }
  if (!x)
    return failure();
  auto rows = reshapeTo(node, x, {kept, count});
  if (failed(rows))
    return failure();
  // Multiply the first half by the second until one column is left; an odd
  // column out joins the next round.
  Value product = *rows;
  for (int64_t width = count; width > 1 && product;) {
    int64_t half = width / 2;
    Value paired = build(node, "memopt.mul",
                         {sliceAlong(node, product, 1, 0, half),
                          sliceAlong(node, product, 1, half, 2 * half)});
    if (width % 2) {
      SmallVector<NamedAttribute> attrs;
      setAttr(attrs, "axis", builder.getI64IntegerAttr(1));
      paired = build(node, "memopt.concat",
                     {paired, sliceAlong(node, product, 1, width - 1, width)},
                     attrs);
    }
    product = paired;
    width = half + width % 2;
  }
  if (!product)
    return failure();
  auto result = reshapeTo(node, product, outShape);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>>
GraphImporter::importGlobalMaxPool(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  int64_t rank = typeOf(*input).getRank();
  if (rank < 3)
    return emitError(node.loc)
           << node.describe() << ": expected an input [N, C, spatial...]";
  SmallVector<int64_t> axes;
  for (int64_t i = 2; i < rank; ++i)
    axes.push_back(i);
  Value result =
      build(node, "memopt.reduce_max", {*input}, reduceAttrs(axes, 1));
  if (!result)
    return failure();
  return SmallVector<Value>{result};
}

FailureOr<SmallVector<Value>>
GraphImporter::importLpNormalization(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  RankedTensorType type = typeOf(*input);
  auto axis = axisOf(node, intAttr(node, "axis", -1), type.getRank());
  if (failed(axis))
    return failure();
  int64_t p = intAttr(node, "p", 2);
  if (p != 1 && p != 2)
    return emitError(node.loc)
           << node.describe() << ": p " << p << " is not 1 or 2";
  Value x = *input;
  Value norm;
  if (p == 1) {
    norm = build(node, "memopt.reduce_sum", {build(node, "memopt.abs", {x})},
                 reduceAttrs({*axis}, 1));
  } else {
    norm = build(
        node, "memopt.sqrt",
        {build(node, "memopt.reduce_sum", {build(node, "memopt.mul", {x, x})},
               reduceAttrs({*axis}, 1))});
  }
  // A zero norm gives zeros (the reference's 0 / 0 = 0).
  Value zero = scalarConstant(node.loc, type.getElementType(), 0);
  Value result = build(node, "memopt.where",
                       {build(node, "memopt.equal", {norm, zero}), zero,
                        build(node, "memopt.div", {x, norm})});
  if (!result)
    return failure();
  return SmallVector<Value>{result};
}

FailureOr<SmallVector<Value>>
GraphImporter::importMeanVarianceNormalization(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  RankedTensorType type = typeOf(*input);
  auto axes = normalizeAxes(
      intsAttr(node, "axes").value_or(SmallVector<int64_t>{0, 2, 3}),
      type.getRank(), node.loc, node.describe());
  if (failed(axes))
    return failure();
  Value x = *input;
  Type elementType = type.getElementType();
  Value mean = build(node, "memopt.reduce_mean", {x}, reduceAttrs(*axes, 1));
  Value meanOfSquares =
      build(node, "memopt.reduce_mean", {build(node, "memopt.mul", {x, x})},
            reduceAttrs(*axes, 1));
  Value variance =
      build(node, "memopt.sub",
            {meanOfSquares, build(node, "memopt.mul", {mean, mean})});
  Value deviation = build(node, "memopt.add",
                          {build(node, "memopt.sqrt", {variance}),
                           scalarConstant(node.loc, elementType, 1e-9)});
  Value result = build(node, "memopt.div",
                       {build(node, "memopt.sub", {x, mean}), deviation});
  if (!result)
    return failure();
  return SmallVector<Value>{result};
}

FailureOr<SmallVector<Value>> GraphImporter::importLpPool(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  RankedTensorType type = typeOf(*input);
  Type elementType = type.getElementType();
  if (!isa<FloatType>(elementType))
    return emitError(node.loc)
           << node.describe() << ": expected a floating-point input";
  auto attrs = windowAttributes(node, {*input}, {"p"});
  if (failed(attrs))
    return failure();
  // Padding counts as zeros in the sum, so the average over the whole window
  // times its size is the sum.
  setAttr(*attrs, "count_include_pad", builder.getI64IntegerAttr(1));
  int64_t windowSize = 1;
  for (const NamedAttribute &attr : *attrs)
    if (attr.getName() == "kernel_shape")
      for (int64_t k : cast<DenseI64ArrayAttr>(attr.getValue()).asArrayRef())
        windowSize *= k;
  int64_t p = intAttr(node, "p", 2);
  if (p <= 0)
    return emitError(node.loc)
           << node.describe() << ": p " << p << " is not positive";
  Value x = *input;
  Value powered = p == 1   ? build(node, "memopt.abs", {x})
                  : p == 2 ? build(node, "memopt.mul", {x, x})
                           : build(node, "memopt.pow",
                                   {build(node, "memopt.abs", {x}),
                                    scalarConstant(node.loc, elementType, p)});
  Value sum = build(node, "memopt.mul",
                    {build(node, "memopt.average_pool", {powered}, *attrs),
                     scalarConstant(node.loc, elementType, windowSize)});
  Value result =
      p == 1   ? sum
      : p == 2 ? build(node, "memopt.sqrt", {sum})
               : build(node, "memopt.pow",
                       {sum, scalarConstant(node.loc, elementType, 1.0 / p)});
  if (!result)
    return failure();
  return SmallVector<Value>{result};
}

FailureOr<SmallVector<Value>>
GraphImporter::importLayerNormalization(const Node &node) {
  // The normalized output; Mean and InvStdDev below when they are read.
  auto normalized = importGeneric(node, /*numResults=*/1);
  if (failed(normalized))
    return failure();
  bool wantsStatistics = false;
  for (int i = 1; i < node.proto.output_size() && i < 3; ++i)
    wantsStatistics |= usedNames.contains(node.proto.output(i));
  if (!wantsStatistics)
    return normalized;
  // Mean and InvStdDev: the statistics over the axes from `axis`, kept as
  // size-1 dimensions (ONNX's stash_type f32 is the type memopt computes
  // f32 inputs in).
  Value x = *lookup(node, 0);
  RankedTensorType type = typeOf(x);
  auto axis = axisOf(node, intAttr(node, "axis", -1), type.getRank());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> axes;
  for (int64_t i = *axis; i < type.getRank(); ++i)
    axes.push_back(i);
  Value mean = build(node, "memopt.reduce_mean", {x}, reduceAttrs(axes, 1));
  Value centered = build(node, "memopt.sub", {x, mean});
  Value variance = build(node, "memopt.reduce_mean",
                         {build(node, "memopt.mul", {centered, centered})},
                         reduceAttrs(axes, 1));
  const onnx::AttributeProto *epsilon = node.attribute("epsilon");
  Value inverse =
      build(node, "memopt.reciprocal",
            {build(node, "memopt.sqrt",
                   {build(node, "memopt.add",
                          {variance,
                           scalarConstant(node.loc, type.getElementType(),
                                          epsilon ? epsilon->f() : 1e-5f)})})});
  if (!inverse)
    return failure();
  return SmallVector<Value>{(*normalized)[0], mean, inverse};
}

FailureOr<SmallVector<Value>> GraphImporter::importLRN(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  RankedTensorType type = typeOf(*input);
  int64_t size = intAttr(node, "size", 0);
  if (type.getRank() < 3 || !isa<FloatType>(type.getElementType()) || size <= 0)
    return emitError(node.loc)
           << node.describe()
           << ": expected a floating-point input [N, C, ...] and a positive "
              "size";
  const onnx::AttributeProto *alphaAttr = node.attribute("alpha");
  const onnx::AttributeProto *betaAttr = node.attribute("beta");
  const onnx::AttributeProto *biasAttr = node.attribute("bias");
  double alpha = alphaAttr ? alphaAttr->f() : 1e-4f;
  double beta = betaAttr ? betaAttr->f() : 0.75f;
  double bias = biasAttr ? biasAttr->f() : 1.0f;
  // The sum of squares over channels [c - floor((size-1)/2),
  // c + ceil((size-1)/2)]: a [size, 1] window sum over [N, 1, C, rest].
  int64_t batch = type.getDimSize(0), channels = type.getDimSize(1);
  int64_t rest = type.getNumElements() / std::max<int64_t>(batch * channels, 1);
  int64_t before = (size - 1) / 2, after = size - 1 - before;
  Value x = *input;
  Value square = build(node, "memopt.mul", {x, x});
  if (!square)
    return failure();
  auto view = reshapeTo(node, square, {batch, 1, channels, rest});
  if (failed(view))
    return failure();
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "kernel_shape", builder.getDenseI64ArrayAttr({size, 1}));
  setAttr(attrs, "strides", builder.getDenseI64ArrayAttr({1, 1}));
  setAttr(attrs, "dilations", builder.getDenseI64ArrayAttr({1, 1}));
  setAttr(attrs, "pads", builder.getDenseI64ArrayAttr({before, 0, after, 0}));
  setAttr(attrs, "count_include_pad", builder.getI64IntegerAttr(1));
  Type elementType = type.getElementType();
  // average * size * alpha / size.
  Value scaled = build(node, "memopt.mul",
                       {build(node, "memopt.average_pool", {*view}, attrs),
                        scalarConstant(node.loc, elementType, alpha)});
  if (!scaled)
    return failure();
  auto sum = reshapeTo(node, scaled, type.getShape());
  if (failed(sum))
    return failure();
  Value denominator =
      build(node, "memopt.pow",
            {build(node, "memopt.add",
                   {*sum, scalarConstant(node.loc, elementType, bias)}),
             scalarConstant(node.loc, elementType, beta)});
  Value result = build(node, "memopt.div", {x, denominator});
  if (!result)
    return failure();
  return SmallVector<Value>{result};
}

FailureOr<SmallVector<Value>> GraphImporter::importTopK(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  auto kValues = constantInts(node, 1);
  if (failed(kValues))
    return failure();
  RankedTensorType type = typeOf(*input);
  int64_t rank = type.getRank();
  auto axis = axisOf(node, intAttr(node, "axis", -1), rank);
  if (failed(axis))
    return failure();
  int64_t size = type.getDimSize(*axis);
  int64_t k = kValues->empty() ? -1 : kValues->front();
  if (kValues->size() != 1 || k < 1 || k > size)
    return emitError(node.loc) << node.describe() << ": k must be one value "
                               << "in [1, " << size << "]";
  if (size > (int64_t{1} << 24))
    return emitError(node.loc) << node.describe() << ": " << size
                               << " positions along the axis (at most 2^24)";
  // k rounds of ArgMax over the elements not taken yet: the first position
  // of the extreme wins ties (ONNX: the lower index first); the values are
  // gathered from the input, so they are exact whatever the type.
  Type f32 = builder.getF32Type();
  // Compared in f32 (the runtime's reductions compute floats).
  Value x = *input;
  if (!type.getElementType().isF32())
    x = build(node, "memopt.cast", {x}, {},
              {RankedTensorType::get(type.getShape(), f32)});
  if (intAttr(node, "largest", 1) == 0)
    x = build(node, "memopt.neg", {x});
  Value position = positions(builder, node.loc, rank, *axis, size);
  Value negatedPosition = build(node, "memopt.neg", {position});
  Value lowest = scalarConstant(node.loc, f32, -INFINITY);
  Value none = scalarConstant(node.loc, f32, -double(size));
  Value taken;
  SmallVector<Value> indices, values;
  SmallVector<int64_t> oneShape(type.getShape());
  oneShape[*axis] = 1;
  auto indexType = RankedTensorType::get(oneShape, builder.getI64Type());
  SmallVector<NamedAttribute> gatherAttrs;
  setAttr(gatherAttrs, "axis", builder.getI64IntegerAttr(*axis));
  for (int64_t round = 0; round < k; ++round) {
    Value open = taken ? build(node, "memopt.where", {taken, lowest, x}) : x;
    Value maximum =
        build(node, "memopt.reduce_max", {open}, reduceAttrs({*axis}, 1));
    Value matches = build(node, "memopt.equal", {open, maximum});
    if (taken)
      matches = build(node, "memopt.and",
                      {matches, build(node, "memopt.not", {taken})});
    Value candidates =
        build(node, "memopt.where", {matches, negatedPosition, none});
    Value chosen = build(node, "memopt.neg",
                         {build(node, "memopt.reduce_max", {candidates},
                                reduceAttrs({*axis}, 1))});
    Value index = build(node, "memopt.cast", {chosen}, {}, {indexType});
    indices.push_back(index);
    values.push_back(
        build(node, "memopt.gather_elements", {*input, index}, gatherAttrs));
    Value hit = build(node, "memopt.equal", {position, chosen});
    taken = taken ? build(node, "memopt.or", {taken, hit}) : hit;
    if (!taken)
      return failure();
  }
  SmallVector<NamedAttribute> concatAttrs;
  setAttr(concatAttrs, "axis", builder.getI64IntegerAttr(*axis));
  Value allValues = values.size() == 1
                        ? values.front()
                        : build(node, "memopt.concat", values, concatAttrs);
  Value allIndices = indices.size() == 1
                         ? indices.front()
                         : build(node, "memopt.concat", indices, concatAttrs);
  if (!allValues || !allIndices)
    return failure();
  return SmallVector<Value>{allValues, allIndices};
}

/// det of `m` [..., n, n] by Laplace expansion along the first row: the
/// minors built from slices (n! products: small matrices only).
static Value
laplaceDeterminant(function_ref<Value(Value, int64_t, int64_t, int64_t)> slice,
                   function_ref<Value(StringRef, ArrayRef<Value>)> op,
                   function_ref<Value(ArrayRef<Value>, int64_t)> concat,
                   Value m, int64_t n, int64_t rank) {
  if (!m)
    return {};
  if (n == 1)
    return slice(slice(m, rank - 2, 0, 1), rank - 1, 0, 1);
  Value rest = slice(m, rank - 2, 1, n);
  Value sum;
  for (int64_t j = 0; j < n; ++j) {
    SmallVector<Value> columns;
    if (j > 0)
      columns.push_back(slice(rest, rank - 1, 0, j));
    if (j < n - 1)
      columns.push_back(slice(rest, rank - 1, j + 1, n));
    Value minor = concat(columns, rank - 1);
    Value term =
        op("memopt.mul",
           {slice(slice(m, rank - 2, 0, 1), rank - 1, j, j + 1),
            laplaceDeterminant(slice, op, concat, minor, n - 1, rank)});
    sum = !sum ? term : op(j % 2 ? "memopt.sub" : "memopt.add", {sum, term});
  }
  return sum;
}

FailureOr<SmallVector<Value>> GraphImporter::importDet(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  RankedTensorType type = typeOf(*input);
  int64_t rank = type.getRank();
  if (rank < 2 || type.getDimSize(rank - 1) != type.getDimSize(rank - 2) ||
      !isa<FloatType>(type.getElementType()))
    return emitError(node.loc) << node.describe()
                               << ": expected floating-point square matrices "
                                  "[..., n, n], got "
                               << type;
  int64_t n = type.getDimSize(rank - 1);
  if (n < 1 || n > 4)
    return emitError(node.loc)
           << node.describe() << ": " << n << " x " << n
           << " matrices (the Laplace expansion is built for n <= 4)";
  auto slice = [&](Value value, int64_t axis, int64_t start, int64_t end) {
    return sliceAlong(node, value, axis, start, end);
  };
  auto op = [&](StringRef name, ArrayRef<Value> operands) {
    return build(node, name, operands);
  };
  auto concat = [&](ArrayRef<Value> values, int64_t axis) {
    return concatAlong(node, values, axis);
  };
  Value det = laplaceDeterminant(slice, op, concat, *input, n, rank);
  if (!det)
    return failure();
  auto result = reshapeTo(node, det, type.getShape().drop_back(2));
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}
