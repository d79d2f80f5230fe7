//===- HostInternal.h - shared by the host backend's files ------*- C++ -*-===//
//
// The host backend's context, thread pool (ThreadPool.cpp) and double
// conversions (HostKernels.h; these host:: forms in HostBackend.cpp) for the
// other host files, so every host kernel splits its work the same way: items
// fixed by the shapes, each output element owned by one item, results
// independent of the thread count. The op-family files (Elementwise.cpp,
// Gemm.cpp, Convolution.cpp, ...) use the inline forms of HostKernels.h; the
// training and collective files call the out-of-line ones below.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_RUNTIME_HOST_HOSTINTERNAL_H
#define MEMOPT_LIB_RUNTIME_HOST_HOSTINTERNAL_H

#include "../Internal.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace memopt::rt {

class OffloadEngine;

/// True on a pool worker (and on the caller while it runs chunks): a
/// parallelFor issued from inside one runs serially instead of deadlocking.
inline thread_local bool insideParallelFor = false;

/// Workers that run the chunks of one parallelFor at a time; the calling
/// thread takes chunks too. Chunks are claimed from an atomic counter, so
/// which thread runs a chunk varies, but chunks never share output elements.
/// (ThreadPool.cpp)
class ThreadPool {
public:
  explicit ThreadPool(int workers);
  ~ThreadPool();

  /// Calls task(i) for every i in [0, count) and returns when all are done.
  void run(int64_t count, const std::function<void(int64_t)> &task);

private:
  void drain(const std::function<void(int64_t)> &task, int64_t count);
  void workerLoop();

  std::vector<std::thread> threads;
  std::mutex mutex;
  std::condition_variable wake, done;
  const std::function<void(int64_t)> *current = nullptr;
  int64_t chunks = 0;
  std::atomic<int64_t> next{0};
  int active = 0;
  uint64_t generation = 0;
  bool stopping = false;
};

/// MEMOPT_HOST_THREADS when it is a positive number, else one thread per
/// hardware thread (ThreadPool.cpp).
int hostThreadCount();

/// The host context (createContext in HostBackend.cpp).
struct Context {
  std::string error;
  std::chrono::steady_clock::time_point timerStart;
  /// The planned workspace of the next matmul (setMatmulWorkspace).
  void *matmulWorkspace = nullptr;
  size_t matmulWorkspaceBytes = 0;
  /// Threads an op may use (hostThreadCount() at creation).
  int threads = 1;
  /// threads - 1 workers, started by the first op large enough to split.
  std::unique_ptr<ThreadPool> pool;
  /// matmul's packed B, kept between calls: a fresh allocation of this size
  /// (hundreds of MiB for an LM head) costs more in page faults than the
  /// packing itself.
  std::vector<double> packedB;
  ContextOptions options;
  // Per-op instrumentation (opDone): when the last op (or the run) ended,
  // the runs so far, and the times gathered.
  std::chrono::steady_clock::time_point lastOpEnd;
  int64_t runs = 0;
  OpTimes opTimes;
  /// Activation offload's host pool (Host/Offload.cpp).
  std::vector<uint8_t> hostPool;
  /// --offload optimizer's CPU updates (HostAdam.h), made on first use.
  OffloadEngine *offload = nullptr;
};

namespace host {

/// Calls fn(lo, hi) on chunks of at least `grain` items covering [begin,
/// end) on the context's threads (HostKernels.h's parallelFor).
void parallelFor(Context &ctx, int64_t begin, int64_t end, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &fn);
/// Items per chunk so that a chunk does at least the minimum useful work
/// (about 2^17 multiply-adds); `workPerItem` in multiply-adds.
int64_t grainFor(int64_t workPerItem);
/// Elements per chunk of a plain elementwise pass.
constexpr int64_t kElementGrain = int64_t(1) << 16;
/// All elements of a float tensor as double, converted on the threads.
std::vector<double> toDouble(Context &ctx, const TensorRef &t);
/// Stores `values` (t's element count) into t, on the threads.
void store(Context &ctx, const std::vector<double> &values, const TensorRef &t);
/// The context's host pool of offloaded activations (Host/Offload.cpp).
std::vector<uint8_t> &hostPoolOf(Context &ctx);
/// Fills a planned workspace with NaN (see HostKernels.h).
void poisonWorkspace(void *workspace, size_t bytes);
/// [outer][inner][channels] -> [outer][channels][inner]: a channels-last
/// tensor (or a KRSC filter) in channels-first order (Convolution.cpp). The
/// host computes channels-last ops through these copies.
std::vector<double> channelsToFront(Context &ctx, const std::vector<double> &v,
                                    int64_t outer, int64_t inner,
                                    int64_t channels);
/// [outer][channels][inner] -> [outer][inner][channels].
std::vector<double> channelsToBack(Context &ctx, const std::vector<double> &v,
                                   int64_t outer, int64_t inner,
                                   int64_t channels);

/// Training batch normalization (TrainingKernels.cpp), shared with the
/// fused normalized convolutions (NormConv.cpp). x in double, [N, C, S] or
/// channels-last [N, S, C]: each channel's mean and 1 / sqrt(var + epsilon)
/// (biased variance), summed in (n, s) order, in double.
void batchNormStatistics(Context &ctx, const std::vector<double> &x,
                         int64_t batch, int64_t channels, int64_t spatial,
                         bool channelsLast, float epsilon,
                         std::vector<double> &mean,
                         std::vector<double> &invStd);
/// batchNormTrainingGrad's arithmetic: dx (x's size), dscale and dbias [C]
/// from x and dy in double and the f32 statistics and scale.
void batchNormGradient(Context &ctx, const std::vector<double> &x,
                       const std::vector<double> &dy, int64_t batch,
                       int64_t channels, int64_t spatial, bool channelsLast,
                       const float *mean, const float *invStd,
                       const float *scale, float *dscale, float *dbias,
                       std::vector<double> &dx);

} // namespace host

} // namespace memopt::rt

#endif // MEMOPT_LIB_RUNTIME_HOST_HOSTINTERNAL_H
