//===- HostAdam.h - the CPU optimizer of --offload optimizer ------*- C++
//-*-===//
//
// Private to lib/Runtime. The update arithmetic of an offloaded SGD / AdamW
// step on the CPU (vectorizable loops over f32 masters and state, double
// arithmetic as the host backend's reference kernels), a small thread pool
// that splits one update over the cores, and the queue that runs the
// updates in submission order while the device computes the next
// gradients. Both backends use it: the host backend submits right away, the
// CUDA backend from a host function on its copy stream (HostOptimizer.cpp).
//
// Taken from DeepSpeed's DeepSpeedCPUAdam (ZeRO-Offload: AVX-vectorized,
// OpenMP-parallel Adam over tiles of the fp32 master) and torchao's
// CPUOffloadOptimizer (one CPU step per parameter as its gradient arrives).
// Where memopt differs: the arithmetic is the host backend's (double, one
// rounding to f32 per stored value), so the offloaded step is bit-identical
// to the plain one on the host; the loops are written for gcc's
// auto-vectorizer (no intrinsics to keep in step with a scalar fallback),
// compiled for AVX-512, AVX2 and the baseline and picked at run time, and
// write a low working copy in the same pass as the master.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_RUNTIME_HOSTADAM_H
#define MEMOPT_LIB_RUNTIME_HOSTADAM_H

#include "memopt/Runtime/Runtime.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

namespace memopt::rt {

/// Index of each scalar in an offloaded update's staging slot
/// (kHostStagingScalarBytes of F32 at its head).
enum HostStagingScalar : int {
  kStagingLr = 0,
  kStagingStep = 1,
  kStagingMicroStep = 2,
  kStagingLossScale = 3,
  kStagingFoundInf = 4,
  kStagingSkipped = 5,
};

/// One offloaded update: what the CPU reads and writes. `grad` is the
/// staged gradient (F32, F16 or BF16, `elements` of it); `scalars` the
/// staging slot's head. `param` (may be null): where the new master is also
/// written, as `paramType` (F32; F16 / BF16 rounded to nearest even, a low
/// working parameter): the host backend's device parameter, or on CUDA a
/// low parameter's copy in the staging slot (an f32 master is copied back
/// from the master itself).
/// `paramPersists`: `param` is copied to the device on every run, written
/// or not (CUDA's low copy), so the engine has the CPU round the master
/// into it on an update's first run after setHostState / a reload
/// (`refreshParam`, set by the engine), even when the update does not apply.
struct HostUpdate {
  enum class Kind { Sgd, AdamW } kind = Kind::Sgd;
  const char *node = "";
  float momentum = 0, weightDecay = 0, beta1 = 0.9f, beta2 = 0.999f,
        eps = 1e-8f;
  float *master = nullptr;
  float *momentumBuffer = nullptr; ///< SGD with momentum
  float *expAvg = nullptr, *expAvgSq = nullptr;
  float *accumulator = nullptr;
  const void *grad = nullptr;
  DType gradType = DType::F32;
  int64_t elements = 0;
  /// Micro-batches per step when the update is gated on the micro-step
  /// (scalars[kStagingMicroStep]); 0: not gated.
  int64_t accumulationSteps = 0;
  bool scaled = false; ///< dynamic loss scaling: scale, found_inf, skipped
  const float *scalars = nullptr;
  void *param = nullptr;
  DType paramType = DType::F32;
  bool paramPersists = false;
  bool refreshParam = false;
};

/// The working parameter of a master: `dst[i]` = `src[i]` for F32, rounded
/// to nearest even for F16 / BF16 exactly as the backends' cast does
/// (Internal.h's floatToHalf / floatToBf16, CUDA's __float2half_rn /
/// __float2bfloat16_rn: overflow to infinity, NaN kept a quiet NaN of its
/// sign, subnormals rounded), over [begin, end), in branch-free loops that
/// gcc vectorizes. Exposed for the unit tests.
void roundMasterRange(const float *src, void *dst, DType type, int64_t begin,
                      int64_t end);
/// The inverse where it exists: widens F16 / BF16 (exact).
void widenParameterRange(const void *src, DType type, float *dst, int64_t begin,
                         int64_t end);

/// What one update does this step, from its scalars: whether it
/// accumulates (first micro-step or not), whether it applies, and the
/// step's constants. Returns "" or an error message.
struct HostUpdatePlan {
  bool accumulate = false, first = false, apply = true, scaled = false;
  double inverseScale = 1, rate = 0;
  double stepSize = 0, correction2 = 1; ///< AdamW
};
std::string planHostUpdate(const HostUpdate &update, HostUpdatePlan &plan);

/// The element loops over [begin, end) (HostAdamLoops.cpp): accumulation,
/// then (when the plan applies) SGD or AdamW on the master with the copy
/// into `param` written in the same pass; a refreshed persistent copy when
/// it does not apply. Exposed for the unit tests
/// (unittests/Runtime/HostAdamTest.cpp).
void runHostUpdateRange(const HostUpdate &update, const HostUpdatePlan &plan,
                        int64_t begin, int64_t end);

/// The instruction set the loops run with on this CPU: "avx512", "avx2" or
/// "baseline" (MEMOPT_OFFLOAD_ISA=avx2|sse2 caps it; read once).
const char *getHostUpdateIsa();

/// A fixed pool of worker threads that splits loops into chunks; the
/// calling thread takes a share.
class HostUpdatePool {
public:
  /// `threads` <= 0: MEMOPT_OFFLOAD_THREADS, else every core.
  explicit HostUpdatePool(int threads = 0);
  ~HostUpdatePool();
  HostUpdatePool(const HostUpdatePool &) = delete;
  HostUpdatePool &operator=(const HostUpdatePool &) = delete;
  int threads() const { return int(workers_.size()) + 1; }
  /// Runs body(lo, hi) over [0, n) in chunks of at least `grain`; returns
  /// when every chunk is done.
  void parallelFor(int64_t n, int64_t grain,
                   const std::function<void(int64_t, int64_t)> &body);

private:
  void work();
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)> *body_ = nullptr;
  int64_t n_ = 0, chunk_ = 0, next_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

/// Bytes the CPU streams for one update under `plan`, in the unit of the
/// fit search's host-update rate (include/memopt/Conversion/Fit.h,
/// hostUpdateEvent): the gradient and every host-placed f32 operand
/// (master, moments or momentum, accumulator) once when it applies; the
/// gradient and the accumulator on a micro-step that only accumulates.
int64_t getHostUpdateStreamedBytes(const HostUpdate &update,
                                   const HostUpdatePlan &plan);

/// Runs one update on the pool (plan, then the element loops in parallel).
/// `streamedBytes`, when given, receives getHostUpdateStreamedBytes (0 when
/// the update did nothing this micro-step).
std::string runHostUpdate(const HostUpdate &update, HostUpdatePool &pool,
                          int64_t *streamedBytes = nullptr);

/// The updates of a step, run one after another on a dispatcher thread
/// (each over the whole pool) in the order they were submitted, so the CPU
/// update of one bucket runs while the device computes the next gradients.
struct OpTimes;

class OffloadEngine {
public:
  OffloadEngine();
  ~OffloadEngine();
  OffloadEngine(const OffloadEngine &) = delete;
  OffloadEngine &operator=(const OffloadEngine &) = delete;
  /// Queues `update` (copied); returns its ticket.
  uint64_t submit(const HostUpdate &update);
  /// Blocks until the update with `ticket` (and every one before) is done.
  void waitFor(uint64_t ticket);
  /// Blocks until every submitted update is done.
  void waitAll();
  /// The first error of an update and its node (cleared), or "".
  std::string takeError(std::string &node);
  /// Seconds the CPU took per GiB streamed, over every update run so far
  /// (0: none streamed). --profile-times writes it as "<host update 1 GiB>",
  /// the entry the fit search reads instead of its constant.
  double measuredSecondsPerGiB();

  /// The masters changed outside the updates (a load): every persistent
  /// parameter copy is rounded again on its update's next run.
  void invalidateParams();

  uint8_t *hostState = nullptr;
  size_t hostStateBytes = 0;
  /// Backend data (CUDA: streams, events and sites; HostOptimizer.cpp).
  void *backend = nullptr;
  void (*destroyBackend)(void *) = nullptr;

private:
  void dispatch();
  HostUpdatePool pool_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<std::pair<uint64_t, HostUpdate>> queue_;
  uint64_t submitted_ = 0, completed_ = 0;
  double updateSeconds_ = 0;
  int64_t updateBytes_ = 0;
  std::string error_, errorNode_;
  /// Persistent parameter copies written since the last invalidateParams.
  std::unordered_set<const void *> freshParams_;
  bool stop_ = false;
  /// Last: it starts in the constructor, after every member it uses.
  std::thread dispatcher_;
};

/// Checks an offloaded update's operands (the host backend's update
/// checks, with the master as the parameter, and the device parameter of
/// the master's shape and type) and describes it: the staged gradient at
/// `staging` + kHostStagingScalarBytes, the scalars at `staging`. `m` / `v`
/// are AdamW's moments, `momentumBuffer` SGD's (or null). Returns false
/// after recording an error on the context.
bool describeOffloadedUpdate(Context &ctx, HostUpdate::Kind kind,
                             const char *node, void *staging,
                             const TensorRef &param, const TensorRef &grad,
                             const TensorRef &master,
                             const TensorRef *momentumBuffer,
                             const TensorRef *m, const TensorRef *v,
                             const TensorRef &lr, const TensorRef *step,
                             const GradientAccumulation *accumulation,
                             const LossScaling *scaling, HostUpdate &update);
/// describeOffloadedUpdate for SGD (a momentum needs its buffer) and AdamW,
/// with the update's hyperparameters set: both backends' offload entry
/// points start here, so they report the same errors.
bool describeOffloadedSgd(Context &ctx, const char *node, void *staging,
                          float momentum, float weightDecay,
                          const TensorRef &param, const TensorRef &grad,
                          const TensorRef &master,
                          const TensorRef *momentumBuffer, const TensorRef &lr,
                          const GradientAccumulation *accumulation,
                          const LossScaling *scaling, HostUpdate &update);
bool describeOffloadedAdamw(Context &ctx, const char *node, void *staging,
                            float beta1, float beta2, float eps,
                            float weightDecay, const TensorRef &param,
                            const TensorRef &grad, const TensorRef &master,
                            const TensorRef &m, const TensorRef &v,
                            const TensorRef &lr, const TensorRef &step,
                            const GradientAccumulation *accumulation,
                            const LossScaling *scaling, HostUpdate &update);

/// The context's engine (created on first use; each backend keeps the
/// pointer in its Context and deletes it in destroyContext).
OffloadEngine &offloadEngine(Context &ctx);
/// Deletes an engine (waits for its updates first); null does nothing.
void destroyOffloadEngine(OffloadEngine *engine);

/// Adds the engine's measured "<host update 1 GiB>" entry to `times`
/// (nothing when `engine` is null or streamed nothing); the entry's
/// milliseconds are per run times the runs, like the ops'.
void appendHostUpdateTime(OffloadEngine *engine, OpTimes &times);

} // namespace memopt::rt

#endif // MEMOPT_LIB_RUNTIME_HOSTADAM_H
