//===- AttentionBenchShim.cpp - the runtime's attention for ctypes --------===//
//
// A small C interface over attention() and attentionBackward() for
// bench/attention_sdpa_bench.py, which calls it through ctypes on tensors
// that PyTorch allocated: it checks both CUDA engines (cuDNN's fused SDPA and
// memopt's kernels) against torch.nn.functional.scaled_dot_product_attention
// and times them as generated programs run them, replayed from a CUDA graph
// (execute(): one eager run that builds the plans, one capture, replays).
//
//===----------------------------------------------------------------------===//

#include "memopt/Runtime/Runtime.h"

#include <algorithm>
#include <cstring>
#include <vector>

using namespace memopt::rt;

extern "C" {

/// One attention problem: shapes, parameters and device pointers. Q, K, V
/// have one rank; Y and the gradients have Q's batch dims.
struct MabProblem {
  int32_t dtype; ///< memopt::rt::DType
  int32_t rank;
  int64_t q[kMaxRank], k[kMaxRank], v[kMaxRank], bias[kMaxRank];
  int32_t biasRank; ///< 0: no bias
  float scale;
  int32_t causal, keyTransposed, safeSoftmax;
  /// dK / dV in K's and V's own shapes (grouped-query K / V, broadcast over
  /// a trailing batch dim): AttentionParams::groupedGradients.
  int32_t groupedGradients;
  void *qData, *kData, *vData, *biasData, *yData, *lseData, *dyData, *dqData,
      *dkData, *dvData, *workspace;
  int64_t workspaceBytes;
};
}

namespace {

struct Tensors {
  TensorRef q, k, v, bias, y, lse, dy, dq, dk, dv;
};

Tensors tensorsOf(const MabProblem &p) {
  DType dtype = DType(p.dtype);
  int r = p.rank;
  Tensors t;
  t.q = makeTensor(p.qData, dtype, r, p.q);
  t.k = makeTensor(p.kData, dtype, r, p.k);
  t.v = makeTensor(p.vData, dtype, r, p.v);
  t.bias = makeTensor(p.biasData, dtype, p.biasRank, p.bias);
  int64_t shape[kMaxRank];
  std::memcpy(shape, p.q, sizeof(shape));
  shape[r - 1] = p.v[r - 1];
  t.y = makeTensor(p.yData, dtype, r, shape);
  t.dy = makeTensor(p.dyData, dtype, r, shape);
  shape[r - 1] = 2;
  t.lse = makeTensor(p.lseData, DType::F32, r, shape);
  t.dq = makeTensor(p.dqData, dtype, r, p.q);
  shape[r - 2] = p.k[r - 2];
  shape[r - 1] = p.k[r - 1];
  t.dk = makeTensor(p.dkData, dtype, r, p.groupedGradients ? p.k : shape);
  shape[r - 2] = p.v[r - 2];
  shape[r - 1] = p.v[r - 1];
  t.dv = makeTensor(p.dvData, dtype, r, p.groupedGradients ? p.v : shape);
  return t;
}

AttentionParams paramsOf(const MabProblem &p) {
  AttentionParams params;
  params.scale = p.scale;
  params.causal = p.causal != 0;
  params.keyTransposed = p.keyTransposed != 0;
  params.safeSoftmax = p.safeSoftmax != 0;
  params.groupedGradients = p.groupedGradients != 0;
  return params;
}

/// One call: the forward (with statistics when lseData is set) or the
/// backward.
void runOnce(Context &ctx, const MabProblem &p, bool backward,
             const char *node) {
  Tensors t = tensorsOf(p);
  const TensorRef *bias = p.biasRank ? &t.bias : nullptr;
  if (backward)
    attentionBackward(ctx, node, paramsOf(p), t.q, t.k, t.v, bias, t.y, t.dy,
                      t.lse, t.dq, t.dk, t.dv, nullptr, p.workspace,
                      size_t(p.workspaceBytes));
  else
    attention(ctx, node, paramsOf(p), t.q, t.k, t.v, bias, t.y, p.workspace,
              size_t(p.workspaceBytes), p.lseData ? &t.lse : nullptr);
}

struct Body {
  const MabProblem *problem;
  bool backward;
  int calls;
};

void runBody(Context &ctx, void *user) {
  const Body &body = *static_cast<const Body *>(user);
  for (int i = 0; i < body.calls; ++i)
    runOnce(ctx, *body.problem, body.backward, "attention");
}

void copyText(const char *text, char *out, int capacity) {
  if (!out || capacity <= 0)
    return;
  std::strncpy(out, text ? text : "", size_t(capacity - 1));
  out[capacity - 1] = 0;
}

} // namespace

extern "C" {

/// A context whose attention uses memopt's kernels (`cudnn` 0), cuDNN
/// wherever it accepts the call (1) or the faster of the two as the call
/// site's first run measures them (2: ContextOptions::attentionEngine
/// Measured, a program's default).
void *mab_create(int cudnn) {
  ContextOptions options;
  options.attentionEngine = cudnn == 2   ? AttentionEngine::Measured
                            : cudnn != 0 ? AttentionEngine::Cudnn
                                         : AttentionEngine::Memopt;
  return createContext(options);
}

void mab_destroy(void *ctx) { destroyContext(static_cast<Context *>(ctx)); }

/// Runs one call eagerly and waits; 0, or 1 with the error in `error`.
int mab_run(void *ctx, const MabProblem *p, int backward, char *error,
            int capacity) {
  Context &c = *static_cast<Context *>(ctx);
  runOnce(c, *p, backward != 0, "attention");
  synchronize(c);
  copyText(contextError(c), error, capacity);
  return contextError(c) ? 1 : 0;
}

/// The engine report of `ctx` (attentionEngineReport).
void mab_report(void *ctx, char *out, int capacity) {
  copyText(attentionEngineReport(*static_cast<Context *>(ctx)), out, capacity);
}

/// Times `calls` back-to-back calls as a program runs them: a fresh context
/// (mab_create's engines), one eager run, one CUDA graph capture, then
/// `replays` timed replays; samples[i] = ms per call of replay i. Returns 0,
/// or 1 with the error in `error`; `report` gets the engine report.
int mab_time(int cudnn, const MabProblem *p, int backward, int calls,
             int replays, double *samples, char *report, char *error,
             int capacity) {
  Context *ctx = static_cast<Context *>(mab_create(cudnn));
  Body body{p, backward != 0, calls};
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
  copyText(attentionEngineReport(*ctx), report, capacity);
  destroyContext(ctx);
  return status;
}

/// The workspace a program for target cuda plans for cuDNN's SDPA on this
/// problem, forward (with statistics when lseData is set) or backward
/// (cudnnAttentionWorkspaceBound): the bytes a cuDNN context's call needs.
int64_t mab_cudnn_bytes(const MabProblem *p, int backward) {
  Tensors t = tensorsOf(*p);
  return int64_t(cudnnAttentionWorkspaceBound(
      paramsOf(*p), t.q, t.k, t.v, p->biasRank ? &t.bias : nullptr,
      p->lseData != nullptr, backward != 0));
}

/// Workspace bytes memopt's chunked path needs for the whole batch.
int64_t mab_chunk_bytes(int backward, int64_t items, int64_t queries,
                        int64_t keys, int32_t dtype) {
  return int64_t(
      backward ? attentionBackwardChunkBytes(items, queries, keys, DType(dtype))
               : attentionChunkBytes(items, queries, keys, DType(dtype)));
}
}
