//===- Collectives.cpp - data-parallel collectives on the CUDA backend ----===//
//
// Not yet: the CUDA backend has no NCCL communicator (docs/data-parallel.md,
// "What is left"). A data-parallel program links against these and fails
// with one clear message at its first collective. The NCCL communicator
// will implement Communicator (include/memopt/Runtime/Communicator.h) on the
// context's stream, and these functions will call it as the host backend's
// do (lib/Runtime/Host/Collectives.cpp), with the micro-step gate read on
// the host from a value the driver mirrors (a captured graph would keep one
// graph per gate value).
//
//===----------------------------------------------------------------------===//

#include "../Internal.h"

namespace memopt::rt {

namespace {

void notYet(Context &ctx, const char *node) {
  if (hasError(ctx))
    return;
  failf(ctx, node,
        "data-parallel collectives need an NCCL communicator, which the CUDA "
        "backend does not have yet (docs/data-parallel.md); compile for "
        "--target host");
}

} // namespace

void allReduce(Context &ctx, const char *node, CollectiveReduction, TensorRef,
               TensorRef, const GradientAccumulation *) {
  notYet(ctx, node);
}

void reduceScatter(Context &ctx, const char *node, CollectiveReduction, int64_t,
                   TensorRef, TensorRef, const GradientAccumulation *) {
  notYet(ctx, node);
}

void allGather(Context &ctx, const char *node, int64_t, TensorRef,
               const GradientAccumulation *) {
  notYet(ctx, node);
}

} // namespace memopt::rt
