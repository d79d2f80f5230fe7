//===- HostBackend.cpp - the CPU reference backend: context, memory ------===//
//
// Straightforward loops, correct above all: this backend is the reference the
// CUDA backend is compared against and the way CI catches aliasing mistakes of
// the memory planner without a GPU. Float math converts every element to float
// (f16/bf16 included) and accumulates in double; results are rounded once on
// store. Inputs are converted before any output is written, so an op may run
// in place (y aliasing x) wherever the compiler allows it.
//
// Semantics follow the ONNX operator specification; the structure (one loop
// nest per op, index decomposition for broadcasting) follows TFLite's
// reference kernels.
//
// Parallel strategy. Realistic batches (ResNet-50 at 32 images, BERT at
// 8 x 512 tokens) must finish in seconds, so the heavy ops run on a thread
// pool owned by the context (MEMOPT_HOST_THREADS threads, else one per
// hardware thread; started by the first op large enough to split). Work is
// split into items fixed by the shapes alone (matmul: blocks of rows x
// columns; conv: blocks of output channels x positions of one image and
// group; attention: a block of query rows of one head; row-wise ops: rows),
// and every output element is computed by exactly one thread, in the order
// the naive loop uses: results are bit-identical whatever the thread count,
// and to the naive loops (convs: unless a weight is inf or NaN, see
// convGemm). Products keep double accumulation in that order
// (over k; for convs over input channel, then kernel position) and go
// through one 4 x 4 register tile over packed panels (GotoBLAS / BLIS
// structure): matmul, conv as an implicit GEMM (im2col panels built on the
// fly), and both products of attention.
//
// Files. This file holds the context (memory, copies, timers, per-op
// instrumentation) and the out-of-line helpers of HostInternal.h; the ops
// live in one file per family, named after the CUDA backend's
// (docs/runtime.md, "Host and CUDA files"): Elementwise.cpp, Gemm.cpp (+
// Gemm.h, the register tile), Convolution.cpp, Normalization.cpp,
// Attention.cpp, AttentionBackward.cpp, Reductions.cpp, DataMovement.cpp,
// TrainingKernels.cpp, Collectives.cpp, Offload.cpp; ThreadPool.cpp runs the
// chunks, HostKernels.h holds what the family files share.
//
//===----------------------------------------------------------------------===//

#include "../HostAdam.h"
#include "HostKernels.h"
#include "memopt/Runtime/Runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace memopt::rt {

std::vector<uint8_t> &host::hostPoolOf(Context &ctx) { return ctx.hostPool; }

OffloadEngine &offloadEngine(Context &ctx) {
  if (!ctx.offload)
    ctx.offload = new OffloadEngine();
  return *ctx.offload;
}

Context *createContext(const ContextOptions &options) {
  auto *ctx = new Context();
  ctx->threads =
      options.hostThreads > 0 ? options.hostThreads : hostThreadCount();
  ctx->options = options;
  return ctx;
}
void destroyContext(Context *ctx) {
  if (ctx)
    destroyOffloadEngine(ctx->offload);
  delete ctx;
}
const char *contextError(Context &ctx) {
  return ctx.error.empty() ? nullptr : ctx.error.c_str();
}
void contextFail(Context &ctx, const char *nodeName, const char *message) {
  if (ctx.error.empty())
    ctx.error =
        std::string("node '") + (nodeName ? nodeName : "?") + "': " + message;
}
const char *backendName() { return "host"; }
Communicator *contextCommunicator(Context &ctx) {
  return ctx.options.communicator;
}

void *deviceAlloc(Context &ctx, size_t bytes, const char *what) {
  size_t rounded = std::max<size_t>((bytes + 255) / 256 * 256, 256);
  void *ptr = std::aligned_alloc(256, rounded);
  if (!ptr)
    failf(ctx, what, "cannot allocate %zu bytes", bytes);
  return ptr;
}
void deviceFree(Context &, void *ptr) { std::free(ptr); }
void copyToDevice(Context &, void *dst, const void *src, size_t bytes) {
  if (bytes)
    std::memmove(dst, src, bytes);
}
void copyToHost(Context &, void *dst, const void *src, size_t bytes) {
  if (bytes)
    std::memmove(dst, src, bytes);
}
void copyAnywhere(Context &, void *dst, const void *src, size_t bytes) {
  if (bytes)
    std::memmove(dst, src, bytes);
}
bool pinHostMemory(Context &, void *, size_t) { return true; }
void unpinHostMemory(Context &, void *) {}
void synchronize(Context &) {}
void waitForStream(Context &, void *) {}
void signalStream(Context &, void *) {}
void execute(Context &ctx, void (*body)(Context &, void *), void *user) {
  ctx.lastOpEnd = std::chrono::steady_clock::now();
  body(ctx, user);
  if (ctx.options.profile && ctx.runs > 0)
    ctx.opTimes.runs += 1;
  ++ctx.runs;
}
void opDone(Context &ctx, int index, const char *node, const char *kind,
            const TensorRef *results, int numResults) {
  if (hasError(ctx))
    return;
  if (ctx.options.dumpDirectory && *ctx.options.dumpDirectory && ctx.runs == 0)
    dumpOpResults(ctx, ctx.options.dumpDirectory, index, node, kind, results,
                  numResults);
  if (!ctx.options.profile)
    return;
  auto now = std::chrono::steady_clock::now();
  if (ctx.runs > 0)
    ctx.opTimes.add(
        index, node, kind,
        std::chrono::duration<double, std::milli>(now - ctx.lastOpEnd).count());
  ctx.lastOpEnd = std::chrono::steady_clock::now();
}
void printProfile(Context &ctx, FILE *out, int top) {
  printOpTimes(ctx.opTimes, out, top, "host");
}
// One engine (the reference loops): nothing to report.
const char *attentionEngineReport(Context &) { return ""; }
const char *convolutionEngineReport(Context &) { return ""; }
void writeProfileTimes(Context &ctx, FILE *out, int64_t microBatch) {
  // --offload optimizer measures its updates (the fit's host rate).
  OpTimes times = ctx.opTimes;
  appendHostUpdateTime(ctx.offload, times);
  if (microBatch > 0)
    times.values.push_back({"<micro-batch>", double(microBatch)});
  writeOpTimes(times, out);
}
void timerStart(Context &ctx) {
  ctx.timerStart = std::chrono::steady_clock::now();
}
double timerStopMs(Context &ctx) {
  std::chrono::duration<double, std::milli> elapsed =
      std::chrono::steady_clock::now() - ctx.timerStart;
  return elapsed.count();
}
MemoryInfo memoryInfo(Context &) { return MemoryInfo(); }

//===----------------------------------------------------------------------===//
// For the other host files (HostInternal.h)
//===----------------------------------------------------------------------===//

namespace host {

void parallelFor(Context &ctx, int64_t begin, int64_t end, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &fn) {
  rt::parallelFor(ctx, begin, end, grain, fn);
}
int64_t grainFor(int64_t workPerItem) { return rt::grainFor(workPerItem); }
std::vector<double> toDouble(Context &ctx, const TensorRef &t) {
  return rt::toDouble(ctx, t);
}
void store(Context &ctx, const std::vector<double> &values,
           const TensorRef &t) {
  rt::store(ctx, values, t);
}
void poisonWorkspace(void *workspace, size_t bytes) {
  rt::poisonWorkspace(workspace, bytes);
}

} // namespace host

} // namespace memopt::rt
