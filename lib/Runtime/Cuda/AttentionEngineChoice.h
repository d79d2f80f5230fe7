//===- AttentionEngineChoice.h - cuDNN's SDPA or memopt's kernels -*- C++
//-*-===//
//
// Which engine runs an attention call site that both cuDNN's fused SDPA and
// memopt's kernels can run (AttentionEngineChoice.cpp): the engine
// ContextOptions::attentionEngine / MEMOPT_ATTENTION_ENGINE forces, or the
// faster of the two when the call site's first eager run times both.
// CudnnAttention.cpp asks, caches the answer per call site and reports it.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_RUNTIME_CUDA_ATTENTIONENGINECHOICE_H
#define MEMOPT_LIB_RUNTIME_CUDA_ATTENTIONENGINECHOICE_H

#include "CudaInternal.h"

#include <functional>
#include <string>

namespace memopt::rt {

/// ContextOptions::attentionEngine, or the engine MEMOPT_ATTENTION_ENGINE
/// names where it is set; false, with the message in `error`, for a value
/// that names no engine.
bool attentionEngineOf(const ContextOptions &options, AttentionEngine &engine,
                       std::string &error);

/// Why a call cuDNN accepts must not be timed against memopt's kernels now
/// ("" when it may): a CUDA graph is being captured (ctx.capturing, or the
/// stream is capturing for someone else; the timing synchronizes), or
/// memopt's kernels cannot run the call (heads over
/// kAttentionKernelsMaxHeadSize). `permanent` says whether the reason holds
/// for every later call of the site (so the choice may be cached).
std::string attentionTimingRefusal(Context &ctx, const AttentionGeometry &g,
                                   bool &permanent);

/// One call site's measured choice.
struct AttentionChoice {
  bool cudnn = true;
  float cudnnMs = -1.0f, memoptMs = -1.0f; ///< negative: the run failed
  /// The report's account, e.g. "measured 0.020 ms against memopt's
  /// 0.128 ms".
  std::string text;
};

/// Times the call on cuDNN's SDPA path (`runCudnn`: the whole path, the
/// transposes and statistics conversions included) and on memopt's kernels
/// (`runMemopt`), one warm-up and three calls each between CUDA events
/// (timeEngineCalls, as the convolution engines are timed), and keeps the
/// faster; cuDNN where memopt's calls failed or tie. Each launch returns
/// false when it failed; a failure during the timing is cleared (the real
/// run reports its own). The calls write the op's outputs and its
/// workspace: the caller runs the chosen engine once more afterwards.
AttentionChoice measureAttentionEngines(Context &ctx,
                                        const std::function<bool()> &runCudnn,
                                        const std::function<bool()> &runMemopt);

} // namespace memopt::rt

#endif // MEMOPT_LIB_RUNTIME_CUDA_ATTENTIONENGINECHOICE_H
