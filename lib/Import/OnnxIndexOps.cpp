//===- OnnxIndexOps.cpp - ONNX ops that select by position ----------------===//
//
// Handlers of GraphImporter (GraphImporter.h) for ONNX ops that choose
// elements by their position, imported as memopt ops:
//   Trilu            where(mask, x, 0) with a constant triangular mask (k is a
//                    compile-time constant)
//   ScatterElements  scatter_nd with full index tuples: the (wrapped) indices
//                    on `axis`, each element's own position on the other
//                    axes (constant), as onnx-mlir and onnxruntime's
//                    ScatterND-based lowering do
//   CenterCropPad    slice (crop, the odd element off the end) then pad
//                    (zeros, the odd element at the end), the reference
//                    implementation's split
//   RotaryEmbedding  (opset 23) slices of the rotated part, cos / sin rows
//                    gathered by position_ids, x1 cos - x2 sin and
//                    x1 sin + x2 cos, put back halves or interleaved
//                    (onnx/reference/ops/op_rotary_embedding.py)
//   AffineGrid       theta times the constant homogeneous base grid (a
//                    matmul), as onnx/reference/ops/op_affine_grid.py
//   MaxUnpool        scatter_nd of X into zeros at the flat indices, padded
//                    at the end to output_shape (op_max_unpool.py)
//   NonZero          of a constant input: folded to the constant coordinates
//   Col2Im           scatter_nd (add) of every input element to its constant
//                    image position, those in the padding to a scratch slot
//                    (op_col2im.py's loops turned into an index table)
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/IR/ShapeUtils.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::onnx_import;

FailureOr<SmallVector<Value>> GraphImporter::importTrilu(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  RankedTensorType type = typeOf(*input);
  if (type.getRank() < 2)
    return emitError(node.loc)
           << node.describe() << ": expected an input of rank 2 or more";
  int64_t k = 0;
  if (node.hasInput(1)) {
    auto values = constantInts(node, 1);
    if (failed(values))
      return failure();
    if (values->size() != 1)
      return emitError(node.loc) << node.describe() << ": k must be a scalar";
    k = values->front();
  }
  bool upper = intAttr(node, "upper", 1) != 0;
  int64_t rows = type.getDimSize(type.getRank() - 2);
  int64_t columns = type.getDimSize(type.getRank() - 1);
  SmallVector<bool> keep;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < columns; ++j)
      keep.push_back(upper ? j - i >= k : j - i <= k);
  auto maskType = RankedTensorType::get({rows, columns}, builder.getI1Type());
  Value mask = createConstant(node.loc, DenseElementsAttr::get(maskType, keep));
  Value zero = scalarConstant(node.loc, type.getElementType(), 0);
  Value result = build(node, "memopt.where", {mask, *input, zero});
  if (!result)
    return failure();
  return SmallVector<Value>{result};
}

FailureOr<SmallVector<Value>>
GraphImporter::importScatterElements(const Node &node) {
  auto data = lookup(node, 0);
  auto indices = lookup(node, 1);
  auto updates = lookup(node, 2);
  if (failed(data) || failed(indices) || failed(updates))
    return failure();
  if (!*indices || !*updates)
    return emitError(node.loc)
           << node.describe() << ": indices and updates are required";
  RankedTensorType dataType = typeOf(*data);
  RankedTensorType indexType = typeOf(*indices);
  int64_t rank = dataType.getRank();
  if (indexType.getRank() != rank ||
      typeOf(*updates).getShape() != indexType.getShape())
    return emitError(node.loc)
           << node.describe() << ": indices " << indexType << " and updates "
           << typeOf(*updates) << " must have one shape and the rank of data "
           << dataType;
  std::optional<int64_t> axis = normalizeAxis(intAttr(node, "axis", 0), rank);
  if (!axis)
    return emitError(node.loc)
           << node.describe() << ": axis " << intAttr(node, "axis", 0)
           << " is out of range for rank " << rank;
  ArrayRef<int64_t> shape = indexType.getShape();
  Type i64 = builder.getI64Type();
  auto componentType = RankedTensorType::get(shape, i64);
  Value index = *indices;
  if (indexType.getElementType() != i64)
    index = build(node, "memopt.cast", {index}, {}, {componentType});
  // Negative indices count from the end of the axis.
  Value wrapped = build(
      node, "memopt.where",
      {build(node, "memopt.less", {index, scalarConstant(node.loc, i64, 0)}),
       build(
           node, "memopt.add",
           {index, scalarConstant(node.loc, i64, dataType.getDimSize(*axis))}),
       index});
  SmallVector<int64_t> columnShape(shape);
  columnShape.push_back(1);
  auto columnType = RankedTensorType::get(columnShape, i64);
  int64_t count = indexType.getNumElements();
  SmallVector<Value> columns;
  for (int64_t d = 0; d < rank; ++d) {
    if (d == *axis) {
      columns.push_back(
          build(node, "memopt.reshape", {wrapped}, {}, {columnType}));
      continue;
    }
    // The position of each element along axis d.
    int64_t inner = 1;
    for (int64_t e = d + 1; e < rank; ++e)
      inner *= shape[e];
    SmallVector<int64_t> position;
    for (int64_t i = 0; i < count; ++i)
      position.push_back((i / inner) % shape[d]);
    columns.push_back(createConstant(
        node.loc, DenseElementsAttr::get(columnType, ArrayRef(position))));
  }
  SmallVector<NamedAttribute> concatAttrs;
  setAttr(concatAttrs, "axis", builder.getI64IntegerAttr(rank));
  Value tuples = rank == 1 ? columns.front()
                           : build(node, "memopt.concat", columns, concatAttrs);
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "reduction",
          builder.getStringAttr(stringAttr(node, "reduction", "none")));
  Value result =
      build(node, "memopt.scatter_nd", {*data, tuples, *updates}, attrs);
  if (!result)
    return failure();
  return SmallVector<Value>{result};
}

FailureOr<SmallVector<Value>>
GraphImporter::importCenterCropPad(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  auto sizes = constantInts(node, 1);
  if (failed(sizes))
    return failure();
  RankedTensorType type = typeOf(*input);
  int64_t rank = type.getRank();
  SmallVector<int64_t> axes;
  if (auto attr = intsAttr(node, "axes")) {
    for (int64_t axis : *attr) {
      std::optional<int64_t> normalized = normalizeAxis(axis, rank);
      if (!normalized)
        return emitError(node.loc) << node.describe() << ": axis " << axis
                                   << " is out of range for rank " << rank;
      axes.push_back(*normalized);
    }
  } else {
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  if (axes.size() != sizes->size())
    return emitError(node.loc) << node.describe() << ": " << sizes->size()
                               << " sizes for " << axes.size() << " axes";
  Value x = *input;
  SmallVector<int64_t> pads(2 * rank, 0);
  bool padded = false;
  for (auto [axis, size] : llvm::zip(axes, *sizes)) {
    int64_t dim = type.getDimSize(axis);
    if (size < 0)
      return emitError(node.loc)
             << node.describe() << ": size " << size << " is negative";
    if (size < dim) {
      int64_t start = (dim - size) / 2;
      x = sliceAlong(node, x, axis, start, start + size);
    } else if (size > dim) {
      pads[axis] = (size - dim) / 2;
      pads[axis + rank] = size - dim - pads[axis];
      padded = true;
    }
  }
  if (padded) {
    SmallVector<NamedAttribute> attrs;
    setAttr(attrs, "pads", builder.getDenseI64ArrayAttr(pads));
    x = build(node, "memopt.pad", {x}, attrs);
  }
  if (!x)
    return failure();
  return SmallVector<Value>{x};
}

FailureOr<SmallVector<Value>>
GraphImporter::importRotaryEmbedding(const Node &node) {
  auto input = lookup(node, 0);
  auto cosCache = lookup(node, 1);
  auto sinCache = lookup(node, 2);
  auto positionIds = lookup(node, 3);
  if (failed(input) || failed(cosCache) || failed(sinCache) ||
      failed(positionIds))
    return failure();
  if (!*cosCache || !*sinCache)
    return emitError(node.loc)
           << node.describe() << ": cos_cache and sin_cache are required";
  RankedTensorType type = typeOf(*input);
  int64_t rank = type.getRank();
  if (rank != 3 && rank != 4)
    return emitError(node.loc)
           << node.describe() << ": expected an input of rank 3 or 4";
  // Work on [B, H, S, D] (rank 4 as given) or [B, S, H, D] (rank 3 split
  // into heads); cos / sin rows [B, S, half] get a size-1 head axis.
  Value x = *input;
  int64_t headAxis = 1;
  if (rank == 3) {
    int64_t heads = intAttr(node, "num_heads", 0);
    int64_t hidden = type.getDimSize(2);
    if (heads <= 0 || hidden % heads != 0)
      return emitError(node.loc)
             << node.describe() << ": num_heads " << heads
             << " must be positive and divide the hidden size " << hidden;
    auto split = reshapeTo(
        node, x,
        {type.getDimSize(0), type.getDimSize(1), heads, hidden / heads});
    if (failed(split))
      return failure();
    x = *split;
    headAxis = 2;
  }
  int64_t headSize = typeOf(x).getDimSize(3);
  int64_t rotated = intAttr(node, "rotary_embedding_dim", 0);
  if (rotated == 0)
    rotated = headSize;
  if (rotated < 0 || rotated > headSize || rotated % 2)
    return emitError(node.loc)
           << node.describe() << ": rotary_embedding_dim " << rotated
           << " must be even and at most the head size " << headSize;
  int64_t half = rotated / 2;
  Value cos = *cosCache, sin = *sinCache;
  if (*positionIds) {
    cos = build(node, "memopt.gather", {cos, *positionIds});
    sin = build(node, "memopt.gather", {sin, *positionIds});
  }
  if (!cos || !sin)
    return failure();
  if (typeOf(cos).getRank() != 3 || typeOf(cos).getDimSize(2) != half)
    return emitError(node.loc)
           << node.describe() << ": the cos / sin rows " << typeOf(cos)
           << " must be [batch, sequence, " << half << "]";
  SmallVector<NamedAttribute> unsqueezeAttrs;
  setAttr(unsqueezeAttrs, "axes", builder.getDenseI64ArrayAttr({headAxis}));
  cos = build(node, "memopt.unsqueeze", {cos}, unsqueezeAttrs);
  sin = build(node, "memopt.unsqueeze", {sin}, unsqueezeAttrs);

  bool interleaved = intAttr(node, "interleaved", 0) != 0;
  Value rotatePart =
      rotated == headSize ? x : sliceAlong(node, x, 3, 0, rotated);
  Value x1 = interleaved ? sliceAlong(node, rotatePart, 3, 0, rotated, 2)
                         : sliceAlong(node, rotatePart, 3, 0, half);
  Value x2 = interleaved ? sliceAlong(node, rotatePart, 3, 1, rotated, 2)
                         : sliceAlong(node, rotatePart, 3, half, rotated);
  auto mul = [&](Value a, Value b) {
    return build(node, "memopt.mul", {a, b});
  };
  Value real = build(node, "memopt.sub", {mul(cos, x1), mul(sin, x2)});
  Value imaginary = build(node, "memopt.add", {mul(sin, x1), mul(cos, x2)});
  SmallVector<NamedAttribute> lastAxis;
  setAttr(lastAxis, "axis", builder.getI64IntegerAttr(interleaved ? 4 : 3));
  Value result;
  if (interleaved) {
    SmallVector<NamedAttribute> pairAttrs;
    setAttr(pairAttrs, "axes", builder.getDenseI64ArrayAttr({4}));
    Value pairs =
        build(node, "memopt.concat",
              {build(node, "memopt.unsqueeze", {real}, pairAttrs),
               build(node, "memopt.unsqueeze", {imaginary}, pairAttrs)},
              lastAxis);
    if (!pairs)
      return failure();
    auto merged = reshapeTo(node, pairs, typeOf(rotatePart).getShape());
    if (failed(merged))
      return failure();
    result = *merged;
  } else {
    result = build(node, "memopt.concat", {real, imaginary}, lastAxis);
  }
  if (rotated != headSize) {
    SmallVector<NamedAttribute> attrs;
    setAttr(attrs, "axis", builder.getI64IntegerAttr(3));
    result = build(node, "memopt.concat",
                   {result, sliceAlong(node, x, 3, rotated, headSize)}, attrs);
  }
  if (!result)
    return failure();
  auto restored = reshapeTo(node, result, type.getShape());
  if (failed(restored))
    return failure();
  return SmallVector<Value>{*restored};
}

FailureOr<SmallVector<Value>>
GraphImporter::importAffineGrid(const Node &node) {
  auto theta = lookup(node, 0);
  if (failed(theta))
    return failure();
  auto size = constantInts(node, 1);
  if (failed(size))
    return failure();
  RankedTensorType thetaType = typeOf(*theta);
  int64_t spatial = static_cast<int64_t>(size->size()) - 2;
  if ((spatial != 2 && spatial != 3) || thetaType.getRank() != 3 ||
      thetaType.getDimSize(1) != spatial ||
      thetaType.getDimSize(2) != spatial + 1)
    return emitError(node.loc)
           << node.describe() << ": theta " << thetaType << " and size of rank "
           << size->size()
           << " must be [N, 2, 3] and [N, C, H, W] or [N, 3, 4] and "
              "[N, C, D, H, W]";
  bool alignCorners = intAttr(node, "align_corners", 0) != 0;
  ArrayRef<int64_t> dims = ArrayRef(*size).drop_front(2);
  int64_t points = 1;
  for (int64_t dim : dims)
    points *= dim;
  // The homogeneous base grid, transposed: row k holds coordinate k (x over
  // the last axis first) of every point, the last row ones.
  auto coordinate = [&](int64_t index, int64_t dim) {
    if (alignCorners)
      return dim == 1 ? -1.0 : -1.0 + 2.0 * index / (dim - 1);
    return (2.0 * index + 1) / dim - 1;
  };
  SmallVector<float> base((spatial + 1) * points, 1.0f);
  for (int64_t point = 0; point < points; ++point) {
    int64_t rest = point;
    for (int64_t axis = spatial - 1; axis >= 0; --axis) {
      int64_t index = rest % dims[axis];
      rest /= dims[axis];
      // Coordinate 0 is x (the last axis), 1 is y, 2 is z.
      base[(spatial - 1 - axis) * points + point] =
          static_cast<float>(coordinate(index, dims[axis]));
    }
  }
  auto baseType =
      RankedTensorType::get({spatial + 1, points}, thetaType.getElementType());
  Value grid = createConstant(node.loc,
                              DenseElementsAttr::get(baseType, ArrayRef(base)));
  Value mapped = build(node, "memopt.matmul", {*theta, grid});
  Value perPoint = transposeBy(node, mapped, {0, 2, 1});
  if (!perPoint)
    return failure();
  SmallVector<int64_t> shape = {thetaType.getDimSize(0)};
  shape.append(dims.begin(), dims.end());
  shape.push_back(spatial);
  auto result = reshapeTo(node, perPoint, shape);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>> GraphImporter::importMaxUnpool(const Node &node) {
  auto x = lookup(node, 0);
  auto indices = lookup(node, 1);
  if (failed(x) || failed(indices))
    return failure();
  if (!*indices)
    return emitError(node.loc) << node.describe() << ": indices are missing";
  RankedTensorType type = typeOf(*x);
  int64_t spatial = type.getRank() - 2;
  auto kernel = intsAttr(node, "kernel_shape");
  SmallVector<int64_t> strides =
      intsAttr(node, "strides").value_or(SmallVector<int64_t>(spatial, 1));
  SmallVector<int64_t> pads =
      intsAttr(node, "pads").value_or(SmallVector<int64_t>(2 * spatial, 0));
  if (spatial < 1 || !kernel ||
      static_cast<int64_t>(kernel->size()) != spatial ||
      static_cast<int64_t>(strides.size()) != spatial ||
      static_cast<int64_t>(pads.size()) != 2 * spatial ||
      typeOf(*indices).getShape() != type.getShape())
    return emitError(node.loc)
           << node.describe()
           << ": expected kernel_shape, strides and pads per spatial axis and "
              "indices of the input's shape";
  // The unpooled shape; indices count elements of it flattened, and a larger
  // output_shape pads it with zeros at the end.
  SmallVector<int64_t> unpooled = {type.getDimSize(0), type.getDimSize(1)};
  for (int64_t i = 0; i < spatial; ++i)
    unpooled.push_back((type.getDimSize(i + 2) - 1) * strides[i] -
                       (pads[i] + pads[i + spatial]) + (*kernel)[i]);
  SmallVector<int64_t> outShape = unpooled;
  if (node.hasInput(2)) {
    auto given = constantInts(node, 2);
    if (failed(given))
      return failure();
    if (given->size() != unpooled.size())
      return emitError(node.loc)
             << node.describe() << ": output_shape has " << given->size()
             << " entries, not " << unpooled.size();
    outShape = *given;
  }
  int64_t total = 1;
  for (int64_t dim : unpooled)
    total *= dim;
  int64_t count = type.getNumElements();
  Type i64 = builder.getI64Type();
  Value index = *indices;
  if (typeOf(index).getElementType() != i64)
    index = build(node, "memopt.cast", {index}, {},
                  {RankedTensorType::get(type.getShape(), i64)});
  Value tuples = build(node, "memopt.reshape", {index}, {},
                       {RankedTensorType::get({count, 1}, i64)});
  Value updates =
      build(node, "memopt.reshape", {*x}, {},
            {RankedTensorType::get({count}, type.getElementType())});
  auto flatType = RankedTensorType::get({total}, type.getElementType());
  Value zeros = createConstant(
      node.loc, DenseElementsAttr::get(
                    flatType, builder.getFloatAttr(type.getElementType(), 0)));
  Value scattered = build(node, "memopt.scatter_nd", {zeros, tuples, updates});
  if (!scattered)
    return failure();
  auto result = reshapeTo(node, scattered, unpooled);
  if (failed(result))
    return failure();
  if (outShape == unpooled)
    return SmallVector<Value>{*result};
  SmallVector<int64_t> padding(2 * unpooled.size(), 0);
  for (size_t i = 0; i < unpooled.size(); ++i) {
    if (outShape[i] < unpooled[i])
      return emitError(node.loc)
             << node.describe() << ": output_shape [" << formatShape(outShape)
             << "] is smaller than the unpooled [" << formatShape(unpooled)
             << "]";
    padding[unpooled.size() + i] = outShape[i] - unpooled[i];
  }
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "pads", builder.getDenseI64ArrayAttr(padding));
  Value padded = build(node, "memopt.pad", {*result}, attrs);
  if (!padded)
    return failure();
  return SmallVector<Value>{padded};
}

FailureOr<SmallVector<Value>> GraphImporter::importCol2Im(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  auto image = constantInts(node, 1);
  auto block = constantInts(node, 2);
  if (failed(image) || failed(block))
    return failure();
  RankedTensorType type = typeOf(*input);
  int64_t spatial = image->size();
  SmallVector<int64_t> strides =
      intsAttr(node, "strides").value_or(SmallVector<int64_t>(spatial, 1));
  SmallVector<int64_t> dilations =
      intsAttr(node, "dilations").value_or(SmallVector<int64_t>(spatial, 1));
  SmallVector<int64_t> pads =
      intsAttr(node, "pads").value_or(SmallVector<int64_t>(2 * spatial, 0));
  if (type.getRank() != 3 || spatial < 1 ||
      static_cast<int64_t>(block->size()) != spatial ||
      static_cast<int64_t>(strides.size()) != spatial ||
      static_cast<int64_t>(dilations.size()) != spatial ||
      static_cast<int64_t>(pads.size()) != 2 * spatial)
    return emitError(node.loc)
           << node.describe()
           << ": expected an input [N, C * block, L] and image_shape, "
              "block_shape, strides, dilations (and 2x pads) per spatial axis";
  // Blocks per axis, and the output position of every (channel, kernel
  // offset, block) element of the input; positions in the padding go to a
  // scratch slot past the image.
  int64_t kernel = 1, blocks = 1, imageSize = 1;
  SmallVector<int64_t> counts;
  for (int64_t d = 0; d < spatial; ++d) {
    int64_t span = dilations[d] * ((*block)[d] - 1) + 1;
    int64_t count =
        ((*image)[d] + pads[d] + pads[d + spatial] - span) / strides[d] + 1;
    if (count <= 0 || (*block)[d] <= 0)
      return emitError(node.loc)
             << node.describe() << ": no block fits along axis " << d;
    counts.push_back(count);
    kernel *= (*block)[d];
    blocks *= count;
    imageSize *= (*image)[d];
  }
  int64_t batch = type.getDimSize(0);
  if (type.getDimSize(1) % kernel != 0 || type.getDimSize(2) != blocks)
    return emitError(node.loc)
           << node.describe() << ": input " << type << " does not hold "
           << kernel << " kernel positions x " << blocks << " blocks";
  int64_t channels = type.getDimSize(1) / kernel;
  int64_t elements = channels * kernel * blocks;
  SmallVector<int64_t> imageStrides(spatial, 1);
  for (int64_t d = spatial - 2; d >= 0; --d)
    imageStrides[d] = imageStrides[d + 1] * (*image)[d + 1];
  SmallVector<int64_t> positions;
  positions.reserve(elements);
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t k = 0; k < kernel; ++k)
      for (int64_t l = 0; l < blocks; ++l) {
        int64_t restK = k, restL = l, flat = 0;
        bool inside = true;
        for (int64_t d = spatial - 1; d >= 0; --d) {
          int64_t kd = restK % (*block)[d], ld = restL % counts[d];
          restK /= (*block)[d];
          restL /= counts[d];
          int64_t at = ld * strides[d] - pads[d] + kd * dilations[d];
          inside &= at >= 0 && at < (*image)[d];
          flat += at * imageStrides[d];
        }
        positions.push_back(inside ? c * imageSize + flat
                                   : channels * imageSize);
      }
  Type elementType = type.getElementType();
  auto tupleType = RankedTensorType::get({elements, 1}, builder.getI64Type());
  Value tuples = createConstant(
      node.loc, DenseElementsAttr::get(tupleType, ArrayRef(positions)));
  auto rows = reshapeTo(node, *input, {batch, elements});
  if (failed(rows))
    return failure();
  Value updates = transposeBy(node, *rows, {1, 0});
  auto slotsType =
      RankedTensorType::get({channels * imageSize + 1, batch}, elementType);
  Value zeros = createConstant(
      node.loc,
      DenseElementsAttr::get(slotsType, builder.getFloatAttr(elementType, 0)));
  SmallVector<NamedAttribute> add;
  setAttr(add, "reduction", builder.getStringAttr("add"));
  Value summed =
      build(node, "memopt.scatter_nd", {zeros, tuples, updates}, add);
  Value kept = sliceAlong(node, summed, 0, 0, channels * imageSize);
  Value result = transposeBy(node, kept, {1, 0});
  if (!result)
    return failure();
  SmallVector<int64_t> shape = {batch, channels};
  shape.append(image->begin(), image->end());
  auto reshaped = reshapeTo(node, result, shape);
  if (failed(reshaped))
    return failure();
  return SmallVector<Value>{*reshaped};
}

FailureOr<SmallVector<Value>> GraphImporter::importNonZero(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  // The count of non-zeros decides the result's shape: only an input that
  // folds to a constant (a mask or table computed from shapes) has one.
  auto values = constantFloats(node, 0);
  if (failed(values))
    return failure();
  RankedTensorType type = typeOf(*input);
  int64_t rank = type.getRank();
  SmallVector<int64_t> hits;
  for (auto [i, v] : llvm::enumerate(*values))
    if (v != 0)
      hits.push_back(i);
  int64_t count = hits.size();
  // [rank, count]: row d holds the d-th coordinate of every hit, in order.
  SmallVector<int64_t> coordinates(std::max<int64_t>(rank, 1) * count);
  for (auto [j, flat] : llvm::enumerate(hits)) {
    int64_t rest = flat;
    for (int64_t d = rank - 1; d >= 0; --d) {
      coordinates[d * count + j] = rest % type.getDimSize(d);
      rest /= type.getDimSize(d);
    }
  }
  if (rank == 0)
    coordinates.assign(count, 0);
  auto resultType = RankedTensorType::get({rank, count}, builder.getI64Type());
  return SmallVector<Value>{createConstant(
      node.loc, DenseElementsAttr::get(resultType, ArrayRef(coordinates)))};
}
