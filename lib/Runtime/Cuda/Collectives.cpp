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
// freezes one micro-step's choice, so a context with a communicator keeps
// one graph per micro-step (CudaContext.cpp, execute).
//
// Overlap (memopt-bucket-collectives, docs/data-parallel.md "Overlap"):
// every collective runs on the context's communication stream, a
// high-priority stream as PyTorch's ProcessGroupNCCL uses, so that one
// stream drives the communicator (NCCL does not order one communicator's
// calls across streams). A bucket (beginCollectives .. endCollectives) waits
// for an event recorded on the compute stream when its last gradient is
// produced, runs as one NCCL group, and records its completion event, which
// the bucket's wait (waitCollectives) makes the compute stream wait for:
// DDP's bucket all-reduce on its NCCL stream, the optimizer waiting on the
// bucket's work. A collective outside a bucket (the loss scale's flag, an
// all-gather, the driver's) runs there too, the compute stream waiting for
// it at once. While a bucket is issued, `ctx.stream` is the communication
// stream, so the accumulation a gated collective queues runs there, in
// order with the NCCL calls.
//
//===----------------------------------------------------------------------===//

#include "CudaInternal.h"
#include "memopt/Runtime/Communicator.h"

#include <functional>
#include <mutex>
#include <unordered_map>
#include <vector>

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
  if (!validateCollectiveAccumulation(ctx, node, x, *accumulation))
    return false;
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

/// A context's communication stream (Context holds none: this table does,
/// so that the kernels' shared header stays as it is). `bucketDone[b]` is
/// recorded after bucket b, `collectiveDone` after a collective outside a
/// bucket; while a bucket is issued `ctx.stream` is `stream` and
/// `computeStream` holds the compute stream.
struct CommState {
  cudaStream_t stream = nullptr, computeStream = nullptr;
  cudaEvent_t ready = nullptr, collectiveDone = nullptr;
  std::vector<cudaEvent_t> bucketDone;
  int64_t openBucket = -1;
};

std::mutex commStatesMutex;
std::unordered_map<const Context *, CommState> commStates;

CommState &commState(Context &ctx) {
  std::lock_guard<std::mutex> lock(commStatesMutex);
  return commStates[&ctx]; // references stay valid across inserts
}

/// The communication stream and its events, created on first use.
bool ensureCommStream(Context &ctx, CommState &comm, const char *node) {
  if (comm.stream)
    return true;
  int least = 0, greatest = 0;
  return checkCuda(ctx, node,
                   cudaDeviceGetStreamPriorityRange(&least, &greatest),
                   "cudaDeviceGetStreamPriorityRange") &&
         checkCuda(ctx, node,
                   cudaStreamCreateWithPriority(
                       &comm.stream, cudaStreamNonBlocking, greatest),
                   "cudaStreamCreateWithPriority") &&
         checkCuda(
             ctx, node,
             cudaEventCreateWithFlags(&comm.ready, cudaEventDisableTiming),
             "cudaEventCreate") &&
         checkCuda(ctx, node,
                   cudaEventCreateWithFlags(&comm.collectiveDone,
                                            cudaEventDisableTiming),
                   "cudaEventCreate");
}

/// Issues what follows on the communication stream, after the compute
/// stream's work so far.
bool enterCommStream(Context &ctx, CommState &comm, const char *node) {
  if (!ensureCommStream(ctx, comm, node) ||
      !checkCuda(ctx, node, cudaEventRecord(comm.ready, ctx.stream),
                 "cudaEventRecord") ||
      !checkCuda(ctx, node, cudaStreamWaitEvent(comm.stream, comm.ready),
                 "cudaStreamWaitEvent"))
    return false;
  comm.computeStream = ctx.stream;
  ctx.stream = comm.stream;
  return true;
}

/// Back to the compute stream; records `done` after the communication
/// stream's work so far. Restores the stream even after an error.
bool leaveCommStream(Context &ctx, CommState &comm, const char *node,
                     cudaEvent_t done) {
  if (!comm.computeStream)
    return false;
  ctx.stream = comm.computeStream;
  comm.computeStream = nullptr;
  return !hasError(ctx) &&
         checkCuda(ctx, node, cudaEventRecord(done, comm.stream),
                   "cudaEventRecord");
}

/// A collective outside a bucket: on the communication stream, the compute
/// stream waiting for it right after (the order of a synchronous call).
class OnCommStream {
public:
  OnCommStream(Context &ctx, const char *node)
      : ctx(ctx), comm(commState(ctx)), node(node) {
    active = comm.openBucket < 0 && contextCommunicator(ctx) &&
             !hasError(ctx) && enterCommStream(ctx, comm, node);
  }
  ~OnCommStream() {
    if (active && leaveCommStream(ctx, comm, node, comm.collectiveDone))
      checkCuda(ctx, node, cudaStreamWaitEvent(ctx.stream, comm.collectiveDone),
                "cudaStreamWaitEvent");
  }
  OnCommStream(const OnCommStream &) = delete;
  OnCommStream &operator=(const OnCommStream &) = delete;

private:
  Context &ctx;
  CommState &comm;
  const char *node;
  bool active = false;
};

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
  OnCommStream onCommStream(ctx, node);
  if (!gate(ctx, node, x, accumulation, source))
    return;
  size_t count = size_t(x.numElements());
  if (!comm) {
    copyBytes(ctx, node, y.data, source, count * dtypeSize(x.dtype));
    return;
  }
  comm->label(node);
  if (!comm->allReduce(source, y.data, count, x.dtype, reduction, ctx.stream))
    failCollective(ctx, node, "all_reduce", *comm);
}

void reduceScatter(Context &ctx, const char *node,
                   CollectiveReduction reduction, int64_t ranks, TensorRef x,
                   TensorRef y, const GradientAccumulation *accumulation) {
  if (hasError(ctx) || !validateReduceScatter(ctx, node, ranks, x, y))
    return;
  int64_t elements = x.numElements();
  int64_t chunk = elements / ranks, tail = elements % ranks;
  const void *source = nullptr;
  bool ok = false;
  Communicator *comm = collectiveCommunicator(ctx, node, ranks, ok);
  OnCommStream onCommStream(ctx, node);
  if (!ok || !gate(ctx, node, x, accumulation, source))
    return;
  size_t bytes = dtypeSize(x.dtype);
  auto *out = static_cast<uint8_t *>(y.data);
  const auto *in = static_cast<const uint8_t *>(source);
  if (!comm) { // one rank: its chunk is everything
    copyBytes(ctx, node, out, in, size_t(elements) * bytes);
    return;
  }
  comm->label(node);
  if (chunk > 0 && !comm->reduceScatter(in, out, size_t(chunk), x.dtype,
                                        reduction, ctx.stream)) {
    failCollective(ctx, node, "reduce_scatter", *comm);
    return;
  }
  comm->label(node);
  if (tail > 0 && !comm->allReduce(in + size_t(ranks * chunk) * bytes,
                                   out + size_t(chunk) * bytes, size_t(tail),
                                   x.dtype, reduction, ctx.stream))
    failCollective(ctx, node, "all_reduce (tail)", *comm);
}

void allGather(Context &ctx, const char *node, int64_t ranks, TensorRef param,
               const GradientAccumulation *accumulation) {
  if (hasError(ctx) || !validateAllGather(ctx, node, ranks, param))
    return;
  const void *source = nullptr;
  bool ok = false;
  Communicator *comm = collectiveCommunicator(ctx, node, ranks, ok);
  OnCommStream onCommStream(ctx, node);
  if (!ok || !gate(ctx, node, param, accumulation, source) || !comm)
    return;
  int64_t chunk = param.numElements() / ranks;
  auto *p = static_cast<float *>(param.data);
  comm->label(node);
  if (chunk > 0 && !comm->allGather(p + int64_t(comm->rank()) * chunk, p,
                                    size_t(chunk), ctx.stream))
    failCollective(ctx, node, "all_gather", *comm);
}

void beginCollectives(Context &ctx, int64_t bucket) {
  const char *node = "beginCollectives";
  if (hasError(ctx))
    return;
  CommState &state = commState(ctx);
  if (bucket < 0 || state.openBucket >= 0) {
    failf(ctx, node, "bucket %lld begins while bucket %lld is open",
          (long long)bucket, (long long)state.openBucket);
    return;
  }
  state.openBucket = bucket;
  // Without a communicator the collectives are copies on the compute
  // stream (and the step may be a CUDA graph): nothing to overlap.
  Communicator *comm = contextCommunicator(ctx);
  if (!comm || !enterCommStream(ctx, state, node))
    return;
  if (!comm->groupStart())
    failCollective(ctx, node, "ncclGroupStart", *comm);
}

void endCollectives(Context &ctx, int64_t bucket) {
  const char *node = "endCollectives";
  CommState &state = commState(ctx);
  bool open = state.openBucket == bucket;
  state.openBucket = -1;
  Communicator *comm = contextCommunicator(ctx);
  if (!comm || !state.computeStream) {
    if (!open && !hasError(ctx))
      failf(ctx, node, "bucket %lld ends but was not begun", (long long)bucket);
    return;
  }
  // The group is closed and the stream restored whatever happened since
  // the bucket began.
  bool grouped = comm->groupEnd();
  if (size_t(bucket) >= state.bucketDone.size())
    state.bucketDone.resize(size_t(bucket) + 1, nullptr);
  cudaEvent_t &done = state.bucketDone[size_t(bucket)];
  cudaError_t created = cudaSuccess;
  if (!done)
    created = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  if (!grouped && !hasError(ctx))
    failCollective(ctx, node, "ncclGroupEnd", *comm);
  if (created != cudaSuccess)
    checkCuda(ctx, node, created, "cudaEventCreate");
  leaveCommStream(ctx, state, node, done);
}

void waitCollectives(Context &ctx, const char *node, int64_t bucket) {
  if (hasError(ctx) || !contextCommunicator(ctx))
    return;
  CommState &state = commState(ctx);
  if (bucket < 0 || size_t(bucket) >= state.bucketDone.size() ||
      !state.bucketDone[size_t(bucket)]) {
    failf(ctx, node, "waits for bucket %lld, which was never issued",
          (long long)bucket);
    return;
  }
  checkCuda(ctx, node,
            cudaStreamWaitEvent(ctx.stream, state.bucketDone[size_t(bucket)]),
            "cudaStreamWaitEvent");
}

/// Called by destroyContext (CudaContext.cpp): frees the context's
/// communication stream and events.
void destroyCollectives(Context &ctx) {
  CommState state;
  {
    std::lock_guard<std::mutex> lock(commStatesMutex);
    auto it = commStates.find(&ctx);
    if (it == commStates.end())
      return;
    state = it->second;
    commStates.erase(it);
  }
  if (state.stream)
    cudaStreamSynchronize(state.stream);
  for (cudaEvent_t event : state.bucketDone)
    if (event)
      cudaEventDestroy(event);
  if (state.ready)
    cudaEventDestroy(state.ready);
  if (state.collectiveDone)
    cudaEventDestroy(state.collectiveDone);
  if (state.stream)
    cudaStreamDestroy(state.stream);
}

/// A peer's failure noticed inside the process: the host's waits on a
/// data-parallel step (the loss read, the driver's all-reduces, the
/// checkpoints' gathers: every synchronize, and the --bench timer) run under
/// the communicator's watchdog, which aborts the communicator when the wait
/// outlasts MEMOPT_NCCL_TIMEOUT_S or NCCL reports an asynchronous error
/// (PyTorch's ProcessGroupNCCL watchdog; NcclCommunicator.cpp). The abort
/// releases the NCCL kernels the stream is stuck behind, so the wait returns
/// and the step fails with the watchdog's message instead of hanging.
bool watchedWait(Context &ctx, const char *node,
                 const std::function<cudaError_t()> &wait, const char *call) {
  cudaError_t status = cudaSuccess;
  Communicator *comm = ctx.options.communicator;
  if (!comm) {
    status = wait();
  } else if (!comm->watchWait([&] { status = wait(); })) {
    contextFail(ctx, node, comm->error().c_str());
    return false;
  }
  return checkCuda(ctx, node, status, call);
}

// ZeRO-3: the rank's chunk and the tail into place in the whole buffer, then
// the chunks all-gathered in place (NCCL's in-place all-gather: the send
// buffer is the rank's chunk of the receive buffer). A low-precision whole
// (memopt-data-parallel gathers the f16 / bf16 copy when every reader casts
// it: FSDP's param_dtype) gets the shard cast into place, then gathers half
// the bytes. Without a communicator (one rank) the shard is the whole
// parameter.
// Inside a gather group (beginCollectives .. endCollectives) ctx.stream is
// the communication stream, so the placing copies run there, in order with
// the all-gather, while the compute stream goes on (the prefetch); outside
// one the gather runs on the communication stream and the compute stream
// waits for it at once.
void gatherParameter(Context &ctx, const char *node, int64_t ranks,
                     TensorRef shard, TensorRef whole) {
  if (hasError(ctx) || !validateGatherParameter(ctx, node, ranks, shard, whole))
    return;
  int64_t elements = whole.numElements();
  int64_t chunk = elements / ranks, tail = elements % ranks;
  bool ok = false;
  Communicator *comm = collectiveCommunicator(ctx, node, ranks, ok);
  if (!ok)
    return;
  OnCommStream onCommStream(ctx, node);
  int64_t rank = comm ? comm->rank() : 0;
  size_t bytes = dtypeSize(whole.dtype);
  auto *w = static_cast<uint8_t *>(whole.data);
  const auto *s = static_cast<const float *>(shard.data);
  auto place = [&](int64_t to, int64_t from, int64_t count) {
    if (count <= 0)
      return;
    if (whole.dtype == DType::F32) {
      copyBytes(ctx, node, w + size_t(to) * bytes, s + from,
                size_t(count) * bytes);
      return;
    }
    cast(ctx, node,
         makeTensor(const_cast<float *>(s + from), DType::F32, 1, &count),
         makeTensor(w + size_t(to) * bytes, whole.dtype, 1, &count));
  };
  place(rank * chunk, 0, chunk);
  place(ranks * chunk, chunk, tail);
  if (comm)
    comm->label(node);
  if (comm && chunk > 0 && !hasError(ctx) &&
      !comm->allGather(w + size_t(rank * chunk) * bytes, w, size_t(chunk),
                       whole.dtype, ctx.stream))
    failCollective(ctx, node, "all_gather", *comm);
}

} // namespace memopt::rt
