//===- Collectives.cpp - data-parallel collectives on the CUDA backend ----===//
//
// The collective ops of a data-parallel program (Runtime.h, "Data
// parallel") over the context's communicator, NCCL on the CUDA backend
// (lib/Runtime/NcclCommunicator.cpp), every call enqueued on the context's
// stream. The same calls as the host backend's (lib/Runtime/Host/
// Collectives.cpp): a sharded tensor's equal chunks through one
// reduce-scatter / all-gather, its tail (fewer elements than ranks) through
// a small all-reduce; without a communicator (a one-rank program run
// alone) a collective is a copy.
//
// Gradient accumulation: the accumulator sums the gradient on every
// micro-step (a device copy on micro-step 0, an add on the others, queued on
// the stream); the collective runs on micro-step K - 1 only. The host
// backend reads the micro-step from its weight; here the host must know it
// before it enqueues (or not) an NCCL call, so the driver mirrors the value
// it writes into the MicroStep weight with setMicroStep. PyTorch DDP's
// no_sync() makes the same decision on the host. A captured CUDA graph
// would freeze one micro-step's choice: a context with a communicator runs
// every step eagerly (CudaContext.cpp, execute) instead of keeping one graph
// per gate value.
//
//===----------------------------------------------------------------------===//

#include "CudaInternal.h"
#include "memopt/Runtime/Communicator.h"

namespace memopt::rt {

bool ranksAreProcesses() { return true; }

std::unique_ptr<Communicator>
createProcessCommunicator(const LaunchEnvironment &env, std::string &error) {
  std::string prefix = "rank " + std::to_string(env.rank) + ": ";
  int devices = 0;
  cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess) {
    error = prefix + "cudaGetDeviceCount failed: " + cudaGetErrorString(status);
    return nullptr;
  }
  if (env.localRank >= devices) {
    error = prefix + "LOCAL_RANK=" + std::to_string(env.localRank) +
            " but this machine has " + std::to_string(devices) +
            " CUDA device(s)";
    return nullptr;
  }
  // ncclCommInitRank binds the communicator to the current device; the
  // context created next selects the same one (ContextOptions::device).
  float *scratch = nullptr;
  if ((status = cudaSetDevice(env.localRank)) != cudaSuccess ||
      (status = cudaMalloc(&scratch, sizeof(float))) != cudaSuccess) {
    error = prefix + "cannot use CUDA device " + std::to_string(env.localRank) +
            ": " + cudaGetErrorString(status);
    return nullptr;
  }
  return createNcclCommunicator(
      env, scratch, [scratch] { cudaFree(scratch); }, error);
}

void setMicroStep(Context &ctx, int64_t microStep) {
  ctx.microStep = microStep;
}

namespace {

/// The micro-step gate and the accumulation of a collective: sums x into
/// the accumulator (when there is one) and says whether the collective
/// runs now; `source` then points to the values it reduces.
bool gate(Context &ctx, const char *node, const TensorRef &x,
          const GradientAccumulation *accumulation, const void *&source) {
  source = x.data;
  if (!accumulation)
    return true;
  if (!validateAccumulation(ctx, node, x, *accumulation))
    return false;
  if (accumulation->accumulator.data && x.dtype != DType::F32) {
    failf(ctx, node,
          "an f32 accumulator sums f32 gradients, got %s (reduce the "
          "accumulated gradients in f32)",
          dtypeName(x.dtype));
    return false;
  }
  int64_t micro = ctx.microStep;
  if (micro < 0 || micro >= accumulation->steps) {
    failf(ctx, node,
          "the host does not know the micro-step of this run (%lld; the "
          "driver sets it with setMicroStep before each of the %lld "
          "micro-batches)",
          (long long)micro, (long long)accumulation->steps);
    return false;
  }
  if (accumulation->accumulator.data) {
    TensorRef sum = accumulation->accumulator;
    if (micro == 0)
      copy(ctx, node, x, sum);
    else
      binary(ctx, node, BinaryOp::Add, sum, x, sum);
    if (hasError(ctx))
      return false;
    source = sum.data;
  }
  return micro == accumulation->steps - 1;
}

void copyBytes(Context &ctx, const char *node, void *to, const void *from,
               size_t bytes) {
  if (to != from && bytes)
    checkCuda(
        ctx, node,
        cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, ctx.stream),
        "cudaMemcpyAsync");
}

} // namespace

void allReduce(Context &ctx, const char *node, CollectiveReduction reduction,
               TensorRef x, TensorRef y,
               const GradientAccumulation *accumulation) {
  const void *source = nullptr;
  bool ok = false;
  if (hasError(ctx) || !validateCollective(ctx, node, x, y, x.numElements()))
    return;
  Communicator *comm = collectiveCommunicator(ctx, node, 0, ok);
  if (!gate(ctx, node, x, accumulation, source))
    return;
  size_t count = size_t(x.numElements());
  if (!comm) {
    copyBytes(ctx, node, y.data, source, count * dtypeSize(x.dtype));
    return;
  }
  if (!comm->allReduce(source, y.data, count, x.dtype, reduction, ctx.stream))
    failCollective(ctx, node, "all_reduce", *comm);
}

void reduceScatter(Context &ctx, const char *node,
                   CollectiveReduction reduction, int64_t ranks, TensorRef x,
                   TensorRef y, const GradientAccumulation *accumulation) {
  if (hasError(ctx))
    return;
  if (ranks < 1) {
    failf(ctx, node, "reduce_scatter over %lld ranks", (long long)ranks);
    return;
  }
  int64_t elements = x.numElements();
  int64_t chunk = elements / ranks, tail = elements % ranks;
  const void *source = nullptr;
  bool ok = false;
  if (!validateCollective(ctx, node, x, y, chunk + tail))
    return;
  Communicator *comm = collectiveCommunicator(ctx, node, ranks, ok);
  if (!ok || !gate(ctx, node, x, accumulation, source))
    return;
  size_t bytes = dtypeSize(x.dtype);
  auto *out = static_cast<uint8_t *>(y.data);
  const auto *in = static_cast<const uint8_t *>(source);
  if (!comm) { // one rank: its chunk is everything
    copyBytes(ctx, node, out, in, size_t(elements) * bytes);
    return;
  }
  if (chunk > 0 && !comm->reduceScatter(in, out, size_t(chunk), x.dtype,
                                        reduction, ctx.stream)) {
    failCollective(ctx, node, "reduce_scatter", *comm);
    return;
  }
  if (tail > 0 && !comm->allReduce(in + size_t(ranks * chunk) * bytes,
                                   out + size_t(chunk) * bytes, size_t(tail),
                                   x.dtype, reduction, ctx.stream))
    failCollective(ctx, node, "all_reduce (tail)", *comm);
}

void allGather(Context &ctx, const char *node, int64_t ranks, TensorRef param,
               const GradientAccumulation *accumulation) {
  if (hasError(ctx))
    return;
  if (ranks < 1) {
    failf(ctx, node, "all_gather over %lld ranks", (long long)ranks);
    return;
  }
  const void *source = nullptr;
  bool ok = false;
  if (!validateCollective(ctx, node, param, param, param.numElements()))
    return;
  Communicator *comm = collectiveCommunicator(ctx, node, ranks, ok);
  if (!ok || !gate(ctx, node, param, accumulation, source) || !comm)
    return;
  int64_t chunk = param.numElements() / ranks;
  auto *p = static_cast<float *>(param.data);
  if (chunk > 0 && !comm->allGather(p + int64_t(comm->rank()) * chunk, p,
                                    size_t(chunk), ctx.stream))
    failCollective(ctx, node, "all_gather", *comm);
}

} // namespace memopt::rt
