//===- CudnnConvFusion.cpp - normalized convolutions (fallback) -----------===//
//
// TEMPORARY (branch nrchost): normReluConv and normReluConvBackwardFilter
// with the fallback only, so that the CUDA backend links before helper
// nrccudnn's file of the same name (cuDNN's fused scale-bias-relu
// convolution graphs, with this fallback where cuDNN refuses) replaces it.
// The prologue r = max(fmaf(x, scale, bias), 0) goes to the workspace's head
// (launchNormReluApply, NormConvKernels.cu), then the plain cuDNN conv /
// convBackwardFilter runs on r with the rest of the workspace.
//
//===----------------------------------------------------------------------===//

#include "NormConv.h"
#include "memopt/Runtime/Workspace.h"

namespace memopt::rt {

namespace {

/// r at the workspace's head (x's dtype and shape); the rest after it.
TensorRef normalizedInput(Context &ctx, const char *node,
                          const ConvParams &params, const TensorRef &x,
                          const TensorRef &scale, const TensorRef &bias,
                          void *workspace, size_t workspaceBytes, void *&rest,
                          size_t &restBytes) {
  TensorRef r = x;
  r.data = workspace;
  launchNormReluApply(ctx, node, x, scale, bias, r, params.channelsLast);
  size_t head = size_t(workspace::normReluConvTempBytes(int64_t(x.bytes())));
  rest =
      workspaceBytes > head ? static_cast<char *>(workspace) + head : nullptr;
  restBytes = workspaceBytes > head ? workspaceBytes - head : 0;
  return r;
}

} // namespace

void normReluConv(Context &ctx, const char *node, const ConvParams &params,
                  TensorRef x, TensorRef w, TensorRef scale, TensorRef bias,
                  const TensorRef *convBias, TensorRef y, void *workspace,
                  size_t workspaceBytes) {
  ConvGeometry g;
  if (hasError(ctx) ||
      !validateNormReluConv(ctx, node, params, false, x, w, scale, bias, y,
                            workspace, workspaceBytes, g))
    return;
  void *rest = nullptr;
  size_t restBytes = 0;
  TensorRef r = normalizedInput(ctx, node, params, x, scale, bias, workspace,
                                workspaceBytes, rest, restBytes);
  conv(ctx, node, params, r, w, convBias, y, rest, restBytes);
}

void normReluConvBackwardFilter(Context &ctx, const char *node,
                                const ConvParams &params, TensorRef x,
                                TensorRef dy, TensorRef scale, TensorRef bias,
                                TensorRef dw, void *workspace,
                                size_t workspaceBytes) {
  ConvGeometry g;
  if (hasError(ctx) ||
      !validateNormReluConv(ctx, node, params, true, x, dy, scale, bias, dw,
                            workspace, workspaceBytes, g))
    return;
  void *rest = nullptr;
  size_t restBytes = 0;
  TensorRef r = normalizedInput(ctx, node, params, x, scale, bias, workspace,
                                workspaceBytes, rest, restBytes);
  convBackwardFilter(ctx, node, params, r, dy, dw, rest, restBytes);
}

} // namespace memopt::rt
