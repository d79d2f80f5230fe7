//===- Validate.cpp - per-op argument checks shared by the backends -------===//
//
// Both backends call these first, so a malformed call fails with the same
// message (naming the ONNX node) on the CPU and on the GPU.
//
//===----------------------------------------------------------------------===//

#include "Internal.h"
#include "memopt/Runtime/Workspace.h"

#include <algorithm>
#include <utility>

namespace memopt::rt {

bool validateUnary(Context &ctx, const char *node, UnaryOp op,
                   const TensorRef &x, const TensorRef &y) {
  if (!checkTensor(ctx, node, x, "input") ||
      !checkTensor(ctx, node, y, "output") ||
      !checkSameDType(ctx, node, x, y, "input/output") ||
      !checkSameCount(ctx, node, x, y, "input/output"))
    return false;
  bool intOk = op == UnaryOp::Identity || op == UnaryOp::Neg ||
               op == UnaryOp::Abs || op == UnaryOp::Relu;
  if (op == UnaryOp::Not) {
    if (x.dtype != DType::Bool) {
      failf(ctx, node, "Not needs a bool input, got %s", dtypeName(x.dtype));
      return false;
    }
    return true;
  }
  if (isFloatType(x.dtype) ||
      (intOk && (x.dtype == DType::I32 || x.dtype == DType::I64)))
    return true;
  failf(ctx, node, "unary op %d does not support dtype %s", int(op),
        dtypeName(x.dtype));
  return false;
}

bool validateBinary(Context &ctx, const char *node, BinaryOp op,
                    const TensorRef &a, const TensorRef &b,
                    const TensorRef &c) {
  if (!checkTensor(ctx, node, a, "lhs") || !checkTensor(ctx, node, b, "rhs") ||
      !checkTensor(ctx, node, c, "output") ||
      !checkSameDType(ctx, node, a, b, "lhs/rhs") ||
      !checkSameDType(ctx, node, a, c, "lhs/output"))
    return false;
  bool isInt = a.dtype == DType::I32 || a.dtype == DType::I64;
  if (!isFloatType(a.dtype) &&
      !(isInt && op != BinaryOp::Pow && op != BinaryOp::ReluGrad)) {
    failf(ctx, node, "binary op %d does not support dtype %s", int(op),
          dtypeName(a.dtype));
    return false;
  }
  TensorRef inputs[2] = {a, b};
  return checkBroadcast(ctx, node, inputs, 2, c);
}

bool validateFusedElementwise(Context &ctx, const char *node,
                              const ElementwiseStep *steps, int numSteps,
                              const TensorRef *inputs, int numInputs,
                              const TensorRef &y) {
  if (numInputs < 1 || numInputs > kMaxFusedInputs || numSteps < 1 ||
      numSteps > kMaxFusedSteps || !steps || !inputs) {
    failf(ctx, node,
          "fused elementwise program with %d inputs and %d steps (1 to %d "
          "and 1 to %d)",
          numInputs, numSteps, kMaxFusedInputs, kMaxFusedSteps);
    return false;
  }
  if (!checkTensor(ctx, node, y, "output"))
    return false;
  if (!isFloatType(y.dtype) || !isFloatType(inputs[0].dtype)) {
    failf(ctx, node, "fused elementwise ops need float types, got %s and %s",
          dtypeName(inputs[0].dtype), dtypeName(y.dtype));
    return false;
  }
  for (int i = 0; i < numInputs; ++i) {
    if (!checkTensor(ctx, node, inputs[i], "input") ||
        !checkSameDType(ctx, node, inputs[i], inputs[0], "input/input"))
      return false;
    if (inputs[i].data == y.data &&
        (inputs[i].numElements() != y.numElements() ||
         inputs[i].dtype != y.dtype)) {
      failf(ctx, node, "output aliases broadcast or converted input %d", i);
      return false;
    }
  }
  for (int i = 0; i < numSteps; ++i) {
    const ElementwiseStep &s = steps[i];
    int registers = numInputs + i;
    bool unaryOk = s.kind == ElementwiseStep::kUnary && s.op >= 0 &&
                   s.op <= int32_t(UnaryOp::PowScalar) &&
                   s.op != int32_t(UnaryOp::Not);
    bool binaryOk = s.kind == ElementwiseStep::kBinary && s.op >= 0 &&
                    s.op <= int32_t(BinaryOp::ReluGrad) && s.b >= 0 &&
                    s.b < registers;
    if ((!unaryOk && !binaryOk) || s.a < 0 || s.a >= registers) {
      failf(ctx, node, "fused elementwise step %d is invalid (kind %d, op %d)",
            i, int(s.kind), int(s.op));
      return false;
    }
  }
  return checkBroadcast(ctx, node, inputs, numInputs, y);
}

bool validateCompare(Context &ctx, const char *node, const TensorRef &a,
                     const TensorRef &b, const TensorRef &c, bool logical) {
  if (!checkTensor(ctx, node, a, "lhs") || !checkTensor(ctx, node, b, "rhs") ||
      !checkTensor(ctx, node, c, "output") ||
      !checkSameDType(ctx, node, a, b, "lhs/rhs"))
    return false;
  if (c.dtype != DType::Bool || (logical && a.dtype != DType::Bool)) {
    failf(ctx, node, "%s needs bool %s", logical ? "logical op" : "compare",
          logical ? "inputs and output" : "output");
    return false;
  }
  if (!logical && a.dtype == DType::Bool) {
    failf(ctx, node, "compare does not support bool inputs");
    return false;
  }
  TensorRef inputs[2] = {a, b};
  return checkBroadcast(ctx, node, inputs, 2, c);
}

bool validateWhere(Context &ctx, const char *node, const TensorRef &cond,
                   const TensorRef &x, const TensorRef &z, const TensorRef &y) {
  if (!checkTensor(ctx, node, cond, "condition") ||
      !checkTensor(ctx, node, x, "X") || !checkTensor(ctx, node, z, "Y") ||
      !checkTensor(ctx, node, y, "output") ||
      !checkSameDType(ctx, node, x, z, "X/Y") ||
      !checkSameDType(ctx, node, x, y, "X/output"))
    return false;
  if (cond.dtype != DType::Bool) {
    failf(ctx, node, "condition must be bool, got %s", dtypeName(cond.dtype));
    return false;
  }
  TensorRef inputs[3] = {cond, x, z};
  return checkBroadcast(ctx, node, inputs, 3, y);
}

bool validateIsNaN(Context &ctx, const char *node, const TensorRef &x,
                   const TensorRef &y) {
  if (!checkTensor(ctx, node, x, "input") ||
      !checkTensor(ctx, node, y, "output") ||
      !checkSameShape(ctx, node, x, y, "input/output"))
    return false;
  if (!(isFloatType(x.dtype) || x.dtype == DType::F64) ||
      y.dtype != DType::Bool) {
    failf(ctx, node,
          "IsNaN needs a float input and a bool output, got %s -> %s",
          dtypeName(x.dtype), dtypeName(y.dtype));
    return false;
  }
  return true;
}

bool validateRange(Context &ctx, const char *node, const TensorRef &start,
                   const TensorRef &delta, const TensorRef &y) {
  if (!checkTensor(ctx, node, start, "start") ||
      !checkTensor(ctx, node, delta, "delta") ||
      !checkTensor(ctx, node, y, "output") ||
      !checkSameDType(ctx, node, start, y, "start/output") ||
      !checkSameDType(ctx, node, delta, y, "delta/output"))
    return false;
  bool supported = isFloatType(y.dtype) || y.dtype == DType::F64 ||
                   y.dtype == DType::I32 || y.dtype == DType::I64;
  if (!supported || y.rank != 1 || start.numElements() != 1 ||
      delta.numElements() != 1) {
    failf(ctx, node,
          "Range needs one-element start and delta and a 1-D output of a "
          "float, I32 or I64 dtype, got a rank-%d %s output",
          y.rank, dtypeName(y.dtype));
    return false;
  }
  return true;
}

static TensorRef leadingDims(const TensorRef &t, int rank) {
  TensorRef result = t;
  result.rank = rank;
  return result;
}

bool validateMatmul(Context &ctx, const char *node, const MatmulParams &params,
                    const TensorRef &a, const TensorRef &b,
                    const TensorRef *bias, const TensorRef &c,
                    MatmulGeometry &g) {
  if (!checkFloat(ctx, node, a, "A") || !checkFloat(ctx, node, b, "B") ||
      !checkFloat(ctx, node, c, "output") ||
      !checkSameDType(ctx, node, a, b, "A/B"))
    return false;
  // The output has the operands' dtype, or f32 for f16 / bf16 operands (the
  // f32 accumulator stored as it is).
  bool widened = c.dtype == DType::F32 &&
                 (a.dtype == DType::F16 || a.dtype == DType::BF16);
  if (!widened && !checkSameDType(ctx, node, a, c, "A/output"))
    return false;
  if (a.rank < 2 || b.rank < 2 || c.rank < 2) {
    failf(ctx, node, "matmul operands need rank >= 2 (got %d, %d -> %d)",
          a.rank, b.rank, c.rank);
    return false;
  }
  int64_t am = a.shape[a.rank - 2], ak = a.shape[a.rank - 1];
  if (params.transA)
    std::swap(am, ak);
  int64_t bk = b.shape[b.rank - 2], bn = b.shape[b.rank - 1];
  if (params.transB)
    std::swap(bk, bn);
  if (ak != bk || c.shape[c.rank - 2] != am || c.shape[c.rank - 1] != bn) {
    failf(ctx, node, "matmul shapes do not agree: A %s%s, B %s%s, output %s",
          shapeString(a).c_str(), params.transA ? "^T" : "",
          shapeString(b).c_str(), params.transB ? "^T" : "",
          shapeString(c).c_str());
    return false;
  }
  g.m = am;
  g.n = bn;
  g.k = ak;
  g.batchRank = c.rank - 2;
  g.aBatch = leadingDims(a, a.rank - 2);
  g.bBatch = leadingDims(b, b.rank - 2);
  g.cBatch = leadingDims(c, c.rank - 2);
  g.batchCount = g.cBatch.numElements();
  TensorRef batches[2] = {g.aBatch, g.bBatch};
  if (!checkBroadcast(ctx, node, batches, 2, g.cBatch))
    return false;
  if (bias) {
    if (!checkTensor(ctx, node, *bias, "bias") ||
        !checkSameDType(ctx, node, *bias, c, "bias/output"))
      return false;
    TensorRef biasRef = *bias;
    if (!checkBroadcast(ctx, node, &biasRef, 1, c, /*exact=*/false))
      return false;
    g.biasIsRowVector =
        biasRef.numElements() == g.n &&
        (biasRef.rank >= 1 && biasRef.shape[biasRef.rank - 1] == g.n);
  }
  return true;
}

/// Whether the bytes of `a` and `b` overlap (both non-empty).
static bool overlaps(const TensorRef &a, const TensorRef &b) {
  auto *pa = static_cast<const char *>(a.data);
  auto *pb = static_cast<const char *>(b.data);
  return a.bytes() && b.bytes() && pa < pb + b.bytes() && pb < pa + a.bytes();
}

bool validateAttention(Context &ctx, const char *node,
                       const AttentionParams &params, const TensorRef &q,
                       const TensorRef &k, const TensorRef &v,
                       const TensorRef *bias, const TensorRef &y,
                       AttentionGeometry &g) {
  if (!checkFloat(ctx, node, q, "Q") || !checkFloat(ctx, node, k, "K") ||
      !checkFloat(ctx, node, v, "V") || !checkFloat(ctx, node, y, "output") ||
      !checkSameDType(ctx, node, q, k, "Q/K") ||
      !checkSameDType(ctx, node, q, v, "Q/V") ||
      !checkSameDType(ctx, node, q, y, "Q/output"))
    return false;
  // Dropout of the probabilities: a ratio in [0, 1) and, above 0, the key
  // [seed, micro-batch] its mask is drawn with (both backends).
  if (!(params.dropoutRatio >= 0.0f && params.dropoutRatio < 1.0f)) {
    failf(ctx, node, "attention dropout ratio %g is not in [0, 1)",
          double(params.dropoutRatio));
    return false;
  }
  if (params.dropoutRatio > 0.0f && !params.dropoutKey) {
    failf(ctx, node,
          "attention dropout ratio %g needs dropoutKey (the program's "
          "random_key)",
          double(params.dropoutRatio));
    return false;
  }
  if (q.rank < 2 || k.rank < 2 || v.rank < 2 || y.rank < 2) {
    failf(ctx, node, "attention operands need rank >= 2 (Q %s, K %s, V %s)",
          shapeString(q).c_str(), shapeString(k).c_str(),
          shapeString(v).c_str());
    return false;
  }
  g.queries = q.shape[q.rank - 2];
  g.headSize = q.shape[q.rank - 1];
  int64_t keyHeadSize = k.shape[k.rank - (params.keyTransposed ? 2 : 1)];
  g.keys = k.shape[k.rank - (params.keyTransposed ? 1 : 2)];
  g.valueSize = v.shape[v.rank - 1];
  if (keyHeadSize != g.headSize || v.shape[v.rank - 2] != g.keys ||
      y.shape[y.rank - 2] != g.queries || y.shape[y.rank - 1] != g.valueSize) {
    failf(ctx, node,
          "attention shapes do not agree: Q %s, K %s%s, V %s, output %s",
          shapeString(q).c_str(), shapeString(k).c_str(),
          params.keyTransposed ? " (transposed)" : "", shapeString(v).c_str(),
          shapeString(y).c_str());
    return false;
  }
  g.batchRank = y.rank - 2;
  TensorRef batches[3] = {leadingDims(q, q.rank - 2),
                          leadingDims(k, k.rank - 2),
                          leadingDims(v, v.rank - 2)};
  TensorRef yBatch = leadingDims(y, g.batchRank);
  if (!checkBroadcast(ctx, node, batches, 3, yBatch))
    return false;
  g.batch = yBatch.numElements();
  BroadcastStrides qs = broadcastStrides(q, y), ks = broadcastStrides(k, y),
                   vs = broadcastStrides(v, y);
  for (int i = 0; i < g.batchRank; ++i) {
    g.batchShape[i] = y.shape[i];
    g.qStride[i] = qs.stride[i];
    g.kStride[i] = ks.stride[i];
    g.vStride[i] = vs.stride[i];
  }
  if (bias) {
    if (!checkTensor(ctx, node, *bias, "bias") ||
        !checkSameDType(ctx, node, *bias, y, "bias/output"))
      return false;
    TensorRef scores = y;
    scores.shape[y.rank - 1] = g.keys;
    TensorRef biasRef = *bias;
    if (!checkBroadcast(ctx, node, &biasRef, 1, scores, /*exact=*/false))
      return false;
    BroadcastStrides bs = broadcastStrides(*bias, scores);
    for (int i = 0; i < g.batchRank; ++i)
      g.biasStride[i] = bs.stride[i];
    g.biasRowStride = bs.stride[y.rank - 2];
    g.biasColStride = bs.stride[y.rank - 1];
    g.hasBias = true;
  }
  if (overlaps(y, q) || overlaps(y, k) || overlaps(y, v) ||
      (bias && overlaps(y, *bias))) {
    failf(ctx, node, "attention output must not alias an input");
    return false;
  }
  return true;
}

bool validateAttentionStatistics(
    Context &ctx, const char *node, const TensorRef &lse, const TensorRef &y,
    std::initializer_list<const TensorRef *> others) {
  if (!checkTensor(ctx, node, lse, "lse"))
    return false;
  bool shapeOk = lse.dtype == DType::F32 && lse.rank == y.rank &&
                 lse.shape[lse.rank - 1] == 2;
  for (int i = 0; shapeOk && i + 1 < y.rank; ++i)
    shapeOk = lse.shape[i] == y.shape[i];
  if (!shapeOk) {
    failf(ctx, node,
          "attention row statistics must be f32 [batch..., S, 2] for output "
          "%s, got %s %s",
          shapeString(y).c_str(), dtypeName(lse.dtype),
          shapeString(lse).c_str());
    return false;
  }
  for (const TensorRef *other : others)
    if (other && overlaps(lse, *other)) {
      failf(ctx, node,
            "attention row statistics must not alias another "
            "operand or result");
      return false;
    }
  return true;
}

bool validateAttentionBackward(Context &ctx, const char *node,
                               const AttentionParams &params,
                               const TensorRef &q, const TensorRef &k,
                               const TensorRef &v, const TensorRef *bias,
                               const TensorRef &y, const TensorRef &dy,
                               const TensorRef &lse, const TensorRef &dq,
                               const TensorRef &dk, const TensorRef &dv,
                               const TensorRef *dbias, AttentionGeometry &g) {
  if (!validateAttention(ctx, node, params, q, k, v, bias, y, g))
    return false;
  if (dbias && y.dtype != DType::F32) {
    failf(ctx, node,
          "attention bias gradients are f32 only (got %s operands; a trained "
          "bias runs its attention in f32)",
          dtypeName(y.dtype));
    return false;
  }
  if (!checkTensor(ctx, node, dy, "dY") ||
      !checkSameDType(ctx, node, dy, y, "dY/output") ||
      !checkSameShape(ctx, node, dy, y, "dY/output") ||
      !validateAttentionStatistics(ctx, node, lse, y, {}))
    return false;
  if (params.groupedGradients) {
    // K and V: y's batch dims up to a trailing run of 1s they broadcast
    // along (at least two entries to a group).
    bool ok = k.rank == y.rank && v.rank == y.rank;
    int start = g.batchRank;
    while (ok && start > 0 && k.shape[start - 1] == 1)
      --start;
    g.group = 1;
    for (int i = 0; ok && i < g.batchRank; ++i) {
      ok = k.shape[i] == v.shape[i] && (i >= start || k.shape[i] == y.shape[i]);
      if (i >= start)
        g.group *= y.shape[i];
    }
    if (!ok || g.group < 2) {
      failf(ctx, node,
            "grouped attention gradients need K %s and V %s with the same "
            "batch dims, those of the output %s up to a trailing run they "
            "broadcast along",
            shapeString(k).c_str(), shapeString(v).c_str(),
            shapeString(y).c_str());
      return false;
    }
  }
  // dq, dk, dv: the operand's last two dims after y's batch dims (K's and
  // V's own shapes with grouped gradients).
  struct Gradient {
    const TensorRef *grad, *operand;
    const char *name;
  };
  for (Gradient gradient : {Gradient{&dq, &q, "dQ"}, Gradient{&dk, &k, "dK"},
                            Gradient{&dv, &v, "dV"}}) {
    const TensorRef &t = *gradient.grad, &operand = *gradient.operand;
    bool own = params.groupedGradients && gradient.operand != &q;
    const TensorRef &batchOf = own ? operand : y;
    bool ok = checkTensor(ctx, node, t, gradient.name) &&
              t.dtype == operand.dtype && t.rank == y.rank;
    for (int i = 0; ok && i < y.rank; ++i)
      ok = t.shape[i] == (i < g.batchRank
                              ? batchOf.shape[i]
                              : operand.shape[operand.rank - y.rank + i]);
    if (!ok) {
      failf(ctx, node,
            "attention gradient %s must be %s (its operand's dtype) with the "
            "batch dims of %s and the last two of %s, got %s %s",
            gradient.name, dtypeName(operand.dtype),
            shapeString(batchOf).c_str(), shapeString(operand).c_str(),
            dtypeName(t.dtype), shapeString(t).c_str());
      return false;
    }
  }
  if (dbias && (!bias || !checkTensor(ctx, node, *dbias, "dbias") ||
                !checkSameDType(ctx, node, *dbias, *bias, "dbias/bias") ||
                !checkSameShape(ctx, node, *dbias, *bias, "dbias/bias"))) {
    if (!bias)
      failf(ctx, node, "attention dbias needs a bias");
    return false;
  }
  const TensorRef *outputs[4] = {&dq, &dk, &dv, dbias};
  const TensorRef *inputs[7] = {&q, &k, &v, bias, &y, &dy, &lse};
  for (int o = 0; o < 4; ++o) {
    if (!outputs[o])
      continue;
    bool bad = false;
    for (const TensorRef *input : inputs)
      bad |= input && overlaps(*outputs[o], *input);
    for (int p = 0; p < o; ++p)
      bad |= outputs[p] && overlaps(*outputs[o], *outputs[p]);
    if (bad) {
      failf(ctx, node,
            "attention gradients must not alias an input or each "
            "other");
      return false;
    }
  }
  return true;
}

size_t attentionBackwardChunkBytes(int64_t items, int64_t queries, int64_t keys,
                                   DType dtype) {
  return size_t(workspace::attentionBackwardBytes(items, queries, keys,
                                                  int64_t(dtypeSize(dtype))));
}

size_t cudnnAttentionWorkspaceBound(const AttentionParams &params,
                                    const TensorRef &q, const TensorRef &k,
                                    const TensorRef &v, const TensorRef *bias,
                                    bool statistics, bool backward) {
  if (q.rank < 2 || k.rank < 2 || v.rank < 2)
    return 0;
  // The output's batch: the broadcast of the operands' batch dims.
  int rank = std::max({q.rank, k.rank, v.rank});
  int64_t batch = 1, keyBatch = 1;
  for (int i = 0; i < rank - 2; ++i) {
    int64_t dim = 1;
    for (const TensorRef *t : {&q, &k, &v}) {
      int at = i - (rank - t->rank);
      if (at >= 0 && t->shape[at] != 1)
        dim = t->shape[at];
    }
    batch *= dim;
    int at = i - (rank - k.rank);
    keyBatch *= at >= 0 ? k.shape[at] : 1;
  }
  int64_t queries = q.shape[q.rank - 2], headSize = q.shape[q.rank - 1];
  int64_t keys = k.shape[k.rank - (params.keyTransposed ? 1 : 2)];
  if (queries == 0 || headSize == 0)
    return 0;
  int64_t queryBatch = q.numElements() / (queries * headSize);
  bool lowFloat = q.dtype == DType::F16 || q.dtype == DType::BF16;
  if (!workspace::cudnnAttentionPlanned(lowFloat, headSize, v.shape[v.rank - 1],
                                        queryBatch == batch, bias, keys))
    return 0;
  int64_t rows = batch * queries;
  int64_t transposedKeyBytes = params.keyTransposed ? int64_t(k.bytes()) : 0;
  // cuDNN's generator draws the mask from a seed and offset in the workspace.
  bool cudnnDropout = params.dropoutRatio > 0.0f && params.dropoutCudnnRng;
  if (!backward)
    return size_t(workspace::cudnnAttentionBytes(
        rows, statistics, transposedKeyBytes, cudnnDropout));
  // cuDNN's backward takes no K stored [D, Sk] with grouped heads (as
  // --memopt-attention-engine, which reserves nothing there).
  if (params.keyTransposed && keyBatch < batch)
    return 0;
  int64_t fullHeadKeyRows = keyBatch < batch ? batch * keys : 0;
  return size_t(workspace::cudnnAttentionBackwardBytes(
      rows, headSize, v.shape[v.rank - 1], fullHeadKeyRows,
      int64_t(dtypeSize(q.dtype)), transposedKeyBytes, cudnnDropout));
}

static bool validateSpatial(Context &ctx, const char *node, int spatialRank,
                            const TensorRef &x, const TensorRef &y) {
  if (spatialRank < 1 || spatialRank > 3) {
    failf(ctx, node, "spatial rank %d not supported (1..3)", spatialRank);
    return false;
  }
  if (x.rank != spatialRank + 2 || y.rank != spatialRank + 2) {
    failf(ctx, node, "expected rank-%d NC... tensors, got %s -> %s",
          spatialRank + 2, shapeString(x).c_str(), shapeString(y).c_str());
    return false;
  }
  return true;
}

size_t attentionChunkBytes(int64_t items, int64_t queries, int64_t keys,
                           DType dtype) {
  return size_t(workspace::attentionBytes(items, queries, keys,
                                          int64_t(dtypeSize(dtype))));
}

TensorRef channelsFirstView(const TensorRef &t) {
  TensorRef view = t;
  if (t.rank >= 3) {
    view.shape[1] = t.shape[t.rank - 1];
    for (int i = 2; i < t.rank; ++i)
      view.shape[i] = t.shape[i - 1];
  }
  return view;
}

bool validateConv(Context &ctx, const char *node, const ConvParams &params,
                  bool transposed, const TensorRef &xGiven,
                  const TensorRef &wGiven, const TensorRef *bias,
                  const TensorRef &yGiven, ConvGeometry &g) {
  // Channels-last tensors are checked through their channels-first views.
  g.channelsLast = params.channelsLast;
  const TensorRef x = g.channelsLast ? channelsFirstView(xGiven) : xGiven;
  const TensorRef w = g.channelsLast ? channelsFirstView(wGiven) : wGiven;
  const TensorRef y = g.channelsLast ? channelsFirstView(yGiven) : yGiven;
  if (!checkFloat(ctx, node, x, "X") || !checkFloat(ctx, node, w, "W") ||
      !checkFloat(ctx, node, y, "output") ||
      !checkSameDType(ctx, node, x, w, "X/W") ||
      !checkSameDType(ctx, node, x, y, "X/output") ||
      !validateSpatial(ctx, node, params.spatialRank, x, y))
    return false;
  if (w.rank != x.rank) {
    failf(ctx, node, "weight rank %d does not match input rank %d", w.rank,
          x.rank);
    return false;
  }
  int sr = params.spatialRank;
  g.batch = x.shape[0];
  g.inChannels = x.shape[1];
  g.outChannels = y.shape[1];
  g.group = params.group;
  if (g.group < 1 || g.inChannels % g.group || g.outChannels % g.group) {
    failf(ctx, node, "group %lld does not divide channels %lld -> %lld",
          (long long)g.group, (long long)g.inChannels,
          (long long)g.outChannels);
    return false;
  }
  int64_t wIn = transposed ? w.shape[0] : w.shape[1] * g.group;
  int64_t wOut = transposed ? w.shape[1] * g.group : w.shape[0];
  if (wIn != g.inChannels || wOut != g.outChannels || y.shape[0] != g.batch) {
    failf(ctx, node, "weight %s does not fit input %s and output %s",
          shapeString(w).c_str(), shapeString(x).c_str(),
          shapeString(y).c_str());
    return false;
  }
  for (int i = 0; i < sr; ++i) {
    int d = 3 - sr + i;
    g.in[d] = x.shape[2 + i];
    g.out[d] = y.shape[2 + i];
    g.kernel[d] = w.shape[2 + i];
    g.padsBegin[d] = params.padsBegin[i];
    g.padsEnd[d] = params.padsEnd[i];
    g.strides[d] = params.strides[i];
    g.dilations[d] = params.dilations[i];
    if (g.strides[d] < 1 || g.dilations[d] < 1 || g.padsBegin[d] < 0 ||
        g.padsEnd[d] < 0) {
      failf(ctx, node, "invalid stride/dilation/pad on spatial axis %d", i);
      return false;
    }
    int64_t span = g.dilations[d] * (g.kernel[d] - 1) + 1;
    int64_t expected =
        transposed
            ? g.strides[d] * (g.in[d] - 1) + params.outputPadding[i] + span -
                  g.padsBegin[d] - g.padsEnd[d]
            : (g.in[d] + g.padsBegin[d] + g.padsEnd[d] - span) / g.strides[d] +
                  1;
    if (expected != g.out[d]) {
      failf(ctx, node,
            "output spatial size %lld on axis %d does not match the expected "
            "%lld",
            (long long)g.out[d], i, (long long)expected);
      return false;
    }
  }
  if (bias) {
    if (!checkTensor(ctx, node, *bias, "bias") ||
        !checkSameDType(ctx, node, *bias, y, "bias/output"))
      return false;
    if (bias->numElements() != g.outChannels) {
      failf(ctx, node, "bias %s does not have %lld elements",
            shapeString(*bias).c_str(), (long long)g.outChannels);
      return false;
    }
  }
  return true;
}

bool validateConvResidual(Context &ctx, const char *node,
                          const TensorRef &residual, const TensorRef &y) {
  return checkSameShape(ctx, node, residual, y, "residual") &&
         checkSameDType(ctx, node, residual, y, "residual/output");
}

bool validatePool(Context &ctx, const char *node, const PoolParams &params,
                  const TensorRef &xGiven, const TensorRef &yGiven,
                  ConvGeometry &g) {
  g.channelsLast = params.channelsLast;
  const TensorRef x = g.channelsLast ? channelsFirstView(xGiven) : xGiven;
  const TensorRef y = g.channelsLast ? channelsFirstView(yGiven) : yGiven;
  if (!checkFloat(ctx, node, x, "X") || !checkFloat(ctx, node, y, "output") ||
      !checkSameDType(ctx, node, x, y, "X/output") ||
      !validateSpatial(ctx, node, params.spatialRank, x, y))
    return false;
  if (x.shape[0] != y.shape[0] || x.shape[1] != y.shape[1]) {
    failf(ctx, node, "pool input %s and output %s differ in N or C",
          shapeString(x).c_str(), shapeString(y).c_str());
    return false;
  }
  int sr = params.spatialRank;
  g.batch = x.shape[0];
  g.inChannels = g.outChannels = x.shape[1];
  for (int i = 0; i < sr; ++i) {
    int d = 3 - sr + i;
    g.in[d] = x.shape[2 + i];
    g.out[d] = y.shape[2 + i];
    g.kernel[d] = params.kernel[i];
    g.padsBegin[d] = params.padsBegin[i];
    g.padsEnd[d] = params.padsEnd[i];
    g.strides[d] = params.strides[i];
    g.dilations[d] = params.dilations[i];
    if (g.kernel[d] < 1 || g.strides[d] < 1 || g.dilations[d] < 1 ||
        g.padsBegin[d] < 0 || g.padsEnd[d] < 0) {
      failf(ctx, node, "invalid kernel/stride/dilation/pad on axis %d", i);
      return false;
    }
    int64_t span = g.dilations[d] * (g.kernel[d] - 1) + 1;
    int64_t room = g.in[d] + g.padsBegin[d] + g.padsEnd[d] - span;
    int64_t expected =
        (params.ceilMode ? (room + g.strides[d] - 1) / g.strides[d]
                         : room / g.strides[d]) +
        1;
    // ONNX ceil_mode: drop a last window that starts in the end padding.
    if (params.ceilMode &&
        (expected - 1) * g.strides[d] >= g.in[d] + g.padsBegin[d])
      --expected;
    if (expected != g.out[d]) {
      failf(ctx, node,
            "output spatial size %lld on axis %d does not match the expected "
            "%lld",
            (long long)g.out[d], i, (long long)expected);
      return false;
    }
  }
  return true;
}

bool validateConvBackwardFilter(Context &ctx, const char *node,
                                const ConvParams &params, const TensorRef &x,
                                const TensorRef &dy, const TensorRef &dw,
                                ConvGeometry &g) {
  if (!checkFloat(ctx, node, dy, "dY") || !checkFloat(ctx, node, dw, "dW"))
    return false;
  return validateConv(ctx, node, params, false, x, dw, nullptr, dy, g);
}

bool validatePoolGrad(Context &ctx, const char *node, const PoolParams &params,
                      const TensorRef &x, const TensorRef &dy,
                      const TensorRef &dx, ConvGeometry &g) {
  return validatePool(ctx, node, params, x, dy, g) &&
         checkFloat(ctx, node, dx, "dX") &&
         checkSameDType(ctx, node, x, dx, "X/dX") &&
         checkSameShape(ctx, node, x, dx, "X/dX");
}

AxisSplit splitAt(const TensorRef &t, int axis) {
  AxisSplit s;
  for (int i = 0; i < t.rank; ++i) {
    if (i < axis)
      s.outer *= t.shape[i];
    else if (i == axis)
      s.axis = t.shape[i];
    else
      s.inner *= t.shape[i];
  }
  return s;
}

bool validateLayerNorm(Context &ctx, const char *node, int axis,
                       const TensorRef &x, const TensorRef &scale,
                       const TensorRef *bias, const TensorRef &y) {
  if (!checkFloat(ctx, node, x, "X") || !checkFloat(ctx, node, y, "output") ||
      !checkFloat(ctx, node, scale, "scale") ||
      !checkSameShape(ctx, node, x, y, "X/output") ||
      !checkSameDType(ctx, node, x, y, "X/output") ||
      !checkAxis(ctx, node, axis, x.rank))
    return false;
  int64_t cols = 1;
  for (int i = axis; i < x.rank; ++i)
    cols *= x.shape[i];
  if (scale.numElements() != cols) {
    failf(ctx, node, "scale %s does not have the %lld normalized elements",
          shapeString(scale).c_str(), (long long)cols);
    return false;
  }
  if (bias && (!checkFloat(ctx, node, *bias, "bias") ||
               !checkSameDType(ctx, node, *bias, scale, "bias/scale") ||
               !checkSameCount(ctx, node, *bias, scale, "bias/scale")))
    return false;
  return true;
}

bool validateBatchNorm(Context &ctx, const char *node, const TensorRef &x,
                       const TensorRef &scale, const TensorRef &bias,
                       const TensorRef &mean, const TensorRef &var,
                       const TensorRef &y, bool channelsLast) {
  if (!checkFloat(ctx, node, x, "X") || !checkFloat(ctx, node, y, "output") ||
      !checkSameShape(ctx, node, x, y, "X/output") ||
      !checkSameDType(ctx, node, x, y, "X/output"))
    return false;
  if (x.rank < 2) {
    failf(ctx, node, "BatchNormalization needs rank >= 2, got %s",
          shapeString(x).c_str());
    return false;
  }
  int64_t channels = x.shape[channelsLast ? x.rank - 1 : 1];
  const TensorRef *params[4] = {&scale, &bias, &mean, &var};
  const char *names[4] = {"scale", "B", "mean", "var"};
  for (int i = 0; i < 4; ++i) {
    if (!checkFloat(ctx, node, *params[i], names[i]))
      return false;
    if (params[i]->numElements() != channels) {
      failf(ctx, node, "%s %s does not have %lld channels", names[i],
            shapeString(*params[i]).c_str(), (long long)channels);
      return false;
    }
  }
  return true;
}

bool validateReduce(Context &ctx, const char *node, const int *axes,
                    int numAxes, const TensorRef &x, const TensorRef &y) {
  if (!checkFloat(ctx, node, x, "X") || !checkFloat(ctx, node, y, "output") ||
      !checkSameDType(ctx, node, x, y, "X/output"))
    return false;
  int64_t kept = 1;
  int next = 0;
  for (int i = 0; i < x.rank; ++i) {
    if (next < numAxes && axes[next] == i) {
      ++next;
      continue;
    }
    kept *= x.shape[i];
  }
  for (int i = 0; i < numAxes; ++i) {
    if (axes[i] < 0 || axes[i] >= x.rank || (i && axes[i] <= axes[i - 1])) {
      failf(ctx, node, "reduce axes must be sorted, unique and in [0, %d)",
            x.rank);
      return false;
    }
  }
  if (kept != y.numElements()) {
    failf(ctx, node, "output %s does not hold the %lld reduced elements",
          shapeString(y).c_str(), (long long)kept);
    return false;
  }
  return true;
}

bool validateCumSum(Context &ctx, const char *node, int axis,
                    const TensorRef &x, const TensorRef &y) {
  if (!checkTensor(ctx, node, x, "input") ||
      !checkTensor(ctx, node, y, "output") ||
      !checkSameDType(ctx, node, x, y, "input/output") ||
      !checkSameShape(ctx, node, x, y, "input/output") ||
      !checkAxis(ctx, node, axis, x.rank))
    return false;
  if (!isFloatType(x.dtype) && x.dtype != DType::I32 && x.dtype != DType::I64) {
    failf(ctx, node, "CumSum does not support dtype %s", dtypeName(x.dtype));
    return false;
  }
  return true;
}

bool validateTranspose(Context &ctx, const char *node, const int *perm,
                       const TensorRef &x, const TensorRef &y) {
  if (!checkTensor(ctx, node, x, "input") ||
      !checkTensor(ctx, node, y, "output") ||
      !checkSameDType(ctx, node, x, y, "input/output"))
    return false;
  bool ok = x.rank == y.rank;
  unsigned seen = 0;
  for (int i = 0; ok && i < x.rank; ++i) {
    ok = perm[i] >= 0 && perm[i] < x.rank && !(seen & (1u << perm[i])) &&
         y.shape[i] == x.shape[perm[i]];
    if (ok)
      seen |= 1u << perm[i];
  }
  if (!ok) {
    failf(ctx, node, "perm does not map input %s to output %s",
          shapeString(x).c_str(), shapeString(y).c_str());
    return false;
  }
  return true;
}

bool validateConcat(Context &ctx, const char *node, int axis,
                    const TensorRef *inputs, int numInputs,
                    const TensorRef &y) {
  if (!checkTensor(ctx, node, y, "output") ||
      !checkAxis(ctx, node, axis, y.rank))
    return false;
  int64_t total = 0;
  for (int k = 0; k < numInputs; ++k) {
    const TensorRef &in = inputs[k];
    if (!checkTensor(ctx, node, in, "input") ||
        !checkSameDType(ctx, node, in, y, "input/output"))
      return false;
    bool ok = in.rank == y.rank;
    for (int i = 0; ok && i < y.rank; ++i)
      ok = i == axis || in.shape[i] == y.shape[i];
    if (!ok) {
      failf(ctx, node, "part %d of shape %s does not fit output %s on axis %d",
            k, shapeString(in).c_str(), shapeString(y).c_str(), axis);
      return false;
    }
    total += in.shape[axis];
  }
  if (total != y.shape[axis]) {
    failf(ctx, node, "parts sum to %lld along axis %d, output has %lld",
          (long long)total, axis, (long long)y.shape[axis]);
    return false;
  }
  return true;
}

bool validateSlice(Context &ctx, const char *node, const int64_t *starts,
                   const int64_t *steps, const TensorRef &x,
                   const TensorRef &y) {
  if (!checkTensor(ctx, node, x, "input") ||
      !checkTensor(ctx, node, y, "output") ||
      !checkSameDType(ctx, node, x, y, "input/output"))
    return false;
  if (x.rank != y.rank) {
    failf(ctx, node, "slice keeps the rank: %s -> %s", shapeString(x).c_str(),
          shapeString(y).c_str());
    return false;
  }
  for (int i = 0; i < x.rank; ++i) {
    if (y.shape[i] == 0)
      continue;
    int64_t last = starts[i] + (y.shape[i] - 1) * steps[i];
    if (steps[i] == 0 || starts[i] < 0 || starts[i] >= x.shape[i] || last < 0 ||
        last >= x.shape[i]) {
      failf(ctx, node,
            "slice on axis %d (start %lld, step %lld, %lld elements) leaves "
            "the input dim %lld",
            i, (long long)starts[i], (long long)steps[i], (long long)y.shape[i],
            (long long)x.shape[i]);
      return false;
    }
  }
  return true;
}

bool validateGather(Context &ctx, const char *node, int axis,
                    const TensorRef &x, const TensorRef &indices,
                    const TensorRef &y, bool elements) {
  if (!checkTensor(ctx, node, x, "data") ||
      !checkTensor(ctx, node, indices, "indices") ||
      !checkTensor(ctx, node, y, "output") ||
      !checkSameDType(ctx, node, x, y, "data/output") ||
      !checkAxis(ctx, node, axis, x.rank))
    return false;
  if (indices.dtype != DType::I64 && indices.dtype != DType::I32) {
    failf(ctx, node, "indices must be i64 or i32, got %s",
          dtypeName(indices.dtype));
    return false;
  }
  bool ok;
  if (elements) {
    ok = sameShape(indices, y) && indices.rank == x.rank;
    for (int i = 0; ok && i < x.rank; ++i)
      ok = i == axis || indices.shape[i] <= x.shape[i];
  } else {
    ok = y.rank == x.rank - 1 + indices.rank;
    for (int i = 0; ok && i < y.rank; ++i) {
      int64_t expected = i < axis ? x.shape[i]
                         : i < axis + indices.rank
                             ? indices.shape[i - axis]
                             : x.shape[i - indices.rank + 1];
      ok = y.shape[i] == expected;
    }
  }
  if (!ok) {
    failf(ctx, node, "output %s does not match data %s and indices %s",
          shapeString(y).c_str(), shapeString(x).c_str(),
          shapeString(indices).c_str());
    return false;
  }
  return true;
}

bool validateScatterND(Context &ctx, const char *node,
                       ScatterReduction reduction, const TensorRef &data,
                       const TensorRef &indices, const TensorRef &updates,
                       const TensorRef &y, ScatterGeometry &g) {
  if (!checkTensor(ctx, node, data, "data") ||
      !checkTensor(ctx, node, indices, "indices") ||
      !checkTensor(ctx, node, updates, "updates") ||
      !checkTensor(ctx, node, y, "output") ||
      !checkSameDType(ctx, node, data, y, "data/output") ||
      !checkSameDType(ctx, node, data, updates, "data/updates") ||
      !checkSameShape(ctx, node, data, y, "data/output"))
    return false;
  if (int(reduction) < int(ScatterReduction::None) ||
      int(reduction) > int(ScatterReduction::Min)) {
    failf(ctx, node, "invalid scatter reduction %d", int(reduction));
    return false;
  }
  if (reduction != ScatterReduction::None && data.dtype == DType::Bool) {
    failf(ctx, node, "scatter reduction %d needs a numeric dtype, got bool",
          int(reduction));
    return false;
  }
  if (indices.dtype != DType::I64 && indices.dtype != DType::I32) {
    failf(ctx, node, "indices must be i64 or i32, got %s",
          dtypeName(indices.dtype));
    return false;
  }
  if (indices.rank < 1 || indices.shape[indices.rank - 1] > data.rank) {
    failf(ctx, node,
          "indices %s do not index data %s (need rank >= 1 and a "
          "last dimension <= the data rank)",
          shapeString(indices).c_str(), shapeString(data).c_str());
    return false;
  }
  g.k = indices.shape[indices.rank - 1];
  g.tuples = 1;
  for (int i = 0; i + 1 < indices.rank; ++i)
    g.tuples *= indices.shape[i];
  g.sliceSize = 1;
  for (int i = int(g.k); i < data.rank; ++i)
    g.sliceSize *= data.shape[i];
  bool ok = updates.rank == indices.rank - 1 + data.rank - int(g.k);
  for (int i = 0; ok && i < updates.rank; ++i)
    ok = updates.shape[i] == (i < indices.rank - 1
                                  ? indices.shape[i]
                                  : data.shape[i - (indices.rank - 1) + g.k]);
  if (!ok) {
    failf(ctx, node,
          "updates %s must have shape indices[:-1] + data[k:] (indices %s, "
          "data %s)",
          shapeString(updates).c_str(), shapeString(indices).c_str(),
          shapeString(data).c_str());
    return false;
  }
  if (overlaps(indices, y) || overlaps(updates, y)) {
    failf(ctx, node, "indices and updates must not overlap the output");
    return false;
  }
  int64_t strides[kMaxRank];
  contiguousStrides(data, strides);
  for (int i = 0; i < int(g.k); ++i) {
    g.dims[i] = data.shape[i];
    g.strides[i] = strides[i];
  }
  return true;
}

bool validatePad(Context &ctx, const char *node, PadMode mode,
                 const int64_t *padsBegin, const int64_t *padsEnd,
                 const TensorRef &x, const TensorRef &y) {
  if (!checkTensor(ctx, node, x, "input") ||
      !checkTensor(ctx, node, y, "output") ||
      !checkSameDType(ctx, node, x, y, "input/output"))
    return false;
  bool ok = x.rank == y.rank;
  for (int i = 0; ok && i < x.rank; ++i) {
    ok = y.shape[i] == x.shape[i] + padsBegin[i] + padsEnd[i];
    if (mode == PadMode::Reflect)
      ok = ok && padsBegin[i] < std::max<int64_t>(x.shape[i], 1) &&
           padsEnd[i] < std::max<int64_t>(x.shape[i], 1);
    if (mode != PadMode::Constant && x.shape[i] == 0 && y.shape[i] > 0)
      ok = false;
  }
  if (!ok) {
    failf(ctx, node, "pads do not map input %s to output %s",
          shapeString(x).c_str(), shapeString(y).c_str());
    return false;
  }
  return true;
}

bool validateResize(Context &ctx, const char *node, const ResizeParams &params,
                    const TensorRef &x, const TensorRef &y, float *scales) {
  if (!checkTensor(ctx, node, x, "X") || !checkTensor(ctx, node, y, "output") ||
      !checkSameDType(ctx, node, x, y, "X/output"))
    return false;
  if (params.mode == ResizeMode::Linear && !isFloatType(x.dtype)) {
    failf(ctx, node, "linear resize needs a float dtype, got %s",
          dtypeName(x.dtype));
    return false;
  }
  if (x.rank != y.rank) {
    failf(ctx, node, "resize keeps the rank: %s -> %s", shapeString(x).c_str(),
          shapeString(y).c_str());
    return false;
  }
  int resized = 0;
  for (int i = 0; i < x.rank; ++i) {
    if (x.shape[i] == 0 && y.shape[i] != 0) {
      failf(ctx, node, "cannot resize an empty axis %d", i);
      return false;
    }
    scales[i] = params.scales[i] > 0
                    ? params.scales[i]
                    : (x.shape[i] ? float(y.shape[i]) / float(x.shape[i]) : 1);
    if (x.shape[i] != y.shape[i] || scales[i] != 1.0f)
      ++resized;
  }
  if (params.mode == ResizeMode::Linear && resized > 3) {
    failf(ctx, node, "linear resize over %d axes (at most 3 supported)",
          resized);
    return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Copies, casts, softmax, global pooling, arg reductions
//===----------------------------------------------------------------------===//

bool validateCast(Context &ctx, const char *node, const TensorRef &x,
                  const TensorRef &y) {
  return checkTensor(ctx, node, x, "input") &&
         checkTensor(ctx, node, y, "output") &&
         checkSameCount(ctx, node, x, y, "input/output");
}

bool validateCopy(Context &ctx, const char *node, const TensorRef &x,
                  const TensorRef &y) {
  if (!checkTensor(ctx, node, x, "input") ||
      !checkTensor(ctx, node, y, "output"))
    return false;
  if (x.bytes() != y.bytes()) {
    failf(ctx, node, "copy of %zu bytes into %zu bytes", x.bytes(), y.bytes());
    return false;
  }
  return true;
}

bool validateExpand(Context &ctx, const char *node, const TensorRef &x,
                    const TensorRef &y) {
  return checkTensor(ctx, node, x, "input") &&
         checkTensor(ctx, node, y, "output") &&
         checkSameDType(ctx, node, x, y, "input/output") &&
         checkBroadcast(ctx, node, &x, 1, y, /*exact=*/false);
}

bool validateSoftmax(Context &ctx, const char *node, int axis,
                     const TensorRef &x, const TensorRef &y) {
  return checkFloat(ctx, node, x, "input") &&
         checkFloat(ctx, node, y, "output") &&
         checkSameDType(ctx, node, x, y, "input/output") &&
         checkSameShape(ctx, node, x, y, "input/output") &&
         checkAxis(ctx, node, axis, x.rank);
}

bool validateGlobalAvgPool(Context &ctx, const char *node, const TensorRef &x,
                           const TensorRef &y, bool channelsLast,
                           int64_t &channels) {
  if (!checkFloat(ctx, node, x, "X") || !checkFloat(ctx, node, y, "output") ||
      !checkSameDType(ctx, node, x, y, "X/output"))
    return false;
  channels = x.rank < 2 ? 0 : x.shape[channelsLast ? x.rank - 1 : 1];
  if (x.rank < 2 || y.numElements() != x.shape[0] * channels) {
    failf(ctx, node, "GlobalAveragePool output %s does not match input %s",
          shapeString(y).c_str(), shapeString(x).c_str());
    return false;
  }
  return true;
}

bool validateArgReduce(Context &ctx, const char *node, int axis,
                       const TensorRef &x, const TensorRef &y) {
  if (!checkFloat(ctx, node, x, "input") ||
      !checkTensor(ctx, node, y, "output") ||
      !checkAxis(ctx, node, axis, x.rank))
    return false;
  AxisSplit s = splitAt(x, axis);
  if (y.dtype != DType::I64 || y.numElements() != s.outer * s.inner) {
    failf(ctx, node, "ArgMax/ArgMin output must be i64 with %lld elements",
          (long long)(s.outer * s.inner));
    return false;
  }
  return true;
}

} // namespace memopt::rt
