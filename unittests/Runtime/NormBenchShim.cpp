//===- NormBenchShim.cpp - channels-last BN / pool gradient for ctypes ----===//
//
// A small C interface over batchNormTraining(), batchNormTrainingGrad() and
// poolGrad() on channels-last tensors for bench/norm_nhwc_bench.py, which
// calls it through ctypes on tensors that PyTorch allocated: it checks the
// runtime's channels-last kernels against PyTorch's native batch norm and
// max-pool backward, and times both as generated programs run them (the
// shape of AttentionBenchShim.cpp: a fresh context, one eager run, one CUDA
// graph capture, timed replays).
//
//===----------------------------------------------------------------------===//

#include "memopt/Runtime/Runtime.h"
#include "memopt/Runtime/Workspace.h"

#include <cstring>

using namespace memopt::rt;

extern "C" {

/// One problem on [N, H, W, C] activations; `op` 0: batch normalization
/// forward, 1: its gradient, 2: the max-pool gradient (kernel, stride, pad
/// square; dy [N, outH, outW, C]). Pointers are device memory.
struct MnbProblem {
  int32_t op;
  int32_t dtype; ///< memopt::rt::DType of the activations
  int64_t n, h, w, c;
  int64_t kernel, stride, pad, outH, outW;
  float epsilon;
  void *x, *y, *dy, *dx, *scale, *bias, *mean, *invStd, *dscale, *dbias,
      *workspace;
  int64_t workspaceBytes;
};
}

namespace {

void runOnce(Context &ctx, const MnbProblem &p) {
  DType dt = DType(p.dtype);
  int64_t act[4] = {p.n, p.h, p.w, p.c}, channels[1] = {p.c};
  TensorRef x = makeTensor(p.x, dt, 4, act);
  auto vec = [&](void *data) {
    return makeTensor(data, DType::F32, 1, channels);
  };
  if (p.op == 2) {
    int64_t out[4] = {p.n, p.outH, p.outW, p.c};
    PoolParams params;
    params.kind = PoolKind::Max;
    params.channelsLast = true;
    for (int i = 0; i < 2; ++i) {
      params.kernel[i] = p.kernel;
      params.strides[i] = p.stride;
      params.padsBegin[i] = params.padsEnd[i] = p.pad;
    }
    poolGrad(ctx, "max_pool_grad", params, x, makeTensor(p.dy, dt, 4, out),
             makeTensor(p.dx, dt, 4, act));
    return;
  }
  if (p.op == 0) {
    batchNormTraining(ctx, "bn", p.epsilon, Activation::None, x, vec(p.scale),
                      vec(p.bias), makeTensor(p.y, dt, 4, act), vec(p.mean),
                      vec(p.invStd), p.workspace, size_t(p.workspaceBytes),
                      /*channelsLast=*/true);
    return;
  }
  batchNormTrainingGrad(ctx, "bn_grad", x, makeTensor(p.dy, dt, 4, act),
                        vec(p.scale), vec(p.mean), vec(p.invStd),
                        makeTensor(p.dx, dt, 4, act), vec(p.dscale),
                        vec(p.dbias), p.workspace, size_t(p.workspaceBytes),
                        /*channelsLast=*/true);
}

struct Body {
  const MnbProblem *problem;
  int calls;
};

void runBody(Context &ctx, void *user) {
  const Body &body = *static_cast<const Body *>(user);
  for (int i = 0; i < body.calls; ++i)
    runOnce(ctx, *body.problem);
}

void copyText(const char *text, char *out, int capacity) {
  if (!out || capacity <= 0)
    return;
  std::strncpy(out, text ? text : "", size_t(capacity - 1));
  out[capacity - 1] = 0;
}

} // namespace

extern "C" {

/// The workspace a program plans for a channels-last batch normalization
/// (forward or gradient) of `rows` rows of `channels`.
int64_t mnb_bn_workspace_bytes(int64_t channels, int64_t rows) {
  return memopt::workspace::batchNormTrainingLastBytes(channels, rows);
}

/// Runs one call eagerly on a fresh context and waits; 0, or 1 with the
/// error in `error`.
int mnb_run(const MnbProblem *p, char *error, int capacity) {
  Context *ctx = createContext();
  runOnce(*ctx, *p);
  synchronize(*ctx);
  int status = contextError(*ctx) ? 1 : 0;
  copyText(contextError(*ctx), error, capacity);
  destroyContext(ctx);
  return status;
}

/// Times `calls` back-to-back calls as a program runs them: a fresh
/// context, one eager run, one CUDA graph capture, then `replays` timed
/// replays; samples[i] = ms per call of replay i. 0, or 1 with the error.
int mnb_time(const MnbProblem *p, int calls, int replays, double *samples,
             char *error, int capacity) {
  Context *ctx = createContext();
  Body body{p, calls};
  for (int i = 0; i < 2 && !contextError(*ctx); ++i)
    execute(*ctx, runBody, &body);
  for (int i = 0; i < replays && !contextError(*ctx); ++i) {
    timerStart(*ctx);
    execute(*ctx, runBody, &body);
    samples[i] = timerStopMs(*ctx) / calls;
  }
  synchronize(*ctx);
  int status = contextError(*ctx) ? 1 : 0;
  copyText(contextError(*ctx), error, capacity);
  destroyContext(ctx);
  return status;
}
}
