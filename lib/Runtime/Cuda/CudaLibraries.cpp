//===- CudaLibraries.cpp - cuBLASLt matmuls and cuDNN convolutions --------===//
//
// MatMul / Gemm go to cuBLASLt with the row-major-as-transposed-column-major
// trick (C^T = B^T A^T), strided batches (stride 0 broadcasts a whole
// operand), and bias / ReLU / GELU(tanh) epilogues where they fuse. Conv and
// ConvTranspose (and the training filter gradient) go to cuDNN 9's legacy
// convolution API: the first call at a
// call site benchmarks the algorithms with cudnnFind*AlgorithmEx inside the
// workspace the compiler reserved (so the choice never needs more memory than
// planned) and caches it; during CUDA graph capture a cache miss falls back to
// the cudnnGet*_v7 heuristics, which launch no work. onnxruntime's CUDA EP
// does the same per-node caching; here the workspace is the plan's, not an
// allocator's. Channels-last convolutions use cuDNN's NHWC descriptors and
// KRSC filters. A forward convolution's epilogue (bias, activation, a
// residual) is timed both as cudnnConvolutionBiasActivationForward (cuDNN's
// fused call, TensorFlow's FusedConv2DBiasActivation uses it likewise) and as
// the convolution plus one epilogue kernel, and the faster is cached, as
// matmuls time cuBLASLt's candidates.
//
//===----------------------------------------------------------------------===//

#include "CudaInternal.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace memopt::rt {

namespace {

cudaDataType_t cudaTypeOf(DType dtype) {
  return dtype == DType::F16    ? CUDA_R_16F
         : dtype == DType::BF16 ? CUDA_R_16BF
                                : CUDA_R_32F;
}

cudnnDataType_t cudnnTypeOf(DType dtype) {
  return dtype == DType::F16    ? CUDNN_DATA_HALF
         : dtype == DType::BF16 ? CUDNN_DATA_BFLOAT16
                                : CUDNN_DATA_FLOAT;
}

/// Largest power of two (<= 256) dividing the address.
int alignmentOf(const void *p) {
  uintptr_t v = reinterpret_cast<uintptr_t>(p);
  int a = 1;
  while (a < 256 && (v % uintptr_t(a * 2)) == 0)
    a *= 2;
  return a;
}

std::string geometryKey(const char *node, const TensorRef *tensors, int count,
                        const int64_t *extra, int numExtra) {
  std::string key = node ? node : "";
  for (int t = 0; t < count; ++t) {
    key += '|';
    key += dtypeName(tensors[t].dtype);
    for (int i = 0; i < tensors[t].rank; ++i)
      key += ',' + std::to_string(tensors[t].shape[i]);
  }
  for (int i = 0; i < numExtra; ++i)
    key += ';' + std::to_string(extra[i]);
  return key;
}

/// True when `batch` is either the whole output batch or a single matrix.
bool stridedBatchable(const TensorRef &batch, const TensorRef &out,
                      bool &broadcast) {
  int64_t n = batch.numElements();
  broadcast = n == 1;
  if (broadcast)
    return true;
  if (n != out.numElements())
    return false;
  for (int i = 0; i < batch.rank; ++i)
    if (batch.shape[i] != out.shape[out.rank - batch.rank + i])
      return false;
  return true;
}

/// Times each candidate (one warm-up, then 3 runs between CUDA events) on the
/// call's own operands with beta = 0, writing only the output, and returns the
/// fastest. A candidate that fails to launch is skipped; if timing itself
/// fails, the heuristic's first choice stands.
cublasLtMatmulAlgo_t
fastestMatmulAlgo(Context &ctx, const MatmulPlan &plan,
                  const cublasLtMatmulHeuristicResult_t *results, int found,
                  const void *aPtr, const void *bPtr, const void *cPtr) {
  cublasLtMatmulAlgo_t best = results[0].algo;
  TimingEvents events;
  if (!events.ok())
    return best;
  cudaEvent_t begin = events.begin, end = events.end;
  float alpha = 1.0f, beta = 0.0f, bestMs = 0;
  bool haveBest = false;
  void *out = const_cast<void *>(cPtr);
  auto launch = [&](const cublasLtMatmulAlgo_t &algo) {
    // Lt's A is our B (see buildMatmulPlan).
    return cublasLtMatmul(ctx.lt, plan.desc, &alpha, bPtr, plan.a, aPtr, plan.b,
                          &beta, out, plan.c, out, plan.c, &algo,
                          ctx.callWorkspace, ctx.callWorkspaceBytes,
                          ctx.stream);
  };
  for (int i = 0; i < found; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS ||
        results[i].workspaceSize > ctx.callWorkspaceBytes ||
        launch(results[i].algo) != CUBLAS_STATUS_SUCCESS)
      continue;
    cudaEventRecord(begin, ctx.stream);
    bool ok = true;
    for (int run = 0; run < 3 && ok; ++run)
      ok = launch(results[i].algo) == CUBLAS_STATUS_SUCCESS;
    cudaEventRecord(end, ctx.stream);
    float ms = 0;
    if (!ok || cudaEventSynchronize(end) != cudaSuccess ||
        cudaEventElapsedTime(&ms, begin, end) != cudaSuccess)
      continue;
    if (!haveBest || ms < bestMs) {
      haveBest = true;
      bestMs = ms;
      best = results[i].algo;
    }
  }
  cudaGetLastError(); // a skipped candidate's launch error is not the call's
  return best;
}

/// `dtype` is A's and B's, `outType` C's and D's (the same, or F32 for F16 /
/// BF16 operands: cuBLASLt supports 16F/16BF A/B with 32F C/D under
/// CUBLAS_COMPUTE_32F, the bias then being f32 too).
bool buildMatmulPlan(Context &ctx, const char *node, const MatmulParams &p,
                     const MatmulGeometry &g, DType dtype, DType outType,
                     int64_t batch, bool broadcastA, bool broadcastB,
                     cublasLtEpilogue_t epi, const void *aPtr, const void *bPtr,
                     const void *cPtr, const void *biasPtr, MatmulPlan &plan) {
  cudaDataType_t type = cudaTypeOf(dtype);
  cudaDataType_t outCudaType = cudaTypeOf(outType);
  bool tf32 = p.allowTf32 || ctx.options.allowTf32;
  cublasComputeType_t compute = dtype == DType::F32 && tf32
                                    ? CUBLAS_COMPUTE_32F_FAST_TF32
                                    : CUBLAS_COMPUTE_32F;
  if (!checkCublas(ctx, node,
                   cublasLtMatmulDescCreate(&plan.desc, compute, CUDA_R_32F),
                   "cublasLtMatmulDescCreate"))
    return false;
  // Lt's A is our B, Lt's B is our A (C^T = B^T A^T in column-major).
  cublasOperation_t opLtA = p.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opLtB = p.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opLtA,
                                 sizeof(opLtA));
  cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opLtB,
                                 sizeof(opLtB));
  cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                 sizeof(epi));
  if (biasPtr)
    cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                   &biasPtr, sizeof(biasPtr));
  uint64_t m = uint64_t(g.m), n = uint64_t(g.n), k = uint64_t(g.k);
  // Lt A: op(A) is n x k.
  uint64_t aRows = p.transB ? k : n, aCols = p.transB ? n : k;
  // Lt B: op(B) is k x m.
  uint64_t bRows = p.transA ? m : k, bCols = p.transA ? k : m;
  if (!checkCublas(ctx, node,
                   cublasLtMatrixLayoutCreate(&plan.a, type, aRows, aCols,
                                              int64_t(aRows)),
                   "cublasLtMatrixLayoutCreate") ||
      !checkCublas(ctx, node,
                   cublasLtMatrixLayoutCreate(&plan.b, type, bRows, bCols,
                                              int64_t(bRows)),
                   "cublasLtMatrixLayoutCreate") ||
      !checkCublas(
          ctx, node,
          cublasLtMatrixLayoutCreate(&plan.c, outCudaType, n, m, int64_t(n)),
          "cublasLtMatrixLayoutCreate"))
    return false;
  if (batch > 1) {
    int32_t count = int32_t(batch);
    int64_t strideLtA = broadcastB ? 0 : int64_t(k * n);
    int64_t strideLtB = broadcastA ? 0 : int64_t(m * k);
    int64_t strideC = int64_t(m * n);
    cublasLtMatrixLayout_t layouts[3] = {plan.a, plan.b, plan.c};
    int64_t strides[3] = {strideLtA, strideLtB, strideC};
    for (int i = 0; i < 3; ++i) {
      cublasLtMatrixLayoutSetAttribute(layouts[i],
                                       CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                       &count, sizeof(count));
      cublasLtMatrixLayoutSetAttribute(
          layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i],
          sizeof(strides[i]));
    }
  }
  cublasLtMatmulPreference_t pref = nullptr;
  if (!checkCublas(ctx, node, cublasLtMatmulPreferenceCreate(&pref),
                   "cublasLtMatmulPreferenceCreate"))
    return false;
  uint64_t workspace = ctx.callWorkspaceBytes;
  cublasLtMatmulPreferenceSetAttribute(pref,
                                       CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &workspace, sizeof(workspace));
  // Per-matrix calls (a general batch broadcast) pass pointers at multiples
  // of the matrix size: the guaranteed alignment is the smaller of the
  // base's and the matrix size's. Strided batches are checked by cuBLASLt.
  auto alignment = [&](const void *p, uint64_t rows, uint64_t cols,
                       DType type) {
    uintptr_t bytes = uintptr_t(rows * cols * dtypeSize(type));
    int a = alignmentOf(p);
    if (batch == 1 && g.batchCount > 1)
      a = std::min(a, alignmentOf(reinterpret_cast<const void *>(bytes)));
    return uint32_t(a);
  };
  uint32_t alignA = alignment(bPtr, k, n, dtype);
  uint32_t alignB = alignment(aPtr, m, k, dtype);
  uint32_t alignC = alignment(cPtr, m, n, outType);
  cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignA,
      sizeof(alignA));
  cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignB,
      sizeof(alignB));
  cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignC,
      sizeof(alignC));
  cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignC,
      sizeof(alignC));
  // Large products: time cuBLASLt's top candidates on the real operands and
  // keep the fastest (its first guess was up to 1.3x slower on ViT-B/16's
  // fp32 GEMMs on an H100), as cudnnFind does for convolutions and as
  // cuBLASLt's own "auto-tuning" sample recommends. Small ones take the
  // first guess: timing would cost more than it can save.
  constexpr int kCandidates = 8;
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  bool timeCandidates =
      !ctx.capturing && !ctx.callAccumulate && m * n * k >= (uint64_t(1) << 24);
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      ctx.lt, plan.desc, plan.a, plan.b, plan.c, plan.c, pref,
      timeCandidates ? kCandidates : 1, results, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (!checkCublas(ctx, node, status, "cublasLtMatmulAlgoGetHeuristic"))
    return false;
  if (found == 0) {
    failf(ctx, node, "cuBLASLt found no algorithm for %lldx%lldx%lld (%s)",
          (long long)m, (long long)n, (long long)k, dtypeName(dtype));
    return false;
  }
  plan.algo = results[0].algo;
  if (found > 1)
    plan.algo = fastestMatmulAlgo(ctx, plan, results, found, aPtr, bPtr, cPtr);
  plan.ok = true;
  return true;
}

} // namespace

namespace {
void matmulCall(Context &ctx, const char *node, const MatmulParams &params,
                TensorRef a, TensorRef b, const TensorRef *bias, TensorRef c) {
  MatmulGeometry g;
  if (hasError(ctx) || !validateMatmul(ctx, node, params, a, b, bias, c, g))
    return;
  if (c.numElements() == 0)
    return;
  if (g.k == 0) {
    failf(ctx, node, "matmul with an empty inner dimension (K = 0)");
    return;
  }
  bool broadcastA = false, broadcastB = false;
  bool strided = stridedBatchable(g.aBatch, g.cBatch, broadcastA) &&
                 stridedBatchable(g.bBatch, g.cBatch, broadcastB);
  // Bias: fused as an epilogue when it is a row vector added once; otherwise
  // broadcast into C first and accumulated with beta.
  bool fuseBias = bias && g.biasIsRowVector && params.beta == 1.0f;
  bool biasInC = bias && !fuseBias;
  const bool accumulate = ctx.callAccumulate;
  if (accumulate && (bias || params.activation != Activation::None ||
                     c.data == a.data || c.data == b.data)) {
    failf(ctx, node,
          "an accumulating matmul takes no bias, no activation "
          "and no output aliasing an operand");
    return;
  }
  if (biasInC && (c.data == a.data || c.data == b.data)) {
    failf(ctx, node, "output must not alias an operand when C is used");
    return;
  }
  Activation act = params.activation;
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  bool fusedAct = true;
  if (act == Activation::Relu)
    epi = fuseBias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
  else if (act == Activation::GeluTanh)
    epi = fuseBias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
  else {
    epi = fuseBias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    fusedAct = act == Activation::None;
  }
  int64_t batch = strided ? g.batchCount : 1;
  TensorRef keyTensors[3] = {a, b, c};
  int64_t extra[11] = {int64_t(ctx.callWorkspaceBytes),
                       params.transA,
                       params.transB,
                       int64_t(epi),
                       alignmentOf(a.data),
                       alignmentOf(b.data),
                       alignmentOf(c.data),
                       biasInC,
                       strided,
                       params.allowTf32,
                       accumulate};
  std::string key = geometryKey(node, keyTensors, 3, extra, 11);
  auto it = ctx.matmulPlans.find(key);
  if (it == ctx.matmulPlans.end()) {
    MatmulPlan plan;
    bool ok = buildMatmulPlan(ctx, node, params, g, a.dtype, c.dtype, batch,
                              broadcastA, broadcastB, epi, a.data, b.data,
                              c.data, fuseBias ? bias->data : nullptr, plan);
    it = ctx.matmulPlans.emplace(key, plan).first;
    if (!ok)
      return;
  }
  MatmulPlan &plan = it->second;
  if (!plan.ok) {
    failf(ctx, node, "no cuBLASLt plan for this matmul");
    return;
  }
  // C holds the broadcast bias only now: choosing the plan may have timed
  // candidates that wrote the output.
  if (biasInC) {
    expand(ctx, node, *bias, c);
    if (hasError(ctx))
      return;
  }
  if (fuseBias) // the plan may be shared by replays with the same bias
    cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                   &bias->data, sizeof(bias->data));
  float alpha = params.alpha, beta = biasInC      ? params.beta
                                     : accumulate ? 1.0f
                                                  : 0.0f;
  size_t elem = dtypeSize(a.dtype), outElem = dtypeSize(c.dtype);
  BroadcastStrides sa = broadcastStrides(g.aBatch, g.cBatch),
                   sb = broadcastStrides(g.bBatch, g.cBatch);
  int64_t calls = strided ? 1 : g.batchCount;
  for (int64_t i = 0; i < calls; ++i) {
    int64_t aIndex = 0, bIndex = 0, rest = i;
    for (int d = g.cBatch.rank - 1; d >= 0 && !strided; --d) {
      int64_t coord = rest % g.cBatch.shape[d];
      rest /= g.cBatch.shape[d];
      aIndex += coord * sa.stride[d];
      bIndex += coord * sb.stride[d];
    }
    const uint8_t *pa = static_cast<const uint8_t *>(a.data) +
                        size_t(aIndex * g.m * g.k) * elem;
    const uint8_t *pb = static_cast<const uint8_t *>(b.data) +
                        size_t(bIndex * g.k * g.n) * elem;
    uint8_t *pc =
        static_cast<uint8_t *>(c.data) + size_t(i * g.m * g.n) * outElem;
    if (!checkCublas(ctx, node,
                     cublasLtMatmul(ctx.lt, plan.desc, &alpha, pb, plan.a, pa,
                                    plan.b, &beta, pc, plan.c, pc, plan.c,
                                    &plan.algo, ctx.callWorkspace,
                                    ctx.callWorkspaceBytes, ctx.stream),
                     "cublasLtMatmul"))
      return;
  }
  if (!fusedAct)
    unary(ctx, node, UnaryOp::Gelu, 0, 0, c, c);
}
} // namespace

void setMatmulWorkspace(Context &ctx, void *workspace, size_t bytes) {
  ctx.nextMatmulWorkspace = bytes ? workspace : nullptr;
  ctx.nextMatmulWorkspaceBytes = workspace ? bytes : 0;
}

void matmulWithWorkspace(Context &ctx, const char *node,
                         const MatmulParams &params, TensorRef a, TensorRef b,
                         const TensorRef *bias, TensorRef c, void *workspace,
                         size_t workspaceBytes) {
  ctx.callWorkspace = workspaceBytes ? workspace : nullptr;
  ctx.callWorkspaceBytes = workspace ? workspaceBytes : 0;
  matmulCall(ctx, node, params, a, b, bias, c);
}

void matmulAccumulate(Context &ctx, const char *node,
                      const MatmulParams &params, TensorRef a, TensorRef b,
                      TensorRef c, void *workspace, size_t workspaceBytes) {
  ctx.callWorkspace = workspaceBytes ? workspace : nullptr;
  ctx.callWorkspaceBytes = workspace ? workspaceBytes : 0;
  ctx.callAccumulate = true;
  matmulCall(ctx, node, params, a, b, nullptr, c);
  ctx.callAccumulate = false;
}

void matmul(Context &ctx, const char *node, const MatmulParams &params,
            TensorRef a, TensorRef b, const TensorRef *bias, TensorRef c) {
  // The planned slice for this call, else the context's own workspace.
  if (ctx.nextMatmulWorkspace) {
    ctx.callWorkspace = ctx.nextMatmulWorkspace;
    ctx.callWorkspaceBytes = ctx.nextMatmulWorkspaceBytes;
  } else {
    ctx.callWorkspace = ctx.matmulWorkspace;
    ctx.callWorkspaceBytes =
        ctx.matmulWorkspace ? ctx.options.matmulWorkspaceBytes : 0;
  }
  ctx.nextMatmulWorkspace = nullptr;
  ctx.nextMatmulWorkspaceBytes = 0;
  matmulCall(ctx, node, params, a, b, bias, c);
}

//===----------------------------------------------------------------------===//
// Convolutions
//===----------------------------------------------------------------------===//

namespace {

/// An N-D tensor descriptor for [n, c, spatial...] (dims in cuDNN's NCHW
/// order); with `channelsLast` the strides are those of [n, spatial..., c]
/// (cuDNN's NHWC).
bool setTensorDesc(Context &ctx, const char *node,
                   cudnnTensorDescriptor_t &desc, DType dtype, int64_t n,
                   int64_t c, const int64_t *spatial3, int spatialRank,
                   bool channelsLast) {
  if (!checkCudnn(ctx, node, cudnnCreateTensorDescriptor(&desc),
                  "cudnnCreateTensorDescriptor"))
    return false;
  // 1-D convs run as 2-D with H = 1; 3-D as 5-D tensors.
  int dims = spatialRank == 3 ? 5 : 4;
  int shape[5], strides[5];
  shape[0] = int(n);
  shape[1] = int(c);
  for (int i = 0; i < dims - 2; ++i)
    shape[2 + i] = int(spatial3[3 - (dims - 2) + i]);
  if (channelsLast) {
    strides[1] = 1;
    int stride = int(c);
    for (int i = dims - 1; i >= 2; --i) {
      strides[i] = stride;
      stride *= shape[i];
    }
    strides[0] = stride;
  } else {
    strides[dims - 1] = 1;
    for (int i = dims - 2; i >= 0; --i)
      strides[i] = strides[i + 1] * shape[i + 1];
  }
  return checkCudnn(ctx, node,
                    cudnnSetTensorNdDescriptor(desc, cudnnTypeOf(dtype), dims,
                                               shape, strides),
                    "cudnnSetTensorNdDescriptor");
}

} // namespace

bool convLogEnabled() {
  static const bool enabled = [] {
    const char *env = std::getenv("MEMOPT_CONV_LOG");
    return env && *env && std::string(env) != "0";
  }();
  return enabled;
}

namespace {

/// The search's results as "algo:ms:bytes:math[:status]" entries.
template <typename Perf>
void logConvSearch(const char *node, const char *what, const ConvGeometry &g,
                   DType dtype, const void *workspace, size_t workspaceBytes,
                   bool heuristic, const Perf *perf, int returned) {
  if (!convLogEnabled())
    return;
  std::string line;
  char buf[160];
  std::snprintf(buf, sizeof(buf),
                "memopt conv: %s %s %s %s n=%lld c=%lld k=%lld in=%lldx%lld "
                "kernel=%lldx%lld stride=%lld group=%lld ws=%zu align=%d %s:",
                node ? node : "?", what, dtypeName(dtype),
                g.channelsLast ? "nhwc" : "nchw", (long long)g.batch,
                (long long)g.inChannels, (long long)g.outChannels,
                (long long)g.in[1], (long long)g.in[2], (long long)g.kernel[1],
                (long long)g.kernel[2], (long long)g.strides[1],
                (long long)g.group, workspaceBytes, alignmentOf(workspace),
                heuristic ? "heuristic" : "found");
  line = buf;
  for (int i = 0; i < returned; ++i) {
    std::snprintf(buf, sizeof(buf), " %d:%.4f:%zu:%d", int(perf[i].algo),
                  double(perf[i].time), perf[i].memory, int(perf[i].mathType));
    line += buf;
    if (perf[i].status != CUDNN_STATUS_SUCCESS)
      line += ":" + std::to_string(int(perf[i].status));
    else if (perf[i].memory > workspaceBytes)
      line += ":ws";
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

/// One usable result of cuDNN's algorithm search.
struct ConvCandidate {
  int algo = 0;
  size_t bytes = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  float ms = 0; ///< measured by timeConvCandidates, else cuDNN's
};

/// The first candidate becomes the plan's algorithm (its math type set on the
/// descriptor), later ones its fallbacks.
bool setConvCandidates(Context &ctx, const char *node, ConvPlan &plan,
                       const std::vector<ConvCandidate> &candidates) {
  for (const ConvCandidate &c : candidates) {
    if (plan.algo < 0) {
      plan.algo = c.algo;
      plan.workspaceBytes = c.bytes;
      if (!checkCudnn(ctx, node, cudnnSetConvolutionMathType(plan.conv, c.math),
                      "cudnnSetConvolutionMathType"))
        return false;
    } else if (plan.numFallbacks < 8) {
      plan.fallbackAlgos[plan.numFallbacks] = c.algo;
      plan.fallbackBytes[plan.numFallbacks] = c.bytes;
      plan.fallbackMaths[plan.numFallbacks] = int(c.math);
      ++plan.numFallbacks;
    }
  }
  return true;
}

/// Which cuDNN convolution a plan runs: conv, ConvTranspose (the backward
/// data of the conv y -> x) or the filter gradient of a conv.
enum class ConvDirection { Forward, BackwardData, BackwardFilter };

const char *directionName(ConvDirection direction) {
  return direction == ConvDirection::Forward        ? "Conv"
         : direction == ConvDirection::BackwardData ? "ConvTranspose"
                                                    : "conv filter gradient";
}

/// The search's usable results (run successfully, within the workspace), in
/// its order.
template <typename Perf>
void collectCandidates(const Perf *perf, int returned, size_t workspaceBytes,
                       std::vector<ConvCandidate> &candidates) {
  for (int i = 0; i < returned; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS &&
        perf[i].memory <= workspaceBytes)
      candidates.push_back(
          {int(perf[i].algo), perf[i].memory, perf[i].mathType, perf[i].time});
}

cudnnStatus_t callConv(Context &ctx, ConvPlan &plan, ConvDirection direction,
                       const TensorRef &x, const TensorRef &w,
                       const TensorRef &y, void *workspace, float beta);

/// Re-times the search's fastest candidates (at most kTimedCandidates), one
/// warm-up and three calls each, and orders them by that time. cudnnFind*Ex
/// times each algorithm once: on an H100 its times for ResNet-50's f16
/// channels-last convolutions were 5-10x the steady state and swapped
/// IMPLICIT_GEMM (CUDA cores) with IMPLICIT_PRECOMP_GEMM (tensor cores) from
/// run to run, so 6 to 12 of the 53 call sites kept the slow kernel
/// (MEMOPT_CONV_LOG). PyTorch's cudnn.benchmark and the matmul plans here
/// (fastestMatmulAlgo) time the same way. The calls write y (as the search
/// did): the caller saved a residual that y aliases.
void timeConvCandidates(Context &ctx, const char *node, ConvPlan &plan,
                        ConvDirection direction, const TensorRef &x,
                        const TensorRef &w, const TensorRef &y, void *workspace,
                        std::vector<ConvCandidate> &candidates) {
  constexpr size_t kTimedCandidates = 4;
  size_t timed = std::min(candidates.size(), kTimedCandidates);
  if (timed < 2)
    return;
  TimingEvents events;
  if (!events.ok())
    return;
  cudaEvent_t begin = events.begin, end = events.end;
  for (size_t i = 0; i < timed; ++i) {
    ConvCandidate &c = candidates[i];
    plan.algo = c.algo;
    plan.workspaceBytes = c.bytes;
    float ms = -1.0f;
    if (cudnnSetConvolutionMathType(plan.conv, c.math) == CUDNN_STATUS_SUCCESS)
      ms = timeCalls(ctx, begin, end, 3, [&] {
        return callConv(ctx, plan, direction, x, w, y, workspace, 0.0f) ==
               CUDNN_STATUS_SUCCESS;
      });
    // A candidate that fails here goes last among the timed ones.
    c.ms = ms >= 0 ? ms : std::numeric_limits<float>::max();
  }
  cudaGetLastError(); // a failed candidate's launch error is not the call's
  plan.algo = -1;
  plan.workspaceBytes = 0;
  std::stable_sort(candidates.begin(), candidates.begin() + timed,
                   [](const ConvCandidate &a, const ConvCandidate &b) {
                     return a.ms < b.ms;
                   });
  if (convLogEnabled()) {
    std::string line = "memopt conv: " + std::string(node ? node : "?") + " " +
                       directionName(direction) + " timed:";
    char buf[64];
    for (size_t i = 0; i < timed; ++i) {
      std::snprintf(buf, sizeof(buf), " %d:%.4f:%zu:%d", candidates[i].algo,
                    double(candidates[i].ms), candidates[i].bytes,
                    int(candidates[i].math));
      line += buf;
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

bool buildConvPlan(Context &ctx, const char *node, const ConvParams &params,
                   const ConvGeometry &g, ConvDirection direction,
                   const TensorRef &x, const TensorRef &w, const TensorRef &y,
                   void *workspace, size_t workspaceBytes, int spatialRank,
                   ConvPlan &plan) {
  int dims = spatialRank == 3 ? 5 : 4;
  int spatial = dims - 2;
  // Forward view: input (conv: x, transposed: y) -> output.
  if (!setTensorDesc(ctx, node, plan.x, x.dtype, g.batch, g.inChannels, g.in,
                     spatialRank, g.channelsLast) ||
      !setTensorDesc(ctx, node, plan.y, y.dtype, g.batch, g.outChannels, g.out,
                     spatialRank, g.channelsLast))
    return false;
  // Filter dims in KCRS order whatever the format; channels-last filters
  // are stored KRSC (cuDNN's NHWC filter format).
  int filter[5];
  filter[0] = int(g.outChannels);
  filter[1] = int(g.inChannels / g.group);
  if (direction == ConvDirection::BackwardData) {
    // [C, M/g, k...], or its KRSC form [C, k..., M/g] channels-last.
    filter[0] = int(w.shape[0]);
    filter[1] = int(g.channelsLast ? w.shape[w.rank - 1] : w.shape[1]);
  }
  for (int i = 2; i < dims; ++i)
    filter[i] = 1;
  for (int i = 0; i < spatial; ++i)
    filter[2 + i] = int(g.kernel[3 - spatial + i]);
  if (!checkCudnn(ctx, node, cudnnCreateFilterDescriptor(&plan.w),
                  "cudnnCreateFilterDescriptor") ||
      !checkCudnn(ctx, node,
                  cudnnSetFilterNdDescriptor(plan.w, cudnnTypeOf(w.dtype),
                                             g.channelsLast ? CUDNN_TENSOR_NHWC
                                                            : CUDNN_TENSOR_NCHW,
                                             dims, filter),
                  "cudnnSetFilterNdDescriptor"))
    return false;
  int pads[3], strides[3], dilations[3];
  for (int i = 0; i < spatial; ++i) {
    int d = 3 - spatial + i;
    pads[i] = int(g.padsBegin[d]);
    strides[i] = int(g.strides[d]);
    dilations[i] = int(g.dilations[d]);
  }
  // PyTorch's choice: FMA math keeps f32 exact; tensor-op math lets f32
  // convolutions run in TF32 (cuDNN's TENSOR_OP_MATH permits it on sm_80+).
  bool tf32 = params.allowTf32 || ctx.options.allowTf32;
  cudnnMathType_t math =
      x.dtype == DType::F32 && !tf32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
  if (!checkCudnn(ctx, node, cudnnCreateConvolutionDescriptor(&plan.conv),
                  "cudnnCreateConvolutionDescriptor") ||
      !checkCudnn(ctx, node,
                  cudnnSetConvolutionNdDescriptor(
                      plan.conv, spatial, pads, strides, dilations,
                      CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                  "cudnnSetConvolutionNdDescriptor") ||
      !checkCudnn(ctx, node,
                  cudnnSetConvolutionGroupCount(plan.conv, int(g.group)),
                  "cudnnSetConvolutionGroupCount") ||
      !checkCudnn(ctx, node, cudnnSetConvolutionMathType(plan.conv, math),
                  "cudnnSetConvolutionMathType"))
    return false;

  constexpr int kRequested = 8;
  int returned = 0;
  std::vector<ConvCandidate> candidates;
  if (direction == ConvDirection::Forward) {
    cudnnConvolutionFwdAlgoPerf_t perf[kRequested];
    cudnnStatus_t status =
        ctx.capturing ? cudnnGetConvolutionForwardAlgorithm_v7(
                            ctx.dnn, plan.x, plan.w, plan.conv, plan.y,
                            kRequested, &returned, perf)
                      : cudnnFindConvolutionForwardAlgorithmEx(
                            ctx.dnn, plan.x, x.data, plan.w, w.data, plan.conv,
                            plan.y, y.data, kRequested, &returned, perf,
                            workspace, workspaceBytes);
    if (!checkCudnn(ctx, node, status, "cudnn forward algorithm search"))
      return false;
    logConvSearch(node, "Conv", g, x.dtype, workspace, workspaceBytes,
                  ctx.capturing, perf, returned);
    if (convLogEnabled() && !ctx.capturing) {
      cudnnConvolutionFwdAlgoPerf_t heur[kRequested];
      int count = 0;
      if (cudnnGetConvolutionForwardAlgorithm_v7(
              ctx.dnn, plan.x, plan.w, plan.conv, plan.y, kRequested, &count,
              heur) == CUDNN_STATUS_SUCCESS)
        logConvSearch(node, "Conv", g, x.dtype, workspace, workspaceBytes, true,
                      heur, count);
    }
    collectCandidates(perf, returned, workspaceBytes, candidates);
  } else if (direction == ConvDirection::BackwardData) {
    // ConvTranspose = backward data of the conv y -> x with the same filter.
    cudnnConvolutionBwdDataAlgoPerf_t perf[kRequested];
    cudnnStatus_t status =
        ctx.capturing ? cudnnGetConvolutionBackwardDataAlgorithm_v7(
                            ctx.dnn, plan.w, plan.x, plan.conv, plan.y,
                            kRequested, &returned, perf)
                      : cudnnFindConvolutionBackwardDataAlgorithmEx(
                            ctx.dnn, plan.w, w.data, plan.x, x.data, plan.conv,
                            plan.y, y.data, kRequested, &returned, perf,
                            workspace, workspaceBytes);
    if (!checkCudnn(ctx, node, status, "cudnn backward-data algorithm search"))
      return false;
    logConvSearch(node, "ConvTranspose", g, x.dtype, workspace, workspaceBytes,
                  ctx.capturing, perf, returned);
    if (convLogEnabled() && !ctx.capturing) {
      cudnnConvolutionBwdDataAlgoPerf_t heur[kRequested];
      int count = 0;
      if (cudnnGetConvolutionBackwardDataAlgorithm_v7(
              ctx.dnn, plan.w, plan.x, plan.conv, plan.y, kRequested, &count,
              heur) == CUDNN_STATUS_SUCCESS)
        logConvSearch(node, "ConvTranspose", g, x.dtype, workspace,
                      workspaceBytes, true, heur, count);
    }
    collectCandidates(perf, returned, workspaceBytes, candidates);
  } else {
    // Filter gradient: x and dy (y here) in, dw (w here) out.
    cudnnConvolutionBwdFilterAlgoPerf_t perf[kRequested];
    cudnnStatus_t status =
        ctx.capturing ? cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                            ctx.dnn, plan.x, plan.y, plan.conv, plan.w,
                            kRequested, &returned, perf)
                      : cudnnFindConvolutionBackwardFilterAlgorithmEx(
                            ctx.dnn, plan.x, x.data, plan.y, y.data, plan.conv,
                            plan.w, w.data, kRequested, &returned, perf,
                            workspace, workspaceBytes);
    if (!checkCudnn(ctx, node, status,
                    "cudnn backward-filter algorithm search"))
      return false;
    logConvSearch(node, "FilterGrad", g, x.dtype, workspace, workspaceBytes,
                  ctx.capturing, perf, returned);
    if (convLogEnabled() && !ctx.capturing) {
      cudnnConvolutionBwdFilterAlgoPerf_t heur[kRequested];
      int count = 0;
      if (cudnnGetConvolutionBackwardFilterAlgorithm_v7(
              ctx.dnn, plan.x, plan.y, plan.conv, plan.w, kRequested, &count,
              heur) == CUDNN_STATUS_SUCCESS)
        logConvSearch(node, "FilterGrad", g, x.dtype, workspace, workspaceBytes,
                      true, heur, count);
    }
    collectCandidates(perf, returned, workspaceBytes, candidates);
  }
  if (candidates.empty()) {
    failf(ctx, node,
          "cuDNN has no %s algorithm within the %zu-byte workspace the plan "
          "reserved",
          directionName(direction), workspaceBytes);
    return false;
  }
  if (!ctx.capturing)
    timeConvCandidates(ctx, node, plan, direction, x, w, y, workspace,
                       candidates);
  return setConvCandidates(ctx, node, plan, candidates);
}

/// What follows a forward convolution: y = act(conv + bias + residual).
struct ConvEpilogue {
  const TensorRef *bias = nullptr;
  const TensorRef *residual = nullptr;
  Activation activation = Activation::None;
  bool any() const {
    return bias || residual || activation != Activation::None;
  }
};

/// The key of a call site's plan: node, shapes, dtypes and every setting.
std::string convPlanKey(const char *node, const ConvParams &params,
                        const ConvGeometry &g, ConvDirection direction,
                        const TensorRef &x, const TensorRef &w,
                        const TensorRef &y, void *workspace,
                        size_t workspaceBytes, bool epilogue) {
  int64_t extra[17] = {int64_t(direction), params.group, alignmentOf(workspace),
                       int64_t(workspaceBytes)};
  for (int d = 0; d < 3; ++d) {
    extra[4 + d] = g.padsBegin[d];
    extra[7 + d] = g.strides[d];
    extra[10 + d] = g.dilations[d];
  }
  extra[13] = g.padsEnd[0] * 9 + g.padsEnd[1] * 3 + g.padsEnd[2];
  extra[14] = params.allowTf32;
  extra[15] = g.channelsLast;
  extra[16] = epilogue;
  TensorRef keyTensors[3] = {x, w, y};
  return geometryKey(node, keyTensors, 3, extra, 17);
}

/// The plan cached under `key`, built on first use.
ConvPlan *getConvPlan(Context &ctx, const char *node, const std::string &key,
                      const ConvParams &params, const ConvGeometry &g,
                      ConvDirection direction, const TensorRef &x,
                      const TensorRef &w, const TensorRef &y, void *workspace,
                      size_t workspaceBytes) {
  auto it = ctx.convPlans.find(key);
  if (it != ctx.convPlans.end())
    return &it->second;
  bool transposed = direction == ConvDirection::BackwardData;
  bool symmetric = true;
  for (int d = 0; d < 3; ++d)
    symmetric = symmetric && g.padsBegin[d] == g.padsEnd[d];
  ConvPlan plan;
  bool ok = true;
  if (!symmetric) {
    if (transposed) {
      failf(ctx, node,
            "ConvTranspose with asymmetric pads is not supported on CUDA");
      return nullptr;
    }
    plan.useFallback = true;
  } else {
    ok = buildConvPlan(ctx, node, params, g, direction, x, w, y, workspace,
                       workspaceBytes, params.spatialRank, plan);
  }
  it = ctx.convPlans.emplace(key, plan).first;
  return ok ? &it->second : nullptr;
}

/// One cuDNN call of the plan's algorithm, y = conv + beta * y.
cudnnStatus_t callConv(Context &ctx, ConvPlan &plan, ConvDirection direction,
                       const TensorRef &x, const TensorRef &w,
                       const TensorRef &y, void *workspace, float beta) {
  float one = 1.0f;
  switch (direction) {
  case ConvDirection::BackwardData:
    return cudnnConvolutionBackwardData(
        ctx.dnn, &one, plan.w, w.data, plan.x, x.data, plan.conv,
        cudnnConvolutionBwdDataAlgo_t(plan.algo), workspace,
        plan.workspaceBytes, &beta, plan.y, y.data);
  case ConvDirection::BackwardFilter:
    return cudnnConvolutionBackwardFilter(
        ctx.dnn, &one, plan.x, x.data, plan.y, y.data, plan.conv,
        cudnnConvolutionBwdFilterAlgo_t(plan.algo), workspace,
        plan.workspaceBytes, &beta, plan.w, w.data);
  default:
    return cudnnConvolutionForward(
        ctx.dnn, &one, plan.x, x.data, plan.w, w.data, plan.conv,
        cudnnConvolutionFwdAlgo_t(plan.algo), workspace, plan.workspaceBytes,
        &beta, plan.y, y.data);
  }
}

/// The plan's convolution, y = conv + beta * y; an algorithm that fails
/// outright is dropped for the search's next one, outside graph capture
/// only (the first run of a program is eager).
bool runConv(Context &ctx, const char *node, ConvPlan &plan,
             ConvDirection direction, const TensorRef &x, const TensorRef &w,
             const TensorRef &y, void *workspace, float beta) {
  cudnnStatus_t status =
      callConv(ctx, plan, direction, x, w, y, workspace, beta);
  while (status != CUDNN_STATUS_SUCCESS && !ctx.capturing &&
         plan.numFallbacks > 0) {
    plan.algo = plan.fallbackAlgos[0];
    plan.workspaceBytes = plan.fallbackBytes[0];
    cudnnSetConvolutionMathType(plan.conv,
                                cudnnMathType_t(plan.fallbackMaths[0]));
    --plan.numFallbacks;
    for (int i = 0; i < plan.numFallbacks; ++i) {
      plan.fallbackAlgos[i] = plan.fallbackAlgos[i + 1];
      plan.fallbackBytes[i] = plan.fallbackBytes[i + 1];
      plan.fallbackMaths[i] = plan.fallbackMaths[i + 1];
    }
    status = callConv(ctx, plan, direction, x, w, y, workspace, beta);
  }
  return checkCudnn(ctx, node, status,
                    direction == ConvDirection::BackwardData
                        ? "cudnnConvolutionBackwardData"
                    : direction == ConvDirection::BackwardFilter
                        ? "cudnnConvolutionBackwardFilter"
                        : "cudnnConvolutionForward");
}

/// Forward conv and its epilogue as two steps: the convolution (into y, or
/// accumulated onto y when y is the residual itself), then one kernel for
/// bias, residual and activation.
bool runSeparateEpilogue(Context &ctx, const char *node, ConvPlan &plan,
                         const ConvGeometry &g, const TensorRef &x,
                         const TensorRef &w, const TensorRef &y,
                         void *workspace, const ConvEpilogue &epilogue) {
  bool inPlace = epilogue.residual && epilogue.residual->data == y.data;
  bool ok = plan.useFallback
                ? launchDirectConv(ctx, node, g, x, w, y, inPlace)
                : runConv(ctx, node, plan, ConvDirection::Forward, x, w, y,
                          workspace, inPlace ? 1.0f : 0.0f);
  if (!ok || !epilogue.any())
    return ok;
  int64_t spatial = g.channelsLast ? 1 : g.out[0] * g.out[1] * g.out[2];
  return launchBiasActivation(ctx, node, y, epilogue.bias, g.outChannels,
                              spatial, epilogue.activation,
                              inPlace ? nullptr : epilogue.residual);
}

/// One cudnnConvolutionBiasActivationForward: y = act(conv(x) + alpha2 * z +
/// bias) with z the residual (alpha2 = 1) or y (alpha2 = 0).
cudnnStatus_t callFused(Context &ctx, ConvPlan &plan, int algo, size_t bytes,
                        const TensorRef &x, const TensorRef &w,
                        const TensorRef &y, void *workspace,
                        const ConvEpilogue &epilogue) {
  float one = 1.0f, alpha2 = epilogue.residual ? 1.0f : 0.0f;
  const void *z = epilogue.residual ? epilogue.residual->data : y.data;
  return cudnnConvolutionBiasActivationForward(
      ctx.dnn, &one, plan.x, x.data, plan.w, w.data, plan.conv,
      cudnnConvolutionFwdAlgo_t(algo), workspace, bytes, &alpha2, plan.y, z,
      plan.bias, epilogue.bias->data, plan.activation, plan.y, y.data);
}

/// Times the separate epilogue against cudnnConvolutionBiasActivationForward
/// with each of the search's usable algorithms (at most three) that cuDNN
/// allows there (any with ReLU, IMPLICIT_PRECOMP_GEMM without an
/// activation), one warm-up and three runs each between CUDA events, and
/// keeps the fastest (as buildMatmulPlan times cuBLASLt's candidates). The
/// runs overwrite y: the caller saved a residual that y aliases.
void chooseEpilogue(Context &ctx, const char *node, ConvPlan &plan,
                    const ConvGeometry &g, const TensorRef &x,
                    const TensorRef &w, const TensorRef &y, void *workspace,
                    const ConvEpilogue &epilogue) {
  plan.epilogueChosen = true;
  bool relu = epilogue.activation == Activation::Relu;
  if (plan.useFallback || !epilogue.bias ||
      !(relu || epilogue.activation == Activation::None))
    return;
  int dims = 4, biasShape[5] = {1, int(g.outChannels), 1, 1, 1},
      biasStrides[5] = {int(g.outChannels), 1, 1, 1, 1};
  int yDims = 0;
  cudnnDataType_t yType;
  int yShape[5], yStrides[5];
  if (cudnnGetTensorNdDescriptor(plan.y, 5, &yType, &yDims, yShape, yStrides) ==
      CUDNN_STATUS_SUCCESS)
    dims = yDims;
  if (cudnnCreateTensorDescriptor(&plan.bias) != CUDNN_STATUS_SUCCESS ||
      cudnnSetTensorNdDescriptor(plan.bias, cudnnTypeOf(y.dtype), dims,
                                 biasShape,
                                 biasStrides) != CUDNN_STATUS_SUCCESS ||
      cudnnCreateActivationDescriptor(&plan.activation) !=
          CUDNN_STATUS_SUCCESS ||
      cudnnSetActivationDescriptor(
          plan.activation,
          relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
          CUDNN_NOT_PROPAGATE_NAN, 0.0) != CUDNN_STATUS_SUCCESS)
    return;
  TimingEvents events;
  if (!events.ok())
    return;
  cudaEvent_t begin = events.begin, end = events.end;
  auto time = [&](auto &&launch) -> float {
    return timeCalls(ctx, begin, end, 3, launch);
  };
  // The separate path as it would run, without the in-place accumulation
  // (y holds no residual during the timing).
  ConvEpilogue timed = epilogue;
  if (timed.residual && timed.residual->data == y.data)
    timed.residual = nullptr;
  std::string saved = ctx.error;
  plan.separateMs = time([&] {
    return runSeparateEpilogue(ctx, node, plan, g, x, w, y, workspace, timed);
  });
  if (!ctx.error.empty() && saved.empty()) {
    // Timing must not fail the call: the real run reports its own errors.
    ctx.error.clear();
    plan.separateMs = -1.0f;
  }
  int algos[9] = {plan.algo};
  size_t bytes[9] = {plan.workspaceBytes};
  int count = 1;
  for (int i = 0; i < plan.numFallbacks; ++i, ++count) {
    algos[count] = plan.fallbackAlgos[i];
    bytes[count] = plan.fallbackBytes[i];
  }
  int tried = 0;
  for (int i = 0; i < count && tried < 3; ++i) {
    if (!relu && algos[i] != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)
      continue;
    ++tried;
    float ms = time([&] {
      return callFused(ctx, plan, algos[i], bytes[i], x, w, y, workspace,
                       timed) == CUDNN_STATUS_SUCCESS;
    });
    if (ms >= 0 && (plan.separateMs < 0 || ms < plan.separateMs) &&
        (plan.fusedAlgo < 0 || ms < plan.fusedMs)) {
      plan.fusedAlgo = algos[i];
      plan.fusedBytes = bytes[i];
      plan.fusedMs = ms;
    }
  }
  cudaGetLastError(); // a failed candidate's launch error is not the call's
  if (convLogEnabled())
    std::fprintf(stderr,
                 "memopt conv: %s epilogue separate=%.4fms (algo %d) "
                 "fused=%.4fms (algo %d, %d tried) -> %s\n",
                 node ? node : "?", double(plan.separateMs), plan.algo,
                 double(plan.fusedMs), plan.fusedAlgo, tried,
                 plan.fusedAlgo >= 0 ? "fused" : "separate");
}

/// A residual that y aliases, kept on the host while the first run searches
/// and times algorithms (they write y): the runtime allocates no device
/// memory of its own.
struct SavedResidual {
  std::vector<uint8_t> bytes;
  bool save(Context &ctx, const char *node, const TensorRef &residual) {
    bytes.resize(residual.bytes());
    return checkCuda(ctx, node,
                     cudaMemcpyAsync(bytes.data(), residual.data, bytes.size(),
                                     cudaMemcpyDeviceToHost, ctx.stream),
                     "cudaMemcpyAsync") &&
           checkCuda(ctx, node, cudaStreamSynchronize(ctx.stream),
                     "cudaStreamSynchronize");
  }
  bool restore(Context &ctx, const char *node, const TensorRef &residual) {
    return checkCuda(ctx, node,
                     cudaMemcpyAsync(residual.data, bytes.data(), bytes.size(),
                                     cudaMemcpyHostToDevice, ctx.stream),
                     "cudaMemcpyAsync") &&
           checkCuda(ctx, node, cudaStreamSynchronize(ctx.stream),
                     "cudaStreamSynchronize");
  }
};

//===----------------------------------------------------------------------===//
// The engine of a channels-last depthwise convolution
//===----------------------------------------------------------------------===//

} // namespace

bool convEngineOf(Context &ctx, const char *node, ConvEngine &engine) {
  const char *env = std::getenv("MEMOPT_CONV_ENGINE");
  int32_t value = 0;
  if (!engineFromEnvironment(int32_t(ctx.options.convEngine), env, value)) {
    failf(ctx, node, "MEMOPT_CONV_ENGINE='%s' is not measured, cudnn or memopt",
          env);
    return false;
  }
  engine = ConvEngine(value);
  return true;
}

void noteConvEngine(Context &ctx, const char *node, const std::string &text) {
  std::string name = node ? node : "?";
  if (convLogEnabled())
    std::fprintf(stderr, "memopt conv: %s engine: %s\n", name.c_str(),
                 text.c_str());
  for (auto &site : ctx.convEngineSites)
    if (site.first == name) {
      site.second = text;
      return;
    }
  ctx.convEngineSites.emplace_back(name, text);
}

namespace {

/// The cuDNN path of a forward convolution as convForward runs it:
/// cudnnConvolutionBiasActivationForward where chooseEpilogue kept it, else
/// the convolution and the separate epilogue.
bool runCudnnForward(Context &ctx, const char *node, ConvPlan &plan,
                     const ConvGeometry &g, const TensorRef &x,
                     const TensorRef &w, const TensorRef &y, void *workspace,
                     const ConvEpilogue &epilogue) {
  if (plan.fusedAlgo >= 0)
    return callFused(ctx, plan, plan.fusedAlgo, plan.fusedBytes, x, w, y,
                     workspace, epilogue) == CUDNN_STATUS_SUCCESS;
  return runSeparateEpilogue(ctx, node, plan, g, x, w, y, workspace, epilogue);
}

/// The report's name of the plan's own engine: cuDNN, or the direct kernel
/// that runs what cuDNN cannot express (asymmetric pads).
std::string planEngineName(const ConvPlan &plan) {
  return plan.useFallback ? "direct kernel (asymmetric pads)" : "cudnn";
}

/// Times the call site's cuDNN path (its algorithm and epilogue already
/// chosen) against memopt's depthwise kernel with the epilogue fused, one
/// warm-up and three runs each between CUDA events (timeCalls, as the
/// algorithm search's candidates are timed), and keeps the faster in the
/// plan. The runs write y: the caller saved a residual that y aliases.
void chooseConvEngine(Context &ctx, const char *node, ConvPlan &plan,
                      const ConvGeometry &g, const TensorRef &x,
                      const TensorRef &w, const TensorRef &y, void *workspace,
                      const ConvEpilogue &epilogue) {
  plan.engineChosen = true;
  TimingEvents events;
  if (!events.ok()) {
    noteConvEngine(ctx, node, "cudnn (the timing could not start)");
    return;
  }
  cudaEvent_t begin = events.begin, end = events.end;
  auto time = [&](auto &&launch) {
    return timeEngineCalls(ctx, begin, end, launch);
  };
  plan.cudnnMs = plan.algo < 0 && !plan.useFallback ? -1.0f : time([&] {
    return runCudnnForward(ctx, node, plan, g, x, w, y, workspace, epilogue);
  });
  plan.depthwiseMs = time([&] {
    return launchDepthwiseConv(ctx, node, g, x, w, epilogue.bias,
                               epilogue.residual, epilogue.activation, y);
  });
  plan.depthwise = plan.depthwiseMs >= 0 &&
                   (plan.cudnnMs < 0 || plan.depthwiseMs < plan.cudnnMs);
  std::string other = planEngineName(plan);
  char text[200];
  std::snprintf(text, sizeof(text), "%s (measured: memopt %.4f ms, %s %.4f ms)",
                plan.depthwise ? "memopt depthwise kernel" : other.c_str(),
                double(plan.depthwiseMs), other.c_str(), double(plan.cudnnMs));
  noteConvEngine(ctx, node, text);
}

void convForward(Context &ctx, const char *node, const ConvParams &params,
                 TensorRef x, TensorRef w, const TensorRef *bias,
                 const TensorRef *residual, TensorRef y, void *workspace,
                 size_t workspaceBytes) {
  ConvGeometry g;
  if (hasError(ctx) ||
      !validateConv(ctx, node, params, false, x, w, bias, y, g))
    return;
  if (residual && !validateConvResidual(ctx, node, *residual, y))
    return;
  if (y.numElements() == 0)
    return;
  ConvEpilogue epilogue;
  epilogue.bias = bias;
  epilogue.residual = residual;
  epilogue.activation = params.activation;
  auto runDepthwise = [&] {
    launchDepthwiseConv(ctx, node, g, x, w, bias, residual, params.activation,
                        y);
  };
  // The first (eager) run of a call site searches algorithms and times the
  // epilogues, writing y: a residual that y aliases is saved first.
  std::string key = convPlanKey(node, params, g, ConvDirection::Forward, x, w,
                                y, workspace, workspaceBytes, epilogue.any());
  auto found = ctx.convPlans.find(key);
  if (found != ctx.convPlans.end() && found->second.depthwise) {
    runDepthwise();
    return;
  }
  // A channels-last grouped convolution whose engine is not chosen yet:
  // memopt's depthwise kernel may run it (forced, or timed against cuDNN).
  bool chooseEngine =
      g.channelsLast && g.group > 1 && !ctx.capturing &&
      (found == ctx.convPlans.end() || !found->second.engineChosen);
  ConvEngine engine = ConvEngine::Measured;
  std::string refusal;
  if (chooseEngine) {
    if (!convEngineOf(ctx, node, engine))
      return;
    refusal = depthwiseConvRefusal(g, x);
    if (refusal.empty() && engine == ConvEngine::Memopt) {
      ConvPlan &plan = ctx.convPlans[key];
      plan.engineChosen = plan.depthwise = true;
      noteConvEngine(ctx, node,
                     "memopt depthwise kernel (forced: MEMOPT_CONV_ENGINE or "
                     "ContextOptions::convEngine)");
      runDepthwise();
      return;
    }
  }
  bool search = !ctx.capturing &&
                (found == ctx.convPlans.end() || !found->second.epilogueChosen);
  bool inPlace = residual && residual->data == y.data;
  SavedResidual saved;
  if (search && inPlace && !saved.save(ctx, node, *residual))
    return;
  ConvPlan *plan =
      getConvPlan(ctx, node, key, params, g, ConvDirection::Forward, x, w, y,
                  workspace, workspaceBytes);
  bool depthwiseCandidate = chooseEngine && refusal.empty();
  if (!plan || (!plan->useFallback && plan->algo < 0)) {
    if (depthwiseCandidate) {
      // cuDNN cannot run it (no algorithm within the planned workspace):
      // memopt's kernel, which needs none, does.
      std::string why = ctx.error;
      ctx.error.clear();
      ConvPlan &chosen = ctx.convPlans[key];
      chosen.engineChosen = chosen.depthwise = true;
      noteConvEngine(ctx, node, "memopt depthwise kernel (cuDNN: " + why + ")");
      if (search && inPlace && !saved.restore(ctx, node, *residual))
        return;
      runDepthwise();
      return;
    }
    if (plan)
      failf(ctx, node, "no cuDNN algorithm for this convolution");
    return;
  }
  if (search && !plan->epilogueChosen && epilogue.any())
    chooseEpilogue(ctx, node, *plan, g, x, w, y, workspace, epilogue);
  if (chooseEngine) {
    if (depthwiseCandidate && engine == ConvEngine::Measured) {
      chooseConvEngine(ctx, node, *plan, g, x, w, y, workspace, epilogue);
    } else {
      plan->engineChosen = true;
      noteConvEngine(
          ctx, node,
          planEngineName(*plan) +
              (depthwiseCandidate
                   ? std::string(" (forced: MEMOPT_CONV_ENGINE or "
                                 "ContextOptions::convEngine)")
                   : " (memopt's depthwise kernel: " + refusal + ")"));
    }
  }
  if (search && inPlace && !saved.restore(ctx, node, *residual))
    return;
  if (plan->depthwise) {
    runDepthwise();
    return;
  }
  if (plan->fusedAlgo >= 0) {
    cudnnStatus_t status =
        callFused(ctx, *plan, plan->fusedAlgo, plan->fusedBytes, x, w, y,
                  workspace, epilogue);
    if (status == CUDNN_STATUS_SUCCESS || ctx.capturing) {
      checkCudnn(ctx, node, status, "cudnnConvolutionBiasActivationForward");
      return;
    }
    plan->fusedAlgo = -1; // fails outside its timing: the separate path
  }
  runSeparateEpilogue(ctx, node, *plan, g, x, w, y, workspace, epilogue);
}

} // namespace

void conv(Context &ctx, const char *node, const ConvParams &params, TensorRef x,
          TensorRef w, const TensorRef *bias, TensorRef y, void *workspace,
          size_t workspaceBytes) {
  convForward(ctx, node, params, x, w, bias, nullptr, y, workspace,
              workspaceBytes);
}

void convResidual(Context &ctx, const char *node, const ConvParams &params,
                  TensorRef x, TensorRef w, const TensorRef *bias,
                  TensorRef residual, TensorRef y, void *workspace,
                  size_t workspaceBytes) {
  convForward(ctx, node, params, x, w, bias, &residual, y, workspace,
              workspaceBytes);
}

void convTranspose(Context &ctx, const char *node, const ConvParams &params,
                   TensorRef x, TensorRef w, const TensorRef *bias, TensorRef y,
                   void *workspace, size_t workspaceBytes) {
  ConvGeometry g;
  if (hasError(ctx) || !validateConv(ctx, node, params, true, x, w, bias, y, g))
    return;
  if (y.numElements() == 0)
    return;
  ConvPlan *plan =
      getConvPlan(ctx, node,
                  convPlanKey(node, params, g, ConvDirection::BackwardData, x,
                              w, y, workspace, workspaceBytes, false),
                  params, g, ConvDirection::BackwardData, x, w, y, workspace,
                  workspaceBytes);
  if (!plan)
    return;
  if (plan->algo < 0) {
    failf(ctx, node, "no cuDNN algorithm for this convolution");
    return;
  }
  if (!runConv(ctx, node, *plan, ConvDirection::BackwardData, x, w, y,
               workspace, 0.0f))
    return;
  if (bias || params.activation != Activation::None)
    launchBiasActivation(ctx, node, y, bias, g.outChannels,
                         g.channelsLast ? 1 : g.out[0] * g.out[1] * g.out[2],
                         params.activation);
}

void convBackwardFilter(Context &ctx, const char *node,
                        const ConvParams &params, TensorRef x, TensorRef dy,
                        TensorRef dw, void *workspace, size_t workspaceBytes) {
  ConvGeometry g;
  if (hasError(ctx) ||
      !validateConvBackwardFilter(ctx, node, params, x, dy, dw, g) ||
      dw.numElements() == 0)
    return;
  // An empty batch contributes nothing: the gradient is zero.
  if (dy.numElements() == 0) {
    checkCuda(ctx, node, cudaMemsetAsync(dw.data, 0, dw.bytes(), ctx.stream),
              "cudaMemsetAsync");
    return;
  }
  ConvPlan *plan =
      getConvPlan(ctx, node,
                  convPlanKey(node, params, g, ConvDirection::BackwardFilter, x,
                              dw, dy, workspace, workspaceBytes, false),
                  params, g, ConvDirection::BackwardFilter, x, dw, dy,
                  workspace, workspaceBytes);
  if (!plan)
    return;
  if (plan->useFallback) {
    launchDirectConvBackwardFilter(ctx, node, g, x, dy, dw);
    return;
  }
  if (plan->algo < 0) {
    failf(ctx, node, "no cuDNN algorithm for this convolution");
    return;
  }
  runConv(ctx, node, *plan, ConvDirection::BackwardFilter, x, dw, dy, workspace,
          0.0f);
}

const char *convolutionEngineReport(Context &ctx) {
  ctx.convEngineReportText.clear();
  for (const auto &site : ctx.convEngineSites)
    ctx.convEngineReportText += site.first + ": " + site.second + "\n";
  return ctx.convEngineReportText.c_str();
}

} // namespace memopt::rt
