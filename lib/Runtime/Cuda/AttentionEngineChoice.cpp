//===- AttentionEngineChoice.cpp - cuDNN's SDPA or memopt's kernels -------===//
//
// Where both cuDNN's fused SDPA (CudnnAttention.cpp) and memopt's kernels
// (AttentionKernels.cu, AttentionBackwardKernels.cu) can run an attention or
// attention gradient call, the call site's first eager run times both and
// keeps the faster (ContextOptions::attentionEngine = Measured, the
// default), as the depthwise and normalization-ReLU convolutions choose
// their engines (CudaLibraries.cpp, CudnnConvFusion.cpp). The forward and
// the backward of one attention choose separately: both engines keep the
// row statistics as memopt's pairs (log-sum-exp split in two; cuDNN's single
// log-sum-exp is converted both ways in CudnnAttentionKernels.cu), so a
// forward on one engine feeds a backward on the other.
//
// The timing runs the op several times on its own buffers, which is
// harmless here:
//  * no engine accumulates into an output: memopt's forward writes y and the
//    statistics (the chunked path's GEMMs with beta 0); its backward writes
//    dQ, dK, dV whole (a grouped dK / dV is summed inside the key kernel,
//    without atomics); the bias gradient, the one sum with atomics, is
//    zeroed first on every call and never runs on cuDNN anyway (such calls
//    are not timed); cuDNN writes O, dQ, dK, dV (its f32 dQ accumulator
//    lives in the workspace and is cleared by each execution), and the
//    other slots of a K / V head group are zeroed on every call;
//  * no output aliases an input or another output (validateAttention,
//    validateAttentionStatistics and validateAttentionBackward refuse it),
//    and the workspace is scratch that each engine fills before reading;
//  * the op's random numbers (training dropout) are a function of the
//    program's key and the op's stream (lib/Runtime/Philox.h), so a call
//    run again draws the same mask: nothing advances per call. And a call
//    with dropout is never timed: memopt's mask runs on memopt's kernels
//    only, cuDNN's generator on cuDNN only (CudnnAttention.cpp);
//  * both engines run within the call's planned workspace: cuDNN only when
//    its plan fits (CudnnAttention.cpp's fitsWorkspace, else memopt's
//    kernels run untimed), and memopt's kernels take the chunked path only
//    when the workspace holds a chunk's scores, the fused kernel (no
//    workspace) otherwise, exactly as they would run in the program.
// Never timed inside a CUDA graph capture (the timing synchronizes): a
// program's first run is eager, and a site first met during a capture
// takes cuDNN without caching, so that a later eager call measures.
//
// Taken from: memopt's convolution engine choice (timeEngineCalls, the
// stream hold that keeps the host's launch cost out of the events) and
// PyTorch's cudnn.benchmark idea of timing per shape at first use.
// Different: the candidates are two whole engines of one op (cuDNN's graph
// with its conversions against memopt's kernels), and the report keeps both
// times.
//
//===----------------------------------------------------------------------===//

#include "AttentionEngineChoice.h"

#include <cstdio>
#include <cstdlib>

namespace memopt::rt {

bool attentionEngineOf(const ContextOptions &options, AttentionEngine &engine,
                       std::string &error) {
  const char *env = std::getenv("MEMOPT_ATTENTION_ENGINE");
  int32_t value = 0;
  if (!engineFromEnvironment(int32_t(options.attentionEngine), env, value)) {
    error = std::string("MEMOPT_ATTENTION_ENGINE='") + env +
            "' is not measured, cudnn or memopt";
    return false;
  }
  engine = AttentionEngine(value);
  return true;
}

std::string attentionTimingRefusal(Context &ctx, const AttentionGeometry &g,
                                   bool &permanent) {
  permanent = true;
  if (g.headSize > kAttentionKernelsMaxHeadSize ||
      g.valueSize > kAttentionKernelsMaxHeadSize)
    return "memopt's kernels run heads of at most " +
           std::to_string(kAttentionKernelsMaxHeadSize);
  permanent = false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (ctx.capturing ||
      cudaStreamIsCapturing(ctx.stream, &status) != cudaSuccess ||
      status != cudaStreamCaptureStatusNone) {
    cudaGetLastError();
    return "first call inside a CUDA graph capture";
  }
  return "";
}

AttentionChoice
measureAttentionEngines(Context &ctx, const std::function<bool()> &runCudnn,
                        const std::function<bool()> &runMemopt) {
  AttentionChoice choice;
  TimingEvents events;
  if (!events.ok()) {
    choice.text = "not measured: the timing could not start";
    return choice;
  }
  cudaEvent_t begin = events.begin, end = events.end;
  auto checked = [&](const std::function<bool()> &run) {
    return [&] { return run() && !hasError(ctx); };
  };
  choice.cudnnMs = timeEngineCalls(ctx, begin, end, checked(runCudnn));
  choice.memoptMs = timeEngineCalls(ctx, begin, end, checked(runMemopt));
  choice.cudnn = choice.memoptMs < 0 ||
                 (choice.cudnnMs >= 0 && choice.cudnnMs <= choice.memoptMs);
  char text[160];
  if (choice.cudnnMs < 0 && choice.memoptMs < 0)
    std::snprintf(text, sizeof(text),
                  "not measured: both engines failed when timed");
  else if (choice.memoptMs < 0)
    std::snprintf(text, sizeof(text),
                  "measured %.3f ms; memopt's kernels failed when timed",
                  double(choice.cudnnMs));
  else if (choice.cudnnMs < 0)
    std::snprintf(text, sizeof(text),
                  "measured %.3f ms; cuDNN SDPA failed when timed",
                  double(choice.memoptMs));
  else if (choice.cudnn)
    std::snprintf(text, sizeof(text),
                  "measured %.3f ms against memopt's %.3f ms",
                  double(choice.cudnnMs), double(choice.memoptMs));
  else
    std::snprintf(text, sizeof(text),
                  "measured %.3f ms against cuDNN SDPA's %.3f ms",
                  double(choice.memoptMs), double(choice.cudnnMs));
  choice.text = text;
  return choice;
}

} // namespace memopt::rt
