//===- Collectives.cpp - data-parallel collectives on the host backend ----===//
//
// The collective ops of a data-parallel program (Runtime.h, "Data
// parallel") over the context's communicator (Communicator.h; the
// in-process one when N ranks run as N threads). A tensor sharded over N
// ranks is N equal chunks and a tail every rank owns (memopt's
// MemOpt_ShardedUpdate): the chunks go through NCCL-shaped reduce-scatter and
// all-gather calls, the tail through a small all-reduce, so that a CUDA
// version maps each call onto one NCCL call. Without a communicator (a
// program compiled for one rank, run alone) a collective is a copy.
//
//===----------------------------------------------------------------------===//

#include "HostInternal.h"
#include "memopt/Runtime/Communicator.h"

#include <cmath>
#include <cstring>

namespace memopt::rt {

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
  float micro = 0;
  std::memcpy(&micro, accumulation->microStep.data, sizeof micro);
  if (!(micro >= 0 && micro < float(accumulation->steps) &&
        micro == std::floor(micro))) {
    failf(ctx, node, "micro_step %g is not an integer in [0, %lld)",
          double(micro), (long long)accumulation->steps);
    return false;
  }
  if (auto *sum = static_cast<float *>(accumulation->accumulator.data)) {
    const auto *g = static_cast<const float *>(source);
    bool first = micro == 0;
    host::parallelFor(ctx, 0, x.numElements(), host::kElementGrain,
                      [&](int64_t lo, int64_t hi) {
                        for (int64_t i = lo; i < hi; ++i)
                          sum[i] = first ? g[i] : sum[i] + g[i];
                      });
    source = sum;
  }
  return micro == float(accumulation->steps - 1);
}

} // namespace

// The host backend runs data-parallel ranks as threads of one process, each
// with the in-process communicator (RankGroup), and reads the micro-step
// from the weight region, which is host memory.
bool ranksAreProcesses() { return false; }

std::unique_ptr<Communicator>
createProcessCommunicator(const LaunchEnvironment &, std::string &error) {
  error = "the host backend runs data-parallel ranks as threads of one "
          "process (--ranks), not as processes";
  return nullptr;
}

void setMicroStep(Context &, int64_t) {}

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
    if (y.data != source)
      std::memmove(y.data, source, count * dtypeSize(x.dtype));
    return;
  }
  if (!comm->allReduce(source, y.data, count, x.dtype, reduction, nullptr))
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
  if (!ok || !gate(ctx, node, x, accumulation, source))
    return;
  size_t bytes = dtypeSize(x.dtype);
  auto *out = static_cast<uint8_t *>(y.data);
  const auto *in = static_cast<const uint8_t *>(source);
  if (!comm) { // one rank: its chunk is everything
    std::memmove(out, in, size_t(elements) * bytes);
    return;
  }
  if (chunk > 0 && !comm->reduceScatter(in, out, size_t(chunk), x.dtype,
                                        reduction, nullptr)) {
    failCollective(ctx, node, "reduce_scatter", *comm);
    return;
  }
  if (tail > 0 && !comm->allReduce(in + size_t(ranks * chunk) * bytes,
                                   out + size_t(chunk) * bytes, size_t(tail),
                                   x.dtype, reduction, nullptr))
    failCollective(ctx, node, "all_reduce (tail)", *comm);
}

void allGather(Context &ctx, const char *node, int64_t ranks, TensorRef param,
               const GradientAccumulation *accumulation) {
  if (hasError(ctx) || !validateAllGather(ctx, node, ranks, param))
    return;
  const void *source = nullptr;
  bool ok = false;
  Communicator *comm = collectiveCommunicator(ctx, node, ranks, ok);
  if (!ok || !gate(ctx, node, param, accumulation, source) || !comm)
    return;
  int64_t chunk = param.numElements() / ranks;
  auto *p = static_cast<float *>(param.data);
  if (chunk > 0 && !comm->allGather(p + int64_t(comm->rank()) * chunk, p,
                                    size_t(chunk), nullptr))
    failCollective(ctx, node, "all_gather", *comm);
}

// memopt-bucket-collectives: every collective completes where it is called
// (the in-process communicator blocks until all ranks have contributed), so
// a bucket is only its calls in order and the wait has nothing to wait for.
void beginCollectives(Context &ctx, int64_t) {
  if (Communicator *comm = contextCommunicator(ctx);
      comm && !hasError(ctx) && !comm->groupStart())
    failCollective(ctx, "beginCollectives", "group start", *comm);
}

void endCollectives(Context &ctx, int64_t) {
  if (Communicator *comm = contextCommunicator(ctx);
      comm && !hasError(ctx) && !comm->groupEnd())
    failCollective(ctx, "endCollectives", "group end", *comm);
}

void waitCollectives(Context &, const char *, int64_t) {}

// ZeRO-3: the rank's chunk and the tail into place in the whole buffer, then
// the chunks all-gathered in place (NCCL's in-place all-gather: the send
// buffer is the rank's chunk of the receive buffer). A low-precision whole
// (memopt-data-parallel gathers the f16 / bf16 copy when every reader casts
// it: FSDP's param_dtype) gets the shard cast into place, then gathers half
// the bytes. Without a communicator (one rank) the shard is the whole
// parameter.
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
  int64_t rank = comm ? comm->rank() : 0;
  size_t bytes = dtypeSize(whole.dtype);
  auto *w = static_cast<uint8_t *>(whole.data);
  const auto *s = static_cast<const float *>(shard.data);
  auto place = [&](int64_t to, int64_t from, int64_t count) {
    if (count <= 0)
      return;
    if (whole.dtype == DType::F32) {
      std::memmove(w + size_t(to) * bytes, s + from, size_t(count) * bytes);
      return;
    }
    cast(ctx, node,
         makeTensor(const_cast<float *>(s + from), DType::F32, 1, &count),
         makeTensor(w + size_t(to) * bytes, whole.dtype, 1, &count));
  };
  place(rank * chunk, 0, chunk);
  place(ranks * chunk, chunk, tail);
  if (comm && chunk > 0 && !hasError(ctx) &&
      !comm->allGather(w + size_t(rank * chunk) * bytes, w, size_t(chunk),
                       whole.dtype, nullptr))
    failCollective(ctx, node, "all_gather", *comm);
}

} // namespace memopt::rt
