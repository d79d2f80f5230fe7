//===- MemoryReport.h - where the memory goes -------------------*- C++ -*-===//
//
// The memory report of a planned function: the totals (weights, I/O, arena,
// max-live, naive, in-place savings, fragmentation at the peak), one row per
// storage with its offset and live range, and renderings as JSON, a text
// table, an SVG timeline and a self-contained HTML page. Every number comes
// from BufferLiveness and the plan, nothing is recomputed here.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_ANALYSIS_MEMORYREPORT_H
#define MEMOPT_ANALYSIS_MEMORYREPORT_H

#include "memopt/Analysis/BufferLiveness.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace mlir::memopt {

/// One storage of the arena (after in-place and view merging).
struct BufferReport {
  std::string name;
  std::vector<std::string> tensors;
  int64_t size = 0;
  int64_t offset = 0;
  /// Op indices of the first write and the last read, both inclusive.
  int64_t first = 0;
  int64_t last = 0;
  /// Training steps: "saved_for_backward" (alive across the forward /
  /// backward boundary), "gradient" (a parameter's gradient), "workspace",
  /// else "activation".
  std::string kind = "activation";
  /// The liveness storage it holds (internal).
  unsigned storageId = 0;
};

/// Bytes of one category of a mixed-precision training step by element type
/// ("f32", "f16", "bf16", ...), and what the same tensors would take in f32.
struct PrecisionBytes {
  std::vector<std::pair<std::string, int64_t>> byType;
  int64_t f32Equivalent = 0;
  void add(Type elementType, int64_t bytes);
  int64_t total() const;
};

/// A mixed-precision training step (memopt.precision f16 / bf16 on a
/// function with state): the categories by element type, the parameters'
/// low copies (memopt-weight-casts' decision) and the loss scaling.
struct MixedPrecisionReport {
  bool present = false;
  std::string precision;
  PrecisionBytes savedForBackward, gradients, weightCopies, persistentState;
  int64_t weightCopyCount = 0;
  /// memopt-weight-casts: "keep" or "recast" ("" when the pass did not run),
  /// its policy, held bytes and the estimated time of the casts again.
  std::string weightCastDecision, weightCastPolicy;
  int64_t weightCastHeldBytes = 0;
  double weightCastSeconds = 0, stepSeconds = 0;
  /// Dynamic loss scaling: the initial scale and its schedule.
  bool lossScaling = false;
  double initialLossScale = 0, growthFactor = 0, backoffFactor = 0;
  int64_t growthInterval = 0;
};

/// What a training step holds (memopt-autodiff's program): the persistent
/// state by kind and what the arena holds for backward.
struct TrainingReport {
  bool present = false;
  int64_t parameterBytes = 0;
  /// Elements of the trained parameters (PyTorch's sum(p.numel()) of the
  /// module's parameters, when the model is a plain export).
  int64_t parameterCount = 0;
  int64_t optimizerStateBytes = 0;
  /// Running statistics of batch normalization (--bn-batch-stats).
  int64_t statisticBytes = 0;
  /// Constants: frozen weights, BatchNormalization statistics, small ones.
  int64_t constantBytes = 0;
  /// Every parameter gradient (each an arena buffer that dies at its update).
  int64_t gradientBytes = 0;
  /// Gradient bytes alive at the peak op.
  int64_t gradientBytesAtPeak = 0;
  /// max-live if every gradient lived until the end of the step (as in
  /// PyTorch, where optimizer.step() runs after backward) minus max-live:
  /// what updating each parameter right after its gradient saves.
  int64_t fusedUpdateSavedBytes = 0;
  /// Whether the peak op belongs to the forward (the loss depends on it) or
  /// the backward half; the first backward op index.
  bool peakInBackward = false;
  int64_t backwardStart = 0;
  /// Forward tensors alive across the loss op (saved for backward).
  int64_t savedForBackwardBytes = 0;
  /// --accumulate K: the persistent gradient accumulators (weight region,
  /// PyTorch's .grad) and the micro-batches per optimizer step.
  int64_t gradientAccumulatorBytes = 0;
  /// Whether those accumulators are on the host (`--offload optimizer`
  /// with host accumulators): then not in the device's weight region.
  bool gradientAccumulatorsOnHost = false;
  int64_t accumulationSteps = 1;
  MixedPrecisionReport mixedPrecision;
};

/// One rank's share of a data-parallel step (memopt-data-parallel). The
/// training section's bytes are already one rank's (the program is one
/// rank's step); this says what sharding saved and what communication
/// holds and sends.
struct DataParallelReport {
  bool present = false;
  int64_t ranks = 1;
  /// none, optimizer (ZeRO-1), gradients (ZeRO-2) or parameters (ZeRO-3).
  std::string shard = "none";
  int64_t allReduces = 0, reduceScatters = 0, allGathers = 0;
  /// ZeRO-3: the memopt.gather_parameter ops, the arena bytes of the whole
  /// parameters they gather (and the part alive at the peak), and the
  /// parameter bytes one rank would hold unsharded (the weight region holds
  /// the shards: TrainingReport::parameterBytes).
  int64_t parameterGathers = 0;
  int64_t gatheredParameterBytes = 0, gatheredParameterBytesAtPeak = 0;
  int64_t unshardedParameterBytes = 0;
  /// Arena buffers that hold a collective's result in a storage of its own
  /// (the reduce-scatter shards; the all-reduce runs in place over the
  /// gradient and holds none), and the part alive at the peak.
  int64_t communicationBufferBytes = 0;
  int64_t communicationBufferBytesAtPeak = 0;
  /// The optimizer state and accumulators one rank would hold unsharded.
  int64_t unshardedOptimizerStateBytes = 0;
  int64_t unshardedAccumulatorBytes = 0;
  /// Bytes each rank sends per optimizer step with ring algorithms (NCCL's
  /// bus volume): all-reduce 2 (N - 1) / N of its bytes, reduce-scatter and
  /// all-gather (N - 1) / N of the whole tensor's.
  int64_t sentBytesPerStep = 0;
  /// memopt-bucket-collectives: the gradient bytes of each bucket, in issue
  /// order (empty: every collective synchronous where it is).
  std::vector<int64_t> bucketBytes;
  /// ZeRO-3 (memopt-bucket-collectives' gather groups): the gathered bytes
  /// of each group of parameter gathers issued together one group ahead,
  /// in issue order (empty: every gather synchronous where it is).
  std::vector<int64_t> gatherGroupBytes;
};

/// What rematerialization (memopt-rematerialize) recomputed and what that
/// cost and saved. Times are priced as the solver priced them
/// (RematSummary.h): measured kernel times where it had them, the cost
/// model's roofline (CostModel.h) elsewhere; FLOPs come from
/// CostOpInterface.
struct RematReport {
  bool present = false;
  struct Recomputation {
    /// ONNX node name and op kind of the recomputed op.
    std::string name;
    std::string kind;
    /// Its op index in the planned order.
    int64_t opIndex = 0;
    int64_t flops = 0;
    double seconds = 0;
  };
  std::vector<Recomputation> recomputed;
  int64_t addedFlops = 0;
  double addedSeconds = 0;
  /// The step without the recomputations (every other executed op once).
  int64_t stepFlops = 0;
  double stepSeconds = 0;
  /// The arena planned without recomputation (0: not known, e.g. the pass
  /// ran alone in memopt-opt).
  int64_t unconstrainedArenaBytes = 0;
  /// The solver's budget and peaks (its model), from memopt.remat.
  int64_t solverBudgetBytes = 0;
  int64_t solverInitialPeakBytes = 0;
  int64_t solverPeakBytes = 0;
  std::string roofline;
  /// "roofline", or "measured kernel times (N ops), the roofline
  /// elsewhere" (describeRematCosts).
  std::string costModel;
};

/// What activation offload (docs/offload.md) copied to pinned host memory:
/// from the `memopt.offload` and `memopt.host_pool_size` function attributes.
/// Times are the offload timeline's predictions (both directions).
struct OffloadReport {
  bool present = false;
  int64_t values = 0;
  int64_t bytes = 0;
  int64_t hostPoolBytes = 0;
  double copySeconds = 0;
  double exposedSeconds = 0;
  double bytesPerSecond = 0;
};

struct MemoryReport {
  std::string function;
  /// "f32", or the low type memopt-mixed-precision chose ("f16", "bf16").
  std::string precision = "f32";
  /// The device weight region (host-placed variables left out).
  int64_t weightsBytes = 0;
  /// --offload optimizer: the host state region, f32 masters and optimizer
  /// state in pinned host memory (memopt.placement = "host"), and the
  /// pinned staging its gradients stream into.
  int64_t hostStateBytes = 0;
  int64_t hostStagingBytes = 0;
  int64_t ioBytes = 0;
  /// The outputs' part of ioBytes (f16 / bf16 ones with
  /// --output-precision low).
  int64_t outputBytes = 0;
  int64_t arenaBytes = 0;
  int64_t maxLiveBytes = 0;
  int64_t naiveBytes = 0;
  int64_t inPlaceSavedBytes = 0;
  int64_t viewSavedBytes = 0;
  /// Percent: 1 - largest free block / total free bytes, at the peak.
  double fragmentationIndex = 0;
  int64_t peakIndex = 0;
  int64_t numSteps = 0;
  std::vector<int64_t> liveProfile;
  std::vector<BufferReport> buffers;
  std::string algorithm;
  double planSeconds = 0;
  bool provedOptimal = false;
  TrainingReport training;
  DataParallelReport dataParallel;
  /// The arena budget (memopt-compile --memory-budget, the planner's
  /// capacity); 0: none.
  int64_t budgetBytes = 0;
  RematReport remat;
  OffloadReport offload;
};

/// A printable name for `value`: the ONNX node name of its producer (from
/// its NameLoc), with `:N` for results after the first, or `argN`.
std::string getValueName(Value value);

/// The ONNX node name of `op` (its NameLoc), or its mnemonic when it has none.
std::string getOpName(Operation *op);

/// Bytes of the host-placed state of a planned function (the variables
/// --offload optimizer keeps in pinned host memory).
int64_t getHostStateBytes(func::FuncOp function);

/// All the pinned host memory a planned function needs: its host state, the
/// gradient staging (`memopt.host_staging_size`) and the activation pool
/// (`memopt.host_pool_size`).
int64_t getPinnedHostBytes(func::FuncOp function);

/// Builds the report. `storageOffsets[id]` is the arena offset of storage
/// `id` (ignored for storages outside the arena).
MemoryReport buildMemoryReport(func::FuncOp function,
                               const BufferLiveness &liveness,
                               llvm::ArrayRef<int64_t> storageOffsets,
                               int64_t arenaBytes, int64_t budgetBytes = 0);

llvm::json::Value toJson(const MemoryReport &report);
void printTextReport(const MemoryReport &report, llvm::raw_ostream &os);
void writeSvgTimeline(const MemoryReport &report, llvm::raw_ostream &os);
void writeHtmlReport(const MemoryReport &report, llvm::raw_ostream &os);

} // namespace mlir::memopt

#endif // MEMOPT_ANALYSIS_MEMORYREPORT_H
