//===- Fit.h - the fastest configuration that fits a byte limit --*- C++
//-*-===//
//
// memopt-compile --fit BYTES --global-batch B (and memopt.fit in Python):
// searches micro-batch x accumulation, the choices of discrete levers
// (precision, and offload: none, activations, optimizer or both) and
// the recomputation budget for the configuration with the highest predicted
// samples/s whose whole-step device memory (the weight region with the
// optimizer state, the arena with its workspaces, inputs and outputs outside
// the arena, and the runtime's own overhead) is at most BYTES; then compiles
// that one. Every candidate is planned, never built: the plan is exact, so
// no trial runs on the device (docs/fit.md).
//
// Where the design comes from, and where it goes further:
//  - PyTorch Lightning's BatchSizeFinder and accelerate's
//    find_executable_batch_size search the batch by running steps until an
//    out-of-memory error (doubling, then halving); here the same monotone
//    search (the largest micro-batch that fits) runs on plans, and a
//    micro-batch is always a divisor of the global batch, so the step's
//    numerics are the global batch's.
//  - DeepSpeed's autotuner explores ZeRO stage x micro-batch x accumulation
//    with trial runs and prunes by a model of memory; here the memory is
//    the plan's, not a model, and the time is the cost model's (roofline or
//    measured kernel times, CostModel.h).
//  - torch.compile's activation_memory_budget is a fraction of the
//    activations; here the budget is bytes of the whole step, and the
//    recomputation budget is derived from it per candidate.
//  - Offload as a lever: ZeRO-Offload (DeepSpeed) and torchao's CPU offload
//    optimizer are switches a user turns on by hand, torchtune's activation
//    offloading too; DeepSpeed's autotuner tries offload only by a trial
//    run. Here each offload choice is planned like any candidate (the
//    optimizer's masters and state leave the plan's device weight region)
//    and priced in the step time: the activation copies by the remat
//    solver's copy timeline, the host update by a timeline of the
//    gradients' copies out, the CPU update and the copies back
//    (estimateHostOptimizerSeconds), so a limit only offload meets is met.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_CONVERSION_FIT_H
#define MEMOPT_CONVERSION_FIT_H

#include "memopt/Conversion/CompileDriver.h"

#include "llvm/Support/JSON.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mlir::memopt {

/// A discrete choice the search enumerates: its name (as the report prints
/// it), its values, and how a value changes the compile options. Precision
/// and offload are two (the search takes the cartesian product of every
/// lever's values, then searches micro-batch and recomputation for each
/// combination).
struct FitLever {
  std::string name;
  std::vector<std::string> values;
  std::function<void(CompileOptions &, const std::string &)> apply;
  /// Printed before a value in a configuration ("offload " + "optimizer").
  std::string prefix;
};

/// One configuration the search planned.
struct FitPoint {
  /// One value per lever (FitSearch::levers order), and as printed (with
  /// the lever's prefix; empty: the values).
  std::vector<std::string> choices, labels;
  int64_t microBatch = 0;
  int64_t accumulate = 1;
  /// The --memory-budget given to the candidate's compile (the arena
  /// recomputation must fit); 0: none.
  int64_t memoryBudget = 0;
  /// False when planning failed (the message says why, e.g. a budget
  /// recomputation cannot meet or a batch the model cannot take).
  bool planned = false;
  std::string failure;
  /// The whole step's device memory and its parts.
  int64_t arenaBytes = 0, weightBytes = 0, ioBytes = 0, overheadBytes = 0;
  int64_t deviceBytes() const {
    return arenaBytes + weightBytes + ioBytes + overheadBytes;
  }
  /// Ops the recomputation cloned.
  int64_t recomputations = 0;
  /// Pinned host memory: host-placed state (--offload optimizer), its
  /// gradient staging and the activation pool; overHostLimit when that
  /// exceeds --fit-host-memory (then `planned` is false).
  int64_t hostBytes = 0;
  bool overHostLimit = false;
  /// Predicted seconds of one micro-batch and of the optimizer step (the
  /// global batch: accumulate micro-batches), samples per second.
  double microStepSeconds = 0, stepSeconds = 0, samplesPerSecond = 0;
  /// Of microStepSeconds, the optimizer updates that accumulate: they run
  /// whole on the last micro-batch of a step only, and on the others only
  /// sum the gradient into the accumulator (accumulateSeconds).
  double updateSeconds = 0, accumulateSeconds = 0;
  /// Of microStepSeconds (last micro-batch of a step), what host memory
  /// adds: the activation copies the compute stream waits for, and the
  /// optimizer's host timeline (gradient copies out, CPU update, copies
  /// back) past the end of the device's work. hostUpdateSeconds is the CPU
  /// time of the updates, copySeconds that of the optimizer's copies (both
  /// directions), whether hidden or not.
  double activationCopySeconds = 0, hostOptimizerSeconds = 0;
  double hostUpdateSeconds = 0, copySeconds = 0;
  bool fits = false;
  /// On the Pareto front of memory and step time (of the planned points).
  bool pareto = false;
  /// "fp32, micro-batch 8 x 4, arena budget 1.2 MiB".
  std::string describe() const;
  llvm::json::Value toJson(ArrayRef<FitLever> levers) const;
};

/// What the search found: every planned point (in the order tried) and the
/// chosen one (the fastest that fits), or none.
struct FitResult {
  std::vector<FitPoint> points;
  std::optional<size_t> chosen;
  /// The point with the smallest device memory (for the message when
  /// nothing fits).
  std::optional<size_t> smallest;
  int64_t limitBytes = 0;
  int64_t globalBatch = 0;
  std::string timeSource;
  std::vector<FitLever> levers;
  llvm::json::Value toJson() const;
  /// The Pareto front as a table.
  void printFront(llvm::raw_ostream &os) const;
};

/// Plans one candidate (the compile options with its micro-batch, lever
/// values and arena budget applied) and measures it. The driver's plans
/// through planModule; the unit tests give a model of their own.
using FitPlanner = std::function<FitPoint(const FitPoint &candidate)>;

/// The search itself, on any planner: for each combination of lever values,
/// the whole batch in one micro-batch (no gradient accumulators, so it may
/// need less than smaller micro-batches that accumulate), then the largest
/// accumulating micro-batch (a divisor of `localBatch`) whose plan without
/// recomputation fits (binary search: with accumulation, memory grows with
/// the micro-batch), then the larger ones under recomputation with the
/// arena budget the limit leaves, skipped where their time without
/// recomputation (a bound) is no better than the best found, and stopped at
/// the first that cannot fit; the whole batch under recomputation last.
/// `samplesPerStep` is the global batch.
FitResult searchFit(ArrayRef<FitLever> levers, int64_t localBatch,
                    int64_t samplesPerStep, int64_t limitBytes,
                    const FitPlanner &plan);

/// The optimizer offload's part of a micro-step, on a timeline (Fit.cpp):
/// the device's work is `deviceSeconds` segments between the offloaded
/// updates; each gradient is copied out (D2H) on one copy stream in order,
/// the CPU runs each update once its gradient is on the host, one after
/// another, and each master is copied back (H2D) after its update; the step
/// ends when both the device and the last copy back are done. The compute
/// stream waits for a gradient's copy out at its own update, or with
/// `deferCopyWaits` (the runtime without loss scaling: the plan keeps the
/// gradient until then) at the next update. A copy takes
/// `copyLatencySeconds` plus its bytes at `copyBytesPerSecond` (the remat
/// solver's copy model, memopt/Remat/Offload.h).
struct HostUpdateEvent {
  /// Device seconds since the previous event (or the start).
  double deviceSecondsBefore = 0;
  int64_t copyOutBytes = 0, copyBackBytes = 0;
  double hostSeconds = 0;
};
struct HostTimeline {
  /// The micro-step's end; the CPU update time and the copies' time.
  double endSeconds = 0, hostSeconds = 0, copySeconds = 0;
};
HostTimeline simulateHostUpdates(ArrayRef<HostUpdateEvent> events,
                                 double deviceSecondsAfter,
                                 double copyBytesPerSecond,
                                 double copyLatencySeconds,
                                 bool deferCopyWaits = false);

/// The CPU update's throughput in bytes of host state and gradient a
/// second: bench/offload/host_adam_throughput.cpp measured the CPU AdamW at
/// 0.52-0.53 G parameters/s x 16 bytes (gradient, master, two moments) =
/// 8.3-8.5 GB/s on the 2-core development machine, rounded down (a GPU
/// server's cores do more: ZeRO-Offload reports 1.4 G parameters/s). A
/// measured "<host update 1 GiB>" entry in the kernel times wins.
constexpr double kHostUpdateBytesPerSecond = 8e9;
constexpr llvm::StringLiteral kHostUpdateGiBTimeKey = "<host update 1 GiB>";

/// The runtime's device memory outside the program's arena and weight
/// region, added to every candidate: cuBLASLt / cuDNN handles, the cuDNN
/// attention workspace and CUDA graph memory (the CUDA context itself is
/// already outside the free memory --fit auto reads). 0 on the host.
int64_t getRuntimeOverheadBytes(CompileTarget target);

/// The free memory of the GPU the program will run on (device 0 of the
/// CUDA driver, loaded at run time: the compiler does not link CUDA), or
/// MEMOPT_DEVICE_FREE_BYTES when set (tests, and a machine that compiles
/// for another). Fails with a message on a machine without either.
FailureOr<int64_t> queryDeviceFreeBytes(std::string &message);

/// memopt-compile --fit: search, print the front, compile the chosen
/// configuration with `options` (its report JSON gains a "fit" section).
/// Returns the exit code; nothing is written when nothing fits.
int runFit(const CompileOptions &options, llvm::raw_ostream &log,
           llvm::raw_ostream &errors);

} // namespace mlir::memopt

#endif // MEMOPT_CONVERSION_FIT_H
