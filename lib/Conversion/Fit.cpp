//===- Fit.cpp - memopt-compile --fit: the fastest configuration that fits
//-===//
//
// The search of Fit.h over plans (planModule: import and the compile
// pipeline, no emission), the device's free memory for --fit auto, and the
// driver that compiles the chosen configuration. docs/fit.md describes the
// search and how it compares with Lightning's BatchSizeFinder, accelerate,
// DeepSpeed's autotuner and torch.compile's activation_memory_budget, and
// how the offload lever is priced (docs/offload.md: ZeRO-Offload, torchao,
// torchtune).
//
//===----------------------------------------------------------------------===//

#include "memopt/Conversion/Fit.h"

#include "memopt/Analysis/BufferLiveness.h"
#include "memopt/Analysis/CostModel.h"
#include "memopt/Analysis/MemoryReport.h"
#include "memopt/Analysis/ScaledKernelTimes.h"
#include "memopt/Dialect/MemOpt/IR/HostUpdates.h"
#include "memopt/Dialect/MemOpt/IR/MemOptDialect.h"
#include "memopt/Dialect/MemOpt/IR/MemOptInterfaces.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/IR/OffloadOps.h"
#include "memopt/Dialect/MemOpt/Transforms/Offload.h"
#include "memopt/Import/OnnxImporter.h"
#include "memopt/Remat/Offload.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

#include <algorithm>
#include <cstdlib>
#include <dlfcn.h>
#include <map>

using namespace mlir;
using namespace mlir::memopt;

namespace {

std::string formatBytes(int64_t bytes) {
  if (bytes < 1024)
    return std::to_string(bytes) + " B";
  const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = bytes / 1024.0;
  int unit = 0;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  return llvm::formatv("{0:F2} {1}", value, units[unit]).str();
}

std::string formatSeconds(double seconds) {
  if (seconds >= 1)
    return llvm::formatv("{0:F3} s", seconds).str();
  if (seconds >= 1e-3)
    return llvm::formatv("{0:F3} ms", seconds * 1e3).str();
  return llvm::formatv("{0:F2} us", seconds * 1e6).str();
}

StringRef precisionName(CompilePrecision precision) {
  switch (precision) {
  case CompilePrecision::FP32:
    return "fp32";
  case CompilePrecision::TF32:
    return "tf32";
  case CompilePrecision::FP16:
    return "fp16";
  case CompilePrecision::BF16:
    return "bf16";
  }
  return "fp32";
}

CompilePrecision precisionOf(StringRef name) {
  return llvm::StringSwitch<CompilePrecision>(name)
      .Case("tf32", CompilePrecision::TF32)
      .Case("fp16", CompilePrecision::FP16)
      .Case("bf16", CompilePrecision::BF16)
      .Default(CompilePrecision::FP32);
}

/// The divisors of `n`, ascending.
std::vector<int64_t> divisorsOf(int64_t n) {
  std::vector<int64_t> low, high;
  for (int64_t d = 1; d * d <= n; ++d)
    if (n % d == 0) {
      low.push_back(d);
      if (d != n / d)
        high.push_back(n / d);
    }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

/// Every combination of the levers' values (the first lever varies
/// slowest).
std::vector<std::vector<std::string>>
combinationsOf(ArrayRef<FitLever> levers) {
  std::vector<std::vector<std::string>> combinations = {{}};
  for (const FitLever &lever : levers) {
    std::vector<std::vector<std::string>> next;
    for (const auto &prefix : combinations)
      for (const std::string &value : lever.values) {
        next.push_back(prefix);
        next.back().push_back(value);
      }
    combinations = std::move(next);
  }
  return combinations;
}

} // namespace

std::string FitPoint::describe() const {
  std::string text = llvm::join(labels.empty() ? choices : labels, ", ");
  text += (text.empty() ? "" : ", ") + std::string("micro-batch ") +
          std::to_string(microBatch) + " x " + std::to_string(accumulate);
  if (memoryBudget > 0)
    text += ", recomputation to an arena of " + formatBytes(memoryBudget);
  return text;
}

llvm::json::Value FitPoint::toJson(ArrayRef<FitLever> levers) const {
  llvm::json::Object chosenValues;
  for (auto [lever, value] : llvm::zip(levers, choices))
    chosenValues[lever.name] = value;
  llvm::json::Object object{{"choices", std::move(chosenValues)},
                            {"micro_batch", microBatch},
                            {"accumulate", accumulate},
                            {"arena_budget_bytes", memoryBudget},
                            {"planned", planned},
                            {"fits", fits},
                            {"pareto", pareto}};
  if (!planned) {
    object["failure"] = failure;
    return object;
  }
  object["device_bytes"] = deviceBytes();
  object["arena_bytes"] = arenaBytes;
  object["weight_bytes"] = weightBytes;
  object["io_bytes"] = ioBytes;
  object["overhead_bytes"] = overheadBytes;
  object["recomputations"] = recomputations;
  object["host_bytes"] = hostBytes;
  object["micro_step_seconds"] = microStepSeconds;
  object["update_seconds"] = updateSeconds;
  object["accumulate_seconds"] = accumulateSeconds;
  object["activation_copy_seconds"] = activationCopySeconds;
  object["host_optimizer_seconds"] = hostOptimizerSeconds;
  object["host_update_seconds"] = hostUpdateSeconds;
  object["optimizer_copy_seconds"] = copySeconds;
  object["step_seconds"] = stepSeconds;
  object["samples_per_second"] = samplesPerSecond;
  return object;
}

llvm::json::Value FitResult::toJson() const {
  llvm::json::Array leverNames, pointArray;
  for (const FitLever &lever : levers)
    leverNames.push_back(lever.name);
  for (const FitPoint &point : points)
    pointArray.push_back(point.toJson(levers));
  llvm::json::Object object{{"limit_bytes", limitBytes},
                            {"global_batch", globalBatch},
                            {"time_source", timeSource},
                            {"levers", std::move(leverNames)},
                            {"points", std::move(pointArray)}};
  object["chosen"] =
      chosen ? llvm::json::Value(int64_t(*chosen)) : llvm::json::Value(nullptr);
  return object;
}

void FitResult::printFront(llvm::raw_ostream &os) const {
  size_t planned = llvm::count_if(
      points, [](const FitPoint &point) { return point.planned; });
  os << "[fit] " << points.size() << " configurations tried (" << planned
     << " planned); the Pareto front of memory and predicted step time ("
     << timeSource << "):\n";
  os << llvm::formatv("  {0,-12} {1,-12} {2,-12} {3}\n", "device", "step",
                      "samples/s", "configuration");
  std::vector<size_t> front;
  for (size_t i = 0; i < points.size(); ++i)
    if (points[i].pareto)
      front.push_back(i);
  llvm::stable_sort(front, [&](size_t a, size_t b) {
    return points[a].deviceBytes() < points[b].deviceBytes();
  });
  for (size_t i : front) {
    const FitPoint &point = points[i];
    os << llvm::formatv("  {0,-12} {1,-12} {2,-12} {3}{4}{5}\n",
                        formatBytes(point.deviceBytes()),
                        formatSeconds(point.stepSeconds),
                        llvm::formatv("{0:F1}", point.samplesPerSecond).str(),
                        point.describe(), point.fits ? "" : " (over the limit)",
                        chosen && *chosen == i ? "  <- chosen" : "");
  }
}

FitResult mlir::memopt::searchFit(ArrayRef<FitLever> levers, int64_t localBatch,
                                  int64_t samplesPerStep, int64_t limitBytes,
                                  const FitPlanner &plan) {
  FitResult result;
  result.levers.assign(levers.begin(), levers.end());
  result.limitBytes = limitBytes;
  result.globalBatch = samplesPerStep;
  std::vector<int64_t> microBatches = divisorsOf(localBatch);
  double best = 0;
  auto run = [&](const std::vector<std::string> &choices, int64_t microBatch,
                 int64_t memoryBudget) {
    FitPoint candidate;
    candidate.choices = choices;
    candidate.microBatch = microBatch;
    candidate.accumulate = localBatch / microBatch;
    candidate.memoryBudget = memoryBudget;
    FitPoint point = plan(candidate);
    point.choices = choices;
    point.labels.clear();
    for (auto [lever, value] : llvm::zip(levers, choices))
      point.labels.push_back(lever.prefix + value);
    point.microBatch = microBatch;
    point.accumulate = candidate.accumulate;
    point.memoryBudget = memoryBudget;
    if (point.planned) {
      // K micro-batches, of which K - 1 only accumulate the gradients.
      double others = point.microStepSeconds - point.updateSeconds;
      point.stepSeconds =
          double(point.accumulate) * others +
          double(point.accumulate - 1) * point.accumulateSeconds +
          point.updateSeconds;
      point.samplesPerSecond = point.stepSeconds > 0
                                   ? double(samplesPerStep) / point.stepSeconds
                                   : 0.0;
      point.fits = point.deviceBytes() <= limitBytes;
      if (point.fits)
        best = std::max(best, point.samplesPerSecond);
    }
    result.points.push_back(std::move(point));
    return result.points.size() - 1;
  };

  for (const std::vector<std::string> &choices : combinationsOf(levers)) {
    std::map<size_t, size_t> plain; // divisor index -> point
    auto plainPoint = [&](size_t index) -> const FitPoint & {
      auto it = plain.find(index);
      if (it == plain.end())
        it = plain.emplace(index, run(choices, microBatches[index], 0)).first;
      return result.points[it->second];
    };
    // Recomputation for the micro-batch at `index`, with the arena budget
    // the limit leaves after the weights, inputs, outputs and the runtime.
    // Its time without recomputation bounds its time with it, so a
    // micro-batch whose bound is no better than the best fit is skipped
    // (std::nullopt: not tried, or nothing left for the arena).
    auto withRecomputation = [&](size_t index) -> std::optional<bool> {
      const FitPoint &bound = plainPoint(index);
      if (!bound.planned || bound.samplesPerSecond <= best)
        return std::nullopt;
      int64_t memoryBudget = limitBytes - (bound.weightBytes + bound.ioBytes +
                                           bound.overheadBytes);
      if (memoryBudget <= 0)
        return false;
      return result.points[run(choices, microBatches[index], memoryBudget)]
          .fits;
    };
    // The whole batch in one micro-batch (no accumulation) holds no
    // gradient accumulators, so it can need less than smaller micro-batches
    // that accumulate: it is planned on its own, first.
    size_t whole = microBatches.size() - 1;
    bool wholeFits = plainPoint(whole).fits;
    // With accumulation, memory grows with the micro-batch: the largest
    // that fits without recomputation, by bisection over the divisors.
    int64_t low = 0, high = int64_t(whole) - 1, largest = -1;
    while (low <= high) {
      int64_t middle = (low + high) / 2;
      if (plainPoint(size_t(middle)).fits) {
        largest = middle;
        low = middle + 1;
      } else {
        high = middle - 1;
      }
    }
    // Larger accumulating micro-batches need recomputation; the first that
    // cannot fit ends the walk (larger ones need more still).
    for (size_t index = size_t(largest + 1); index < whole; ++index) {
      std::optional<bool> fits = withRecomputation(index);
      if (fits.has_value() && !*fits)
        break;
      if (!plainPoint(index).planned)
        break;
    }
    if (!wholeFits)
      withRecomputation(whole);
  }

  for (size_t i = 0; i < result.points.size(); ++i) {
    const FitPoint &point = result.points[i];
    if (!point.planned)
      continue;
    if (point.fits &&
        (!result.chosen ||
         point.samplesPerSecond >
             result.points[*result.chosen].samplesPerSecond ||
         (point.samplesPerSecond ==
              result.points[*result.chosen].samplesPerSecond &&
          point.deviceBytes() < result.points[*result.chosen].deviceBytes())))
      result.chosen = i;
    if (!result.smallest ||
        point.deviceBytes() < result.points[*result.smallest].deviceBytes())
      result.smallest = i;
  }
  // The Pareto front of (device bytes, step time) over the planned points;
  // of equal points, the first.
  for (size_t i = 0; i < result.points.size(); ++i) {
    FitPoint &point = result.points[i];
    if (!point.planned)
      continue;
    point.pareto = true;
    for (size_t j = 0; j < result.points.size() && point.pareto; ++j) {
      const FitPoint &other = result.points[j];
      if (j == i || !other.planned)
        continue;
      bool noWorse = other.deviceBytes() <= point.deviceBytes() &&
                     other.stepSeconds <= point.stepSeconds;
      bool better = other.deviceBytes() < point.deviceBytes() ||
                    other.stepSeconds < point.stepSeconds;
      if (noWorse && (better || j < i))
        point.pareto = false;
    }
  }
  return result;
}

HostTimeline mlir::memopt::simulateHostUpdates(ArrayRef<HostUpdateEvent> events,
                                               double deviceSecondsAfter,
                                               double copyBytesPerSecond,
                                               double copyLatencySeconds,
                                               bool deferCopyWaits) {
  HostTimeline timeline;
  double device = 0, cpuFree = 0, copyOutFree = 0, copyBackFree = 0;
  double previousCopyOut = 0;
  for (const HostUpdateEvent &event : events) {
    device += event.deviceSecondsBefore;
    // The copy out starts when the gradient is ready and the copy-out
    // stream is free.
    double copyOut =
        copyLatencySeconds + double(event.copyOutBytes) / copyBytesPerSecond;
    copyOutFree = std::max(copyOutFree, device) + copyOut;
    // The compute stream waits for a copy out before the arena bytes it
    // leaves are reused: at the next update when the plan keeps the
    // gradient until then, else at once (docs/offload.md).
    device = std::max(device, deferCopyWaits ? previousCopyOut : copyOutFree);
    previousCopyOut = copyOutFree;
    // One dispatcher thread runs the updates in order, each on every core.
    cpuFree = std::max(cpuFree, copyOutFree) + event.hostSeconds;
    double copyBack =
        copyLatencySeconds + double(event.copyBackBytes) / copyBytesPerSecond;
    copyBackFree = std::max(copyBackFree, cpuFree) + copyBack;
    timeline.hostSeconds += event.hostSeconds;
    timeline.copySeconds += copyOut + copyBack;
  }
  device += deviceSecondsAfter;
  // The step's end waits for every copy (the last copy out through the
  // copy-back stream); the next step's forward reads the masters.
  timeline.endSeconds = std::max(device, copyBackFree);
  return timeline;
}

int64_t mlir::memopt::getRuntimeOverheadBytes(CompileTarget target) {
  // cuBLASLt and cuDNN handles with their internal buffers, the cuDNN
  // attention workspace the context owns and the CUDA graph: 256 MiB covers
  // what an H100 run of GPT-2 and TinyLlama shows outside arena and weights
  // (docs/fit.md).
  return target == CompileTarget::Cuda ? int64_t(256) << 20 : 0;
}

FailureOr<int64_t> mlir::memopt::queryDeviceFreeBytes(std::string &message) {
  if (const char *stated = std::getenv("MEMOPT_DEVICE_FREE_BYTES")) {
    FailureOr<int64_t> bytes = parseByteSize(stated);
    if (failed(bytes) || *bytes <= 0) {
      message = "MEMOPT_DEVICE_FREE_BYTES='" + std::string(stated) +
                "' is not a size (e.g. 24GiB, 4096)";
      return failure();
    }
    return *bytes;
  }
  // The CUDA driver API, loaded here: the compiler links no CUDA library.
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) {
    message = "--fit auto reads the free memory of the GPU through the CUDA "
              "driver (libcuda.so.1), which this machine does not have; give "
              "the bytes instead (--fit 24GiB) or set "
              "MEMOPT_DEVICE_FREE_BYTES";
    return failure();
  }
  using Init = int (*)(unsigned);
  using DeviceGet = int (*)(int *, int);
  using Retain = int (*)(void **, int);
  using Release = int (*)(int);
  using Push = int (*)(void *);
  using Pop = int (*)(void **);
  using MemGetInfo = int (*)(size_t *, size_t *);
  auto init = reinterpret_cast<Init>(dlsym(driver, "cuInit"));
  auto deviceGet = reinterpret_cast<DeviceGet>(dlsym(driver, "cuDeviceGet"));
  auto retain =
      reinterpret_cast<Retain>(dlsym(driver, "cuDevicePrimaryCtxRetain"));
  auto release =
      reinterpret_cast<Release>(dlsym(driver, "cuDevicePrimaryCtxRelease_v2"));
  auto push = reinterpret_cast<Push>(dlsym(driver, "cuCtxPushCurrent_v2"));
  auto pop = reinterpret_cast<Pop>(dlsym(driver, "cuCtxPopCurrent_v2"));
  auto memGetInfo =
      reinterpret_cast<MemGetInfo>(dlsym(driver, "cuMemGetInfo_v2"));
  int device = 0, status = -1;
  size_t freeBytes = 0, totalBytes = 0;
  void *context = nullptr;
  if (init && deviceGet && retain && release && push && pop && memGetInfo &&
      (status = init(0)) == 0 && (status = deviceGet(&device, 0)) == 0 &&
      (status = retain(&context, device)) == 0) {
    if ((status = push(context)) == 0) {
      status = memGetInfo(&freeBytes, &totalBytes);
      void *popped = nullptr;
      pop(&popped);
    }
    release(device);
  }
  dlclose(driver);
  if (status != 0) {
    message = "--fit auto could not read the GPU's free memory (CUDA driver "
              "error " +
              std::to_string(status) +
              ": no usable GPU?); give the bytes instead (--fit 24GiB)";
    return failure();
  }
  return int64_t(freeBytes);
}

namespace {

/// A model input the micro-batch re-shapes (its dimension 0), and the
/// others as the user fixed them.
struct ModelInputs {
  std::vector<std::pair<std::string, SmallVector<int64_t>>> batched;
  std::vector<std::string> fixedSpecs;
};

std::string shapeSpec(StringRef name, ArrayRef<int64_t> dims) {
  std::string spec = name.str() + "=";
  for (auto [i, dim] : llvm::enumerate(dims))
    spec += (i ? "x" : "") + std::to_string(dim);
  return spec;
}

/// How fast host memory moves and updates (bytes a second).
struct HostRates {
  double copyBytesPerSecond = 40e9;
  double updateBytesPerSecond = kHostUpdateBytesPerSecond;
};

/// An offloaded update as the timeline sees it: the staged tensor (the
/// gradient, or the device accumulator) and the scalars go out, the master
/// comes back; the CPU streams the staged tensor and every host-placed
/// operand (master, moments or momentum, accumulator) once, or on a
/// micro-batch that only accumulates, the gradient and the host accumulator
/// (nothing with the accumulator on the device: the device summed it, and
/// the CPU waits for the last micro-batch).
HostUpdateEvent hostUpdateEvent(Operation *op, bool lastMicroStep,
                                const HostRates &rates) {
  HostUpdateOperands operands = getHostUpdateOperands(op);
  Value staged = getStagedValue(op);
  HostUpdateEvent event;
  event.copyOutBytes =
      getTensorBytes(staged.getType()) + kHostStagingScalarBytes;
  event.copyBackBytes = getTensorBytes(operands.param.getType());
  int64_t streamed = 0;
  if (lastMicroStep || !operands.accumulator) {
    streamed = getTensorBytes(staged.getType());
    for (Value operand : op->getOperands())
      if (isHostPlaced(operand))
        streamed += getTensorBytes(operand.getType());
    // The CPU writes a low working parameter's rounded copy too.
    if (hasLowWorkingParameter(op))
      streamed += getTensorBytes(operands.param.getType());
  } else if (!accumulatesOnDevice(op)) {
    streamed = getTensorBytes(operands.grad.getType()) +
               getTensorBytes(operands.accumulator.getType());
  }
  event.hostSeconds = double(streamed) / rates.updateBytesPerSecond;
  return event;
}

/// The predicted seconds of one op of a candidate.
using OpSeconds = std::function<double(Operation *)>;

/// Measures a planned module: the device bytes and the predicted time of
/// one run.
void measurePlanned(func::FuncOp function, const OpSeconds &opSeconds,
                    const HostRates &rates, FitPoint &point) {
  point.arenaBytes =
      function->getAttrOfType<IntegerAttr>("memopt.arena_size").getInt();
  auto weights = function->getAttrOfType<IntegerAttr>("memopt.weights_size");
  point.weightBytes = weights ? weights.getInt() : 0;
  // Inputs are the caller's buffers; outputs live in the arena unless the
  // plan gave them none (EmitProgram's tables).
  for (Type type : function.getArgumentTypes())
    point.ioBytes += getTensorBytes(type);
  point.hostBytes = getPinnedHostBytes(function);
  auto outputOffsets =
      function->getAttrOfType<DenseI64ArrayAttr>("memopt.output_offsets");
  for (auto [index, type] : llvm::enumerate(function.getResultTypes()))
    if (!outputOffsets || outputOffsets[index] < 0)
      point.ioBytes += getTensorBytes(type);
  Roofline roofline = Roofline::h100();
  // The device's seconds between offloaded updates, for the host timeline
  // of the last micro-batch of a step and of one that only accumulates.
  SmallVector<HostUpdateEvent> lastEvents, otherEvents;
  double deviceSince = 0;
  for (Operation &op : function.getBody().front().without_terminator()) {
    // Activation copies run on the copy stream; what the compute stream
    // waits for is the remat solver's exposed time (below).
    if (isa<OffloadOp, OffloadWaitOp, ReloadOp, ReloadWaitOp>(op))
      continue;
    if (isHostUpdate(&op)) {
      // With the accumulator on the device, the device sums the gradient
      // into it first (the accumulation pass of docs/training.md: read the
      // gradient, read and write the f32 sum).
      if (accumulatesOnDevice(&op)) {
        Value grad = getHostUpdateOperands(&op).grad;
        double sum =
            double(getTensorBytes(grad.getType()) +
                   8 * cast<ShapedType>(grad.getType()).getNumElements()) /
                roofline.bytesPerSecond +
            roofline.kernelSeconds;
        point.microStepSeconds += sum;
        deviceSince += sum;
      }
      lastEvents.push_back(hostUpdateEvent(&op, true, rates));
      otherEvents.push_back(hostUpdateEvent(&op, false, rates));
      lastEvents.back().deviceSecondsBefore = deviceSince;
      otherEvents.back().deviceSecondsBefore = deviceSince;
      deviceSince = 0;
      continue;
    }
    double seconds = opSeconds(&op);
    point.microStepSeconds += seconds;
    deviceSince += seconds;
    point.recomputations += op.hasAttr(kRecomputedAttrName);
    // An update that accumulates (memopt-autodiff accumulate=K) runs whole
    // once a step; on the other micro-batches it reads the gradient and
    // reads and writes the f32 accumulator (docs/training.md).
    auto steps = op.getAttrOfType<IntegerAttr>("accumulation_steps");
    if (!steps || steps.getInt() <= 1 || op.getNumOperands() == 0)
      continue;
    point.updateSeconds += seconds;
    int64_t elements = 1;
    if (auto type = dyn_cast<RankedTensorType>(op.getOperand(0).getType()))
      elements = type.getNumElements();
    point.accumulateSeconds +=
        double(3 * 4 * elements) / roofline.bytesPerSecond +
        roofline.kernelSeconds;
  }
  if (auto offload = function->getAttrOfType<DictionaryAttr>(kOffloadAttrName))
    if (auto exposed = offload.getAs<FloatAttr>("exposed_seconds")) {
      point.activationCopySeconds = exposed.getValueAsDouble();
      point.microStepSeconds += point.activationCopySeconds;
      deviceSince += point.activationCopySeconds;
    }
  if (lastEvents.empty())
    return;
  // Under dynamic loss scaling every update waits for the overflow check
  // after the last gradient (docs/offload.md): the copies and the CPU
  // updates start there, and nothing of them hides under the backward.
  bool lossScaled = false;
  for (Operation &op : function.getBody().front().without_terminator())
    lossScaled |= isHostUpdate(&op) && getHostUpdateOperands(&op).foundInf;
  if (lossScaled)
    for (auto *events : {&lastEvents, &otherEvents}) {
      double before = 0;
      for (HostUpdateEvent &event : *events) {
        before += event.deviceSecondsBefore;
        event.deviceSecondsBefore = 0;
      }
      events->front().deviceSecondsBefore = before;
    }
  // Every micro-batch of an offloaded step copies its gradients out and
  // the masters back; the CPU updates whole on the last one only, and on
  // the others sums into the host accumulators.
  double device = point.microStepSeconds;
  // A copy's fixed cost is the remat solver's (memopt/Remat/Offload.h).
  double latency = ::memopt::remat::OffloadProblem().latencySeconds;
  // Without loss scaling the compute stream waits for each gradient's copy
  // out only at the next offloaded update (HostUpdates.h,
  // getDeferredOffloadGradient).
  HostTimeline last = simulateHostUpdates(
      lastEvents, deviceSince, rates.copyBytesPerSecond, latency, !lossScaled);
  HostTimeline other = simulateHostUpdates(
      otherEvents, deviceSince, rates.copyBytesPerSecond, latency, !lossScaled);
  point.hostOptimizerSeconds = last.endSeconds - device;
  point.hostUpdateSeconds = last.hostSeconds;
  point.copySeconds = last.copySeconds;
  point.microStepSeconds = last.endSeconds;
  point.updateSeconds += last.endSeconds - other.endSeconds;
}

/// The first line of each error the context reported.
std::string firstLines(StringRef text) {
  SmallVector<StringRef> lines;
  text.split(lines, '\n', -1, false);
  std::string joined;
  for (StringRef line : lines) {
    line = line.trim();
    line.consume_front("memopt-compile: ");
    line.consume_front("error: ");
    if (!line.empty() && !StringRef(joined).contains(line))
      joined += (joined.empty() ? "" : "; ") + line.str();
  }
  return joined;
}

} // namespace

int mlir::memopt::runFit(const CompileOptions &options, llvm::raw_ostream &log,
                         llvm::raw_ostream &errors) {
  auto fail = [&](const Twine &message) {
    errors << "memopt-compile: error: " << message << "\n";
    return 1;
  };
  auto say = [&](const Twine &line) {
    if (!options.quiet)
      log << line << "\n";
  };
  const TrainingOptions &training = options.training;
  int64_t globalBatch = options.globalBatch;
  if (globalBatch <= 0)
    return fail("--fit needs --global-batch B (the samples of one optimizer "
                "step, which micro-batch x accumulation divides)");
  if (options.memoryBudget > 0)
    return fail("--fit chooses the recomputation budget itself; leave out "
                "--memory-budget");
  if (training.accumulate != 1)
    return fail("--fit chooses the accumulation itself; leave out "
                "--accumulate");
  if (options.noPlan)
    return fail("--fit needs the planner; leave out --no-plan");
  if (options.lowerOnly || StringRef(options.inputPath).ends_with(".mlir"))
    return fail("--fit needs the ONNX model (it re-batches the model's "
                "inputs); '" +
                options.inputPath + "' is MLIR");
  int64_t limit = 0;
  if (options.fit != "auto") {
    FailureOr<int64_t> bytes = parseByteSize(options.fit);
    if (failed(bytes) || *bytes <= 0)
      return fail("--fit '" + options.fit +
                  "' is not a size (e.g. 24GiB, 512MiB) or auto");
    limit = *bytes;
  } else {
    std::string message;
    FailureOr<int64_t> free = queryDeviceFreeBytes(message);
    if (failed(free))
      return fail(message);
    limit = *free;
    say("[fit] --fit auto: the GPU has " + formatBytes(limit) + " (" +
        Twine(limit) + " bytes) free");
  }
  int64_t hostLimit = 0;
  if (!options.fitHostMemory.empty()) {
    FailureOr<int64_t> bytes = parseByteSize(options.fitHostMemory);
    if (failed(bytes) || *bytes <= 0)
      return fail("--fit-host-memory '" + options.fitHostMemory +
                  "' is not a size (e.g. 120GiB)");
    hostLimit = *bytes;
  }
  int64_t ranks =
      training.dataParallel > 0 ? int64_t(training.dataParallel) : 1;
  if (globalBatch % ranks != 0)
    return fail("--global-batch " + Twine(globalBatch) +
                " does not divide over the " + Twine(ranks) +
                " data-parallel ranks");
  int64_t localBatch = globalBatch / ranks;

  DialectRegistry registry;
  registerImportDialects(registry);
  registry.insert<func::FuncDialect, MemOptDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  context.printOpOnDiagnostic(false);

  // The model's inputs as the user fixed them: those whose dimension 0 is
  // the first input's carry the batch.
  ModelInputs inputs;
  {
    ImportOptions importOptions;
    importOptions.foldLimitElements = options.foldLimitElements;
    for (const std::string &spec : options.inputShapes) {
      std::string message;
      if (failed(parseInputShapeSpec(spec, importOptions, message)))
        return fail("--input-shape '" + spec + "': " + message);
    }
    std::string diagnostics;
    FailureOr<OwningOpRef<ModuleOp>> imported;
    {
      ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diagnostic) {
        diagnostics += diagnostic.str() + "\n";
        return success();
      });
      imported = importOnnxModel(options.inputPath, context, importOptions);
    }
    if (failed(imported))
      return fail(firstLines(diagnostics));
    func::FuncOp function;
    for (auto candidate : imported->get().getOps<func::FuncOp>())
      if (!candidate.isExternal())
        function = candidate;
    int64_t batch = -1;
    for (unsigned i = 0; function && i < function.getNumArguments(); ++i) {
      auto type = dyn_cast<RankedTensorType>(function.getArgument(i).getType());
      auto name = function.getArgAttrOfType<StringAttr>(i, "memopt.name");
      if (!type || !name)
        continue;
      if (batch < 0 && type.getRank() > 0)
        batch = type.getDimSize(0);
      if (type.getRank() > 0 && type.getDimSize(0) == batch)
        inputs.batched.push_back(
            {name.str(), SmallVector<int64_t>(type.getShape())});
      else
        inputs.fixedSpecs.push_back(
            shapeSpec(name.getValue(), type.getShape()));
    }
    if (inputs.batched.empty())
      return fail("--fit: the model has no input with a batch dimension "
                  "(dimension 0 of its first input)");
  }

  // The levers: precision (an offload mode would be one more).
  std::vector<CompilePrecision> precisions;
  for (const std::string &name : options.fitPrecisions) {
    FailureOr<CompilePrecision> precision =
        parseEnumName<CompilePrecision>(name);
    if (failed(precision))
      return fail("--fit-precisions '" + name + "' is not " +
                  getEnumNames<CompilePrecision>(", "));
    precisions.push_back(*precision);
  }
  if (precisions.empty()) {
    if (options.precision == CompilePrecision::FP16 ||
        options.precision == CompilePrecision::BF16)
      precisions.push_back(options.target == CompileTarget::Cuda
                               ? CompilePrecision::TF32
                               : CompilePrecision::FP32);
    precisions.push_back(options.precision);
  }
  FitLever precisionLever;
  precisionLever.name = "precision";
  for (CompilePrecision precision : precisions)
    if (!llvm::is_contained(precisionLever.values, precisionName(precision)))
      precisionLever.values.push_back(precisionName(precision).str());
  precisionLever.apply = [](CompileOptions &compile, const std::string &value) {
    compile.precision = precisionOf(value);
  };
  std::vector<FitLever> levers = {precisionLever};

  // Offload: none, activations, optimizer, activations+optimizer, as
  // --fit-offload lists them, else every subset of --offload's values,
  // else all that the step supports (activations and the optimizer with
  // --train; the optimizer not with data-parallel).
  FitLever offloadLever;
  offloadLever.name = "offload";
  offloadLever.prefix = "offload ";
  auto has = [](ArrayRef<std::string> list, StringRef value) {
    return llvm::is_contained(list, value);
  };
  for (const std::string &value : training.offload)
    if (value != "none" && value != "activations" && value != "optimizer")
      return fail("offload '" + value +
                  "' is not none, activations or optimizer (a comma list, "
                  "e.g. --offload activations,optimizer)");
  // "+device-accumulators": the optimizer's offload with the gradient
  // accumulators on the device (--offload-accumulators device).
  constexpr StringLiteral deviceSums = "+device-accumulators";
  if (!options.fitOffload.empty()) {
    for (const std::string &value : options.fitOffload) {
      StringRef base = StringRef(value);
      bool sums = base.consume_back(deviceSums);
      if ((base != "none" && base != "activations" && base != "optimizer" &&
           base != "activations+optimizer") ||
          (sums && !base.ends_with("optimizer")))
        return fail("--fit-offload '" + value +
                    "' is not none, activations, optimizer, "
                    "activations+optimizer, or optimizer or "
                    "activations+optimizer with +device-accumulators");
      if (value != "none" && !training.enabled)
        return fail("--fit-offload " + value + " needs --train");
      if (!has(offloadLever.values, value))
        offloadLever.values.push_back(value);
    }
  } else if (training.enabled) {
    bool userLimits = !training.offload.empty();
    bool activations = !userLimits || has(training.offload, "activations");
    bool optimizer = userLimits ? has(training.offload, "optimizer")
                                : training.dataParallel == 0;
    offloadLever.values.push_back("none");
    if (activations)
      offloadLever.values.push_back("activations");
    if (optimizer)
      offloadLever.values.push_back("optimizer");
    if (activations && optimizer)
      offloadLever.values.push_back("activations+optimizer");
    // Where the accumulators live is the search's too (an accumulating
    // micro-batch's choice: the device's memory against the CPU's work on
    // every micro-batch), unless --offload-accumulators fixed it; with the
    // activation copies too only when --fit-offload lists it (each choice
    // is a search of its own).
    if (optimizer && localBatch > 1 && training.offloadAccumulators.empty())
      offloadLever.values.push_back("optimizer" + deviceSums.str());
  }
  offloadLever.apply = [deviceSums](CompileOptions &compile,
                                    const std::string &value) {
    compile.training.offload.clear();
    SmallVector<StringRef> parts;
    StringRef(value).split(parts, '+');
    for (StringRef part : parts)
      if (part == deviceSums.drop_front())
        compile.training.offloadAccumulators = "device";
      else if (part != "none")
        compile.training.offload.push_back(part.str());
    if (!llvm::is_contained(compile.training.offload, "optimizer"))
      compile.training.offloadAccumulators.clear();
  };
  if (!offloadLever.values.empty())
    levers.push_back(offloadLever);

  HostRates rates;
  rates.copyBytesPerSecond = options.offloadBandwidth * 1e9;
  Roofline roofline = Roofline::h100();
  std::string timeSource = roofline.name + " roofline";
  // Measured kernel times (docs/fit.md, "Predicted time"): one file per
  // measured micro-batch, comma-separated; each --profile-times file says
  // its micro-batch and the target's per-op overhead.
  ScaledKernelTimes measuredTimes;
  measuredTimes.setDefaultOpOverhead(roofline.kernelSeconds);
  SmallVector<StringRef> timeFiles;
  StringRef(options.rematKernelTimes)
      .split(timeFiles, ',', -1, /*KeepEmpty=*/false);
  for (StringRef file : timeFiles) {
    std::string message;
    FailureOr<KernelTimes> read = readKernelTimes(file, message);
    if (failed(read))
      return fail(message);
    int64_t measuredBatch = 0;
    if (auto it = read->find(kMicroBatchTimeKey); it != read->end()) {
      double value = it->second;
      if (!(value >= 1) || value != double(int64_t(value)))
        return fail("kernel times '" + file + "': \"" + kMicroBatchTimeKey +
                    "\" must be a positive integer (the micro-batch the "
                    "times were measured at)");
      measuredBatch = int64_t(value);
    }
    // Measured host rates win (an offloading CUDA executable's
    // --profile-times writes "<copy 1 GiB>" and "<host update 1 GiB>").
    if (auto it = read->find(kCopyGiBTimeKey);
        it != read->end() && it->second > 0)
      rates.copyBytesPerSecond = double(int64_t(1) << 30) / it->second;
    if (auto it = read->find(kHostUpdateGiBTimeKey);
        it != read->end() && it->second > 0)
      rates.updateBytesPerSecond = double(int64_t(1) << 30) / it->second;
    measuredTimes.addMeasurement(*read, measuredBatch);
    timeSource +=
        (timeSource.find("measured") == std::string::npos
             ? "; measured kernel times from "
             : ", ") +
        file.str() +
        (measuredBatch ? " (micro-batch " + std::to_string(measuredBatch) + ")"
                       : std::string(" (micro-batch unknown: "
                                     "times used as they are)"));
  }
  if (!timeFiles.empty())
    timeSource += llvm::formatv(", scaled by the roofline's work; {0:F2} us "
                                "per op",
                                measuredTimes.getOpOverhead() * 1e6)
                      .str();

  int64_t overhead = getRuntimeOverheadBytes(options.target);
  // The compile options of one candidate.
  auto configure = [&](const FitPoint &candidate) {
    CompileOptions compile = options;
    compile.fit.clear();
    compile.globalBatch = 0;
    compile.fitPrecisions.clear();
    compile.fitOffload.clear();
    compile.fitHostMemory.clear();
    for (auto [lever, value] : llvm::zip(levers, candidate.choices))
      lever.apply(compile, value);
    // Activation copies are the recomputation budget's third choice: with
    // no budget they change nothing (and the pipeline refuses them).
    if (candidate.memoryBudget == 0)
      llvm::erase(compile.training.offload, "activations");
    compile.inputShapes = inputs.fixedSpecs;
    for (const auto &[name, dims] : inputs.batched) {
      SmallVector<int64_t> shape = dims;
      shape[0] = candidate.microBatch;
      compile.inputShapes.push_back(shapeSpec(name, shape));
    }
    compile.replaceFixedInputDims = true;
    // The recomputation solver reads one file of kernel times (the first).
    if (!timeFiles.empty())
      compile.rematKernelTimes = timeFiles.front().str();
    if (training.enabled)
      compile.training.accumulate = candidate.accumulate;
    compile.memoryBudget = candidate.memoryBudget;
    return compile;
  };
  // Plans one configuration; the function, or null and why not.
  auto planFunction = [&](const CompileOptions &compile,
                          OwningOpRef<ModuleOp> &module,
                          std::string &failure) -> func::FuncOp {
    std::string diagnostics;
    llvm::raw_string_ostream errorStream(diagnostics);
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diagnostic) {
      if (diagnostic.getSeverity() == DiagnosticSeverity::Error)
        diagnostics += diagnostic.str() + "\n";
      return success();
    });
    FailureOr<OwningOpRef<ModuleOp>> planned =
        planModule(compile, context, errorStream);
    func::FuncOp function;
    if (succeeded(planned)) {
      module = std::move(*planned);
      for (auto body : module->getOps<func::FuncOp>())
        if (!body.isExternal())
          function = body;
    }
    if (!function || !function->hasAttr("memopt.arena_size")) {
      failure = firstLines(diagnostics);
      if (failure.empty())
        failure = "planning failed";
      return func::FuncOp();
    }
    return function;
  };
  // The measured times of each combination of lever values, with the
  // roofline work of each op name in a reference plan at every measured
  // micro-batch (ScaledKernelTimes.h): planned once per combination.
  std::map<std::string, ScaledKernelTimes> timesByChoices;
  auto scaledTimes = [&](const FitPoint &candidate) -> ScaledKernelTimes & {
    auto [it, inserted] = timesByChoices.try_emplace(
        llvm::join(candidate.choices, "/"), measuredTimes);
    if (!inserted)
      return it->second;
    for (int64_t measuredBatch : measuredTimes.getMeasuredMicroBatches()) {
      FitPoint reference;
      reference.choices = candidate.choices;
      reference.microBatch = measuredBatch;
      OwningOpRef<ModuleOp> module;
      std::string failure;
      func::FuncOp function =
          planFunction(configure(reference), module, failure);
      if (!function)
        continue; // that micro-batch's times are used as they are
      llvm::StringSet<> seen;
      for (Operation &op : function.getBody().front().without_terminator()) {
        // The runtime never runs a constant (its bytes are in the weight
        // region), so --profile-times timed the name's next op.
        if (isa<ConstantOp>(op))
          continue;
        double seconds = estimateOpSeconds(&op, roofline);
        if (seconds <= 0)
          continue;
        std::string name = getOpName(&op);
        StringRef kind = op.getName().getStringRef();
        if (seen.insert(name).second)
          it->second.setReferenceWork(name, measuredBatch,
                                      seconds - roofline.kernelSeconds, kind);
        // The first op of each kind under the name (the file's
        // kernelTimeKey entries).
        std::string key = kernelTimeKey(name, kind);
        if (seen.insert(key).second)
          it->second.setReferenceWork(key, measuredBatch,
                                      seconds - roofline.kernelSeconds);
      }
    }
    return it->second;
  };
  auto planOne = [&](const FitPoint &candidate, const CompileOptions &compile) {
    FitPoint point = candidate;
    OwningOpRef<ModuleOp> module;
    func::FuncOp function = planFunction(compile, module, point.failure);
    if (!function)
      return point;
    point.planned = true;
    OpSeconds opSeconds = [&](Operation *op) {
      return estimateOpSeconds(op, roofline);
    };
    if (!measuredTimes.empty()) {
      const ScaledKernelTimes &times = scaledTimes(candidate);
      opSeconds = [&times, &roofline, &candidate](Operation *op) {
        double seconds = estimateOpSeconds(op, roofline);
        if (seconds <= 0)
          return 0.0;
        double work = seconds - roofline.kernelSeconds;
        return times
            .predict(getOpName(op), candidate.microBatch, work,
                     op->getName().getStringRef())
            .value_or(times.getOpOverhead() + work);
      };
    }
    measurePlanned(function, opSeconds, rates, point);
    point.overheadBytes = overhead;
    return point;
  };
  // Candidates that compile alike (activations without a budget are none)
  // are planned once.
  std::map<std::string, FitPoint> planned;
  FitPlanner planner = [&](const FitPoint &candidate) {
    CompileOptions compile = configure(candidate);
    // Without accumulation there are no accumulators to place: the program
    // of the same choice without +device-accumulators.
    if (candidate.accumulate == 1 &&
        compile.training.offloadAccumulators == "device") {
      FitPoint point = candidate;
      point.failure = "no accumulation, so no accumulators to keep on the "
                      "device (the same program as without "
                      "+device-accumulators)";
      return point;
    }
    std::string key = precisionName(compile.precision).str() + "/" +
                      llvm::join(compile.training.offload, "+") + "/" +
                      compile.training.offloadAccumulators + "/" +
                      std::to_string(candidate.microBatch) + "/" +
                      std::to_string(candidate.memoryBudget);
    if (auto it = planned.find(key); it != planned.end())
      return it->second;
    FitPoint point = planOne(candidate, compile);
    // Over the host's limit: not a fit (and, like a plan that failed, it
    // ends the walk to larger micro-batches, which pin at least as much).
    if (point.planned && hostLimit > 0 && point.hostBytes > hostLimit) {
      point.planned = false;
      point.overHostLimit = true;
      point.failure = "needs " + formatBytes(point.hostBytes) +
                      " of pinned host memory, over --fit-host-memory " +
                      formatBytes(hostLimit);
    }
    planned.emplace(key, point);
    return point;
  };

  say("[fit] " + formatBytes(limit) + " (" + Twine(limit) +
      " bytes) of device memory, global batch " + Twine(globalBatch) +
      (ranks > 1 ? " over " + Twine(ranks) + " ranks" : Twine()) +
      ": micro-batch x accumulation over the divisors of " + Twine(localBatch) +
      ", precision " + llvm::join(precisionLever.values, " / ") +
      (levers.size() > 1 ? ", offload " + llvm::join(offloadLever.values, " / ")
                         : std::string()) +
      ", recomputation; " +
      Twine(options.target == CompileTarget::Cuda ? formatBytes(overhead)
                                                  : std::string("nothing")) +
      " for the runtime");
  FitResult result = searchFit(levers, localBatch, globalBatch, limit, planner);
  result.timeSource = timeSource;
  if (!options.quiet)
    result.printFront(log);

  if (!result.smallest && !result.points.empty()) {
    const FitPoint &first = result.points.front();
    if (first.overHostLimit)
      return fail("no configuration fits in --fit-host-memory: micro-batch " +
                  Twine(first.microBatch) + " (" + first.describe() + ") " +
                  first.failure);
    return fail("--fit re-batches the model's inputs along dimension 0, and "
                "no micro-batch could be planned; micro-batch " +
                Twine(first.microBatch) + ": " + first.failure);
  }
  if (!result.chosen) {
    std::string message = "no configuration fits in --fit " +
                          formatBytes(limit) + " (" + std::to_string(limit) +
                          " bytes) of device memory";
    if (result.smallest) {
      const FitPoint &smallest = result.points[*result.smallest];
      message += ": the smallest whole-step footprint found is " +
                 formatBytes(smallest.deviceBytes()) + " (" +
                 std::to_string(smallest.deviceBytes()) + " bytes; " +
                 smallest.describe() + ": weights and state " +
                 formatBytes(smallest.weightBytes) + ", arena " +
                 formatBytes(smallest.arenaBytes) + ", inputs and outputs " +
                 formatBytes(smallest.ioBytes) + ", runtime " +
                 formatBytes(smallest.overheadBytes) + ")";
    }
    // Why recomputation could not go lower: the last attempt's message.
    for (auto it = result.points.rbegin(); it != result.points.rend(); ++it)
      if (!it->planned && it->memoryBudget > 0) {
        message += "; recomputation at micro-batch " +
                   std::to_string(it->microBatch) + ": " + it->failure;
        break;
      }
    return fail(message);
  }

  // The recomputation solvers stop at a time limit, so the chosen point's
  // compile may not reach the arena its plan reached in the search (a loaded
  // machine: GPT-2 medium under 8 GiB planned 2.47 GiB, then found 2.49).
  // Then the next fitting point by predicted speed is compiled, and the
  // report names the one built; nothing is written by a failed attempt.
  std::vector<size_t> order{*result.chosen};
  for (size_t i = 0; i < result.points.size(); ++i)
    if (i != *result.chosen && result.points[i].planned &&
        result.points[i].fits)
      order.push_back(i);
  std::stable_sort(order.begin() + 1, order.end(), [&](size_t a, size_t b) {
    return result.points[a].samplesPerSecond >
           result.points[b].samplesPerSecond;
  });
  for (size_t attempt = 0; attempt < order.size(); ++attempt) {
    result.chosen = order[attempt];
    const FitPoint &chosen = result.points[*result.chosen];
    say("[fit] chosen: " + chosen.describe() + ": " +
        formatBytes(chosen.deviceBytes()) + " of " + formatBytes(limit) + ", " +
        formatSeconds(chosen.stepSeconds) + " per step of " +
        Twine(globalBatch) + " samples (" +
        llvm::formatv("{0:F1}", chosen.samplesPerSecond).str() +
        " samples/s predicted)" +
        (training.enabled ? Twine()
                          : Twine("; run it ") + Twine(chosen.accumulate) +
                                " times per batch of " + Twine(localBatch)));
    CompileOptions compile = configure(chosen);
    bool last = attempt + 1 == order.size();
    std::string failure;
    llvm::raw_string_ostream failureStream(failure);
    int status = runCompile(compile, log, last ? errors : failureStream);
    if (status == 0)
      break;
    // Only the solver's miss moves on; any other failure (a full disk, a
    // bad option) is the user's to see, not a reason to build another
    // configuration.
    if (last ||
        !StringRef(failure).contains("does not fit in the memory budget")) {
      if (!last)
        errors << failure;
      return status;
    }
    say("[fit] its compile did not reach the plan of the search (" +
        firstLines(failure) + "); the next fitting configuration");
  }
  if (options.reportPath.empty())
    return 0;
  // The report gains the search: every point tried and the chosen one.
  auto buffer = llvm::MemoryBuffer::getFile(options.reportPath);
  if (!buffer)
    return fail("cannot read the report '" + options.reportPath + "'");
  llvm::Expected<llvm::json::Value> report =
      llvm::json::parse((*buffer)->getBuffer());
  if (!report || !report->getAsObject())
    return fail("the report '" + options.reportPath + "' is not JSON");
  (*report->getAsObject())["fit"] = result.toJson();
  std::error_code error;
  llvm::raw_fd_ostream out(options.reportPath, error);
  if (error)
    return fail("cannot write '" + options.reportPath +
                "': " + error.message());
  out << llvm::formatv("{0:2}", *report) << "\n";
  return 0;
}
