//===- CudnnAttention.cpp - attention through cuDNN's fused SDPA engine ---===//
//
// memopt.attention and its gradient on cuDNN's fused flash-attention engines
// (f16 / bf16, sm80+), through cudnn-frontend's graph API: one SDPA node for
// the forward, one SDPA backward node for the gradient. A graph (and its
// execution plan) is built on the first call of each distinct problem (the
// first run of a program is eager, so no plan is built while a CUDA graph is
// captured) and kept for the context's life; later calls only fill a variant
// pack and execute. Whatever cuDNN refuses (f32, head sizes that are not
// multiples of 8, batch broadcasts it cannot express, misaligned operands, or
// anything its support check rejects) runs on memopt's kernels. Where both
// engines can run a call, ContextOptions::attentionEngine picks: by default
// the faster when the call site's first eager run times both
// (AttentionEngineChoice.cpp), cached per call site. The engine report says
// which engine ran each call site and why.
//
// memopt's op broadcasts arbitrary batch dims. cuDNN's tensors are
// [b, h, s, d]: the call's batch dims are split into a leading group (b) and
// a trailing one (h); K and V may broadcast over the trailing dims of the
// head group only, which is grouped-query attention (cuDNN's h_k < h_q, query
// head h reading K / V head h / (h_q / h_k)), exactly the view the fusion
// pass gives Llama's repeat_kv ([B, Hkv, n]). The gradients dK, dV of such a
// call are memopt's per query head (the caller sums them over the group):
// cuDNN's summed dK goes into the group's first slot and the others are
// zeroed. The bias broadcasts over b, h and the query axis (strides of 0).
//
// Dropout (issue 26): memopt's mask (the dropout op's Philox words) is
// memopt's kernels' alone, so such calls never run here (the report says
// why). With AttentionParams::dropoutCudnnRng cuDNN draws its own mask
// (set_dropout with a seed and an offset that a one-thread kernel derives on
// the device from the program's key, stream and micro-batch, into the
// workspace); such a call runs cuDNN without a measured choice or fails
// naming the node, since no other engine can draw that mask and a forward
// and its gradient must draw the same one. The kernel suite's hook
// (setCudnnAttentionRngDump) adds cuDNN's rng dump to one forward's plan.
//
// Row statistics: cuDNN keeps one log-sum-exp per row, memopt a pair whose
// sum is it (CudnnAttentionKernels.cu converts); K stored [D, Sk] is
// transposed into the workspace first (cuDNN reads the head dimension
// innermost). The workspace (cuDNN's own, the statistics, a transposed K and
// dK) is the call's planned one, in the arena: the compiler reserves a bound
// of it (workspace::cudnnAttentionBytes, the `memopt.cudnn_workspace` of
// --memopt-attention-engine) and a plan that states more than the call was
// given runs memopt's kernels, with the bytes in the engine report.
//
// Taken from: cudnn-frontend's SDPA samples (samples/cpp/sdpa: a graph per
// problem, tensor uids, variant packs, the workspace the plan states) and
// PyTorch's cuDNN attention (aten/src/ATen/native/cudnn/MHA.cpp: graphs
// cached by the problem's shapes and strides; its dropout seed and offset
// tensors). Different: the batch-dims split above, memopt's statistics
// pairs, a fallback per call site that says why instead of failing, and a
// dropout seed derived on the device from the program's key (PyTorch takes
// seed and offset from its CUDA generator, whose offset advances per call).
//
//===----------------------------------------------------------------------===//

#include "AttentionEngineChoice.h"
#include "CudnnFrontend.h"
#include "memopt/Runtime/Workspace.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>

namespace memopt::rt {

namespace {

using SdpaGraph = FrontendGraph;

enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kBias,
  kDO,
  kDQ,
  kDK,
  kDV,
  kSeed,
  kOffset,
  kRngDump,
};

/// One built graph (or why there is none).
struct SdpaPlan {
  std::shared_ptr<SdpaGraph> graph;
  std::string refusal; ///< empty when the plan built
  /// The report's account of the plan for the call sites it runs.
  std::string engine;
  size_t cudnnWorkspaceBytes = 0;
};

/// A call site's engine, as the report prints it.
struct EngineSite {
  std::string node;
  bool backward = false;
  std::string engine;
};

} // namespace

struct CudnnAttentionState {
  AttentionEngine engine = AttentionEngine::Measured;
  /// A MEMOPT_ATTENTION_ENGINE that names no engine: every call fails.
  std::string engineError;
  bool printSites = false;
  int backendVersion = 0;
  std::unordered_map<std::string, SdpaPlan> plans;
  /// Measured: whether cuDNN runs each call site (keyed by siteKey), as
  /// its first eager call timed it.
  std::unordered_map<std::string, bool> choices;
  std::vector<EngineSite> sites;
  std::string report;
  /// The kernel suite's check of cuDNN's dropout (setCudnnAttentionRngDump):
  /// where the next forward with cuDNN's generator writes its draws.
  void *rngDump = nullptr;
};

namespace {

CudnnAttentionState &stateOf(Context &ctx) {
  if (!ctx.cudnnAttention) {
    auto *state = new CudnnAttentionState();
    attentionEngineOf(ctx.options, state->engine, state->engineError);
    const char *print = std::getenv("MEMOPT_ATTENTION_REPORT");
    state->printSites = print && *print && std::strcmp(print, "0");
    state->backendVersion = int(cudnnGetVersion());
    ctx.cudnnAttention = state;
  }
  return *ctx.cudnnAttention;
}

/// Records the engine of a call site (the first call's, or a changed one).
void noteSite(Context &ctx, const char *node, bool backward,
              const std::string &engine) {
  CudnnAttentionState &state = stateOf(ctx);
  std::string name = node ? node : "?";
  for (EngineSite &site : state.sites)
    if (site.node == name && site.backward == backward) {
      site.engine = engine;
      return;
    }
  state.sites.push_back({name, backward, engine});
  if (state.printSites)
    std::fprintf(stderr, "memopt attention '%s' %s: %s\n", name.c_str(),
                 backward ? "backward" : "forward", engine.c_str());
}

size_t alignUp(size_t bytes) {
  return size_t(workspace::roundUp256(int64_t(bytes)));
}

bool aligned16(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

/// Dims [from, to) of y's batch shape collapse into one axis when, innermost
/// first, each non-unit dim's stride is the previous one's stride times its
/// size (all 0: broadcast). `size` is their product, `stride` the innermost
/// non-unit dim's stride (0 when all are unit dims).
bool collapse(const AttentionGeometry &g, const int64_t *strides, int from,
              int to, int64_t &size, int64_t &stride) {
  size = 1;
  stride = 0;
  int64_t expected = -1;
  for (int i = to - 1; i >= from; --i) {
    if (g.batchShape[i] == 1)
      continue;
    if (expected < 0)
      stride = strides[i];
    else if (strides[i] != expected)
      return false;
    expected = strides[i] * g.batchShape[i];
    size *= g.batchShape[i];
  }
  return true;
}

/// cuDNN's view of the call: [b, h, s, d] tensors with element strides.
struct SdpaProblem {
  DType dtype = DType::F16;
  bool backward = false, causal = false, keyTransposed = false,
       statistics = false;
  /// dK / dV in K's and V's own shapes (AttentionParams::groupedGradients)
  /// instead of one slot per query head.
  bool groupedGradients = false;
  float scale = 1.0f;
  int64_t b = 1, hq = 1, hk = 1, s = 0, sk = 0, d = 0, dv = 0;
  /// K and V broadcast over `groups` trailing heads (hq = hk * groups).
  int64_t groups = 1;
  int64_t kStride[2] = {}, vStride[2] = {}; ///< b and h strides of K and V
  bool hasBias = false;
  int64_t biasDim[4] = {}, biasStride[4] = {};
  /// Dropout probability drawn by cuDNN's own generator (0: none), seeded
  /// from the workspace's seed and offset (CudnnAttentionKernels.cu).
  float dropout = 0.0f;
  /// The forward also writes cuDNN's draws (the suite's check only).
  bool rngDump = false;

  std::string key() const {
    char text[600];
    std::snprintf(
        text, sizeof(text),
        "%s %d b%lld hq%lld hk%lld s%lld sk%lld d%lld dv%lld c%d st%d g%d "
        "sc%a dr%a,%d k%lld,%lld v%lld,%lld bias%d %lld,%lld,%lld,%lld/"
        "%lld,%lld,%lld,%lld",
        backward ? "bwd" : "fwd", int(dtype), (long long)b, (long long)hq,
        (long long)hk, (long long)s, (long long)sk, (long long)d, (long long)dv,
        int(causal), int(statistics), int(groupedGradients), double(scale),
        double(dropout), int(rngDump), (long long)kStride[0],
        (long long)kStride[1], (long long)vStride[0], (long long)vStride[1],
        int(hasBias), (long long)biasDim[0], (long long)biasDim[1],
        (long long)biasDim[2], (long long)biasDim[3], (long long)biasStride[0],
        (long long)biasStride[1], (long long)biasStride[2],
        (long long)biasStride[3]);
    return text;
  }
};

/// K's or V's heads: within dims [split, rank) a trailing run of broadcast
/// dims is the group (its size `groups`), the dims before it collapse into
/// the `heads` K / V heads with stride `headStride`.
bool splitHeads(const AttentionGeometry &g, const int64_t *strides, int split,
                int64_t &heads, int64_t &headStride, int64_t &groups) {
  int groupStart = g.batchRank;
  groups = 1;
  while (groupStart > split &&
         (g.batchShape[groupStart - 1] == 1 || strides[groupStart - 1] == 0)) {
    --groupStart;
    groups *= g.batchShape[groupStart];
  }
  return collapse(g, strides, split, groupStart, heads, headStride) &&
         (headStride != 0 || heads == 1);
}

/// Maps the call onto cuDNN's [b, h] batch; an empty string when it fits,
/// else why not.
std::string mapBatch(const AttentionGeometry &g, const TensorRef &q,
                     const TensorRef *bias, SdpaProblem &p) {
  if (q.numElements() != g.batch * g.queries * g.headSize)
    return "Q broadcasts over batch dims";
  const int rank = g.batchRank;
  // Split points: b = dims [0, split), h = dims [split, rank); the last dim
  // alone as the heads first (the [B, H] of most models).
  std::vector<int> splits;
  for (int split = rank - 1; split >= 0; --split)
    splits.push_back(split);
  splits.push_back(rank);
  for (int split : splits) {
    int64_t b, kb, vb, hk, kh, gk, hv, vh, gv, unused;
    if (!collapse(g, g.kStride, 0, split, b, kb) ||
        !collapse(g, g.vStride, 0, split, unused, vb) ||
        (b > 1 && (kb == 0 || vb == 0)) ||
        !splitHeads(g, g.kStride, split, hk, kh, gk) ||
        !splitHeads(g, g.vStride, split, hv, vh, gv) || hk != hv || gk != gv)
      continue;
    int64_t biasB = 1, biasBStride = 0, biasH = 1, biasHStride = 0;
    if (bias && (!collapse(g, g.biasStride, 0, split, biasB, biasBStride) ||
                 !collapse(g, g.biasStride, split, rank, biasH, biasHStride)))
      continue;
    p.b = b;
    p.hk = hk;
    p.groups = gk;
    p.hq = hk * gk;
    p.kStride[0] = b > 1 ? kb : p.hk * g.keys * g.headSize;
    p.kStride[1] = hk > 1 ? kh : g.keys * g.headSize;
    p.vStride[0] = b > 1 ? vb : p.hk * g.keys * g.valueSize;
    p.vStride[1] = hk > 1 ? vh : g.keys * g.valueSize;
    if (bias) {
      // Broadcast axes as stride 0 at full size (an expanded tensor): with
      // size-1 dims instead, cuDNN 9.19's backward reads a bias broadcast
      // over the queries ([B, 1, 1, Sk]) as if it had S rows (wrong
      // gradients, seen on an H200); the forward took either form.
      p.hasBias = true;
      p.biasDim[0] = b;
      p.biasDim[1] = p.hq;
      p.biasDim[2] = g.queries;
      p.biasDim[3] = g.keys;
      p.biasStride[0] = biasBStride;
      p.biasStride[1] = biasHStride;
      p.biasStride[2] = g.biasRowStride;
      p.biasStride[3] = g.biasColStride;
    }
    return "";
  }
  return "batch broadcast that cuDNN's [b, h] with grouped K / V heads "
         "cannot express";
}

/// Whether the call's dropout is cuDNN's to draw: then cuDNN must run it
/// (no other engine reproduces its mask).
bool cudnnDropout(const AttentionParams &params) {
  return params.dropoutRatio > 0.0f && params.dropoutCudnnRng;
}

/// Every reason to leave the call to memopt's kernels that is known before
/// cuDNN is asked; fills the problem otherwise.
std::string refusal(Context &ctx, const char *node,
                    const CudnnAttentionState &state,
                    const AttentionParams &params, const AttentionGeometry &g,
                    const TensorRef &q, const TensorRef *bias,
                    std::initializer_list<const void *> pointers,
                    SdpaProblem &p) {
  if (!state.engineError.empty()) {
    failf(ctx, node, "%s", state.engineError.c_str());
    return state.engineError;
  }
  if (params.dropoutRatio > 0.0f && !params.dropoutCudnnRng)
    return "dropout with memopt's mask, which cuDNN's generator cannot draw "
           "(AttentionParams::dropoutCudnnRng unset)";
  if (state.engine == AttentionEngine::Memopt)
    return "forced: MEMOPT_ATTENTION_ENGINE=memopt or "
           "ContextOptions::attentionEngine";
  if (q.dtype != DType::F16 && q.dtype != DType::BF16)
    return std::string(dtypeName(q.dtype)) +
           " (cuDNN's SDPA runs f16 / bf16 here)";
#if !MEMOPT_HAVE_CUDNN_FRONTEND
  return "the runtime was built without cudnn-frontend (scripts/setup.sh "
         "installs it)";
#endif
  if (ctx.computeMajor < 8)
    return "cuDNN's SDPA needs sm80+";
  if (g.batch == 0 || g.queries == 0 || g.keys == 0)
    return "an empty problem";
  if (g.headSize % 8 || g.valueSize % 8 || g.headSize > 256 ||
      g.valueSize > 256)
    return "head sizes " + std::to_string(g.headSize) + " / " +
           std::to_string(g.valueSize) +
           " (cuDNN: multiples of 8, at most 256)";
  std::string why = mapBatch(g, q, bias, p);
  if (!why.empty())
    return why;
  for (const void *pointer : pointers)
    if (!aligned16(pointer))
      return "an operand is not 16-byte aligned";
  // cuDNN moves tiles with 16-byte vectors and TMA and does not check the
  // strides: each must be a multiple of 8 elements.
  if (p.hasBias) {
    bool stridesOk = p.biasStride[3] == 1;
    for (int i = 0; i < 3; ++i)
      stridesOk = stridesOk && p.biasStride[i] % 8 == 0;
    if (!stridesOk)
      return "bias rows of " + std::to_string(g.keys) +
             " keys (cuDNN needs bias strides of a multiple of 8 elements)";
  }
  p.dtype = q.dtype;
  p.causal = params.causal;
  p.keyTransposed = params.keyTransposed;
  p.scale = params.scale;
  p.s = g.queries;
  p.sk = g.keys;
  p.d = g.headSize;
  p.dv = g.valueSize;
  p.dropout = cudnnDropout(params) ? params.dropoutRatio : 0.0f;
  return "";
}

#if MEMOPT_HAVE_CUDNN_FRONTEND
using TensorPtr = FrontendTensor;

TensorPtr addTensor(FrontendGraph &graph, const char *name, Uid uid,
                    std::vector<int64_t> dims, std::vector<int64_t> strides) {
  return addFrontendTensor(graph, name, uid, std::move(dims),
                           std::move(strides));
}

/// Packed [b, h, s, d] strides.
std::vector<int64_t> packed(int64_t h, int64_t s, int64_t d) {
  return {h * s * d, s * d, d, 1};
}

/// Builds the SDPA (or SDPA backward) graph of `p`; an error message or "".
std::string buildGraph(Context &ctx, const SdpaProblem &p, SdpaPlan &plan) {
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(frontendType(p.dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  TensorPtr q =
      addTensor(*graph, "Q", kQ, {p.b, p.hq, p.s, p.d}, packed(p.hq, p.s, p.d));
  TensorPtr k = addTensor(*graph, "K", kK, {p.b, p.hk, p.sk, p.d},
                          {p.kStride[0], p.kStride[1], p.d, 1});
  TensorPtr v = addTensor(*graph, "V", kV, {p.b, p.hk, p.sk, p.dv},
                          {p.vStride[0], p.vStride[1], p.dv, 1});
  TensorPtr seed, offset;
  if (p.dropout > 0.0f) {
    // Device scalars (written before each call: a captured graph replays
    // the driver's new micro-batch).
    auto scalar = [&](const char *name, Uid uid) {
      return graph->tensor(fe::graph::Tensor_attributes()
                               .set_name(name)
                               .set_uid(uid)
                               .set_dim({1, 1, 1, 1})
                               .set_stride({1, 1, 1, 1})
                               .set_data_type(fe::DataType_t::INT64));
    };
    seed = scalar("dropout_seed", kSeed);
    offset = scalar("dropout_offset", kOffset);
  }
  TensorPtr bias;
  if (p.hasBias)
    bias = addTensor(
        *graph, "bias", kBias,
        {p.biasDim[0], p.biasDim[1], p.biasDim[2], p.biasDim[3]},
        {p.biasStride[0], p.biasStride[1], p.biasStride[2], p.biasStride[3]});
  if (!p.backward) {
    auto options = fe::graph::SDPA_attributes()
                       .set_name("memopt_attention")
                       .set_generate_stats(p.statistics)
                       .set_attn_scale(p.scale);
    if (p.causal)
      options.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
          .set_diagonal_band_right_bound(0);
    if (bias)
      options.set_bias(bias);
    if (seed) {
      options.set_dropout(p.dropout, seed, offset);
      if (p.rngDump)
        options.set_rng_dump(
            graph->tensor(fe::graph::Tensor_attributes()
                              .set_name("rng_dump")
                              .set_uid(kRngDump)
                              .set_dim({p.b, p.hq, p.s, p.sk})
                              .set_stride(packed(p.hq, p.s, p.sk))
                              .set_data_type(fe::DataType_t::FLOAT)));
    }
    auto [o, stats] = graph->sdpa(q, k, v, options);
    o->set_output(true)
        .set_uid(kO)
        .set_dim({p.b, p.hq, p.s, p.dv})
        .set_stride(packed(p.hq, p.s, p.dv));
    if (p.statistics)
      stats->set_output(true).set_uid(kStats).set_data_type(
          fe::DataType_t::FLOAT);
  } else {
    TensorPtr o = addTensor(*graph, "O", kO, {p.b, p.hq, p.s, p.dv},
                            packed(p.hq, p.s, p.dv));
    TensorPtr dO = addTensor(*graph, "dO", kDO, {p.b, p.hq, p.s, p.dv},
                             packed(p.hq, p.s, p.dv));
    TensorPtr stats = graph->tensor(fe::graph::Tensor_attributes()
                                        .set_name("stats")
                                        .set_uid(kStats)
                                        .set_dim({p.b, p.hq, p.s, 1})
                                        .set_stride({p.hq * p.s, p.s, 1, 1})
                                        .set_data_type(fe::DataType_t::FLOAT));
    auto options = fe::graph::SDPA_backward_attributes()
                       .set_name("memopt_attention_backward")
                       .set_attn_scale(p.scale);
    if (p.causal)
      options.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
          .set_diagonal_band_right_bound(0);
    if (bias)
      options.set_bias(bias);
    if (seed)
      options.set_dropout(p.dropout, seed, offset);
    auto [dQ, dK, dV] = graph->sdpa_backward(q, k, v, o, dO, stats, options);
    dQ->set_output(true)
        .set_uid(kDQ)
        .set_dim({p.b, p.hq, p.s, p.d})
        .set_stride(packed(p.hq, p.s, p.d));
    // With grouped gradients dK / dV have K's and V's own shapes (cuDNN's
    // group sums, packed); else memopt's dK / dV hold one slot per query
    // head and cuDNN writes the group's first (a transposed K's dK goes to
    // packed scratch).
    int64_t slots = p.groupedGradients ? 1 : p.groups;
    int64_t keySlots = p.keyTransposed ? 1 : slots;
    dK->set_output(true)
        .set_uid(kDK)
        .set_dim({p.b, p.hk, p.sk, p.d})
        .set_stride(
            {p.hk * keySlots * p.sk * p.d, keySlots * p.sk * p.d, p.d, 1});
    dV->set_output(true)
        .set_uid(kDV)
        .set_dim({p.b, p.hk, p.sk, p.dv})
        .set_stride({p.hk * slots * p.sk * p.dv, slots * p.sk * p.dv, p.dv, 1});
  }
  auto start = std::chrono::steady_clock::now();
  std::string why = buildFrontendPlan(ctx, *graph, {fe::HeurMode_t::A},
                                      plan.cudnnWorkspaceBytes);
  if (!why.empty())
    return why;
  double buildMs = std::chrono::duration<double, std::milli>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  char text[256];
  std::snprintf(text, sizeof(text),
                "b %lld, heads %lld / %lld kv, %lld x %lld keys, d %lld"
                "%s%s%s%s; plan built in %.1f ms, cuDNN workspace %zu bytes",
                (long long)p.b, (long long)p.hq, (long long)p.hk,
                (long long)p.s, (long long)p.sk, (long long)p.d,
                p.causal ? ", causal" : "", p.hasBias ? ", bias" : "",
                p.dropout > 0.0f ? ", dropout (cuDNN's generator)" : "",
                p.keyTransposed ? ", K transposed first" : "", buildMs,
                plan.cudnnWorkspaceBytes);
  plan.engine = text;
  plan.graph = std::move(graph);
  return "";
}
#else
std::string buildGraph(Context &, const SdpaProblem &, SdpaPlan &) {
  return "built without cudnn-frontend";
}
#endif

/// The plan of `p`, built on first use; nullptr (with `why`) when cuDNN
/// refuses it or it cannot be built now.
const SdpaPlan *planFor(Context &ctx, CudnnAttentionState &state,
                        const SdpaProblem &p, std::string &why) {
  std::string key = p.key();
  auto found = state.plans.find(key);
  if (found == state.plans.end()) {
    // Building a plan allocates and synchronizes: never inside a capture
    // (a program's first run is eager and builds them all).
    if (ctx.capturing) {
      why = "first call inside a CUDA graph capture";
      return nullptr;
    }
    SdpaPlan plan;
    plan.refusal = buildGraph(ctx, p, plan);
    if (!plan.refusal.empty()) {
      // The first line of cuDNN's message (buildFrontendPlan).
      plan.refusal = "cuDNN: " + plan.refusal;
      plan.graph.reset();
    }
    found = state.plans.emplace(key, std::move(plan)).first;
  }
  if (!found->second.graph) {
    why = found->second.refusal;
    return nullptr;
  }
  return &found->second;
}

/// The workspace's parts for one call, in bytes from its start: the order of
/// workspace::cudnnAttentionBytes / cudnnAttentionBackwardBytes, with
/// cuDNN's own part as its plan states it.
struct WorkspaceLayout {
  size_t statistics = 0, keys = 0, keyGradient = 0, dropoutSeed = 0, total = 0;
};

WorkspaceLayout layoutFor(const SdpaProblem &p, const SdpaPlan &plan,
                          const TensorRef &k) {
  WorkspaceLayout w;
  size_t offset = alignUp(plan.cudnnWorkspaceBytes);
  if (p.statistics || p.backward) {
    w.statistics = offset;
    offset += alignUp(size_t(p.b * p.hq * p.s) * sizeof(float));
  }
  if (p.keyTransposed) {
    w.keys = offset;
    offset += alignUp(k.bytes());
    if (p.backward) {
      w.keyGradient = offset;
      offset += alignUp(size_t(p.b * p.hk * p.sk * p.d) * dtypeSize(p.dtype));
    }
  }
  if (p.dropout > 0.0f) {
    // cuDNN's seed and offset (two I64), derived on the device.
    w.dropoutSeed = offset;
    offset += alignUp(size_t(workspace::kCudnnAttentionDropoutBytes));
  }
  w.total = offset;
  return w;
}

uint8_t *at(void *base, size_t offset) {
  return static_cast<uint8_t *>(base) + offset;
}

/// Whether the call's planned workspace holds the plan's layout; else why
/// not (the engine report's text).
bool fitsWorkspace(const WorkspaceLayout &w, const SdpaPlan &plan,
                   const void *workspace, size_t workspaceBytes,
                   std::string &why) {
  if (w.total <= workspaceBytes && (workspace || !w.total) &&
      (reinterpret_cast<uintptr_t>(workspace) & 15) == 0)
    return true;
  if (!workspaceBytes) {
    why = "no workspace planned for cuDNN (" + std::to_string(w.total) +
          " bytes needed; compile for target cuda: memopt.cudnn_workspace)";
    return false;
  }
  if (w.total > workspaceBytes) {
    why = "cuDNN's plan states " + std::to_string(plan.cudnnWorkspaceBytes) +
          " bytes of workspace, " + std::to_string(w.total) +
          " with the statistics and K, more than the " +
          std::to_string(workspaceBytes) + " planned";
    return false;
  }
  why = "the planned workspace is not 16-byte aligned";
  return false;
}

/// The engine report's account of a call that cuDNN can run (after the
/// reason it runs there or not).
std::string engineText(const SdpaPlan &plan, const WorkspaceLayout &w,
                       size_t workspaceBytes) {
  return plan.engine + "; " + std::to_string(w.total) + " of " +
         std::to_string(workspaceBytes) + " planned workspace bytes";
}

/// Whether cuDNN runs a call it accepts (its plan built and fits the
/// workspace), memopt's kernels (`runMemopt`) being able to run it too: the
/// engine forced, the call site's cached choice, or the faster of the two
/// timed now (AttentionEngineChoice.cpp). Notes the site's engine.
bool cudnnRuns(Context &ctx, CudnnAttentionState &state, const char *node,
               bool backward, const SdpaProblem &p, size_t workspaceBytes,
               const AttentionGeometry &g, const std::string &account,
               const std::function<bool()> &runCudnn,
               const std::function<bool()> &runMemopt) {
  if (state.engine == AttentionEngine::Cudnn) {
    noteSite(ctx, node, backward,
             "cuDNN SDPA (forced: MEMOPT_ATTENTION_ENGINE=cudnn or "
             "ContextOptions::attentionEngine; " +
                 account + ")");
    return true;
  }
  // One choice per call site and problem (a node runs one shape in a
  // program; the suite's and benchmarks' contexts may reuse names).
  std::string siteKey = std::string(node ? node : "?") + " " + p.key() + " ws" +
                        std::to_string(workspaceBytes);
  auto found = state.choices.find(siteKey);
  if (found != state.choices.end())
    return found->second;
  bool permanent = false;
  std::string why = attentionTimingRefusal(ctx, g, permanent);
  if (!why.empty()) {
    if (permanent)
      state.choices[siteKey] = true;
    noteSite(ctx, node, backward,
             "cuDNN SDPA (not measured: " + why + "; " + account + ")");
    return true;
  }
  AttentionChoice choice = measureAttentionEngines(ctx, runCudnn, runMemopt);
  state.choices[siteKey] = choice.cudnn;
  noteSite(ctx, node, backward,
           choice.cudnn ? "cuDNN SDPA (" + choice.text + "; " + account + ")"
                        : "memopt kernel (" + choice.text + ")");
  return choice.cudnn;
}

bool execute(Context &ctx, const char *node, const SdpaPlan &plan,
             std::unordered_map<int64_t, void *> &pack, void *workspace) {
#if !MEMOPT_HAVE_CUDNN_FRONTEND
  failf(ctx, node, "cuDNN SDPA: built without cudnn-frontend");
  return false;
#else
  return executeFrontendPlan(ctx, node, "cuDNN SDPA", *plan.graph, pack,
                             workspace);
#endif
}

/// cuDNN's dropout seed and offset into the workspace (derived on the
/// device from the program's key, so a captured graph replays the driver's
/// new micro-batch), and their variant pack entries. False when the launch
/// failed.
bool prepareDropout(Context &ctx, const char *node, const SdpaProblem &p,
                    const AttentionParams &params, const WorkspaceLayout &w,
                    void *workspace,
                    std::unordered_map<int64_t, void *> &pack) {
  if (p.dropout <= 0.0f)
    return true;
  auto *seed = reinterpret_cast<int64_t *>(at(workspace, w.dropoutSeed));
  if (!launchCudnnDropoutSeed(ctx, node, params.dropoutKey,
                              params.dropoutStream, seed))
    return false;
  pack[kSeed] = seed;
  pack[kOffset] = seed + 1;
  return true;
}

/// Batch entries of K's own shape (its matrices of d x sk).
int64_t keyMatrices(const TensorRef &k, const SdpaProblem &p) {
  return k.numElements() / (p.d * p.sk);
}

/// The forward on cuDNN's plan: K transposed first where it is stored
/// [D, Sk], the statistics converted to memopt's pairs after. False when a
/// launch failed (the error is on the context).
bool runForward(Context &ctx, const char *node, const SdpaProblem &p,
                const AttentionParams &params, const SdpaPlan &plan,
                const WorkspaceLayout &w, const TensorRef &q,
                const TensorRef &k, const TensorRef &v, const TensorRef *bias,
                const TensorRef &y, const TensorRef *lse, void *workspace,
                void *rngDump) {
  void *keys = k.data;
  if (p.keyTransposed) {
    keys = at(workspace, w.keys);
    if (!launchTransposeMatrices16(ctx, node, k.data, keys, keyMatrices(k, p),
                                   p.d, p.sk))
      return false;
  }
  float *statistics =
      p.statistics ? reinterpret_cast<float *>(at(workspace, w.statistics))
                   : nullptr;
  std::unordered_map<int64_t, void *> pack = {
      {kQ, q.data}, {kK, keys}, {kV, v.data}, {kO, y.data}};
  if (bias)
    pack[kBias] = bias->data;
  if (statistics)
    pack[kStats] = statistics;
  if (p.rngDump)
    pack[kRngDump] = rngDump;
  if (!prepareDropout(ctx, node, p, params, w, workspace, pack) ||
      !execute(ctx, node, plan, pack, workspace))
    return false;
  return !statistics || launchStatisticsToPairs(ctx, node, statistics,
                                                static_cast<float *>(lse->data),
                                                p.b * p.hq * p.s);
}

/// The backward on cuDNN's plan: memopt's pairs summed into cuDNN's
/// statistics and K transposed first, dK transposed back or the K / V head
/// groups' other slots zeroed after. False when a launch failed.
bool runBackward(Context &ctx, const char *node, const SdpaProblem &p,
                 const AttentionParams &params, const SdpaPlan &plan,
                 const WorkspaceLayout &w, const TensorRef &q,
                 const TensorRef &k, const TensorRef &v, const TensorRef *bias,
                 const TensorRef &y, const TensorRef &dy, const TensorRef &lse,
                 const TensorRef &dq, const TensorRef &dk, const TensorRef &dv,
                 void *workspace) {
  float *statistics = reinterpret_cast<float *>(at(workspace, w.statistics));
  if (!launchPairsToStatistics(ctx, node, static_cast<const float *>(lse.data),
                               statistics, p.b * p.hq * p.s))
    return false;
  void *keys = k.data, *keyGradient = dk.data;
  if (p.keyTransposed) {
    keys = at(workspace, w.keys);
    keyGradient = at(workspace, w.keyGradient);
    if (!launchTransposeMatrices16(ctx, node, k.data, keys, keyMatrices(k, p),
                                   p.d, p.sk))
      return false;
  }
  std::unordered_map<int64_t, void *> pack = {
      {kQ, q.data},   {kK, keys},         {kV, v.data},
      {kO, y.data},   {kDO, dy.data},     {kStats, statistics},
      {kDQ, dq.data}, {kDK, keyGradient}, {kDV, dv.data}};
  if (bias)
    pack[kBias] = bias->data;
  if (!prepareDropout(ctx, node, p, params, w, workspace, pack) ||
      !execute(ctx, node, plan, pack, workspace))
    return false;
  if (p.keyTransposed)
    return launchTransposeMatrices16(ctx, node, keyGradient, dk.data,
                                     p.b * p.hk, p.sk, p.d);
  if (p.groups > 1 && !p.groupedGradients) {
    // The group's other slots: the caller sums dK and dV over the group.
    size_t elem = dtypeSize(p.dtype);
    struct Slots {
      void *data;
      int64_t width;
    };
    for (Slots slots : {Slots{dk.data, p.d}, Slots{dv.data, p.dv}}) {
      size_t slot = size_t(p.sk * slots.width) * elem;
      if (!checkCuda(ctx, node,
                     cudaMemset2DAsync(at(slots.data, slot), p.groups * slot, 0,
                                       (p.groups - 1) * slot,
                                       size_t(p.b * p.hk), ctx.stream),
                     "cudaMemset2DAsync(dK / dV group slots)"))
        return false;
    }
  }
  return true;
}

/// A call with cuDNN's dropout generator that cuDNN cannot run: an error (no
/// other engine draws cuDNN's mask, and the forward's and the backward's
/// masks must be one).
void failDropout(Context &ctx, const char *node, bool backward,
                 const std::string &why) {
  noteSite(ctx, node, backward, "none (" + why + ")");
  failf(ctx, node,
        "attention%s with dropout drawn by cuDNN's generator "
        "(AttentionParams::dropoutCudnnRng) must run on cuDNN's fused SDPA, "
        "which cannot run it: %s",
        backward ? " backward" : "", why.c_str());
}

std::string dropoutSiteText(const std::string &account) {
  return "cuDNN SDPA (dropout drawn by cuDNN's generator: no other engine "
         "draws its mask; " +
         account + ")";
}

} // namespace

void setCudnnAttentionRngDump(Context &ctx, void *dump) {
  stateOf(ctx).rngDump = dump;
}

bool cudnnAttentionForward(Context &ctx, const char *node,
                           const AttentionParams &params,
                           const AttentionGeometry &g, const TensorRef &q,
                           const TensorRef &k, const TensorRef &v,
                           const TensorRef *bias, const TensorRef &y,
                           const TensorRef *lse, void *workspace,
                           size_t workspaceBytes) {
  CudnnAttentionState &state = stateOf(ctx);
  SdpaProblem p;
  p.statistics = lse != nullptr;
  void *rngDump = nullptr;
  if (cudnnDropout(params)) { // the suite's check: this call's only
    rngDump = state.rngDump;
    state.rngDump = nullptr;
  }
  p.rngDump = rngDump != nullptr;
  std::string why =
      refusal(ctx, node, state, params, g, q, bias,
              {q.data, k.data, v.data, y.data, bias ? bias->data : nullptr}, p);
  const SdpaPlan *plan = why.empty() ? planFor(ctx, state, p, why) : nullptr;
  WorkspaceLayout w;
  if (plan) {
    w = layoutFor(p, *plan, k);
    if (!fitsWorkspace(w, *plan, workspace, workspaceBytes, why))
      plan = nullptr;
  }
  if (hasError(ctx))
    return true;
  if (!plan) {
    if (cudnnDropout(params)) {
      failDropout(ctx, node, false, why);
      return true;
    }
    noteSite(ctx, node, false, "memopt kernel (" + why + ")");
    return false;
  }
  auto runCudnn = [&] {
    return runForward(ctx, node, p, params, *plan, w, q, k, v, bias, y, lse,
                      workspace, rngDump);
  };
  if (cudnnDropout(params)) {
    noteSite(ctx, node, false,
             dropoutSiteText(engineText(*plan, w, workspaceBytes)));
    runCudnn();
    return true;
  }
  auto runMemopt = [&] {
    attentionKernels(ctx, node, params, g, q, k, v, bias, y, workspace,
                     workspaceBytes, lse);
    return !hasError(ctx);
  };
  if (!cudnnRuns(ctx, state, node, false, p, workspaceBytes, g,
                 engineText(*plan, w, workspaceBytes), runCudnn, runMemopt))
    return false;
  runCudnn();
  return true;
}

bool cudnnAttentionBackward(Context &ctx, const char *node,
                            const AttentionParams &params,
                            const AttentionGeometry &g, const TensorRef &q,
                            const TensorRef &k, const TensorRef &v,
                            const TensorRef *bias, const TensorRef &y,
                            const TensorRef &dy, const TensorRef &lse,
                            const TensorRef &dq, const TensorRef &dk,
                            const TensorRef &dv, const TensorRef *dbias,
                            void *workspace, size_t workspaceBytes) {
  CudnnAttentionState &state = stateOf(ctx);
  SdpaProblem p;
  p.backward = true;
  std::string why =
      dbias ? "bias gradient (memopt's f32 kernels)"
            : refusal(ctx, node, state, params, g, q, bias,
                      {q.data, k.data, v.data, y.data, dy.data, dq.data,
                       dk.data, dv.data, bias ? bias->data : nullptr},
                      p);
  if (why.empty() && p.keyTransposed && p.groups > 1)
    why = "K as [D, Sk] with grouped K / V heads";
  p.groupedGradients = params.groupedGradients;
  // Grouped gradients are summed over the op's group (y's trailing batch
  // entries that share K / V), which must be cuDNN's.
  if (why.empty() && p.groupedGradients && p.groups != g.group)
    why = "grouped gradients over " + std::to_string(g.group) +
          " query heads where cuDNN's groups are " + std::to_string(p.groups);
  // cudnn-frontend stages sequence lengths from host memory for this case
  // (a workaround for older backends), which a CUDA graph cannot capture.
  if (why.empty() && state.backendVersion <= 91500 && p.sk % 128)
    why = "cuDNN <= 9.15.0 backward with keys not a multiple of 128";
  const SdpaPlan *plan = why.empty() ? planFor(ctx, state, p, why) : nullptr;
  WorkspaceLayout w;
  if (plan) {
    w = layoutFor(p, *plan, k);
    if (!fitsWorkspace(w, *plan, workspace, workspaceBytes, why))
      plan = nullptr;
  }
  if (hasError(ctx))
    return true;
  if (!plan) {
    if (cudnnDropout(params)) {
      failDropout(ctx, node, true, why);
      return true;
    }
    noteSite(ctx, node, true, "memopt kernel (" + why + ")");
    return false;
  }
  auto runCudnn = [&] {
    return runBackward(ctx, node, p, params, *plan, w, q, k, v, bias, y, dy,
                       lse, dq, dk, dv, workspace);
  };
  if (cudnnDropout(params)) {
    noteSite(ctx, node, true,
             dropoutSiteText(engineText(*plan, w, workspaceBytes)));
    runCudnn();
    return true;
  }
  auto runMemopt = [&] {
    attentionBackwardKernels(ctx, node, params, g, q, k, v, bias, y, dy, lse,
                             dq, dk, dv, dbias, workspace, workspaceBytes);
    return !hasError(ctx);
  };
  if (!cudnnRuns(ctx, state, node, true, p, workspaceBytes, g,
                 engineText(*plan, w, workspaceBytes), runCudnn, runMemopt))
    return false;
  runCudnn();
  return true;
}

void destroyCudnnAttention(Context &ctx) {
  if (!ctx.cudnnAttention)
    return;
  delete ctx.cudnnAttention;
  ctx.cudnnAttention = nullptr;
}

const char *attentionEngineReport(Context &ctx) {
  CudnnAttentionState &state = stateOf(ctx);
  state.report.clear();
  for (const EngineSite &site : state.sites)
    state.report += site.node + (site.backward ? " backward: " : " forward: ") +
                    site.engine + "\n";
  return state.report.c_str();
}

} // namespace memopt::rt
