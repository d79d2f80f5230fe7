//===- CudaInternal.h - CUDA backend state and helpers -----------*- C++
//-*-===//
//
// The CUDA backend's Context, status checks that name the ONNX node, and the
// small device-side helpers shared by the kernel files.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_RUNTIME_CUDA_CUDAINTERNAL_H
#define MEMOPT_LIB_RUNTIME_CUDA_CUDAINTERNAL_H

#include "../HostAdam.h"
#include "../Internal.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace memopt::rt {

/// A cached cuBLASLt plan for one matmul call site.
struct MatmulPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo;
  bool ok = false;
};

/// A cached cuDNN plan for one conv call site.
struct ConvPlan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = -1; ///< forward, backward-data or backward-filter algorithm
  size_t workspaceBytes = 0;
  /// The algorithm search's other usable results, fastest first: taken in
  /// turn if a call with `algo` fails (seen with f16 on an H100: an
  /// algorithm cudnnFind timed out fine returned CUDNN_STATUS_BAD_PARAM).
  int fallbackAlgos[8] = {};
  size_t fallbackBytes[8] = {};
  int fallbackMaths[8] = {}; ///< each fallback's cudnnMathType_t
  int numFallbacks = 0;
  bool useFallback = false; ///< own direct kernel (asymmetric pads)
  /// The epilogue (bias, activation, residual) of a forward conv: either
  /// the separate kernel (fusedAlgo < 0) or one
  /// cudnnConvolutionBiasActivationForward with `fusedAlgo`, whichever was
  /// faster when the first eager run timed both.
  bool epilogueChosen = false;
  int fusedAlgo = -1;
  size_t fusedBytes = 0;
  cudnnTensorDescriptor_t bias = nullptr;
  cudnnActivationDescriptor_t activation = nullptr;
  float separateMs = 0, fusedMs = 0; ///< the timings behind the choice
  /// A channels-last grouped forward convolution's engine: cuDNN (this
  /// plan) or memopt's depthwise kernel (`depthwise`, DepthwiseKernels.cu),
  /// the faster when the first eager run timed both, or the one
  /// ContextOptions::convEngine / MEMOPT_CONV_ENGINE forces.
  bool engineChosen = false;
  bool depthwise = false;
  float cudnnMs = -1, depthwiseMs = -1; ///< the timings behind the choice
};

/// cuDNN fused attention: the plans built so far and the engine report
/// (Cuda/CudnnAttention.cpp).
struct CudnnAttentionState;
/// The fused normalization-ReLU convolutions' plans and engine choices
/// (Cuda/CudnnConvFusion.cpp).
struct NormConvFusionState;
struct OffloadState; // Cuda/Offload.cpp

struct Context {
  std::string error;
  ContextOptions options;
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  cudnnHandle_t dnn = nullptr;
  void *matmulWorkspace = nullptr;
  /// Set by setMatmulWorkspace for the next matmul call, then cleared.
  void *nextMatmulWorkspace = nullptr;
  size_t nextMatmulWorkspaceBytes = 0;
  /// The workspace of the matmul call in progress.
  void *callWorkspace = nullptr;
  size_t callWorkspaceBytes = 0;
  /// The matmul call in progress adds to c (matmulAccumulate).
  bool callAccumulate = false;
  cudaEvent_t timerBegin = nullptr, timerEnd = nullptr;
  /// Orders the context's stream with a caller's (waitForStream,
  /// signalStream); created on first use.
  cudaEvent_t streamEvent = nullptr;
  int smCount = 1;
  int computeMajor = 0; ///< compute capability major (8: Ampere, 9: Hopper)
  // CUDA graph replay (see execute()): one captured step per key, the key
  // being the micro-step in a data-parallel context (whose collectives
  // decide on the host whether this micro-batch communicates) and 0
  // otherwise.
  int runs = 0;
  bool capturing = false;
  struct CapturedStep {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    /// Runs of this key before capture: one eager run first, so that what
    /// initializes lazily (NCCL's connections, the algorithm searches of
    /// this micro-step's kernels) happens outside the capture.
    int eagerRuns = 0;
  };
  std::map<int64_t, CapturedStep> graphs;
  size_t peakUsedBytes = 0;
  /// The micro-step of the run in progress as the driver set it
  /// (setMicroStep; -1: not set): the data-parallel collectives decide on
  /// the host whether this micro-batch communicates.
  int64_t microStep = -1;
  // Per-op instrumentation (ContextOptions::profile / dumpDirectory):
  // opEvents[0] is recorded when a run starts, opEvents[k] after the k-th
  // op of the run, whose index, node and kind are opLabels[k - 1].
  std::vector<cudaEvent_t> opEvents;
  struct OpLabel {
    int index;
    const char *node, *kind;
  };
  std::vector<OpLabel> opLabels;
  OpTimes opTimes;
  std::unordered_map<std::string, MatmulPlan> matmulPlans;
  std::unordered_map<std::string, ConvPlan> convPlans;
  /// The engine of each channels-last grouped convolution call site, in
  /// first-call order (convolutionEngineReport), and the report's text.
  std::vector<std::pair<std::string, std::string>> convEngineSites;
  std::string convEngineReportText;
  CudnnAttentionState *cudnnAttention = nullptr;
  NormConvFusionState *normConvFusion = nullptr;
  /// Activation offload: the host pool, copy streams and events.
  OffloadState *offload = nullptr;
  /// --offload optimizer: the CPU optimizer and its copy streams
  /// (HostOptimizer.cpp), made on first use.
  OffloadEngine *optimizerOffload = nullptr;
};

/// Records a failed CUDA / cuBLAS / cuDNN status for `node`; returns false.
/// Frees the offload state (Cuda/Offload.cpp); called by destroyContext.
void destroyOffloadState(Context &ctx);
/// Seconds one copy of 1 GiB between the host pool and the device takes,
/// the slower direction, measured now (0: no host pool). writeProfileTimes
/// adds it as "<copy 1 GiB>", the entry --remat-kernel-times reads.
double measureCopySecondsPerGiB(Context &ctx);
/// The same for --offload optimizer without a host pool: a pinned scratch
/// buffer, on the gradients' copy-out and the masters' copy-back streams
/// (HostOptimizer.cpp); 0 without an optimizer offload.
double measureOptimizerCopySecondsPerGiB(Context &ctx);
/// Both directions' best of three copies of `bytes` between `host` (pinned)
/// and a device buffer, on `d2h` and `h2d`: the slower's seconds per GiB.
double timeCopySecondsPerGiB(Context &ctx, void *host, size_t bytes,
                             cudaStream_t d2h, cudaStream_t h2d);
/// The fixed cost of one op on this GPU: an empty kernel replayed from a
/// captured CUDA graph (the way a step runs), seconds per kernel, the best
/// of three replays of 512; 0 after an error (OpOverhead.cu).
double measureOpOverheadSeconds(Context &ctx);
bool checkCuda(Context &ctx, const char *node, cudaError_t status,
               const char *what);
bool checkCublas(Context &ctx, const char *node, cublasStatus_t status,
                 const char *what);
bool checkCudnn(Context &ctx, const char *node, cudnnStatus_t status,
                const char *what);
/// Checks the launch that was just made.
bool checkLaunch(Context &ctx, const char *node);

/// Grid size for a grid-stride loop over n items with 256-thread blocks.
inline unsigned gridFor(const Context &ctx, int64_t n, int threads = 256) {
  int64_t blocks = (n + threads - 1) / threads;
  int64_t cap = int64_t(ctx.smCount) * 32;
  return unsigned(blocks < 1 ? 1 : blocks > cap ? cap : blocks);
}

/// Shape and element strides by value for kernels (strides 0 = broadcast).
struct KernelDims {
  int rank;
  int64_t shape[kMaxRank];
  int64_t stride[kMaxRank];
};
KernelDims dimsOf(const TensorRef &t);
KernelDims broadcastDims(const TensorRef &in, const TensorRef &out);

/// A matmul (see matmul()) with an explicit cuBLASLt workspace, for kernels
/// built from several library calls (the chunked attention).
void matmulWithWorkspace(Context &ctx, const char *node,
                         const MatmulParams &params, TensorRef a, TensorRef b,
                         const TensorRef *bias, TensorRef c, void *workspace,
                         size_t workspaceBytes);

/// c += op(a) @ op(b) (beta = 1 on c's contents; no bias, no activation),
/// for sums over chunks (the fused head + loss's dx). Its algorithm is
/// cuBLASLt's first heuristic choice: timing candidates would overwrite c.
void matmulAccumulate(Context &ctx, const char *node,
                      const MatmulParams &params, TensorRef a, TensorRef b,
                      TensorRef c, void *workspace, size_t workspaceBytes);

/// Runs the attention (or its gradient) through cuDNN's fused SDPA engine
/// when the context allows it and cuDNN accepts the call, building the plan
/// of its shape on first use; returns false, having done nothing, when
/// memopt's kernels must run (the reason goes to the engine report).
/// Arguments as attention() / attentionBackward(), already validated; the
/// workspace is the one the program planned for the call (cuDNN's own, then
/// the statistics and a transposed K: workspace::cudnnAttentionBytes).
bool cudnnAttentionForward(Context &ctx, const char *node,
                           const AttentionParams &params,
                           const AttentionGeometry &geometry,
                           const TensorRef &q, const TensorRef &k,
                           const TensorRef &v, const TensorRef *bias,
                           const TensorRef &y, const TensorRef *lse,
                           void *workspace, size_t workspaceBytes);
bool cudnnAttentionBackward(
    Context &ctx, const char *node, const AttentionParams &params,
    const AttentionGeometry &geometry, const TensorRef &q, const TensorRef &k,
    const TensorRef &v, const TensorRef *bias, const TensorRef &y,
    const TensorRef &dy, const TensorRef &lse, const TensorRef &dq,
    const TensorRef &dk, const TensorRef &dv, const TensorRef *dbias,
    void *workspace, size_t workspaceBytes);
/// memopt's own attention kernels (AttentionKernels.cu): the chunked
/// cuBLASLt path where the workspace holds it, the fused kernel otherwise;
/// what attention() runs where cuDNN does not. Arguments validated.
void attentionKernels(Context &ctx, const char *node,
                      const AttentionParams &params,
                      const AttentionGeometry &geometry, const TensorRef &q,
                      const TensorRef &k, const TensorRef &v,
                      const TensorRef *bias, const TensorRef &y,
                      void *workspace, size_t workspaceBytes,
                      const TensorRef *lse);
/// The same for the gradient (AttentionBackwardKernels.cu).
void attentionBackwardKernels(
    Context &ctx, const char *node, const AttentionParams &params,
    const AttentionGeometry &geometry, const TensorRef &q, const TensorRef &k,
    const TensorRef &v, const TensorRef *bias, const TensorRef &y,
    const TensorRef &dy, const TensorRef &lse, const TensorRef &dq,
    const TensorRef &dk, const TensorRef &dv, const TensorRef *dbias,
    void *workspace, size_t workspaceBytes);
/// The largest head size (Q / K and V alike) memopt's attention kernels run,
/// forward and backward; larger heads run on cuDNN or fail.
constexpr int kAttentionKernelsMaxHeadSize = 128;
/// Frees the plans (destroyContext).
void destroyCudnnAttention(Context &ctx);
/// Frees normReluConv's and normReluConvBackwardFilter's cuDNN graphs
/// (destroyContext; CudnnConvFusion.cpp).
void destroyNormConvFusion(Context &ctx);
/// In CudnnAttentionKernels.cu. cuDNN's row statistics (one log-sum-exp per
/// row) to memopt's pairs (log-sum-exp, 0), and pairs back to sums.
bool launchStatisticsToPairs(Context &ctx, const char *node,
                             const float *statistics, float *pairs,
                             int64_t rows);
bool launchPairsToStatistics(Context &ctx, const char *node, const float *pairs,
                             float *statistics, int64_t rows);
/// cuDNN's dropout seed and offset (I64 each, `seedOffset[0..1]`) from the
/// program's key [seed, micro-batch] and the op's dropout stream, computed
/// on the device (CUDA-graph safe); the same values for a forward and its
/// gradient, so the backward regenerates the forward's mask.
bool launchCudnnDropoutSeed(Context &ctx, const char *node, const int64_t *key,
                            uint32_t stream, int64_t *seedOffset);
/// y[b] = x[b]^T for `batch` row-major rows x cols matrices of 2-byte
/// elements (K between [D, Sk] and cuDNN's [Sk, D]).
bool launchTransposeMatrices16(Context &ctx, const char *node, const void *x,
                               void *y, int64_t batch, int64_t rows,
                               int64_t cols);

/// Holds ctx.stream for `microseconds` (a kernel spinning on the GPU's
/// global timer), so the calls the host enqueues behind it run back to back
/// and CUDA events around them time the GPU alone, not the host's launch
/// overhead (nvbench's blocking kernel); in Kernels.cu. Returns false if the
/// launch failed.
bool launchStreamHold(Context &ctx, float microseconds);
/// Launchers implemented in ElementwiseKernels.cu, used by CudaLibraries.cpp.
/// y = act(y + bias[c] + residual) in place; the channel of element i is
/// (i / spatial) % channels (channels-last: spatial = 1). bias and residual
/// may be null.
bool launchBiasActivation(Context &ctx, const char *node, TensorRef y,
                          const TensorRef *bias, int64_t channels,
                          int64_t spatial, Activation activation,
                          const TensorRef *residual = nullptr);
/// y = conv(x, w) (+ y when `accumulate`), NCHW or channels-last.
bool launchDirectConv(Context &ctx, const char *node,
                      const ConvGeometry &geometry, TensorRef x, TensorRef w,
                      TensorRef y, bool accumulate = false);
/// In DepthwiseKernels.cu: memopt's channels-last depthwise convolution
/// (group == C == M), y = act(conv(x, w) + bias + residual) in one kernel
/// (bias and residual may be null; the residual may be y itself). The
/// refusal says why the kernel cannot run a convolution ("" when it can).
std::string depthwiseConvRefusal(const ConvGeometry &geometry,
                                 const TensorRef &x);
bool launchDepthwiseConv(Context &ctx, const char *node,
                         const ConvGeometry &geometry, const TensorRef &x,
                         const TensorRef &w, const TensorRef *bias,
                         const TensorRef *residual, Activation activation,
                         const TensorRef &y);
/// In TrainingKernels.cu: the conv filter gradient for asymmetric pads.
bool launchDirectConvBackwardFilter(Context &ctx, const char *node,
                                    const ConvGeometry &geometry, TensorRef x,
                                    TensorRef dy, TensorRef dw);

//===----------------------------------------------------------------------===//
// Timing and engine choices shared by the convolution files
// (CudaLibraries.cpp, CudnnConvFusion.cpp)
//===----------------------------------------------------------------------===//

/// Milliseconds per call of `runs` calls of `launch` between CUDA events
/// after one warm-up call, or a negative value when a call or an event fails.
/// The stream is held while the host enqueues the timed calls: cuDNN 9's
/// legacy convolution calls cost 0.1-0.2 ms of host time each, more than the
/// GPU time of a channels-last f16 convolution at batch 32, so timing them
/// back to back from the host measured the host (IMPLICIT_GEMM then won
/// over IMPLICIT_PRECOMP_GEMM's tensor cores by its cheaper setup, on an
/// H100). Graph replays, where the program spends its time, have no host
/// cost.
template <typename Launch>
float timeCalls(Context &ctx, cudaEvent_t begin, cudaEvent_t end, int runs,
                Launch &&launch) {
  if (!launch() || cudaStreamSynchronize(ctx.stream) != cudaSuccess ||
      !launchStreamHold(ctx, 300.0f * float(runs) + 200.0f))
    return -1.0f;
  cudaEventRecord(begin, ctx.stream);
  for (int run = 0; run < runs; ++run)
    if (!launch())
      return -1.0f;
  cudaEventRecord(end, ctx.stream);
  float ms = 0;
  if (cudaEventSynchronize(end) != cudaSuccess ||
      cudaEventElapsedTime(&ms, begin, end) != cudaSuccess)
    return -1.0f;
  return ms / float(runs);
}

/// The pair of events that times a call site's candidates (timeCalls,
/// timeEngineCalls), destroyed with it. ok() is false when the driver could
/// not create them; the error is cleared and the caller keeps its untimed
/// choice.
struct TimingEvents {
  cudaEvent_t begin = nullptr, end = nullptr;
  TimingEvents() {
    if (cudaEventCreate(&begin) != cudaSuccess ||
        cudaEventCreate(&end) != cudaSuccess) {
      cudaGetLastError();
      release();
    }
  }
  ~TimingEvents() { release(); }
  TimingEvents(const TimingEvents &) = delete;
  TimingEvents &operator=(const TimingEvents &) = delete;
  bool ok() const { return begin && end; }

private:
  void release() {
    if (begin)
      cudaEventDestroy(begin);
    if (end)
      cudaEventDestroy(end);
    begin = end = nullptr;
  }
};

/// timeCalls of an engine that competes for a call site (three runs): a
/// failing run does not fail the op (the real run reports its own errors),
/// its error is cleared and the time is negative.
template <typename Launch>
float timeEngineCalls(Context &ctx, cudaEvent_t begin, cudaEvent_t end,
                      Launch &&launch) {
  float ms = timeCalls(ctx, begin, end, 3, launch);
  if (!ctx.error.empty()) {
    ctx.error.clear();
    ms = -1.0f;
  }
  cudaGetLastError();
  return ms;
}

/// MEMOPT_CONV_LOG=1: every call site's algorithm search and epilogue timing
/// on stderr, one line each (what cuDNN offered, within the planned
/// workspace or not, and what the plan kept), to tell a slow kernel choice
/// from a slow kernel; and each engine choice as it is made.
bool convLogEnabled();
/// ContextOptions::convEngine, or MEMOPT_CONV_ENGINE where it is set; false
/// (the call failed) for a value that names no engine.
bool convEngineOf(Context &ctx, const char *node, ConvEngine &engine);
/// Records the engine of a call site for convolutionEngineReport (the report
/// keeps the latest line of each node; MEMOPT_CONV_LOG prints it).
void noteConvEngine(Context &ctx, const char *node, const std::string &text);

} // namespace memopt::rt

#endif // MEMOPT_LIB_RUNTIME_CUDA_CUDAINTERNAL_H
