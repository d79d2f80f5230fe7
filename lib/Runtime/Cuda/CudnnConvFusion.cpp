//===- CudnnConvFusion.cpp - batch-norm -> ReLU -> convolution on cuDNN ---===//
//
// The CUDA normReluConv and normReluConvBackwardFilter: a convolution (or its
// filter gradient) of r = relu(x * scale[c] + bias[c]), the training step's
// batch normalization and ReLU applied as the convolution loads x, so that r
// is never stored (issue 26, item 2). Two engines:
//
//  - cuDNN's fusion, through cudnn-frontend's graph API: X -> mul(scale) ->
//    add(bias) -> RELU_FWD -> conv_fprop(W) -> Y, or ... -> conv_wgrad(dY)
//    -> dW (cuDNN's "ConvBNfprop" / "ConvBNwgrad" runtime fusions; the
//    convolution's own bias, where the call has one, as an ADD after
//    conv_fprop). io type x's dtype, scale and bias FLOAT [1, C, 1, 1],
//    intermediate and compute FLOAT (where cuDNN refuses a FLOAT
//    intermediate, for f16 the io type, as its wgrad sample has it; never
//    bf16: see buildSite); 2-D convolutions of group 1, NCHW / KCRS or
//    NHWC / KRSC as ConvParams::channelsLast says, any pads, strides,
//    dilations. f32 without TF32 leaves out the tensor-core engines.
//  - the fallback ("apply + conv"): launchNormReluApply writes r into the
//    workspace head (normReluConvTempBytes(x.bytes())), then the existing
//    conv / convBackwardFilter (CudaLibraries.cpp: algorithm search, cached
//    plan) runs with the rest of the workspace. Every shape and dtype.
//
// Each call site (node, shapes, dtypes, params, workspace bytes) chooses at
// its first run, which is eager (a CUDA graph captures later runs): the
// fusion's graph and plan are built then (never while capturing, never per
// step) and, where both engines can run, each is timed (timeEngineCalls, as
// the depthwise engine choice is) and the faster kept.
// MEMOPT_CONV_ENGINE=cudnn|memopt (or ContextOptions::convEngine) forces one
// (memopt = the fallback); convolutionEngineReport and MEMOPT_CONV_LOG=1 say
// which engine runs each node and why. The fusion runs only in the workspace
// the call was given (cuDNN's plan must fit in all of it: the fusion needs no
// r).
//
// Taken from: cudnn-frontend's samples (samples/cpp/convolution/fprop.cpp
// "SBRCS": the scale-bias-relu-conv graph and its NHWC strides;
// wgrads.cpp "scale-bias-relu-wgrad": the same prologue before conv_wgrad)
// and this runtime's attention on cudnn-frontend (CudnnAttention.cpp: a plan
// per problem built on first use, the engine report). Different: memopt's
// batch-norm arithmetic (appliedScale / appliedBias in f32, the fallback
// rounding r to x's dtype, Runtime.h), the measured choice against the
// unfused pair, a fallback that says why, and the planned workspace.
//
//===----------------------------------------------------------------------===//

#include "CudnnFrontend.h"
#include "NormConv.h"
#include "memopt/Runtime/Workspace.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>

namespace memopt::rt {

/// One call site's engine: the fusion's plan (or why there is none) and the
/// choice.
struct NormConvFusionSite {
  std::shared_ptr<FrontendGraph> graph; ///< null: no fusion plan
  size_t cudnnWorkspaceBytes = 0;
  std::string plan;    ///< the fusion's plan, as the report prints it
  bool chosen = false; ///< the first eager run chose the engine
  bool fused = false;  ///< runs cuDNN's fusion (else apply + conv)
};

struct NormConvFusionState {
  std::unordered_map<std::string, NormConvFusionSite> sites;
};

namespace {

enum FusionUid : int64_t {
  kX = 1,
  kScale,
  kBias,
  kOperand, ///< conv: the filter W; filter gradient: dY
  kResult,  ///< conv: Y; filter gradient: dW
  kConvBias,
};

/// One call, as both entry points see it.
struct FusionCall {
  bool backwardFilter = false;
  const ConvParams *params = nullptr;
  ConvGeometry g;
  TensorRef x, operand, scale, bias, result; ///< operand: w or dy
  const TensorRef *convBias = nullptr;       ///< conv only: its own bias [M]
  void *workspace = nullptr;
  size_t workspaceBytes = 0;

  /// The report's name of the fusion.
  const char *fusionName() const {
    return backwardFilter ? "cuDNN scale-bias-relu-wgrad fusion"
                          : "cuDNN scale-bias-relu-conv fusion";
  }
  std::string key(const char *node) const {
    std::string text = node ? node : "?";
    text += backwardFilter ? "|wgrad" : "|fprop";
    for (const TensorRef *t : {&x, &operand, &result}) {
      text += '|';
      text += dtypeName(t->dtype);
      for (int i = 0; i < t->rank; ++i)
        text += ',' + std::to_string(t->shape[i]);
    }
    const ConvParams &p = *params;
    char buf[160];
    for (int i = 0; i < 3; ++i) {
      std::snprintf(buf, sizeof(buf), ";%lld,%lld,%lld,%lld",
                    (long long)p.padsBegin[i], (long long)p.padsEnd[i],
                    (long long)p.strides[i], (long long)p.dilations[i]);
      text += buf;
    }
    std::snprintf(buf, sizeof(buf), ";r%d g%lld cl%d tf%d b%d ws%zu",
                  p.spatialRank, (long long)p.group, int(p.channelsLast),
                  int(p.allowTf32), int(convBias != nullptr), workspaceBytes);
    return text + buf;
  }
};

NormConvFusionState &stateOf(Context &ctx) {
  if (!ctx.normConvFusion)
    ctx.normConvFusion = new NormConvFusionState();
  return *ctx.normConvFusion;
}

bool aligned16(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

/// The call's operands as the host checks them (validateNormReluConv; a
/// convolution bias as conv's).
bool validateCall(Context &ctx, const char *node, FusionCall &c) {
  return validateNormReluConv(ctx, node, *c.params, c.backwardFilter, c.x,
                              c.operand, c.scale, c.bias, c.result, c.workspace,
                              c.workspaceBytes, c.g) &&
         (!c.convBias || validateConv(ctx, node, *c.params, false, c.x,
                                      c.operand, c.convBias, c.result, c.g));
}

/// The convolution of the fallback and of empty calls: conv or
/// convBackwardFilter of `input` with the workspace from `offset` on.
void runConvolution(Context &ctx, const char *node, const FusionCall &c,
                    const TensorRef &input, size_t offset) {
  void *rest = static_cast<uint8_t *>(c.workspace) + offset;
  size_t restBytes = c.workspaceBytes - offset;
  if (c.backwardFilter)
    convBackwardFilter(ctx, node, *c.params, input, c.operand, c.result, rest,
                       restBytes);
  else
    conv(ctx, node, *c.params, input, c.operand, c.convBias, c.result, rest,
         restBytes);
}

/// apply + conv: r into the workspace head, then the convolution of r with
/// the rest. False after an error.
bool runFallback(Context &ctx, const char *node, const FusionCall &c) {
  TensorRef r = c.x;
  r.data = c.workspace;
  launchNormReluApply(ctx, node, c.x, c.scale, c.bias, r,
                      c.params->channelsLast);
  if (hasError(ctx))
    return false;
  runConvolution(
      ctx, node, c, r,
      size_t(workspace::normReluConvTempBytes(int64_t(c.x.bytes()))));
  return !hasError(ctx);
}

/// Why the fusion cannot run the call whatever cuDNN says; "" when it may.
std::string shapeRefusal(Context &ctx, const FusionCall &c) {
#if !MEMOPT_HAVE_CUDNN_FRONTEND
  return "the runtime was built without cudnn-frontend (scripts/setup.sh "
         "installs it)";
#endif
  if (c.params->spatialRank != 2)
    return std::to_string(c.params->spatialRank) +
           "-D convolution (the fusion runs 2-D ones)";
  if (c.g.group != 1)
    return "group " + std::to_string(c.g.group) + " (the fusion runs group 1)";
  if (ctx.computeMajor < 8)
    return "cuDNN's runtime fusions need sm80+";
  for (const void *p :
       {c.x.data, c.operand.data, c.result.data, c.scale.data, c.bias.data,
        c.convBias ? c.convBias->data : nullptr, c.workspace})
    if (!aligned16(p))
      return "an operand is not 16-byte aligned";
  return "";
}

#if MEMOPT_HAVE_CUDNN_FRONTEND
/// [n, c, h, w] dims of an activation or filter with the strides of its
/// layout: NHWC / KRSC channels-last, else packed NCHW / KCRS.
std::vector<int64_t> stridesOf(const std::vector<int64_t> &dims,
                               bool channelsLast) {
  int64_t c = dims[1], h = dims[2], w = dims[3];
  if (channelsLast)
    return {h * w * c, 1, w * c, c};
  return {c * h * w, h * w, w, 1};
}

/// Builds the fusion's graph of the call with `intermediate` as the
/// intermediate type; "" or cuDNN's message.
std::string buildFusion(Context &ctx, const FusionCall &c,
                        fe::DataType_t intermediate, NormConvFusionSite &site) {
  const ConvGeometry &g = c.g;
  const ConvParams &p = *c.params;
  bool last = g.channelsLast;
  std::vector<int64_t> xDims = {g.batch, g.inChannels, g.in[1], g.in[2]};
  std::vector<int64_t> yDims = {g.batch, g.outChannels, g.out[1], g.out[2]};
  std::vector<int64_t> wDims = {g.outChannels, g.inChannels, g.kernel[1],
                                g.kernel[2]};
  std::vector<int64_t> channelDims = {1, g.inChannels, 1, 1};
  std::vector<int64_t> pre = {g.padsBegin[1], g.padsBegin[2]};
  std::vector<int64_t> post = {g.padsEnd[1], g.padsEnd[2]};
  std::vector<int64_t> strides = {g.strides[1], g.strides[2]};
  std::vector<int64_t> dilations = {g.dilations[1], g.dilations[2]};

  auto graph = std::make_shared<FrontendGraph>();
  graph->set_io_data_type(frontendType(c.x.dtype))
      .set_intermediate_data_type(intermediate)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  FrontendTensor x =
      addFrontendTensor(*graph, "x", kX, xDims, stridesOf(xDims, last));
  FrontendTensor scale = addFrontendTensor(*graph, "scale", kScale, channelDims,
                                           stridesOf(channelDims, last));
  scale->set_data_type(fe::DataType_t::FLOAT);
  FrontendTensor bias = addFrontendTensor(*graph, "bias", kBias, channelDims,
                                          stridesOf(channelDims, last));
  bias->set_data_type(fe::DataType_t::FLOAT);
  FrontendTensor scaled = graph->pointwise(
      x, scale,
      fe::graph::Pointwise_attributes().set_name("scale").set_mode(
          fe::PointwiseMode_t::MUL));
  FrontendTensor shifted = graph->pointwise(
      scaled, bias,
      fe::graph::Pointwise_attributes().set_name("bias").set_mode(
          fe::PointwiseMode_t::ADD));
  FrontendTensor r = graph->pointwise(
      shifted, fe::graph::Pointwise_attributes().set_name("relu").set_mode(
                   fe::PointwiseMode_t::RELU_FWD));
  if (!c.backwardFilter) {
    FrontendTensor w =
        addFrontendTensor(*graph, "w", kOperand, wDims, stridesOf(wDims, last));
    FrontendTensor y = graph->conv_fprop(r, w,
                                         fe::graph::Conv_fprop_attributes()
                                             .set_name("conv")
                                             .set_pre_padding(pre)
                                             .set_post_padding(post)
                                             .set_stride(strides)
                                             .set_dilation(dilations));
    if (c.convBias) {
      // The convolution's own bias [M] in x's type, added to the f32
      // convolution before Y is rounded.
      std::vector<int64_t> outChannelDims = {1, g.outChannels, 1, 1};
      FrontendTensor convBias =
          addFrontendTensor(*graph, "conv_bias", kConvBias, outChannelDims,
                            stridesOf(outChannelDims, last));
      convBias->set_data_type(frontendType(c.convBias->dtype));
      y = graph->pointwise(y, convBias,
                           fe::graph::Pointwise_attributes()
                               .set_name("conv_bias")
                               .set_mode(fe::PointwiseMode_t::ADD));
    }
    y->set_output(true)
        .set_uid(kResult)
        .set_dim(yDims)
        .set_stride(stridesOf(yDims, last))
        .set_data_type(frontendType(c.result.dtype));
  } else {
    FrontendTensor dy = addFrontendTensor(*graph, "dy", kOperand, yDims,
                                          stridesOf(yDims, last));
    FrontendTensor dw = graph->conv_wgrad(dy, r,
                                          fe::graph::Conv_wgrad_attributes()
                                              .set_name("wgrad")
                                              .set_pre_padding(pre)
                                              .set_post_padding(post)
                                              .set_stride(strides)
                                              .set_dilation(dilations));
    dw->set_output(true)
        .set_uid(kResult)
        .set_dim(wDims)
        .set_stride(stridesOf(wDims, last))
        .set_data_type(frontendType(c.result.dtype));
  }
  // f32 stays exact unless TF32 is allowed (as the legacy convolutions'
  // FMA math): no tensor-core engines then.
  std::vector<fe::NumericalNote_t> deselect;
  if (c.x.dtype == DType::F32 && !p.allowTf32 && !ctx.options.allowTf32)
    deselect = {fe::NumericalNote_t::TENSOR_CORE,
                fe::NumericalNote_t::DOWN_CONVERT_INPUTS};
  std::string why = buildFrontendPlan(
      ctx, *graph, {fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK},
      site.cudnnWorkspaceBytes, deselect);
  if (why.empty())
    site.graph = std::move(graph);
  return why;
}
#endif

/// Builds the call site's fusion plan (FLOAT intermediates, else for f16
/// the io type's); "" or why cuDNN refused. bf16 intermediates are not
/// taken: they round x * scale to 8 bits before the bias is added, and on an
/// H200 (cuDNN 9.19, 2026-11-29) that put 11-80 outputs of ResNet-50's 3x3
/// convolutions 0.06-0.07 off the host's, outside bf16's tolerance, where
/// the fallback (one f32 fma, one rounding) stays inside it.
std::string buildSite(Context &ctx, const FusionCall &c,
                      NormConvFusionSite &site) {
#if MEMOPT_HAVE_CUDNN_FRONTEND
  auto start = std::chrono::steady_clock::now();
  std::string why = buildFusion(ctx, c, fe::DataType_t::FLOAT, site);
  const char *intermediate = "f32";
  if (!why.empty() && c.x.dtype == DType::F16) {
    std::string second = buildFusion(ctx, c, frontendType(c.x.dtype), site);
    if (second.empty()) {
      why.clear();
      intermediate = dtypeName(c.x.dtype);
    }
  }
  if (!why.empty())
    return why;
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  char text[192];
  std::snprintf(text, sizeof(text),
                "%s intermediates%s, plan built in %.1f ms, %zu of %zu "
                "workspace bytes",
                intermediate, c.convBias ? ", the conv's bias fused" : "", ms,
                site.cudnnWorkspaceBytes, c.workspaceBytes);
  site.plan = text;
  return "";
#else
  return "built without cudnn-frontend";
#endif
}

/// Runs the fusion's plan; false after an error.
bool runFusion(Context &ctx, const char *node, const FusionCall &c,
               NormConvFusionSite &site) {
#if MEMOPT_HAVE_CUDNN_FRONTEND
  std::unordered_map<int64_t, void *> pack = {{kX, c.x.data},
                                              {kScale, c.scale.data},
                                              {kBias, c.bias.data},
                                              {kOperand, c.operand.data},
                                              {kResult, c.result.data}};
  if (c.convBias)
    pack[kConvBias] = c.convBias->data;
  return executeFrontendPlan(ctx, node, c.fusionName(), *site.graph, pack,
                             c.workspace);
#else
  failf(ctx, node, "%s: built without cudnn-frontend", c.fusionName());
  return false;
#endif
}

std::string milliseconds(float ms) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.4f ms", double(ms));
  return text;
}

/// The first eager run of a call site: which engine runs it, and the
/// report's line. The measured choice times both engines (they write the
/// result; the caller's real run follows).
void chooseEngine(Context &ctx, const char *node, const FusionCall &c,
                  NormConvFusionSite &site) {
  site.chosen = true;
  ConvEngine engine = ConvEngine::Measured;
  if (!convEngineOf(ctx, node, engine))
    return;
  const char *forced = " (forced: MEMOPT_CONV_ENGINE or "
                       "ContextOptions::convEngine)";
  if (engine == ConvEngine::Memopt) {
    noteConvEngine(ctx, node, std::string("apply + conv") + forced);
    return;
  }
  std::string why = shapeRefusal(ctx, c);
  if (!why.empty())
    why = "apply + conv (" + why + ")";
  else if (std::string refused = buildSite(ctx, c, site); !refused.empty())
    why = "apply + conv (cuDNN refused: " + refused + ")";
  else if (site.cudnnWorkspaceBytes > c.workspaceBytes)
    why = "apply + conv (cuDNN's plan states " +
          std::to_string(site.cudnnWorkspaceBytes) +
          " workspace bytes, more than the " +
          std::to_string(c.workspaceBytes) + " planned)";
  if (!why.empty()) {
    site.graph.reset();
    noteConvEngine(ctx, node, why);
    return;
  }
  if (engine == ConvEngine::Cudnn) {
    site.fused = true;
    noteConvEngine(ctx, node,
                   std::string(c.fusionName()) + forced + "; " + site.plan);
    return;
  }
  TimingEvents events;
  if (!events.ok()) {
    site.fused = true;
    noteConvEngine(ctx, node,
                   std::string(c.fusionName()) +
                       " (the timing could not start); " + site.plan);
    return;
  }
  cudaEvent_t begin = events.begin, end = events.end;
  // The fallback first: its first call searches the convolution's
  // algorithms (in the timing's warm-up call).
  float fallbackMs = timeEngineCalls(ctx, begin, end,
                                     [&] { return runFallback(ctx, node, c); });
  float fusedMs = timeEngineCalls(
      ctx, begin, end, [&] { return runFusion(ctx, node, c, site); });
  site.fused = fusedMs >= 0 && (fallbackMs < 0 || fusedMs < fallbackMs);
  std::string fusion = c.fusionName();
  std::string text;
  if (fusedMs < 0)
    text = "apply + conv " + milliseconds(fallbackMs) + " (" + fusion +
           " failed to run)";
  else if (site.fused)
    text = fusion + " " + milliseconds(fusedMs) + " over apply + conv " +
           (fallbackMs < 0 ? std::string("(failed to run)")
                           : milliseconds(fallbackMs));
  else
    text = "apply + conv " + milliseconds(fallbackMs) + " over " + fusion +
           " " + milliseconds(fusedMs);
  noteConvEngine(ctx, node, text + "; " + site.plan);
  if (!site.fused)
    site.graph.reset();
}

void normReluConvCall(Context &ctx, const char *node, FusionCall &c) {
  if (hasError(ctx) || !validateCall(ctx, node, c))
    return;
  // Nothing to normalize (an empty batch) or nothing to compute: the
  // convolution alone says what the result is (a zero filter gradient).
  if (c.x.numElements() == 0 || c.result.numElements() == 0) {
    runConvolution(ctx, node, c, c.x, 0);
    return;
  }
  NormConvFusionState &state = stateOf(ctx);
  std::string key = c.key(node);
  auto found = state.sites.find(key);
  if (found == state.sites.end() || !found->second.chosen) {
    // Building and timing synchronize: never inside a capture (a program's
    // first run is eager and chooses at every call site).
    if (ctx.capturing) {
      noteConvEngine(ctx, node,
                     "apply + conv (first call inside a CUDA graph capture)");
      runFallback(ctx, node, c);
      return;
    }
    NormConvFusionSite &site = state.sites[key];
    chooseEngine(ctx, node, c, site);
    if (hasError(ctx))
      return;
    found = state.sites.find(key);
  }
  NormConvFusionSite &site = found->second;
  // The plan was built for 16-byte aligned operands; a later call whose
  // arena offsets differ (a different program) runs the fallback.
  if (site.fused && shapeRefusal(ctx, c).empty()) {
    runFusion(ctx, node, c, site);
    return;
  }
  runFallback(ctx, node, c);
}

} // namespace

void normReluConv(Context &ctx, const char *node, const ConvParams &params,
                  TensorRef x, TensorRef w, TensorRef scale, TensorRef bias,
                  const TensorRef *convBias, TensorRef y, void *workspace,
                  size_t workspaceBytes) {
  FusionCall c;
  c.params = &params;
  c.x = x;
  c.operand = w;
  c.scale = scale;
  c.bias = bias;
  c.convBias = convBias;
  c.result = y;
  c.workspace = workspace;
  c.workspaceBytes = workspaceBytes;
  normReluConvCall(ctx, node, c);
}

void normReluConvBackwardFilter(Context &ctx, const char *node,
                                const ConvParams &params, TensorRef x,
                                TensorRef dy, TensorRef scale, TensorRef bias,
                                TensorRef dw, void *workspace,
                                size_t workspaceBytes) {
  FusionCall c;
  c.backwardFilter = true;
  c.params = &params;
  c.x = x;
  c.operand = dy;
  c.scale = scale;
  c.bias = bias;
  c.result = dw;
  c.workspace = workspace;
  c.workspaceBytes = workspaceBytes;
  normReluConvCall(ctx, node, c);
}

void destroyNormConvFusion(Context &ctx) {
  delete ctx.normConvFusion;
  ctx.normConvFusion = nullptr;
}

} // namespace memopt::rt
