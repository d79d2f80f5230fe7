//===- OnnxComposedAttention.cpp - ONNX Attention (opset 23) --------------===//
//
// Handler of GraphImporter (GraphImporter.h) for ONNX Attention, imported as
// the matmul / softmax ops it is defined by, in the order of the ONNX
// reference implementation (onnx/reference/ops/op_attention.py) and of the
// schema's function body (onnx/defs/nn/utils.cc):
//   3-D Q, K, V [B, S, heads * D] -> [B, heads, S, D] (reshape, transpose)
//   K, V appended to past_key / past_value on the sequence axis (the
//   present_key / present_value outputs)
//   Q * sqrt(scale) @ (K * sqrt(scale))^T, scale 1 / sqrt(D) by default
//   softcap: softcap * tanh(scores / softcap)
//   bias: the mask (a boolean mask as 0 / -inf, padded with -inf up to the
//   key length) plus, with is_causal, a constant bottom-right causal bias
//   (key j allowed for query i when j <= i + past length)
//   softmax over the keys; a row whose bias is all -inf gives zeros
//   grouped-query attention: each K / V head repeated for its query heads
//   (expand + reshape, heads interleaved as np.repeat)
//   the optional qk_matmul_output (mode 0 / 1: the scores, 2: with the bias,
//   3: the probabilities)
// --memopt-fuse-attention may then match the result into memopt.attention,
// as it matches the exporters' own spelling of the same graph.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::onnx_import;

FailureOr<SmallVector<Value>> GraphImporter::importAttention(const Node &node) {
  SmallVector<Value> inputs;
  for (int i = 0; i < 6; ++i) {
    auto value = lookup(node, i);
    if (failed(value))
      return failure();
    inputs.push_back(*value);
  }
  if (node.hasInput(6))
    return emitError(node.loc)
           << node.describe()
           << ": nonpad_kv_seqlen (an external key/value cache) is not "
              "supported";
  Value q = inputs[0], k = inputs[1], v = inputs[2], mask = inputs[3];
  Value pastKey = inputs[4], pastValue = inputs[5];
  if (!q || !k || !v)
    return emitError(node.loc) << node.describe() << ": Q, K and V are needed";
  if (bool(pastKey) != bool(pastValue))
    return emitError(node.loc)
           << node.describe() << ": past_key and past_value come together";
  if (intAttr(node, "left_window_size", -1) >= 0 ||
      intAttr(node, "right_window_size", -1) >= 0)
    return emitError(node.loc)
           << node.describe() << ": sliding windows are not supported";
  int64_t rank = typeOf(q).getRank();
  if ((rank != 3 && rank != 4) || typeOf(k).getRank() != rank ||
      typeOf(v).getRank() != rank)
    return emitError(node.loc)
           << node.describe() << ": Q, K and V must all be 3-D or all 4-D";
  Type elementType = typeOf(q).getElementType();
  auto unary = [&](StringRef opName, Value value) {
    return createOne(node, opName, {value}, {});
  };
  auto binary = [&](StringRef opName, Value lhs, Value rhs) {
    return createOne(node, opName, {lhs, rhs}, {});
  };
  auto transpose = [&](Value value, ArrayRef<int64_t> perm) {
    SmallVector<NamedAttribute> attrs;
    setAttr(attrs, "perm", builder.getDenseI64ArrayAttr(perm));
    return createOne(node, "memopt.transpose", {value}, attrs);
  };
  auto scalar = [&](double value) {
    return scalarConstant(node.loc, elementType, value);
  };
  const double negInf = -std::numeric_limits<double>::infinity();

  // [B, S, heads * D] -> [B, heads, S, D].
  if (rank == 3) {
    int64_t qHeads = intAttr(node, "q_num_heads", 0);
    int64_t kvHeads = intAttr(node, "kv_num_heads", 0);
    if (qHeads <= 0 || kvHeads <= 0)
      return emitError(node.loc)
             << node.describe()
             << ": 3-D inputs need q_num_heads and kv_num_heads";
    for (auto [value, heads] : {std::pair<Value *, int64_t>{&q, qHeads},
                                {&k, kvHeads},
                                {&v, kvHeads}}) {
      ArrayRef<int64_t> shape = typeOf(*value).getShape();
      if (shape[2] % heads != 0)
        return emitError(node.loc)
               << node.describe() << ": hidden size " << shape[2]
               << " is not a multiple of " << heads << " heads";
      auto split = reshapeTo(node, *value,
                             {shape[0], shape[1], heads, shape[2] / heads});
      if (failed(split))
        return failure();
      auto moved = transpose(*split, {0, 2, 1, 3});
      if (failed(moved))
        return failure();
      *value = *moved;
    }
  }
  ArrayRef<int64_t> qShape = typeOf(q).getShape();
  int64_t batch = qShape[0], qHeads = qShape[1], qLength = qShape[2];
  int64_t headSize = qShape[3];

  // The cache: present = concat(past, new) on the sequence axis.
  int64_t pastLength = 0;
  if (pastKey) {
    pastLength = typeOf(pastKey).getDimSize(2);
    SmallVector<NamedAttribute> attrs;
    setAttr(attrs, "axis", builder.getI64IntegerAttr(2));
    auto keys = createOne(node, "memopt.concat", {pastKey, k}, attrs);
    auto values = createOne(node, "memopt.concat", {pastValue, v}, attrs);
    if (failed(keys) || failed(values))
      return failure();
    k = *keys;
    v = *values;
  }
  Value presentKey = k, presentValue = v;
  int64_t kvHeads = typeOf(k).getDimSize(1);
  int64_t kvLength = typeOf(k).getDimSize(2);

  // Grouped-query attention: each K / V head serves qHeads / kvHeads query
  // heads, repeated in place ([h0, h0, h1, h1, ...]).
  if (kvHeads != qHeads) {
    if (kvHeads <= 0 || qHeads % kvHeads != 0)
      return emitError(node.loc) << node.describe() << ": " << qHeads
                                 << " query heads are not a multiple of "
                                 << kvHeads << " key/value heads";
    int64_t repeats = qHeads / kvHeads;
    for (Value *value : {&k, &v}) {
      ArrayRef<int64_t> shape = typeOf(*value).getShape();
      auto column =
          reshapeTo(node, *value, {shape[0], kvHeads, 1, shape[2], shape[3]});
      if (failed(column))
        return failure();
      auto spread = createOne(
          node, "memopt.expand", {*column}, {},
          {RankedTensorType::get(
              {shape[0], kvHeads, repeats, shape[2], shape[3]}, elementType)});
      if (failed(spread))
        return failure();
      auto merged =
          reshapeTo(node, *spread, {shape[0], qHeads, shape[2], shape[3]});
      if (failed(merged))
        return failure();
      *value = *merged;
    }
  }

  // Scores: (Q * sqrt(scale)) @ (K * sqrt(scale))^T.
  const onnx::AttributeProto *scaleAttr = node.attribute("scale");
  double scale =
      scaleAttr ? double(scaleAttr->f()) : 1.0 / std::sqrt(double(headSize));
  Value rootScale = scalar(std::sqrt(scale));
  auto scaledQ = binary("memopt.mul", q, rootScale);
  auto scaledK = binary("memopt.mul", k, rootScale);
  if (failed(scaledQ) || failed(scaledK))
    return failure();
  auto keysT = transpose(*scaledK, {0, 1, 3, 2});
  if (failed(keysT))
    return failure();
  auto scores = binary("memopt.matmul", *scaledQ, *keysT);
  if (failed(scores))
    return failure();
  const onnx::AttributeProto *softcapAttr = node.attribute("softcap");
  if (softcapAttr && softcapAttr->f() > 0) {
    Value cap = scalar(softcapAttr->f());
    auto divided = binary("memopt.div", *scores, cap);
    if (failed(divided))
      return failure();
    auto squashed = unary("memopt.tanh", *divided);
    if (failed(squashed))
      return failure();
    scores = binary("memopt.mul", *squashed, cap);
    if (failed(scores))
      return failure();
  }
  Value rawScores = *scores;

  // The additive bias: the mask (padded with -inf to the key length), plus
  // the causal bias.
  Value bias;
  if (mask) {
    if (typeOf(mask).getElementType().isInteger(1)) {
      auto additive = createOne(node, "memopt.where",
                                {mask, scalar(0), scalar(negInf)}, {});
      if (failed(additive))
        return failure();
      mask = *additive;
    }
    RankedTensorType maskType = typeOf(mask);
    int64_t missing = kvLength - maskType.getShape().back();
    if (missing < 0)
      return emitError(node.loc)
             << node.describe() << ": attn_mask has more keys ("
             << maskType.getShape().back() << ") than K (" << kvLength << ")";
    if (missing > 0) {
      SmallVector<int64_t> pads(2 * maskType.getRank(), 0);
      pads.back() = missing;
      SmallVector<NamedAttribute> attrs;
      setAttr(attrs, "pads", builder.getDenseI64ArrayAttr(pads));
      setAttr(attrs, "mode", builder.getStringAttr("constant"));
      setAttr(attrs, "constant_value", builder.getF64FloatAttr(negInf));
      auto padded = createOne(node, "memopt.pad", {mask}, attrs);
      if (failed(padded))
        return failure();
      mask = *padded;
    }
    bias = mask;
  }
  if (intAttr(node, "is_causal", 0)) {
    SmallVector<bool> allowed;
    for (int64_t i = 0; i < qLength; ++i)
      for (int64_t j = 0; j < kvLength; ++j)
        allowed.push_back(j <= i + pastLength);
    auto maskType =
        RankedTensorType::get({qLength, kvLength}, builder.getI1Type());
    Value allowedValue =
        createConstant(node.loc, DenseElementsAttr::get(maskType, allowed));
    auto causal = createOne(node, "memopt.where",
                            {allowedValue, scalar(0), scalar(negInf)}, {});
    if (failed(causal))
      return failure();
    if (bias) {
      auto combined = binary("memopt.add", bias, *causal);
      if (failed(combined))
        return failure();
      bias = *combined;
    } else {
      bias = *causal;
    }
  }
  Value biased = rawScores;
  if (bias) {
    auto added = binary("memopt.add", rawScores, bias);
    if (failed(added))
      return failure();
    biased = *added;
  }

  SmallVector<NamedAttribute> lastAxis;
  setAttr(lastAxis, "axis", builder.getI64IntegerAttr(-1));
  auto probabilities = createOne(node, "memopt.softmax", {biased}, lastAxis);
  if (failed(probabilities))
    return failure();
  // A query whose every key is masked attends nothing: zeros, not NaN.
  if (mask) {
    SmallVector<NamedAttribute> attrs;
    setAttr(
        attrs, "axes",
        builder.getDenseI64ArrayAttr({int64_t(typeOf(bias).getRank() - 1)}));
    setAttr(attrs, "keepdims", builder.getI64IntegerAttr(1));
    auto rowMax = createOne(node, "memopt.reduce_max", {bias}, attrs);
    if (failed(rowMax))
      return failure();
    auto allMasked = binary("memopt.equal", *rowMax, scalar(negInf));
    if (failed(allMasked))
      return failure();
    probabilities = createOne(node, "memopt.where",
                              {*allMasked, scalar(0), *probabilities}, {});
    if (failed(probabilities))
      return failure();
  }
  auto output = binary("memopt.matmul", *probabilities, v);
  if (failed(output))
    return failure();
  Value y = *output;
  if (rank == 3) {
    auto moved = transpose(y, {0, 2, 1, 3});
    if (failed(moved))
      return failure();
    ArrayRef<int64_t> shape = typeOf(*moved).getShape();
    auto merged =
        reshapeTo(node, *moved, {batch, qLength, shape[2] * shape[3]});
    if (failed(merged))
      return failure();
    y = *merged;
  }

  int64_t mode = intAttr(node, "qk_matmul_output_mode", 0);
  Value qkOutput = mode == 3 ? *probabilities : mode == 2 ? biased : rawScores;
  return SmallVector<Value>{y, presentKey, presentValue, qkOutput};
}
