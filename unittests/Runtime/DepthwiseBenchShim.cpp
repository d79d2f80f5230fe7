//===- DepthwiseBenchShim.cpp - the runtime's depthwise conv for ctypes ---===//
//
// A small C interface over conv() for bench/depthwise_conv_bench.py, which
// calls it through ctypes on channels-last tensors that PyTorch allocated:
// one channels-last depthwise convolution (group == C) on a context whose
// ContextOptions::convEngine is measured, cuDNN or memopt's depthwise kernel,
// run once (to compare with F.conv2d) or timed as generated programs run it
// (execute(): one eager run that chooses the engine, one CUDA graph capture,
// replays). The same shape as AttentionBenchShim.cpp.
//
//===----------------------------------------------------------------------===//

#include "memopt/Runtime/Runtime.h"

#include <cstring>

using namespace memopt::rt;

extern "C" {

/// One 2-D depthwise convolution: x [N, H, W, C], w [C, k, k, 1], bias [C]
/// or null, y [N, OH, OW, C]; symmetric padding, dilation 1.
struct MdbProblem {
  int32_t dtype;      ///< memopt::rt::DType
  int32_t activation; ///< memopt::rt::Activation
  int64_t batch, channels, height, width, kernel, stride, pad;
  void *x, *w, *bias, *y, *workspace;
  int64_t workspaceBytes;
};
}

namespace {

struct Call {
  ConvParams params;
  TensorRef x, w, bias, y;
};

Call callOf(const MdbProblem &p) {
  Call c;
  DType dtype = DType(p.dtype);
  c.params.group = p.channels;
  c.params.channelsLast = true;
  c.params.activation = Activation(p.activation);
  for (int a = 0; a < 2; ++a) {
    c.params.strides[a] = p.stride;
    c.params.padsBegin[a] = c.params.padsEnd[a] = p.pad;
  }
  int64_t outH = (p.height + 2 * p.pad - p.kernel) / p.stride + 1;
  int64_t outW = (p.width + 2 * p.pad - p.kernel) / p.stride + 1;
  int64_t x[4] = {p.batch, p.height, p.width, p.channels};
  int64_t w[4] = {p.channels, p.kernel, p.kernel, 1};
  int64_t y[4] = {p.batch, outH, outW, p.channels};
  c.x = makeTensor(p.x, dtype, 4, x);
  c.w = makeTensor(p.w, dtype, 4, w);
  c.bias = makeTensor(p.bias, dtype, 1, &p.channels);
  c.y = makeTensor(p.y, dtype, 4, y);
  return c;
}

void runOnce(Context &ctx, const MdbProblem &p) {
  Call c = callOf(p);
  conv(ctx, "depthwise", c.params, c.x, c.w, p.bias ? &c.bias : nullptr, c.y,
       p.workspace, size_t(p.workspaceBytes));
}

struct Body {
  const MdbProblem *problem;
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

Context *create(int engine) {
  ContextOptions options;
  options.convEngine = ConvEngine(engine);
  return createContext(options);
}

} // namespace

extern "C" {

/// The workspace a compiled program plans for this convolution
/// (convWorkspaceBound).
int64_t mdb_workspace_bytes(const MdbProblem *p) {
  Call c = callOf(*p);
  return int64_t(convWorkspaceBound(c.params, c.x, c.w, c.y));
}

/// Runs the convolution twice (the first chooses the engine) on a fresh
/// context of `engine` (ConvEngine: 0 measured, 1 cuDNN, 2 memopt) and
/// waits; 0, or 1 with the error in `error`; `report` gets the engine
/// report (convolutionEngineReport).
int mdb_run(int engine, const MdbProblem *p, char *report, char *error,
            int capacity) {
  Context *ctx = create(engine);
  for (int i = 0; i < 2 && !contextError(*ctx); ++i)
    runOnce(*ctx, *p);
  synchronize(*ctx);
  int status = contextError(*ctx) ? 1 : 0;
  copyText(contextError(*ctx), error, capacity);
  copyText(convolutionEngineReport(*ctx), report, capacity);
  destroyContext(ctx);
  return status;
}

/// Times `calls` back-to-back calls as a program runs them: a fresh context
/// of `engine`, one eager run, one CUDA graph capture, then `replays` timed
/// replays; samples[i] = ms per call of replay i. Returns 0, or 1 with the
/// error in `error`; `report` gets the engine report.
int mdb_time(int engine, const MdbProblem *p, int calls, int replays,
             double *samples, char *report, char *error, int capacity) {
  Context *ctx = create(engine);
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
  copyText(convolutionEngineReport(*ctx), report, capacity);
  destroyContext(ctx);
  return status;
}
}
