//===- NormConv.h - the fused normalized convolutions' CUDA helper -*- C++ -*-//
//
// Shared by NormConvKernels.cu (which defines it) and CudnnConvFusion.cpp
// (normReluConv / normReluConvBackwardFilter's fallback): the batch-norm ->
// ReLU prologue materialized as a tensor.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_RUNTIME_CUDA_NORMCONV_H
#define MEMOPT_LIB_RUNTIME_CUDA_NORMCONV_H

#include "CudaInternal.h"

namespace memopt::rt {
/// r = max(fmaf(x, scale[c], bias[c]), 0) in x's dtype, channels-last or
/// channels-first (x and r [N, C, ...] or [N, ..., C]); r may be x. Launch
/// errors go to ctx naming `node`.
void launchNormReluApply(Context &ctx, const char *node, const TensorRef &x,
                         const TensorRef &scale, const TensorRef &bias,
                         const TensorRef &r, bool channelsLast);
} // namespace memopt::rt

#endif // MEMOPT_LIB_RUNTIME_CUDA_NORMCONV_H
