//===- HostBackend.cpp - the CPU reference backend ------------------------===//
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
//===----------------------------------------------------------------------===//

#include "../HostAdam.h"
#include "HostInternal.h"
#include "memopt/Runtime/Runtime.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace memopt::rt {

namespace {

/// True on a pool worker (and on the caller while it runs chunks): a
/// parallelFor issued from inside one runs serially instead of deadlocking.
thread_local bool insideParallelFor = false;

/// Workers that run the chunks of one parallelFor at a time; the calling
/// thread takes chunks too. Chunks are claimed from an atomic counter, so
/// which thread runs a chunk varies, but chunks never share output elements.
class ThreadPool {
public:
  explicit ThreadPool(int workers) {
    for (int i = 0; i < workers; ++i)
      threads.emplace_back([this] { workerLoop(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    for (std::thread &t : threads)
      t.join();
  }

  /// Calls task(i) for every i in [0, count) and returns when all are done.
  void run(int64_t count, const std::function<void(int64_t)> &task) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      current = &task;
      chunks = count;
      next.store(0);
      active = int(threads.size());
      ++generation;
    }
    wake.notify_all();
    drain(task, count);
    std::unique_lock<std::mutex> lock(mutex);
    done.wait(lock, [this] { return active == 0; });
    current = nullptr;
  }

private:
  void drain(const std::function<void(int64_t)> &task, int64_t count) {
    insideParallelFor = true;
    for (int64_t i = next.fetch_add(1); i < count; i = next.fetch_add(1))
      task(i);
    insideParallelFor = false;
  }

  void workerLoop() {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int64_t)> *task;
      int64_t count;
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] { return stopping || generation != seen; });
        if (stopping)
          return;
        seen = generation;
        task = current;
        count = chunks;
      }
      drain(*task, count);
      // run() waits for every worker, so none can miss a generation.
      std::lock_guard<std::mutex> lock(mutex);
      if (--active == 0)
        done.notify_one();
    }
  }

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
/// hardware thread.
int hostThreadCount() {
  if (const char *env = std::getenv("MEMOPT_HOST_THREADS")) {
    char *end = nullptr;
    long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n > 0)
      return int(std::min<long>(n, 1024));
  }
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

} // namespace

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
void writeProfileTimes(Context &ctx, FILE *out) {
  writeOpTimes(ctx.opTimes, out);
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

namespace {

/// The host's loops need no scratch, but the CUDA backend writes anywhere in
/// a planned workspace: the host fills it with NaN (all bits set) before and
/// after the op, so a workspace that overlaps live data shows up as wrong
/// results in host-backend tests, not only on a GPU.
void poisonWorkspace(void *workspace, size_t bytes) {
  if (workspace && bytes)
    std::memset(workspace, 0xff, bytes);
}

/// Work (in multiply-adds or simple flops, about a nanosecond each) below
/// which a chunk is not worth a thread: waking a worker costs tens of
/// microseconds.
constexpr int64_t kMinChunkWork = int64_t(1) << 17;
/// Elements per chunk of a conversion to or from double (about 0.5 ns each).
constexpr int64_t kMinChunkElements = int64_t(1) << 18;

/// Items per chunk so that a chunk does at least kMinChunkWork.
int64_t grainFor(int64_t workPerItem) {
  return std::max<int64_t>(1,
                           kMinChunkWork / std::max<int64_t>(workPerItem, 1));
}

/// Calls fn(lo, hi) on chunks of at least `grain` items covering [begin,
/// end), spread over the context's threads (serially when there is one chunk
/// or one thread). Chunk boundaries depend on the thread count, so `fn` must
/// compute each item the same way whatever chunk holds it.
template <typename Fn>
void parallelFor(Context &ctx, int64_t begin, int64_t end, int64_t grain,
                 const Fn &fn) {
  int64_t items = end - begin;
  if (items <= 0)
    return;
  grain = std::max<int64_t>(grain, 1);
  int64_t maxChunks = (items + grain - 1) / grain;
  if (ctx.threads <= 1 || maxChunks <= 1 || insideParallelFor) {
    fn(begin, end);
    return;
  }
  // A few chunks per thread even out items of uneven cost.
  int64_t chunks = std::min<int64_t>(maxChunks, int64_t(ctx.threads) * 4);
  int64_t size = (items + chunks - 1) / chunks;
  chunks = (items + size - 1) / size;
  if (!ctx.pool)
    ctx.pool = std::make_unique<ThreadPool>(ctx.threads - 1);
  ctx.pool->run(chunks, [&](int64_t chunk) {
    int64_t lo = begin + chunk * size;
    fn(lo, std::min(end, lo + size));
  });
}

/// Elements [lo, hi) of `t` as double (f32 without the per-element switch).
void loadRange(const TensorRef &t, int64_t lo, int64_t hi, double *out) {
  if (t.dtype == DType::F32) {
    const float *src = static_cast<const float *>(t.data);
    for (int64_t i = lo; i < hi; ++i)
      out[i - lo] = src[i];
    return;
  }
  for (int64_t i = lo; i < hi; ++i)
    out[i - lo] = loadAsDouble(t.data, t.dtype, i);
}

/// Stores in[0, hi - lo) into elements [lo, hi) of `t`.
void storeRange(const double *in, int64_t lo, int64_t hi, const TensorRef &t) {
  if (t.dtype == DType::F32) {
    float *dst = static_cast<float *>(t.data);
    for (int64_t i = lo; i < hi; ++i)
      dst[i] = float(in[i - lo]);
    return;
  }
  for (int64_t i = lo; i < hi; ++i)
    storeFromDouble(t.data, t.dtype, i, in[i - lo]);
}

std::vector<double> toDouble(const TensorRef &t) {
  int64_t n = t.numElements();
  std::vector<double> v(size_t(std::max<int64_t>(n, 0)));
  loadRange(t, 0, n, v.data());
  return v;
}

/// toDouble spread over the context's threads (conversions of large
/// activations are a visible share of a convolutional network's time).
std::vector<double> toDouble(Context &ctx, const TensorRef &t) {
  int64_t n = t.numElements();
  std::vector<double> v(size_t(std::max<int64_t>(n, 0)));
  parallelFor(ctx, 0, n, kMinChunkElements, [&](int64_t lo, int64_t hi) {
    loadRange(t, lo, hi, v.data() + lo);
  });
  return v;
}

void store(const std::vector<double> &v, const TensorRef &t) {
  storeRange(v.data(), 0, int64_t(v.size()), t);
}

void store(Context &ctx, const std::vector<double> &v, const TensorRef &t) {
  parallelFor(
      ctx, 0, int64_t(v.size()), kMinChunkElements,
      [&](int64_t lo, int64_t hi) { storeRange(v.data() + lo, lo, hi, t); });
}

std::vector<int64_t> toInt64(const TensorRef &t) {
  int64_t n = t.numElements();
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = t.dtype == DType::I64 ? static_cast<int64_t *>(t.data)[i]
                   : t.dtype == DType::I32
                       ? static_cast<int32_t *>(t.data)[i]
                       : int64_t(loadAsDouble(t.data, t.dtype, i));
  return v;
}

void storeInt64(const std::vector<int64_t> &v, const TensorRef &t) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (t.dtype == DType::I64)
      static_cast<int64_t *>(t.data)[i] = v[i];
    else
      static_cast<int32_t *>(t.data)[i] = int32_t(v[i]);
  }
}

/// Offset into a broadcast input for output element `index`.
int64_t broadcastOffset(int64_t index, const TensorRef &out,
                        const BroadcastStrides &strides) {
  int64_t offset = 0;
  for (int d = out.rank - 1; d >= 0; --d) {
    int64_t coord = index % out.shape[d];
    index /= out.shape[d];
    offset += coord * strides.stride[d];
  }
  return offset;
}

double applyUnary(UnaryOp op, double x, double alpha, double beta) {
  switch (op) {
  case UnaryOp::Identity:
    return x;
  case UnaryOp::Relu:
    return x > 0 ? x : 0;
  case UnaryOp::LeakyRelu:
    return x >= 0 ? x : alpha * x;
  case UnaryOp::Elu:
    return x >= 0 ? x : alpha * (std::exp(x) - 1);
  case UnaryOp::Sigmoid:
    return 1 / (1 + std::exp(-x));
  case UnaryOp::HardSigmoid:
    return std::max(0.0, std::min(1.0, alpha * x + beta));
  case UnaryOp::HardSwish:
    return x * std::max(0.0, std::min(1.0, x / 6 + 0.5));
  case UnaryOp::Tanh:
    return std::tanh(x);
  case UnaryOp::Gelu:
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  case UnaryOp::GeluTanh:
    return 0.5 * x *
           (1 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  case UnaryOp::Silu:
    return x / (1 + std::exp(-x));
  case UnaryOp::Softplus:
    return std::log1p(std::exp(x));
  case UnaryOp::Exp:
    return std::exp(x);
  case UnaryOp::Log:
    return std::log(x);
  case UnaryOp::Sqrt:
    return std::sqrt(x);
  case UnaryOp::Reciprocal:
    return 1 / x;
  case UnaryOp::Neg:
    return -x;
  case UnaryOp::Abs:
    return std::fabs(x);
  case UnaryOp::Erf:
    return std::erf(x);
  case UnaryOp::Sin:
    return std::sin(x);
  case UnaryOp::Cos:
    return std::cos(x);
  case UnaryOp::Floor:
    return std::floor(x);
  case UnaryOp::Ceil:
    return std::ceil(x);
  case UnaryOp::Round:
    return std::nearbyint(x);
  case UnaryOp::Clip:
    return std::min(std::max(x, alpha), beta);
  case UnaryOp::Not:
    return x == 0 ? 1 : 0;
  case UnaryOp::PowScalar:
    return std::pow(x, alpha);
  }
  return x;
}

double applyActivation(Activation act, double x) {
  switch (act) {
  case Activation::None:
    return x;
  case Activation::Relu:
    return applyUnary(UnaryOp::Relu, x, 0, 0);
  case Activation::Gelu:
    return applyUnary(UnaryOp::Gelu, x, 0, 0);
  case Activation::GeluTanh:
    return applyUnary(UnaryOp::GeluTanh, x, 0, 0);
  }
  return x;
}

double applyBinary(BinaryOp op, double a, double b) {
  switch (op) {
  case BinaryOp::Add:
    return a + b;
  case BinaryOp::Sub:
    return a - b;
  case BinaryOp::Mul:
    return a * b;
  case BinaryOp::Div:
    return a / b;
  case BinaryOp::Pow:
    return std::pow(a, b);
  case BinaryOp::Max:
    return std::max(a, b);
  case BinaryOp::Min:
    return std::min(a, b);
  case BinaryOp::Mod:
  case BinaryOp::FMod:
    return std::fmod(a, b);
  case BinaryOp::ReluGrad:
    return b > 0 ? a : 0.0;
  }
  return 0;
}

int64_t applyBinaryInt(BinaryOp op, int64_t a, int64_t b) {
  switch (op) {
  case BinaryOp::Add:
    return a + b;
  case BinaryOp::Sub:
    return a - b;
  case BinaryOp::Mul:
    return a * b;
  case BinaryOp::Div:
    return b == 0 ? 0 : a / b;
  case BinaryOp::Max:
    return std::max(a, b);
  case BinaryOp::Min:
    return std::min(a, b);
  case BinaryOp::Mod: {
    if (b == 0 || b == -1) // -1: INT64_MIN % -1 overflows; the answer is 0
      return 0;
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  }
  case BinaryOp::FMod:
    return b == 0 || b == -1 ? 0 : a % b;
  case BinaryOp::Pow:
  case BinaryOp::ReluGrad: // floats only (validateBinary)
    return 0;
  }
  return 0;
}

bool isIntType(DType t) { return t == DType::I32 || t == DType::I64; }

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

void unary(Context &ctx, const char *node, UnaryOp op, float alpha, float beta,
           TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validateUnary(ctx, node, op, x, y))
    return;
  if (isIntType(x.dtype)) {
    std::vector<int64_t> v = toInt64(x);
    for (int64_t &e : v)
      e = op == UnaryOp::Neg    ? -e
          : op == UnaryOp::Abs  ? (e < 0 ? -e : e)
          : op == UnaryOp::Relu ? std::max<int64_t>(e, 0)
                                : e;
    storeInt64(v, y);
    return;
  }
  std::vector<double> v = toDouble(ctx, x);
  // About 10 ns an element (exp, erf, tanh).
  parallelFor(ctx, 0, int64_t(v.size()), kMinChunkWork / 8,
              [&](int64_t lo, int64_t hi) {
                for (int64_t i = lo; i < hi; ++i)
                  v[size_t(i)] = applyUnary(op, v[size_t(i)], alpha, beta);
              });
  store(ctx, v, y);
}

void fusedElementwise(Context &ctx, const char *node,
                      const ElementwiseStep *steps, int numSteps,
                      const TensorRef *inputs, int numInputs, TensorRef y) {
  if (hasError(ctx) || !validateFusedElementwise(ctx, node, steps, numSteps,
                                                 inputs, numInputs, y))
    return;
  std::vector<std::vector<double>> values;
  std::vector<BroadcastStrides> strides;
  for (int i = 0; i < numInputs; ++i) {
    values.push_back(toDouble(ctx, inputs[i]));
    strides.push_back(broadcastStrides(inputs[i], y));
  }
  int64_t n = y.numElements();
  std::vector<double> out(static_cast<size_t>(n));
  // Rows of the last dim, as in binary(): each input's offset is decomposed
  // once per row and moves by its last stride (0 where it broadcasts).
  int64_t inner = y.rank ? y.shape[y.rank - 1] : 1;
  int64_t rows = inner ? n / inner : 0;
  int64_t step[kMaxFusedInputs];
  for (int i = 0; i < numInputs; ++i)
    step[i] = y.rank ? strides[size_t(i)].stride[y.rank - 1] : 0;
  parallelFor(
      ctx, 0, rows, grainFor(inner * numSteps), [&](int64_t lo, int64_t hi) {
        const double *row[kMaxFusedInputs];
        double registers[kMaxFusedInputs + kMaxFusedSteps];
        for (int64_t r = lo; r < hi; ++r) {
          for (int i = 0; i < numInputs; ++i)
            row[i] = values[size_t(i)].data() +
                     broadcastOffset(r * inner, y, strides[size_t(i)]);
          for (int64_t j = 0; j < inner; ++j) {
            for (int i = 0; i < numInputs; ++i)
              registers[i] = row[i][j * step[i]];
            for (int s = 0; s < numSteps; ++s) {
              const ElementwiseStep &st = steps[s];
              registers[numInputs + s] =
                  st.kind == ElementwiseStep::kUnary
                      ? applyUnary(UnaryOp(st.op), registers[st.a], st.alpha,
                                   st.beta)
                      : applyBinary(BinaryOp(st.op), registers[st.a],
                                    registers[st.b]);
            }
            out[size_t(r * inner + j)] = registers[numInputs + numSteps - 1];
          }
        }
      });
  store(ctx, out, y);
}

void binary(Context &ctx, const char *node, BinaryOp op, TensorRef a,
            TensorRef b, TensorRef c) {
  if (hasError(ctx) || !validateBinary(ctx, node, op, a, b, c))
    return;
  BroadcastStrides sa = broadcastStrides(a, c), sb = broadcastStrides(b, c);
  int64_t n = c.numElements();
  if (isIntType(c.dtype)) {
    std::vector<int64_t> va = toInt64(a), vb = toInt64(b),
                         out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      out[size_t(i)] = applyBinaryInt(op, va[broadcastOffset(i, c, sa)],
                                      vb[broadcastOffset(i, c, sb)]);
    storeInt64(out, c);
    return;
  }
  std::vector<double> va = toDouble(ctx, a), vb = toDouble(ctx, b),
                      out(static_cast<size_t>(n));
  // Rows of the last dim: operand offsets are decomposed once per row and
  // move by the operand's last stride (0 where it broadcasts) along it.
  int64_t inner = c.rank ? c.shape[c.rank - 1] : 1;
  int64_t rows = inner ? n / inner : 0;
  int64_t strideA = c.rank ? sa.stride[c.rank - 1] : 0;
  int64_t strideB = c.rank ? sb.stride[c.rank - 1] : 0;
  parallelFor(ctx, 0, rows, grainFor(inner), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const double *pa = va.data() + broadcastOffset(r * inner, c, sa);
      const double *pb = vb.data() + broadcastOffset(r * inner, c, sb);
      double *po = out.data() + r * inner;
      for (int64_t j = 0; j < inner; ++j)
        po[j] = applyBinary(op, pa[j * strideA], pb[j * strideB]);
    }
  });
  store(ctx, out, c);
}

void compare(Context &ctx, const char *node, CompareOp op, TensorRef a,
             TensorRef b, TensorRef c) {
  if (hasError(ctx) || !validateCompare(ctx, node, a, b, c, false))
    return;
  BroadcastStrides sa = broadcastStrides(a, c), sb = broadcastStrides(b, c);
  bool ints = isIntType(a.dtype);
  std::vector<double> fa, fb;
  std::vector<int64_t> ia, ib;
  if (ints) {
    ia = toInt64(a);
    ib = toInt64(b);
  } else {
    fa = toDouble(a);
    fb = toDouble(b);
  }
  int64_t n = c.numElements();
  std::vector<uint8_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t oa = broadcastOffset(i, c, sa), ob = broadcastOffset(i, c, sb);
    bool lt = ints ? ia[oa] < ib[ob] : fa[oa] < fb[ob];
    bool gt = ints ? ia[oa] > ib[ob] : fa[oa] > fb[ob];
    bool eq = ints ? ia[oa] == ib[ob] : fa[oa] == fb[ob];
    bool r = op == CompareOp::Equal         ? eq
             : op == CompareOp::Less        ? lt
             : op == CompareOp::LessOrEqual ? (lt || eq)
             : op == CompareOp::Greater     ? gt
                                            : (gt || eq);
    out[size_t(i)] = r;
  }
  std::memcpy(c.data, out.data(), out.size());
}

void logical(Context &ctx, const char *node, LogicalOp op, TensorRef a,
             TensorRef b, TensorRef c) {
  if (hasError(ctx) || !validateCompare(ctx, node, a, b, c, true))
    return;
  BroadcastStrides sa = broadcastStrides(a, c), sb = broadcastStrides(b, c);
  std::vector<uint8_t> va(static_cast<uint8_t *>(a.data),
                          static_cast<uint8_t *>(a.data) + a.numElements());
  std::vector<uint8_t> vb(static_cast<uint8_t *>(b.data),
                          static_cast<uint8_t *>(b.data) + b.numElements());
  int64_t n = c.numElements();
  for (int64_t i = 0; i < n; ++i) {
    bool x = va[broadcastOffset(i, c, sa)] != 0;
    bool y = vb[broadcastOffset(i, c, sb)] != 0;
    bool r = op == LogicalOp::And  ? (x && y)
             : op == LogicalOp::Or ? (x || y)
                                   : (x != y);
    static_cast<uint8_t *>(c.data)[i] = r;
  }
}

void where(Context &ctx, const char *node, TensorRef cond, TensorRef x,
           TensorRef z, TensorRef y) {
  if (hasError(ctx) || !validateWhere(ctx, node, cond, x, z, y))
    return;
  size_t elem = dtypeSize(y.dtype);
  BroadcastStrides sc = broadcastStrides(cond, y), sx = broadcastStrides(x, y),
                   sz = broadcastStrides(z, y);
  int64_t n = y.numElements();
  std::vector<uint8_t> out(size_t(n) * elem);
  for (int64_t i = 0; i < n; ++i) {
    bool c = static_cast<uint8_t *>(cond.data)[broadcastOffset(i, y, sc)];
    const uint8_t *src =
        c ? static_cast<uint8_t *>(x.data) + broadcastOffset(i, y, sx) * elem
          : static_cast<uint8_t *>(z.data) + broadcastOffset(i, y, sz) * elem;
    std::memcpy(out.data() + i * elem, src, elem);
  }
  std::memcpy(y.data, out.data(), out.size());
}

void isNaN(Context &ctx, const char *node, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validateIsNaN(ctx, node, x, y))
    return;
  std::vector<double> v = toDouble(x);
  uint8_t *out = static_cast<uint8_t *>(y.data);
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = std::isnan(v[i]) ? 1 : 0;
}

void range(Context &ctx, const char *node, TensorRef start, TensorRef delta,
           TensorRef y) {
  if (hasError(ctx) || !validateRange(ctx, node, start, delta, y))
    return;
  int64_t n = y.numElements();
  if (y.dtype == DType::I32 || y.dtype == DType::I64) {
    int64_t first = toInt64(start)[0], step = toInt64(delta)[0];
    std::vector<int64_t> values(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      values[size_t(i)] = first + i * step;
    storeInt64(values, y);
    return;
  }
  double first = toDouble(start)[0], step = toDouble(delta)[0];
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    values[size_t(i)] = first + double(i) * step;
  store(values, y);
}

void cast(Context &ctx, const char *node, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !checkTensor(ctx, node, x, "input") ||
      !checkTensor(ctx, node, y, "output") ||
      !checkSameCount(ctx, node, x, y, "input/output"))
    return;
  int64_t n = x.numElements();
  if (isIntType(x.dtype) && isIntType(y.dtype)) {
    storeInt64(toInt64(x), y);
    return;
  }
  if (x.dtype == DType::I64 && y.dtype != DType::Bool) {
    std::vector<int64_t> v = toInt64(x);
    for (int64_t i = 0; i < n; ++i)
      storeFromDouble(y.data, y.dtype, i, double(v[size_t(i)]));
    return;
  }
  store(toDouble(x), y);
}

void copy(Context &ctx, const char *node, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !checkTensor(ctx, node, x, "input") ||
      !checkTensor(ctx, node, y, "output"))
    return;
  if (x.bytes() != y.bytes()) {
    failf(ctx, node, "copy of %zu bytes into %zu bytes", x.bytes(), y.bytes());
    return;
  }
  if (x.data != y.data && x.bytes())
    std::memmove(y.data, x.data, x.bytes());
}

void fill(Context &ctx, const char *node, double value, TensorRef y) {
  if (hasError(ctx) || !checkTensor(ctx, node, y, "output"))
    return;
  int64_t n = y.numElements();
  for (int64_t i = 0; i < n; ++i)
    storeFromDouble(y.data, y.dtype, i, value);
}

void expand(Context &ctx, const char *node, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !checkTensor(ctx, node, x, "input") ||
      !checkTensor(ctx, node, y, "output") ||
      !checkSameDType(ctx, node, x, y, "input/output") ||
      !checkBroadcast(ctx, node, &x, 1, y, /*exact=*/false))
    return;
  size_t elem = dtypeSize(y.dtype);
  BroadcastStrides sx = broadcastStrides(x, y);
  int64_t n = y.numElements();
  std::vector<uint8_t> out(size_t(n) * elem);
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(out.data() + i * elem,
                static_cast<uint8_t *>(x.data) +
                    broadcastOffset(i, y, sx) * elem,
                elem);
  std::memcpy(y.data, out.data(), out.size());
}

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

/// The host's loops need no scratch: the planned slice is only poisoned
/// around the next matmul (poisonWorkspace).
void setMatmulWorkspace(Context &ctx, void *workspace, size_t bytes) {
  ctx.matmulWorkspace = workspace;
  ctx.matmulWorkspaceBytes = bytes;
}

namespace {
void matmulImpl(Context &ctx, const char *node, const MatmulParams &params,
                TensorRef a, TensorRef b, const TensorRef *bias, TensorRef c);
} // namespace

void matmul(Context &ctx, const char *node, const MatmulParams &params,
            TensorRef a, TensorRef b, const TensorRef *bias, TensorRef c) {
  void *workspace = ctx.matmulWorkspace;
  size_t bytes = ctx.matmulWorkspaceBytes;
  ctx.matmulWorkspace = nullptr;
  ctx.matmulWorkspaceBytes = 0;
  poisonWorkspace(workspace, bytes);
  matmulImpl(ctx, node, params, a, b, bias, c);
  poisonWorkspace(workspace, bytes);
}

namespace {

// Blocking of the matmul (GotoBLAS / BLIS structure, in double): B is packed
// once into column panels of kNR columns, [k][kNR] each; a work item packs
// kMC rows of A into kMR-row panels, kKC columns of k at a time, and runs a
// kMR x kNR register tile over them. Tile, panel and item boundaries depend
// only on the shapes.
constexpr int64_t kMR = 4, kNR = 4;
constexpr int64_t kMC = 64, kNC = 128, kKC = 256;

/// Two doubles: one SSE2 register, which every x86-64 has (the runtime is
/// built without -march flags).
typedef double Double2 __attribute__((vector_size(16)));

inline Double2 loadDouble2(const double *p) {
  Double2 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void storeDouble2(double *p, Double2 v) { std::memcpy(p, &v, sizeof v); }

/// c[kMR x kNR] (row stride ldc) = (first ? 0 : c) + sum over p of
/// a[p][r] * b[p][col], p in increasing order: for every element the same
/// sequence of double adds as the naive `acc += a * b` loop.
inline void matmulTile(int64_t kc, const double *a, const double *b, double *c,
                       int64_t ldc, bool first) {
  static_assert(kMR == 4 && kNR == 4, "the tile is written out for 4 x 4");
  Double2 c00 = {0, 0}, c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
          c30 = c00, c31 = c00;
  if (!first) {
    c00 = loadDouble2(c), c01 = loadDouble2(c + 2);
    c10 = loadDouble2(c + ldc), c11 = loadDouble2(c + ldc + 2);
    c20 = loadDouble2(c + 2 * ldc), c21 = loadDouble2(c + 2 * ldc + 2);
    c30 = loadDouble2(c + 3 * ldc), c31 = loadDouble2(c + 3 * ldc + 2);
  }
  for (int64_t p = 0; p < kc; ++p, a += kMR, b += kNR) {
    Double2 b0 = loadDouble2(b), b1 = loadDouble2(b + 2);
    Double2 a0 = {a[0], a[0]}, a1 = {a[1], a[1]}, a2 = {a[2], a[2]},
            a3 = {a[3], a[3]};
    c00 += a0 * b0, c01 += a0 * b1;
    c10 += a1 * b0, c11 += a1 * b1;
    c20 += a2 * b0, c21 += a2 * b1;
    c30 += a3 * b0, c31 += a3 * b1;
  }
  storeDouble2(c, c00), storeDouble2(c + 2, c01);
  storeDouble2(c + ldc, c10), storeDouble2(c + ldc + 2, c11);
  storeDouble2(c + 2 * ldc, c20), storeDouble2(c + 2 * ldc + 2, c21);
  storeDouble2(c + 3 * ldc, c30), storeDouble2(c + 3 * ldc + 2, c31);
}

void matmulImpl(Context &ctx, const char *node, const MatmulParams &params,
                TensorRef a, TensorRef b, const TensorRef *bias, TensorRef c) {
  MatmulGeometry g;
  if (hasError(ctx) || !validateMatmul(ctx, node, params, a, b, bias, c, g))
    return;
  // Every input is read (A and the bias converted, B packed) before any
  // output is written: a full-size bias may be C itself.
  std::vector<double> va = toDouble(ctx, a), vbias;
  BroadcastStrides sbias;
  if (bias) {
    vbias = toDouble(ctx, *bias);
    sbias = broadcastStrides(*bias, c);
  }
  BroadcastStrides sa = broadcastStrides(g.aBatch, g.cBatch),
                   sb = broadcastStrides(g.bBatch, g.cBatch);
  int64_t m = g.m, n = g.n, k = g.k;
  int64_t bMatrices = g.bBatch.numElements();
  int64_t panels = (n + kNR - 1) / kNR;
  // Packed B: matrix, panel, p, column within the panel (zero past n, so
  // the edge panel runs the same tile; its extra columns are dropped).
  std::vector<double> &packedB = ctx.packedB;
  size_t packedSize = size_t(bMatrices * panels * k * kNR);
  if (packedB.size() < packedSize) {
    packedB = std::vector<double>(); // no copy of the old contents
    packedB.resize(packedSize);
  }
  parallelFor(ctx, 0, bMatrices * panels, grainFor(k * kNR),
              [&](int64_t lo, int64_t hi) {
                for (int64_t item = lo; item < hi; ++item) {
                  int64_t matrix = item / panels, j0 = item % panels * kNR;
                  double *dst = packedB.data() + item * k * kNR;
                  const float *f32 = b.dtype == DType::F32
                                         ? static_cast<const float *>(b.data)
                                         : nullptr;
                  for (int64_t p = 0; p < k; ++p)
                    for (int64_t jj = 0; jj < kNR; ++jj) {
                      int64_t j = j0 + jj;
                      int64_t index = matrix * k * n +
                                      (params.transB ? j * k + p : p * n + j);
                      dst[p * kNR + jj] =
                          j >= n ? 0.0
                          : f32  ? double(f32[index])
                                 : loadAsDouble(b.data, b.dtype, index);
                    }
                }
              });

  // Work items: (batch, block of kMC rows, block of kNC columns).
  int64_t rowBlocks = (m + kMC - 1) / kMC, colBlocks = (n + kNC - 1) / kNC;
  int64_t items = g.batchCount * rowBlocks * colBlocks;
  parallelFor(
      ctx, 0, items, grainFor(kMC * kNC * k), [&](int64_t lo, int64_t hi) {
        // Per chunk: A panels [tile][p][kMR] for kKC values of p, and the
        // block's accumulators [kMC rows][kNC + kNR columns].
        std::vector<double> packedA(size_t(kMC * kKC));
        std::vector<double> acc(size_t(kMC * (kNC + kNR)));
        int64_t ldc = kNC + kNR;
        for (int64_t item = lo; item < hi; ++item) {
          int64_t batch = item / (rowBlocks * colBlocks);
          int64_t i0 = item / colBlocks % rowBlocks * kMC;
          int64_t j0 = item % colBlocks * kNC;
          int64_t rows = std::min(kMC, m - i0), cols = std::min(kNC, n - j0);
          int64_t tiles = (rows + kMR - 1) / kMR;
          int64_t colPanels = (cols + kNR - 1) / kNR;
          const double *pa =
              va.data() + broadcastOffset(batch, g.cBatch, sa) * m * k;
          const double *pb =
              packedB.data() +
              (broadcastOffset(batch, g.cBatch, sb) * panels + j0 / kNR) * k *
                  kNR;
          for (int64_t p0 = 0; p0 < k; p0 += kKC) {
            int64_t kc = std::min(kKC, k - p0);
            for (int64_t t = 0; t < tiles; ++t)
              for (int64_t p = 0; p < kc; ++p)
                for (int64_t r = 0; r < kMR; ++r) {
                  int64_t i = i0 + t * kMR + r;
                  double v = 0;
                  if (i < m)
                    v = params.transA ? pa[(p0 + p) * m + i]
                                      : pa[i * k + p0 + p];
                  packedA[size_t((t * kc + p) * kMR + r)] = v;
                }
            for (int64_t jp = 0; jp < colPanels; ++jp)
              for (int64_t t = 0; t < tiles; ++t)
                matmulTile(kc, &packedA[size_t(t * kc * kMR)],
                           pb + (jp * k + p0) * kNR,
                           &acc[size_t(t * kMR * ldc + jp * kNR)], ldc,
                           p0 == 0);
          }
          if (k == 0)
            std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t r = 0; r < rows; ++r) {
            int64_t start = (batch * m + i0 + r) * n + j0;
            // Along a row only the last coordinate moves: the bias offset is
            // linear in the column.
            int64_t biasStart = bias ? broadcastOffset(start, c, sbias) : 0;
            int64_t biasStride = bias ? sbias.stride[c.rank - 1] : 0;
            double *row = &acc[size_t(r * ldc)];
            for (int64_t jj = 0; jj < cols; ++jj) {
              double v = params.alpha * row[jj];
              if (bias)
                v += params.beta * vbias[size_t(biasStart + jj * biasStride)];
              row[jj] = applyActivation(params.activation, v);
            }
            storeRange(row, start, start + cols, c);
          }
        }
      });
}

} // namespace

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

namespace {

/// [outer][inner][channels] -> [outer][channels][inner]: a channels-last
/// tensor (or a KRSC filter) in channels-first order. The host computes
/// channels-last ops through these copies: the reference stays one loop nest.
std::vector<double> channelsToFront(Context &ctx, const std::vector<double> &v,
                                    int64_t outer, int64_t inner,
                                    int64_t channels) {
  std::vector<double> out(v.size());
  parallelFor(ctx, 0, outer * channels, grainFor(inner),
              [&](int64_t lo, int64_t hi) {
                for (int64_t oc = lo; oc < hi; ++oc) {
                  int64_t o = oc / channels, c = oc % channels;
                  const double *src = v.data() + o * inner * channels + c;
                  double *dst = out.data() + oc * inner;
                  for (int64_t i = 0; i < inner; ++i)
                    dst[i] = src[i * channels];
                }
              });
  return out;
}

/// [outer][channels][inner] -> [outer][inner][channels].
std::vector<double> channelsToBack(Context &ctx, const std::vector<double> &v,
                                   int64_t outer, int64_t inner,
                                   int64_t channels) {
  std::vector<double> out(v.size());
  parallelFor(ctx, 0, outer * channels, grainFor(inner),
              [&](int64_t lo, int64_t hi) {
                for (int64_t oc = lo; oc < hi; ++oc) {
                  int64_t o = oc / channels, c = oc % channels;
                  const double *src = v.data() + oc * inner;
                  double *dst = out.data() + o * inner * channels + c;
                  for (int64_t i = 0; i < inner; ++i)
                    dst[i * channels] = src[i];
                }
              });
  return out;
}

/// floor(a / b) and ceil(a / b) for b > 0.
int64_t floorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
int64_t ceilDiv(int64_t a, int64_t b) { return -floorDiv(-a, b); }

/// The positions p in [0, count) with 0 <= p * stride + offset < limit, as
/// [lo, hi) (empty when hi <= lo): the padding test hoisted out of a loop.
void validRange(int64_t count, int64_t stride, int64_t offset, int64_t limit,
                int64_t &lo, int64_t &hi) {
  lo = std::max<int64_t>(0, ceilDiv(-offset, stride));
  hi = std::min<int64_t>(count, floorDiv(limit - 1 - offset, stride) + 1);
}

/// Forward conv of kBlock output channels (consecutive, one group) of one
/// image into out[kBlock][outSpatial], which starts at zero. For each output
/// element the sum runs over input channel, then kernel position, as the
/// naive loop does; one input value feeds kBlock channels.
template <int kBlock>
void convChannels(const ConvGeometry &g, const double *xImage,
                  const double *weights, int64_t inPerGroup, int64_t ci0,
                  double *out) {
  int64_t inSpatial = g.in[0] * g.in[1] * g.in[2];
  int64_t outSpatial = g.out[0] * g.out[1] * g.out[2];
  int64_t kSpatial = g.kernel[0] * g.kernel[1] * g.kernel[2];
  for (int64_t cl = 0; cl < inPerGroup; ++cl) {
    const double *xin = xImage + (ci0 + cl) * inSpatial;
    for (int64_t k0 = 0; k0 < g.kernel[0]; ++k0)
      for (int64_t k1 = 0; k1 < g.kernel[1]; ++k1)
        for (int64_t k2 = 0; k2 < g.kernel[2]; ++k2) {
          int64_t kIndex = (k0 * g.kernel[1] + k1) * g.kernel[2] + k2;
          double wv[kBlock];
          for (int b = 0; b < kBlock; ++b)
            wv[b] = weights[(b * inPerGroup + cl) * kSpatial + kIndex];
          int64_t kk[3] = {k0, k1, k2}, lo[3], hi[3], offset[3];
          for (int d = 0; d < 3; ++d) {
            offset[d] = kk[d] * g.dilations[d] - g.padsBegin[d];
            validRange(g.out[d], g.strides[d], offset[d], g.in[d], lo[d],
                       hi[d]);
          }
          for (int64_t p0 = lo[0]; p0 < hi[0]; ++p0)
            for (int64_t p1 = lo[1]; p1 < hi[1]; ++p1) {
              int64_t q0 = p0 * g.strides[0] + offset[0];
              int64_t q1 = p1 * g.strides[1] + offset[1];
              const double *xRow = xin + (q0 * g.in[1] + q1) * g.in[2];
              double *yRow = out + (p0 * g.out[1] + p1) * g.out[2];
              int64_t s2 = g.strides[2], o2 = offset[2];
              for (int b = 0; b < kBlock; ++b) {
                double w = wv[b];
                double *y = yRow + b * outSpatial;
                // Unit stride: a contiguous axpy the compiler vectorizes.
                if (s2 == 1)
                  for (int64_t p2 = lo[2]; p2 < hi[2]; ++p2)
                    y[p2] += w * xRow[p2 + o2];
                else
                  for (int64_t p2 = lo[2]; p2 < hi[2]; ++p2)
                    y[p2] += w * xRow[p2 * s2 + o2];
              }
            }
        }
  }
}

/// Forward conv as an implicit GEMM per image and group: C[co][s] = sum over
/// t of W[co][t] * X[t][s], t = (input channel, kernel position) in the naive
/// loop's order, s = output position. X's panels are built on the fly
/// (im2col, kKC taps x kNC positions at a time) and run through the matmul
/// tile. A tap that falls in the padding reads 0: w * 0 leaves the sum
/// unchanged (it starts at +0 and so never becomes -0), so the result equals
/// the loop that skips padded taps, unless a weight is inf or NaN (then NaN,
/// as ONNX's zero padding defines).
void convGemm(Context &ctx, const ConvGeometry &g, const ConvParams &params,
              const std::vector<double> &vx, const std::vector<double> &vw,
              const std::vector<double> &vb, bool hasBias, const TensorRef &y) {
  int64_t inPerGroup = g.inChannels / g.group;
  int64_t m = g.outChannels / g.group;
  int64_t inSpatial = g.in[0] * g.in[1] * g.in[2];
  int64_t n = g.out[0] * g.out[1] * g.out[2];
  int64_t kSpatial = g.kernel[0] * g.kernel[1] * g.kernel[2];
  int64_t k = inPerGroup * kSpatial;
  // Weights as A panels [group][tile][t][kMR]: W[co][t] is vw[co * k + t].
  int64_t coTiles = (m + kMR - 1) / kMR;
  std::vector<double> aPanels(size_t(g.group * coTiles * k * kMR));
  parallelFor(ctx, 0, g.group * coTiles, grainFor(k * kMR),
              [&](int64_t lo, int64_t hi) {
                for (int64_t item = lo; item < hi; ++item) {
                  int64_t group = item / coTiles, tile = item % coTiles;
                  double *dst = aPanels.data() + item * k * kMR;
                  for (int64_t t = 0; t < k; ++t)
                    for (int64_t r = 0; r < kMR; ++r) {
                      int64_t ol = tile * kMR + r;
                      dst[t * kMR + r] =
                          ol < m ? vw[size_t((group * m + ol) * k + t)] : 0.0;
                    }
                }
              });
  // Work items: (image, group, block of kMC output channels, block of kNC
  // positions).
  int64_t coBlocks = (m + kMC - 1) / kMC, posBlocks = (n + kNC - 1) / kNC;
  int64_t items = g.batch * g.group * coBlocks * posBlocks;
  parallelFor(
      ctx, 0, items, grainFor(kMC * kNC * k), [&](int64_t lo, int64_t hi) {
        std::vector<double> bPanels(size_t(kKC * (kNC + kNR)));
        std::vector<double> acc(size_t(kMC * (kNC + kNR)));
        int64_t ldc = kNC + kNR;
        // Per position of the block: its first input coordinate on each axis
        // (before the kernel offset); per tap of a kKC slice: the channel's
        // offset and the kernel offset on each axis.
        int64_t start[3][kNC + kNR];
        int64_t tapChannel[kKC], tapOffset[3][kKC];
        for (int64_t item = lo; item < hi; ++item) {
          int64_t image = item / (g.group * coBlocks * posBlocks);
          int64_t group = item / (coBlocks * posBlocks) % g.group;
          int64_t m0 = item / posBlocks % coBlocks * kMC;
          int64_t s0 = item % posBlocks * kNC;
          int64_t rows = std::min(kMC, m - m0), cols = std::min(kNC, n - s0);
          int64_t tiles = (rows + kMR - 1) / kMR;
          int64_t panels = (cols + kNR - 1) / kNR;
          for (int64_t c = 0; c < panels * kNR; ++c) {
            int64_t s = std::min(s0 + c, n - 1), p2 = s % g.out[2];
            int64_t p1 = s / g.out[2] % g.out[1],
                    p0 = s / (g.out[1] * g.out[2]);
            start[0][c] = p0 * g.strides[0] - g.padsBegin[0];
            start[1][c] = p1 * g.strides[1] - g.padsBegin[1];
            start[2][c] = p2 * g.strides[2] - g.padsBegin[2];
          }
          const double *xImage =
              vx.data() +
              (image * g.inChannels + group * inPerGroup) * inSpatial;
          for (int64_t t0 = 0; t0 < k; t0 += kKC) {
            int64_t kc = std::min(kKC, k - t0);
            for (int64_t t = 0; t < kc; ++t) {
              int64_t tap = t0 + t, kIndex = tap % kSpatial;
              tapChannel[t] = tap / kSpatial * inSpatial;
              tapOffset[0][t] =
                  kIndex / (g.kernel[1] * g.kernel[2]) * g.dilations[0];
              tapOffset[1][t] =
                  kIndex / g.kernel[2] % g.kernel[1] * g.dilations[1];
              tapOffset[2][t] = kIndex % g.kernel[2] * g.dilations[2];
            }
            // im2col of this slice: B panels [panel][t][kNR].
            for (int64_t jp = 0; jp < panels; ++jp)
              for (int64_t t = 0; t < kc; ++t)
                for (int64_t cc = 0; cc < kNR; ++cc) {
                  int64_t c = jp * kNR + cc;
                  int64_t q0 = start[0][c] + tapOffset[0][t];
                  int64_t q1 = start[1][c] + tapOffset[1][t];
                  int64_t q2 = start[2][c] + tapOffset[2][t];
                  bool inside = c < cols && q0 >= 0 && q0 < g.in[0] &&
                                q1 >= 0 && q1 < g.in[1] && q2 >= 0 &&
                                q2 < g.in[2];
                  bPanels[size_t((jp * kc + t) * kNR + cc)] =
                      inside ? xImage[tapChannel[t] +
                                      (q0 * g.in[1] + q1) * g.in[2] + q2]
                             : 0.0;
                }
            const double *a =
                aPanels.data() + ((group * coTiles + m0 / kMR) * k + t0) * kMR;
            for (int64_t jp = 0; jp < panels; ++jp)
              for (int64_t t = 0; t < tiles; ++t)
                matmulTile(kc, a + t * k * kMR, bPanels.data() + jp * kc * kNR,
                           acc.data() + t * kMR * ldc + jp * kNR, ldc, t0 == 0);
          }
          if (k == 0)
            std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t r = 0; r < rows; ++r) {
            int64_t co = group * m + m0 + r;
            double *row = acc.data() + r * ldc;
            for (int64_t c = 0; c < cols; ++c)
              row[c] = applyActivation(
                  params.activation, row[c] + (hasBias ? vb[size_t(co)] : 0.0));
            int64_t first = (image * g.outChannels + co) * n + s0;
            storeRange(row, first, first + cols, y);
          }
        }
      });
}

/// The channels-first convolution of already converted operands into y.
void convChannelsFirst(Context &ctx, const ConvGeometry &g,
                       const ConvParams &params, bool transposed,
                       const std::vector<double> &vx,
                       const std::vector<double> &vw,
                       const std::vector<double> &vb, const TensorRef *bias,
                       TensorRef y) {
  int64_t inPerGroup = g.inChannels / g.group;
  int64_t outPerGroup = g.outChannels / g.group;
  // Enough output channels per group to fill register tiles: a GEMM. The
  // others (depthwise convs) and ConvTranspose run the direct loops below.
  if (!transposed && outPerGroup >= 2 * kMR) {
    convGemm(ctx, g, params, vx, vw, vb, bias != nullptr, y);
    return;
  }
  int64_t inSpatial = g.in[0] * g.in[1] * g.in[2];
  int64_t outSpatial = g.out[0] * g.out[1] * g.out[2];
  int64_t kSpatial = g.kernel[0] * g.kernel[1] * g.kernel[2];
  // Work items: blocks of kBlock output channels of one image, within one
  // group; each owns its output planes, so no two threads add into one
  // element.
  constexpr int kBlock = 4;
  int64_t blocksPerGroup = (outPerGroup + kBlock - 1) / kBlock;
  int64_t items = g.batch * g.group * blocksPerGroup;
  int64_t work =
      kBlock * inPerGroup * kSpatial * (transposed ? inSpatial : outSpatial);
  parallelFor(ctx, 0, items, grainFor(work), [&](int64_t lo, int64_t hi) {
    std::vector<double> out(size_t(kBlock * outSpatial));
    for (int64_t item = lo; item < hi; ++item) {
      int64_t n = item / (g.group * blocksPerGroup);
      int64_t group = item / blocksPerGroup % g.group;
      int64_t ol0 = item % blocksPerGroup * kBlock;
      int64_t count = std::min<int64_t>(kBlock, outPerGroup - ol0);
      int64_t co0 = group * outPerGroup + ol0;
      std::fill(out.begin(), out.end(), 0.0);
      const double *xImage = vx.data() + n * g.inChannels * inSpatial;
      if (!transposed) {
        // Weights w[co][cl][k].
        const double *wk = vw.data() + co0 * inPerGroup * kSpatial;
        if (count == kBlock)
          convChannels<kBlock>(g, xImage, wk, inPerGroup, group * inPerGroup,
                               out.data());
        else
          for (int64_t b = 0; b < count; ++b)
            convChannels<1>(g, xImage, wk + b * inPerGroup * kSpatial,
                            inPerGroup, group * inPerGroup,
                            out.data() + b * outSpatial);
      } else {
        // Scatter each input element to the outputs it reaches, input
        // channel, then kernel position, then input position: the naive
        // loop's order of contributions to every output element.
        for (int64_t b = 0; b < count; ++b) {
          int64_t ol = ol0 + b;
          double *yout = out.data() + b * outSpatial;
          for (int64_t cl = 0; cl < inPerGroup; ++cl) {
            int64_t ci = group * inPerGroup + cl;
            // Weights w[ci][ol][k].
            const double *wk = &vw[size_t((ci * outPerGroup + ol) * kSpatial)];
            const double *xin = xImage + ci * inSpatial;
            for (int64_t k0 = 0; k0 < g.kernel[0]; ++k0)
              for (int64_t k1 = 0; k1 < g.kernel[1]; ++k1)
                for (int64_t k2 = 0; k2 < g.kernel[2]; ++k2) {
                  double wv = wk[(k0 * g.kernel[1] + k1) * g.kernel[2] + k2];
                  int64_t kk[3] = {k0, k1, k2}, plo[3], phi[3], offset[3];
                  for (int d = 0; d < 3; ++d) {
                    offset[d] = kk[d] * g.dilations[d] - g.padsBegin[d];
                    validRange(g.in[d], g.strides[d], offset[d], g.out[d],
                               plo[d], phi[d]);
                  }
                  for (int64_t p0 = plo[0]; p0 < phi[0]; ++p0)
                    for (int64_t p1 = plo[1]; p1 < phi[1]; ++p1) {
                      int64_t q0 = p0 * g.strides[0] + offset[0];
                      int64_t q1 = p1 * g.strides[1] + offset[1];
                      const double *xRow = xin + (p0 * g.in[1] + p1) * g.in[2];
                      double *yRow = yout + (q0 * g.out[1] + q1) * g.out[2];
                      for (int64_t p2 = plo[2]; p2 < phi[2]; ++p2)
                        yRow[p2 * g.strides[2] + offset[2]] += wv * xRow[p2];
                    }
                }
          }
        }
      }
      for (int64_t b = 0; b < count; ++b) {
        int64_t co = co0 + b;
        double *plane = out.data() + b * outSpatial;
        for (int64_t s = 0; s < outSpatial; ++s)
          plane[s] = applyActivation(params.activation,
                                     plane[s] + (bias ? vb[co] : 0.0));
        storeRange(plane, (n * g.outChannels + co) * outSpatial,
                   (n * g.outChannels + co + 1) * outSpatial, y);
      }
    }
  });
}

void convImpl(Context &ctx, const char *node, const ConvParams &params,
              bool transposed, TensorRef x, TensorRef w, const TensorRef *bias,
              TensorRef y) {
  ConvGeometry g;
  if (hasError(ctx) ||
      !validateConv(ctx, node, params, transposed, x, w, bias, y, g))
    return;
  // Inputs are converted first; the workers then write disjoint parts of y.
  std::vector<double> vx = toDouble(ctx, x), vw = toDouble(ctx, w), vb;
  if (bias)
    vb = toDouble(*bias);
  if (!g.channelsLast) {
    convChannelsFirst(ctx, g, params, transposed, vx, vw, vb, bias, y);
    return;
  }
  // Channels-last: the same loops on channels-first copies, the result
  // computed into a double buffer and stored back channels-last.
  int64_t inSpatial = g.in[0] * g.in[1] * g.in[2];
  int64_t outSpatial = g.out[0] * g.out[1] * g.out[2];
  int64_t kSpatial = g.kernel[0] * g.kernel[1] * g.kernel[2];
  vx = channelsToFront(ctx, vx, g.batch, inSpatial, g.inChannels);
  vw =
      channelsToFront(ctx, vw, g.outChannels, kSpatial, g.inChannels / g.group);
  std::vector<double> vy(size_t(y.numElements()));
  TensorRef first = channelsFirstView(y);
  first.data = vy.data();
  first.dtype = DType::F64;
  convChannelsFirst(ctx, g, params, transposed, vx, vw, vb, bias, first);
  store(ctx, channelsToBack(ctx, vy, g.batch, outSpatial, g.outChannels), y);
}

} // namespace

void conv(Context &ctx, const char *node, const ConvParams &params, TensorRef x,
          TensorRef w, const TensorRef *bias, TensorRef y, void *workspace,
          size_t workspaceBytes) {
  poisonWorkspace(workspace, workspaceBytes);
  convImpl(ctx, node, params, false, x, w, bias, y);
  poisonWorkspace(workspace, workspaceBytes);
}

void convTranspose(Context &ctx, const char *node, const ConvParams &params,
                   TensorRef x, TensorRef w, const TensorRef *bias, TensorRef y,
                   void *workspace, size_t workspaceBytes) {
  poisonWorkspace(workspace, workspaceBytes);
  convImpl(ctx, node, params, true, x, w, bias, y);
  poisonWorkspace(workspace, workspaceBytes);
}

void convResidual(Context &ctx, const char *node, const ConvParams &params,
                  TensorRef x, TensorRef w, const TensorRef *bias,
                  TensorRef residual, TensorRef y, void *workspace,
                  size_t workspaceBytes) {
  if (hasError(ctx) || !checkSameShape(ctx, node, residual, y, "residual") ||
      !checkSameDType(ctx, node, residual, y, "residual/output"))
    return;
  // y may be the residual: read it before the convolution overwrites it.
  std::vector<double> vr = toDouble(ctx, residual);
  ConvParams linear = params;
  linear.activation = Activation::None;
  conv(ctx, node, linear, x, w, bias, y, workspace, workspaceBytes);
  if (hasError(ctx))
    return;
  std::vector<double> vy = toDouble(ctx, y);
  for (size_t i = 0; i < vy.size(); ++i)
    vy[i] = applyActivation(params.activation, vy[i] + vr[i]);
  store(ctx, vy, y);
}

void pool(Context &ctx, const char *node, const PoolParams &params, TensorRef x,
          TensorRef y) {
  ConvGeometry g;
  if (hasError(ctx) || !validatePool(ctx, node, params, x, y, g))
    return;
  std::vector<double> vx = toDouble(x);
  int64_t inSpatial = g.in[0] * g.in[1] * g.in[2];
  int64_t outSpatial = g.out[0] * g.out[1] * g.out[2];
  if (g.channelsLast)
    vx = channelsToFront(ctx, vx, g.batch, inSpatial, g.inChannels);
  std::vector<double> out(size_t(g.batch * g.inChannels * outSpatial));
  for (int64_t plane = 0; plane < g.batch * g.inChannels; ++plane) {
    const double *xin = &vx[size_t(plane * inSpatial)];
    for (int64_t o = 0; o < outSpatial; ++o) {
      int64_t oc[3] = {o / (g.out[1] * g.out[2]), (o / g.out[2]) % g.out[1],
                       o % g.out[2]};
      double best = -std::numeric_limits<double>::infinity(), sum = 0;
      int64_t valid = 0, padded = 1;
      for (int d = 0; d < 3; ++d) {
        // Window positions inside the padded input (count_include_pad).
        int64_t start = oc[d] * g.strides[d] - g.padsBegin[d];
        int64_t inPadded = 0;
        for (int64_t k = 0; k < g.kernel[d]; ++k) {
          int64_t pos = start + k * g.dilations[d];
          inPadded += pos >= -g.padsBegin[d] && pos < g.in[d] + g.padsEnd[d];
        }
        padded *= inPadded;
      }
      for (int64_t k0 = 0; k0 < g.kernel[0]; ++k0)
        for (int64_t k1 = 0; k1 < g.kernel[1]; ++k1)
          for (int64_t k2 = 0; k2 < g.kernel[2]; ++k2) {
            int64_t kk[3] = {k0, k1, k2}, q[3];
            bool inside = true;
            for (int d = 0; d < 3 && inside; ++d) {
              q[d] = oc[d] * g.strides[d] - g.padsBegin[d] +
                     kk[d] * g.dilations[d];
              inside = q[d] >= 0 && q[d] < g.in[d];
            }
            if (!inside)
              continue;
            double v = xin[(q[0] * g.in[1] + q[1]) * g.in[2] + q[2]];
            best = std::max(best, v);
            sum += v;
            ++valid;
          }
      double r;
      if (params.kind == PoolKind::Max)
        r = best;
      else
        r = sum / double(params.countIncludePad ? padded
                                                : std::max<int64_t>(valid, 1));
      out[size_t(plane * outSpatial + o)] = r;
    }
  }
  if (g.channelsLast)
    out = channelsToBack(ctx, out, g.batch, outSpatial, g.inChannels);
  store(out, y);
}

void globalAvgPool(Context &ctx, const char *node, TensorRef x, TensorRef y,
                   bool channelsLast) {
  if (hasError(ctx) || !checkFloat(ctx, node, x, "X") ||
      !checkFloat(ctx, node, y, "output") ||
      !checkSameDType(ctx, node, x, y, "X/output"))
    return;
  int64_t channels = x.rank < 2 ? 0 : x.shape[channelsLast ? x.rank - 1 : 1];
  if (x.rank < 2 || y.numElements() != x.shape[0] * channels) {
    failf(ctx, node, "GlobalAveragePool output %s does not match input %s",
          shapeString(y).c_str(), shapeString(x).c_str());
    return;
  }
  std::vector<double> vx = toDouble(x);
  int64_t planes = x.shape[0] * channels;
  int64_t spatial = planes ? x.numElements() / planes : 0;
  if (channelsLast)
    vx = channelsToFront(ctx, vx, x.shape[0], spatial, channels);
  std::vector<double> out(static_cast<size_t>(planes));
  for (int64_t p = 0; p < planes; ++p) {
    double sum = 0;
    for (int64_t s = 0; s < spatial; ++s)
      sum += vx[size_t(p * spatial + s)];
    out[size_t(p)] = spatial ? sum / double(spatial) : 0;
  }
  store(out, y);
}

//===----------------------------------------------------------------------===//
// Normalization, softmax, reductions
//===----------------------------------------------------------------------===//

void batchNorm(Context &ctx, const char *node, float epsilon, TensorRef x,
               TensorRef scale, TensorRef bias, TensorRef mean, TensorRef var,
               TensorRef y, bool channelsLast) {
  if (hasError(ctx) ||
      !validateBatchNorm(ctx, node, x, scale, bias, mean, var, y, channelsLast))
    return;
  std::vector<double> vx = toDouble(x), vs = toDouble(scale),
                      vb = toDouble(bias), vm = toDouble(mean),
                      vv = toDouble(var);
  AxisSplit s = splitAt(x, channelsLast ? x.rank - 1 : 1);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t c = 0; c < s.axis; ++c)
      for (int64_t i = 0; i < s.inner; ++i) {
        double &v = vx[size_t((o * s.axis + c) * s.inner + i)];
        v = (v - vm[c]) / std::sqrt(vv[c] + epsilon) * vs[c] + vb[c];
      }
  store(vx, y);
}

void layerNorm(Context &ctx, const char *node, int axis, float epsilon,
               TensorRef x, TensorRef scale, const TensorRef *bias,
               TensorRef y) {
  if (hasError(ctx) || !validateLayerNorm(ctx, node, axis, x, scale, bias, y))
    return;
  std::vector<double> vx = toDouble(ctx, x), vs = toDouble(scale), vb;
  if (bias)
    vb = toDouble(*bias);
  int64_t cols = int64_t(vs.size());
  int64_t rows = cols ? x.numElements() / cols : 0;
  parallelFor(ctx, 0, rows, grainFor(4 * cols), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      double *row = &vx[size_t(r * cols)];
      double mean = 0, var = 0;
      for (int64_t j = 0; j < cols; ++j)
        mean += row[j];
      mean /= double(cols);
      for (int64_t j = 0; j < cols; ++j)
        var += (row[j] - mean) * (row[j] - mean);
      var /= double(cols);
      double inv = 1 / std::sqrt(var + epsilon);
      for (int64_t j = 0; j < cols; ++j)
        row[j] = (row[j] - mean) * inv * vs[j] + (bias ? vb[j] : 0.0);
    }
  });
  store(ctx, vx, y);
}

void softmax(Context &ctx, const char *node, int axis, bool logSoftmax,
             TensorRef x, TensorRef y) {
  if (hasError(ctx) || !checkFloat(ctx, node, x, "input") ||
      !checkFloat(ctx, node, y, "output") ||
      !checkSameDType(ctx, node, x, y, "input/output") ||
      !checkSameShape(ctx, node, x, y, "input/output") ||
      !checkAxis(ctx, node, axis, x.rank))
    return;
  std::vector<double> v = toDouble(ctx, x);
  AxisSplit s = splitAt(x, axis);
  // Items: (outer, inner) pairs, each one independent softmax.
  parallelFor(ctx, 0, s.outer * s.inner, grainFor(8 * s.axis),
              [&](int64_t lo, int64_t hi) {
                for (int64_t item = lo; item < hi; ++item) {
                  int64_t o = item / s.inner, i = item % s.inner;
                  auto at = [&](int64_t a) -> double & {
                    return v[size_t((o * s.axis + a) * s.inner + i)];
                  };
                  double best = -std::numeric_limits<double>::infinity(),
                         sum = 0;
                  for (int64_t a = 0; a < s.axis; ++a)
                    best = std::max(best, at(a));
                  if (logSoftmax) {
                    for (int64_t a = 0; a < s.axis; ++a)
                      sum += std::exp(at(a) - best);
                    for (int64_t a = 0; a < s.axis; ++a)
                      at(a) = at(a) - best - std::log(sum);
                    continue;
                  }
                  // Each exp once (the same value the sum used), then
                  // normalize.
                  for (int64_t a = 0; a < s.axis; ++a)
                    sum += (at(a) = std::exp(at(a) - best));
                  for (int64_t a = 0; a < s.axis; ++a)
                    at(a) /= sum;
                }
              });
  store(ctx, v, y);
}

void attention(Context &ctx, const char *node, const AttentionParams &params,
               TensorRef q, TensorRef k, TensorRef v, const TensorRef *bias,
               TensorRef y, void *workspace, size_t workspaceBytes,
               const TensorRef *lse) {
  if (hasError(ctx))
    return;
  AttentionGeometry g;
  if (!validateAttention(ctx, node, params, q, k, v, bias, y, g) ||
      (lse && !validateAttentionStatistics(ctx, node, *lse, y,
                                           {&q, &k, &v, bias, &y})))
    return;
  // The CUDA backend may write scores anywhere in the workspace: clobber it
  // here too, before the operands are read and after the result is written.
  poisonWorkspace(workspace, workspaceBytes);
  std::vector<double> vq = toDouble(ctx, q), vk = toDouble(ctx, k),
                      vv = toDouble(ctx, v),
                      vbias =
                          bias ? toDouble(ctx, *bias) : std::vector<double>();
  std::vector<double> out(size_t(y.numElements()));
  std::vector<double> statistics(lse ? size_t(2 * g.batch * g.queries) : 0);
  // Work items: kRows query rows of one batch entry. Both products go
  // through the matmul's register tile: an item packs Q's rows, K and V of
  // its entry into panels, computes its rows' scores (Q K^T), turns them into
  // probabilities row by row and multiplies them with V. The tile sums over
  // d, then over keys, in increasing order from zero, so every element is
  // the naive loop's `dot += q * k` and `acc += p * v` sequence.
  constexpr int64_t kRows = 32;
  static_assert(kRows % kMR == 0, "row blocks are whole tiles");
  int64_t rowBlocks = (g.queries + kRows - 1) / kRows;
  int64_t keysPadded = (g.keys + kNR - 1) / kNR * kNR;
  int64_t valuesPadded = (g.valueSize + kNR - 1) / kNR * kNR;
  int64_t work =
      std::min(kRows, g.queries) * g.keys * (g.headSize + g.valueSize);
  parallelFor(
      ctx, 0, g.batch * rowBlocks, grainFor(work), [&](int64_t lo, int64_t hi) {
        // Panels as the tile reads them: A [tile][p][kMR], B [panel][p][kNR].
        std::vector<double> qPanels(size_t(kRows * g.headSize));
        std::vector<double> kPanels(size_t(keysPadded * g.headSize));
        std::vector<double> vPanels(size_t(valuesPadded * g.keys));
        std::vector<double> pPanels(size_t(kRows * g.keys));
        // One block of scores (never the whole [S, Sk] matrix) and of outputs.
        std::vector<double> scores(size_t(kRows * keysPadded));
        std::vector<double> acc(size_t(kRows * valuesPadded));
        std::vector<double> rowSum(static_cast<size_t>(kRows));
        for (int64_t item = lo; item < hi; ++item) {
          int64_t b = item / rowBlocks, i0 = item % rowBlocks * kRows;
          int64_t rows = std::min(kRows, g.queries - i0);
          int64_t tiles = (rows + kMR - 1) / kMR;
          int64_t qOffset = 0, kOffset = 0, vOffset = 0, biasOffset = 0;
          for (int64_t rest = b, i = g.batchRank - 1; i >= 0; --i) {
            int64_t coord = rest % g.batchShape[i];
            rest /= g.batchShape[i];
            qOffset += coord * g.qStride[i];
            kOffset += coord * g.kStride[i];
            vOffset += coord * g.vStride[i];
            biasOffset += coord * g.biasStride[i];
          }
          int64_t d = g.headSize, dv = g.valueSize;
          for (int64_t t = 0; t < tiles; ++t)
            for (int64_t p = 0; p < d; ++p)
              for (int64_t r = 0; r < kMR; ++r) {
                int64_t i = i0 + t * kMR + r;
                qPanels[size_t((t * d + p) * kMR + r)] =
                    i < g.queries ? vq[size_t(qOffset + i * d + p)] : 0.0;
              }
          // Causal rows see keys up to their own index: later key panels are
          // not needed by any row of the block.
          int64_t scoredKeys =
              params.causal ? std::min(g.keys, i0 + rows) : g.keys;
          int64_t keyPanels = (scoredKeys + kNR - 1) / kNR;
          for (int64_t jp = 0; jp < keyPanels; ++jp)
            for (int64_t p = 0; p < d; ++p)
              for (int64_t c = 0; c < kNR; ++c) {
                int64_t j = jp * kNR + c;
                kPanels[size_t((jp * d + p) * kNR + c)] =
                    j >= g.keys ? 0.0
                    : params.keyTransposed
                        ? vk[size_t(kOffset + p * g.keys + j)]
                        : vk[size_t(kOffset + j * d + p)];
              }
          for (int64_t dp = 0; dp < valuesPadded / kNR; ++dp)
            for (int64_t j = 0; j < g.keys; ++j)
              for (int64_t c = 0; c < kNR; ++c) {
                int64_t e = dp * kNR + c;
                vPanels[size_t((dp * g.keys + j) * kNR + c)] =
                    e < dv ? vv[size_t(vOffset + j * dv + e)] : 0.0;
              }
          for (int64_t t = 0; t < tiles; ++t)
            for (int64_t jp = 0; jp < keyPanels; ++jp)
              matmulTile(d, qPanels.data() + t * d * kMR,
                         kPanels.data() + jp * d * kNR,
                         scores.data() + t * kMR * keysPadded + jp * kNR,
                         keysPadded, true);
          for (int64_t r = 0; r < rows; ++r) {
            int64_t i = i0 + r;
            double *row = scores.data() + r * keysPadded;
            double rowMax = -INFINITY;
            for (int64_t j = 0; j < g.keys; ++j) {
              if (params.causal && j > i) {
                row[j] = -INFINITY;
                continue;
              }
              double score = params.scale * row[j];
              if (g.hasBias)
                score += vbias[biasOffset + i * g.biasRowStride +
                               j * g.biasColStride];
              row[j] = score;
              rowMax = std::max(rowMax, score);
            }
            // All -inf: exp(-inf - -inf) is NaN, as in the unfused graph;
            // the safe softmax gives the row zeros instead.
            bool zeroRow = params.safeSoftmax && rowMax == -INFINITY;
            double sum = 0;
            int64_t finite = 0;
            for (int64_t j = 0; j < g.keys; ++j) {
              double p = zeroRow ? 0.0 : std::exp(row[j] - rowMax);
              sum += p;
              finite += row[j] != -INFINITY;
              pPanels[size_t((r / kMR * g.keys + j) * kMR + r % kMR)] = p;
            }
            rowSum[size_t(r)] = zeroRow ? 1.0 : sum;
            if (lse) {
              // The statistics of the saturated scores (kernels' rule): when
              // the maximum saturates, every finite score does.
              double *stat = statistics.data() + 2 * (b * g.queries + i);
              bool saturated =
                  rowMax != -INFINITY && rowMax < kAttentionSaturation;
              stat[0] = saturated ? double(kAttentionLowestMax) : rowMax;
              stat[1] = rowMax == -INFINITY ? -INFINITY
                        : saturated         ? std::log(double(finite))
                                            : std::log(sum);
            }
          }
          // Padding rows of the last tile: zero probabilities, results dropped.
          for (int64_t r = rows; r < tiles * kMR; ++r)
            for (int64_t j = 0; j < g.keys; ++j)
              pPanels[size_t((r / kMR * g.keys + j) * kMR + r % kMR)] = 0.0;
          for (int64_t t = 0; t < tiles; ++t)
            for (int64_t dp = 0; dp < valuesPadded / kNR; ++dp)
              matmulTile(g.keys, pPanels.data() + t * g.keys * kMR,
                         vPanels.data() + dp * g.keys * kNR,
                         acc.data() + t * kMR * valuesPadded + dp * kNR,
                         valuesPadded, true);
          for (int64_t r = 0; r < rows; ++r) {
            double *yRow = out.data() + (b * g.queries + i0 + r) * dv;
            for (int64_t e = 0; e < dv; ++e)
              yRow[e] = acc[size_t(r * valuesPadded + e)] / rowSum[size_t(r)];
          }
        }
      });
  store(ctx, out, y);
  if (lse)
    store(ctx, statistics, *lse);
  poisonWorkspace(workspace, workspaceBytes);
}

void reduce(Context &ctx, const char *node, ReduceOp op, const int *axes,
            int numAxes, TensorRef x, TensorRef y, void *workspace,
            size_t workspaceBytes) {
  if (hasError(ctx) || !validateReduce(ctx, node, axes, numAxes, x, y))
    return;
  poisonWorkspace(workspace, workspaceBytes);
  bool reduced[kMaxRank] = {};
  for (int i = 0; i < numAxes; ++i)
    reduced[axes[i]] = true;
  std::vector<double> vx = toDouble(x);
  int64_t outCount = y.numElements();
  double init = op == ReduceOp::Max   ? -std::numeric_limits<double>::infinity()
                : op == ReduceOp::Min ? std::numeric_limits<double>::infinity()
                : op == ReduceOp::Prod ? 1.0
                                       : 0.0;
  std::vector<double> acc(size_t(outCount), init);
  int64_t count = outCount ? x.numElements() / outCount : 0;
  int64_t n = x.numElements();
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, outIndex = 0, outStride = 1;
    for (int d = x.rank - 1; d >= 0; --d) {
      int64_t coord = rest % x.shape[d];
      rest /= x.shape[d];
      if (!reduced[d]) {
        outIndex += coord * outStride;
        outStride *= x.shape[d];
      }
    }
    double v = vx[size_t(i)];
    double &a = acc[size_t(outIndex)];
    switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean:
      a += v;
      break;
    case ReduceOp::SumSquare:
    case ReduceOp::L2:
      a += v * v;
      break;
    case ReduceOp::Max:
      a = std::max(a, v);
      break;
    case ReduceOp::Min:
      a = std::min(a, v);
      break;
    case ReduceOp::Prod:
      a *= v;
      break;
    }
  }
  for (double &a : acc) {
    if (op == ReduceOp::Mean)
      a = count ? a / double(count) : 0;
    else if (op == ReduceOp::L2)
      a = std::sqrt(a);
  }
  store(acc, y);
}

void argReduce(Context &ctx, const char *node, bool isMax, int axis,
               TensorRef x, TensorRef y) {
  if (hasError(ctx) || !checkFloat(ctx, node, x, "input") ||
      !checkTensor(ctx, node, y, "output") ||
      !checkAxis(ctx, node, axis, x.rank))
    return;
  AxisSplit s = splitAt(x, axis);
  if (y.dtype != DType::I64 || y.numElements() != s.outer * s.inner) {
    failf(ctx, node, "ArgMax/ArgMin output must be i64 with %lld elements",
          (long long)(s.outer * s.inner));
    return;
  }
  std::vector<double> v = toDouble(x);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      int64_t best = 0;
      for (int64_t a = 1; a < s.axis; ++a) {
        double cur = v[size_t((o * s.axis + a) * s.inner + i)];
        double top = v[size_t((o * s.axis + best) * s.inner + i)];
        if (isMax ? cur > top : cur < top)
          best = a;
      }
      static_cast<int64_t *>(y.data)[o * s.inner + i] = best;
    }
}

namespace {

/// Replaces every row of `values` (viewed as [outer, axis, inner]) by its
/// running sum along the axis, one row per item; `add` is the accumulation.
template <typename T, typename Add>
void scanRows(Context &ctx, const AxisSplit &s, bool exclusive, bool reverse,
              T *values, Add add) {
  parallelFor(
      ctx, 0, s.outer * s.inner, grainFor(s.axis), [&](int64_t lo, int64_t hi) {
        for (int64_t item = lo; item < hi; ++item) {
          T *row =
              values + (item / s.inner) * s.axis * s.inner + item % s.inner;
          T sum = T(0);
          for (int64_t step = 0; step < s.axis; ++step) {
            T &element = row[(reverse ? s.axis - 1 - step : step) * s.inner];
            T next = add(sum, element);
            element = exclusive ? sum : next;
            sum = next;
          }
        }
      });
}

} // namespace

void cumSum(Context &ctx, const char *node, int axis, bool exclusive,
            bool reverse, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validateCumSum(ctx, node, axis, x, y))
    return;
  AxisSplit s = splitAt(x, axis);
  if (isFloatType(x.dtype)) {
    std::vector<double> v = toDouble(ctx, x);
    scanRows(ctx, s, exclusive, reverse, v.data(),
             [](double a, double b) { return a + b; });
    store(ctx, v, y);
    return;
  }
  // Integers wrap (two's complement) in 64 bits; I32 results keep the low
  // half, which is the 32-bit wrapped sum.
  std::vector<int64_t> v = toInt64(x);
  scanRows(ctx, s, exclusive, reverse, v.data(), [](int64_t a, int64_t b) {
    return int64_t(uint64_t(a) + uint64_t(b));
  });
  storeInt64(v, y);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

namespace {

/// Copies element `from` of src into element `to` of dst.
inline void copyElement(const TensorRef &src, int64_t from, uint8_t *dst,
                        int64_t to, size_t elem) {
  std::memcpy(dst + to * elem,
              static_cast<const uint8_t *>(src.data) + from * elem, elem);
}

void decompose(int64_t index, const TensorRef &t, int64_t *coords) {
  for (int d = t.rank - 1; d >= 0; --d) {
    coords[d] = index % t.shape[d];
    index /= t.shape[d];
  }
}

} // namespace

void transpose(Context &ctx, const char *node, const int *perm, TensorRef x,
               TensorRef y) {
  if (hasError(ctx) || !validateTranspose(ctx, node, perm, x, y))
    return;
  size_t elem = dtypeSize(x.dtype);
  int64_t xStrides[kMaxRank];
  contiguousStrides(x, xStrides);
  int64_t n = y.numElements();
  std::vector<uint8_t> out(size_t(n) * elem);
  // Rows of y's last dim: one index decomposition per row, then a fixed
  // source stride along it.
  int64_t inner = y.rank ? y.shape[y.rank - 1] : 1;
  int64_t rows = inner ? n / inner : 0;
  int64_t step = y.rank ? xStrides[perm[y.rank - 1]] : 0;
  parallelFor(ctx, 0, rows, grainFor(inner), [&](int64_t lo, int64_t hi) {
    int64_t coords[kMaxRank];
    for (int64_t r = lo; r < hi; ++r) {
      decompose(r * inner, y, coords);
      int64_t from = 0;
      for (int d = 0; d < y.rank; ++d)
        from += coords[d] * xStrides[perm[d]];
      for (int64_t j = 0; j < inner; ++j)
        copyElement(x, from + j * step, out.data(), r * inner + j, elem);
    }
  });
  std::memcpy(y.data, out.data(), out.size());
}

void concat(Context &ctx, const char *node, int axis, const TensorRef *inputs,
            int numInputs, TensorRef y) {
  if (hasError(ctx) || !validateConcat(ctx, node, axis, inputs, numInputs, y))
    return;
  size_t elem = dtypeSize(y.dtype);
  AxisSplit s = splitAt(y, axis);
  std::vector<uint8_t> out(y.bytes());
  int64_t offset = 0;
  for (int k = 0; k < numInputs; ++k) {
    int64_t len = inputs[k].shape[axis];
    size_t block = size_t(len * s.inner) * elem;
    for (int64_t o = 0; o < s.outer; ++o)
      std::memcpy(out.data() + size_t((o * s.axis + offset) * s.inner) * elem,
                  static_cast<uint8_t *>(inputs[k].data) + o * block, block);
    offset += len;
  }
  std::memcpy(y.data, out.data(), out.size());
}

void split(Context &ctx, const char *node, int axis, TensorRef x,
           const TensorRef *outputs, int numOutputs) {
  if (hasError(ctx) || !validateConcat(ctx, node, axis, outputs, numOutputs, x))
    return;
  size_t elem = dtypeSize(x.dtype);
  AxisSplit s = splitAt(x, axis);
  std::vector<uint8_t> in(static_cast<uint8_t *>(x.data),
                          static_cast<uint8_t *>(x.data) + x.bytes());
  int64_t offset = 0;
  for (int k = 0; k < numOutputs; ++k) {
    int64_t len = outputs[k].shape[axis];
    size_t block = size_t(len * s.inner) * elem;
    for (int64_t o = 0; o < s.outer; ++o)
      std::memcpy(static_cast<uint8_t *>(outputs[k].data) + o * block,
                  in.data() + size_t((o * s.axis + offset) * s.inner) * elem,
                  block);
    offset += len;
  }
}

void slice(Context &ctx, const char *node, const int64_t *starts,
           const int64_t *steps, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validateSlice(ctx, node, starts, steps, x, y))
    return;
  size_t elem = dtypeSize(x.dtype);
  int64_t xStrides[kMaxRank];
  contiguousStrides(x, xStrides);
  int64_t n = y.numElements();
  std::vector<uint8_t> out(size_t(n) * elem);
  // Rows of y's last dim, as in transpose.
  int64_t inner = y.rank ? y.shape[y.rank - 1] : 1;
  int64_t rows = inner ? n / inner : 0;
  int64_t step = y.rank ? steps[y.rank - 1] * xStrides[y.rank - 1] : 0;
  parallelFor(ctx, 0, rows, grainFor(inner), [&](int64_t lo, int64_t hi) {
    int64_t coords[kMaxRank];
    for (int64_t r = lo; r < hi; ++r) {
      decompose(r * inner, y, coords);
      int64_t from = 0;
      for (int d = 0; d < y.rank; ++d)
        from += (starts[d] + coords[d] * steps[d]) * xStrides[d];
      for (int64_t j = 0; j < inner; ++j)
        copyElement(x, from + j * step, out.data(), r * inner + j, elem);
    }
  });
  std::memcpy(y.data, out.data(), out.size());
}

void gather(Context &ctx, const char *node, int axis, TensorRef x,
            TensorRef indices, TensorRef y) {
  if (hasError(ctx) || !validateGather(ctx, node, axis, x, indices, y, false))
    return;
  size_t elem = dtypeSize(x.dtype);
  AxisSplit s = splitAt(x, axis);
  std::vector<int64_t> idx = toInt64(indices);
  std::vector<uint8_t> out(y.bytes());
  for (size_t j = 0; j < idx.size(); ++j) {
    int64_t index = idx[j] < 0 ? idx[j] + s.axis : idx[j];
    if (index < 0 || index >= s.axis) {
      failf(ctx, node, "index %lld out of range [-%lld, %lld)",
            (long long)idx[j], (long long)s.axis, (long long)s.axis);
      return;
    }
    idx[j] = index;
  }
  int64_t count = int64_t(idx.size());
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t j = 0; j < count; ++j)
      std::memcpy(out.data() + size_t((o * count + j) * s.inner) * elem,
                  static_cast<uint8_t *>(x.data) +
                      size_t((o * s.axis + idx[size_t(j)]) * s.inner) * elem,
                  size_t(s.inner) * elem);
  std::memcpy(y.data, out.data(), out.size());
}

void gatherElements(Context &ctx, const char *node, int axis, TensorRef x,
                    TensorRef indices, TensorRef y) {
  if (hasError(ctx) || !validateGather(ctx, node, axis, x, indices, y, true))
    return;
  size_t elem = dtypeSize(x.dtype);
  int64_t xStrides[kMaxRank], coords[kMaxRank];
  contiguousStrides(x, xStrides);
  std::vector<int64_t> idx = toInt64(indices);
  int64_t n = y.numElements();
  std::vector<uint8_t> out(size_t(n) * elem);
  for (int64_t i = 0; i < n; ++i) {
    decompose(i, y, coords);
    int64_t index = idx[size_t(i)];
    if (index < 0)
      index += x.shape[axis];
    if (index < 0 || index >= x.shape[axis]) {
      failf(ctx, node, "index %lld out of range for axis size %lld",
            (long long)idx[size_t(i)], (long long)x.shape[axis]);
      return;
    }
    coords[axis] = index;
    int64_t from = 0;
    for (int d = 0; d < x.rank; ++d)
      from += coords[d] * xStrides[d];
    copyElement(x, from, out.data(), i, elem);
  }
  std::memcpy(y.data, out.data(), out.size());
}

namespace {

/// Element `i` of an integer tensor (I64, I32, I8, U8) as int64_t.
int64_t loadInt(const void *data, DType dtype, int64_t i) {
  switch (dtype) {
  case DType::I64:
    return static_cast<const int64_t *>(data)[i];
  case DType::I32:
    return static_cast<const int32_t *>(data)[i];
  case DType::I8:
    return static_cast<const int8_t *>(data)[i];
  default:
    return static_cast<const uint8_t *>(data)[i];
  }
}

/// Stores `v` wrapped to the integer dtype (two's complement, as C++20).
void storeInt(void *data, DType dtype, int64_t i, int64_t v) {
  switch (dtype) {
  case DType::I64:
    static_cast<int64_t *>(data)[i] = v;
    break;
  case DType::I32:
    static_cast<int32_t *>(data)[i] = static_cast<int32_t>(v);
    break;
  case DType::I8:
    static_cast<int8_t *>(data)[i] = static_cast<int8_t>(v);
    break;
  default:
    static_cast<uint8_t *>(data)[i] = static_cast<uint8_t>(v);
    break;
  }
}

template <typename T> T combineScatter(ScatterReduction op, T a, T b) {
  switch (op) {
  case ScatterReduction::Add:
    if constexpr (std::is_integral_v<T>)
      return T(uint64_t(a) + uint64_t(b)); // wraps instead of overflowing
    else
      return a + b;
  case ScatterReduction::Mul:
    if constexpr (std::is_integral_v<T>)
      return T(uint64_t(a) * uint64_t(b));
    else
      return a * b;
  case ScatterReduction::Max:
    return std::max(a, b);
  case ScatterReduction::Min:
    return std::min(a, b);
  case ScatterReduction::None:
    break;
  }
  return b;
}

} // namespace

/// onnxruntime's ScatterND structure: copy data into the output unless they
/// are the same buffer, then visit the index tuples in order. Every index is
/// checked before anything is written.
void scatterND(Context &ctx, const char *node, ScatterReduction reduction,
               TensorRef data, TensorRef indices, TensorRef updates,
               TensorRef y) {
  ScatterGeometry g;
  if (hasError(ctx) ||
      !validateScatterND(ctx, node, reduction, data, indices, updates, y, g))
    return;
  std::vector<int64_t> idx = toInt64(indices);
  std::vector<int64_t> offsets(size_t(g.tuples), 0);
  for (int64_t t = 0; t < g.tuples; ++t) {
    for (int64_t d = 0; d < g.k; ++d) {
      int64_t raw = idx[size_t(t * g.k + d)];
      int64_t index = raw < 0 ? raw + g.dims[d] : raw;
      if (index < 0 || index >= g.dims[d]) {
        failf(ctx, node, "index %lld out of range [-%lld, %lld) on axis %lld",
              (long long)raw, (long long)g.dims[d], (long long)g.dims[d],
              (long long)d);
        return;
      }
      offsets[size_t(t)] += index * g.strides[d];
    }
  }
  if (y.data != data.data && y.bytes())
    std::memmove(y.data, data.data, y.bytes());
  size_t elem = dtypeSize(y.dtype);
  auto *out = static_cast<uint8_t *>(y.data);
  bool isInt = y.dtype == DType::I64 || y.dtype == DType::I32 ||
               y.dtype == DType::I8 || y.dtype == DType::U8;
  for (int64_t t = 0; t < g.tuples; ++t) {
    int64_t base = offsets[size_t(t)], from = t * g.sliceSize;
    if (reduction == ScatterReduction::None) {
      std::memcpy(out + size_t(base) * elem,
                  static_cast<const uint8_t *>(updates.data) +
                      size_t(from) * elem,
                  size_t(g.sliceSize) * elem);
      continue;
    }
    for (int64_t j = 0; j < g.sliceSize; ++j) {
      if (isInt)
        storeInt(y.data, y.dtype, base + j,
                 combineScatter(reduction, loadInt(y.data, y.dtype, base + j),
                                loadInt(updates.data, y.dtype, from + j)));
      else
        storeFromDouble(
            y.data, y.dtype, base + j,
            combineScatter(reduction, loadAsDouble(y.data, y.dtype, base + j),
                           loadAsDouble(updates.data, y.dtype, from + j)));
    }
  }
}

void pad(Context &ctx, const char *node, PadMode mode, const int64_t *padsBegin,
         const int64_t *padsEnd, double value, TensorRef x, TensorRef y) {
  if (hasError(ctx) || !validatePad(ctx, node, mode, padsBegin, padsEnd, x, y))
    return;
  size_t elem = dtypeSize(x.dtype);
  int64_t xStrides[kMaxRank], coords[kMaxRank];
  contiguousStrides(x, xStrides);
  int64_t n = y.numElements();
  std::vector<uint8_t> out(size_t(n) * elem);
  std::vector<uint8_t> constant(elem);
  storeFromDouble(constant.data(), x.dtype, 0, value);
  for (int64_t i = 0; i < n; ++i) {
    decompose(i, y, coords);
    int64_t from = 0;
    bool outside = false;
    for (int d = 0; d < y.rank; ++d) {
      int64_t c = coords[d] - padsBegin[d], size = x.shape[d];
      if (c < 0 || c >= size) {
        if (mode == PadMode::Constant) {
          outside = true;
          break;
        }
        if (mode == PadMode::Edge) {
          c = std::min(std::max<int64_t>(c, 0), size - 1);
        } else {
          while (c < 0 || c >= size)
            c = size == 1 ? 0 : c < 0 ? -c : 2 * (size - 1) - c;
        }
      }
      from += c * xStrides[d];
    }
    if (outside)
      std::memcpy(out.data() + i * elem, constant.data(), elem);
    else
      copyElement(x, from, out.data(), i, elem);
  }
  std::memcpy(y.data, out.data(), out.size());
}

void resize(Context &ctx, const char *node, const ResizeParams &params,
            TensorRef x, TensorRef y) {
  float scales[kMaxRank];
  if (hasError(ctx) || !validateResize(ctx, node, params, x, y, scales))
    return;
  int64_t xStrides[kMaxRank], coords[kMaxRank];
  contiguousStrides(x, xStrides);
  int64_t n = y.numElements();
  size_t elem = dtypeSize(x.dtype);
  std::vector<uint8_t> out(size_t(n) * elem);
  std::vector<double> vx;
  if (params.mode == ResizeMode::Linear)
    vx = toDouble(x);
  for (int64_t i = 0; i < n; ++i) {
    decompose(i, y, coords);
    if (params.mode == ResizeMode::Nearest) {
      int64_t from = 0;
      for (int d = 0; d < y.rank; ++d) {
        int64_t c = coords[d];
        if (x.shape[d] != y.shape[d] || scales[d] != 1.0f) {
          float src = resizeSourceCoordinate(params.coordinateMode, float(c),
                                             scales[d], x.shape[d], y.shape[d]);
          float fl = std::floor(src);
          switch (params.nearestMode) {
          case NearestMode::RoundPreferFloor:
            c = int64_t(src - fl == 0.5f ? fl : std::round(src));
            break;
          case NearestMode::RoundPreferCeil:
            c = int64_t(src - fl == 0.5f ? fl + 1 : std::round(src));
            break;
          case NearestMode::Floor:
            c = int64_t(fl);
            break;
          case NearestMode::Ceil:
            c = int64_t(std::ceil(src));
            break;
          }
          c = std::min(std::max<int64_t>(c, 0), x.shape[d] - 1);
        }
        from += c * xStrides[d];
      }
      copyElement(x, from, out.data(), i, elem);
      continue;
    }
    // Linear: interpolate along every resized axis (corners 2^k).
    int resizedAxes[kMaxRank], k = 0;
    int64_t base = 0, low[kMaxRank], high[kMaxRank];
    double frac[kMaxRank];
    for (int d = 0; d < y.rank; ++d) {
      if (x.shape[d] == y.shape[d] && scales[d] == 1.0f) {
        base += coords[d] * xStrides[d];
        continue;
      }
      float src =
          resizeSourceCoordinate(params.coordinateMode, float(coords[d]),
                                 scales[d], x.shape[d], y.shape[d]);
      src = std::min(std::max(src, 0.0f), float(x.shape[d] - 1));
      low[k] = int64_t(std::floor(src));
      high[k] = std::min(low[k] + 1, x.shape[d] - 1);
      frac[k] = src - float(low[k]);
      resizedAxes[k++] = d;
    }
    double acc = 0;
    for (int corner = 0; corner < (1 << k); ++corner) {
      double weight = 1;
      int64_t from = base;
      for (int j = 0; j < k; ++j) {
        bool up = (corner >> j) & 1;
        weight *= up ? frac[j] : 1 - frac[j];
        from += (up ? high[j] : low[j]) * xStrides[resizedAxes[j]];
      }
      acc += weight * vx[size_t(from)];
    }
    storeFromDouble(out.data(), x.dtype, i, acc);
  }
  std::memcpy(y.data, out.data(), out.size());
}

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
