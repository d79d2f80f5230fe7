//===- CompilePipeline.cpp - the memopt-compile pass pipeline -------------===//
//
// memopt-compile's passes as one registered pipeline, in the manner of
// IREE's `iree-compile` (its phases are pass pipelines registered with
// options, so `iree-opt --iree-...-pipeline` reproduces any stage) and
// onnx-mlir's `addPasses` (one function builds the driver's pass manager):
// the driver and `memopt-opt --memopt-compile-pipeline="..."` call the same
// buildCompilePipeline, so a lit test can compare them. The driver's phase
// lines come from a PassInstrumentation (MLIR's own timing and IR printing
// are instrumentations too) rather than from one PassManager per phase, so
// nested function passes are merged by the pass manager as usual and a new
// pass only needs a place in the builder and, if it opens or closes a phase,
// a line in describePhase.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/MemOpt/Transforms/CompilePipeline.h"

#include "memopt/Analysis/RematSummary.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/Transforms/AttentionFusion.h"
#include "memopt/Dialect/MemOpt/Transforms/MemoryPhase.h"
#include "memopt/Dialect/MemOpt/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <functional>
#include <mutex>

using namespace mlir;
using namespace mlir::memopt;

void CompilePipelineOptions::assign(const CompileOptions &options) {
  // One line per option of CompileOptions.def: enums by their names.
#define MEMOPT_OPTION(STRUCT, FIELD, TYPE, DEFAULT, KIND, FLAG, PIPELINE,      \
                      PYTHON, CATEGORY, META, SHOWN, HELP)                     \
  MEMOPT_PIPELINE_ASSIGN_##KIND(FIELD, MEMOPT_PIPELINE_SOURCE_##STRUCT(FIELD))
#define MEMOPT_DRIVER_OPTION(...)
#define MEMOPT_PIPELINE_SOURCE_Compile(FIELD) options.FIELD
#define MEMOPT_PIPELINE_SOURCE_Training(FIELD) options.training.FIELD
#define MEMOPT_PIPELINE_ASSIGN_Value(FIELD, SOURCE) FIELD = SOURCE;
#define MEMOPT_PIPELINE_ASSIGN_Negated MEMOPT_PIPELINE_ASSIGN_Value
#define MEMOPT_PIPELINE_ASSIGN_OnOff MEMOPT_PIPELINE_ASSIGN_Value
#define MEMOPT_PIPELINE_ASSIGN_Bytes MEMOPT_PIPELINE_ASSIGN_Value
#define MEMOPT_PIPELINE_ASSIGN_List MEMOPT_PIPELINE_ASSIGN_Value
#define MEMOPT_PIPELINE_ASSIGN_Repeated MEMOPT_PIPELINE_ASSIGN_Value
#define MEMOPT_PIPELINE_ASSIGN_Enum(FIELD, SOURCE) FIELD = getEnumName(SOURCE);
#include "memopt/Conversion/CompileOptions.def"
#undef MEMOPT_PIPELINE_SOURCE_Compile
#undef MEMOPT_PIPELINE_SOURCE_Training
#undef MEMOPT_PIPELINE_ASSIGN_Value
#undef MEMOPT_PIPELINE_ASSIGN_Negated
#undef MEMOPT_PIPELINE_ASSIGN_OnOff
#undef MEMOPT_PIPELINE_ASSIGN_Bytes
#undef MEMOPT_PIPELINE_ASSIGN_List
#undef MEMOPT_PIPELINE_ASSIGN_Repeated
#undef MEMOPT_PIPELINE_ASSIGN_Enum
}

std::string CompilePipelineOptions::getShard() const {
  return shard.empty() ? std::string("none") : shard.getValue();
}

bool CompilePipelineOptions::offloads(StringRef what) const {
  return llvm::is_contained(offload, what);
}

std::string CompilePipelineOptions::getReduceDtype() const {
  return reduceDtype.empty() ? std::string("f32") : reduceDtype.getValue();
}

std::string CompilePipelineOptions::getLowType() const {
  if (precision == "fp16")
    return "f16";
  if (precision == "bf16")
    return "bf16";
  if (precision == "tf32")
    return "tf32";
  return "";
}

double CompilePipelineOptions::getLearningRate() const {
  if (learningRate >= 0)
    return learningRate;
  return optimizer == "adamw" ? 0.001 : 0.01;
}

std::string CompilePipelineOptions::getLossScale() const {
  if (lossScale != "auto")
    return lossScale;
  return enabled && precision == "fp16" ? "dynamic" : "none";
}

LogicalResult CompilePipelineOptions::verify(std::string &message) const {
  if (precision != "fp32" && precision != "tf32" && precision != "fp16" &&
      precision != "bf16") {
    message = "precision '" + precision + "' is not fp32, tf32, fp16 or bf16";
    return failure();
  }
  if (outputPrecision != "f32" && outputPrecision != "low") {
    message = "output-precision '" + outputPrecision + "' is not f32 or low";
    return failure();
  }
  // Training: the step's only model output is its f32 loss, so low changes
  // nothing there (and --fit may try fp32).
  if (outputPrecision == "low" && !enabled && precision != "fp16" &&
      precision != "bf16") {
    message = "output-precision low needs precision fp16 or bf16 (every "
              "output is f32 otherwise)";
    return failure();
  }
  if (layout != "auto" && layout != "nchw" && layout != "nhwc") {
    message = "layout '" + layout + "' is not auto, nchw or nhwc";
    return failure();
  }
  if (target != "host" && target != "cuda") {
    message = "target '" + target + "' is not host or cuda";
    return failure();
  }
  if (stopAfter != "graph" && stopAfter != "plan") {
    message = "stop-after '" + stopAfter + "' is not graph or plan";
    return failure();
  }
  if (lossScale != "auto" && lossScale != "dynamic" && lossScale != "none") {
    message = "loss-scale '" + lossScale + "' is not auto, dynamic or none";
    return failure();
  }
  if (getLossScale() == "dynamic" && !enabled) {
    message = "loss-scale dynamic needs train";
    return failure();
  }
  if (weightCasts != "auto" && weightCasts != "keep" &&
      weightCasts != "recast") {
    message = "weight-casts '" + weightCasts + "' is not auto, keep or recast";
    return failure();
  }
  if (dataParallel < 0) {
    message = "data-parallel must be at least 1 rank, got " +
              std::to_string(int64_t(dataParallel));
    return failure();
  }
  if (getShard() != "none" && shard != "optimizer" && shard != "gradients" &&
      shard != "parameters") {
    message =
        "shard '" + shard + "' is not none, optimizer, gradients or parameters";
    return failure();
  }
  if (getReduceDtype() != "f32" && reduceDtype != "low") {
    message = "reduce-dtype '" + reduceDtype + "' is not f32 or low";
    return failure();
  }
  if (!(bucketMib >= 0)) {
    message = "bucket-mib must be at least 0, got " +
              llvm::formatv("{0}", llvm::format("%g", double(bucketMib))).str();
    return failure();
  }
  if (!(gatherMib >= 0)) {
    message = "gather-mib must be at least 0, got " +
              llvm::formatv("{0}", llvm::format("%g", double(gatherMib))).str();
    return failure();
  }
  if (getShard() != "none" && dataParallel == 0) {
    message = "shard " + shard +
              " needs data-parallel N (the ranks the "
              "optimizer state is sharded over)";
    return failure();
  }
  if (dataParallel > 0 && !enabled) {
    message = "data-parallel needs train (it averages the gradients of a "
              "training step over the ranks)";
    return failure();
  }
  for (const std::string &value : offload)
    if (value != "none" && value != "activations" && value != "optimizer") {
      message = "offload '" + value +
                "' is not none, activations or optimizer (a comma list, e.g. "
                "--offload activations,optimizer)";
      return failure();
    }
  if (llvm::is_contained(offload, "none") && offload.size() > 1) {
    message = "offload none cannot be listed with activations or optimizer";
    return failure();
  }
  if (offloads("activations") && !enabled) {
    message = "offload activations needs train (it moves the values a "
              "training step saves for its backward to the host)";
    return failure();
  }
  if (offloads("optimizer") && !enabled) {
    message = "offload optimizer needs train (it moves the optimizer state "
              "of a training step to the host)";
    return failure();
  }
  if (offloads("optimizer") && dataParallel > 0) {
    message = "offload optimizer with data-parallel is not supported yet "
              "(each rank would update the whole parameter on its host)";
    return failure();
  }
  if (!offloadAccumulators.empty() && offloadAccumulators != "host" &&
      offloadAccumulators != "device") {
    message = "offload-accumulators '" + offloadAccumulators +
              "' is not host or device";
    return failure();
  }
  if (offloadAccumulators == "device" && !offloads("optimizer")) {
    message = "offload-accumulators device needs offload optimizer (it "
              "keeps the offloaded update's gradient accumulators on the "
              "device)";
    return failure();
  }
  if (attentionDropoutRng != "auto" && attentionDropoutRng != "memopt") {
    message = "attention-dropout-rng '" + attentionDropoutRng +
              "' is not auto or memopt";
    return failure();
  }
  if (memoryBudget < 0) {
    message = "memory-budget must be at least 0 bytes";
    return failure();
  }
  if (!(rematTimeLimit > 0)) {
    message = "remat-time-limit must be positive";
    return failure();
  }
  if (rematMaxComputations < 1) {
    message = "remat-max-computations must be at least 1";
    return failure();
  }
  if (!(offloadBandwidth > 0)) {
    message = "offload-bandwidth must be positive";
    return failure();
  }
  if (offloads("activations") && memoryBudget == 0) {
    message = "offload activations needs a memory-budget (offloads are "
              "chosen to meet it; --fit sets one)";
    return failure();
  }
  return success();
}

void mlir::memopt::buildCompilePipeline(OpPassManager &pm,
                                        const CompilePipelineOptions &options) {
  std::string lowType = options.getLowType();
  if (options.enabled) {
    // Parameters become variables before anything can fold them.
    MemOptMakeTrainableOptions trainable;
    trainable.batchStatistics = options.batchStatistics;
    trainable.freeze.assign(options.freeze.begin(), options.freeze.end());
    trainable.trainParams.assign(options.trainParams.begin(),
                                 options.trainParams.end());
    pm.addNestedPass<func::FuncOp>(createMemOptMakeTrainable(trainable));
  }
  pm.addPass(createCanonicalizerPass());
  // Before autodiff: memopt.attention has its own gradient
  // (memopt.attention_grad), which saves no [S, Sk] tensor.
  if (options.fuseAttention)
    pm.addNestedPass<func::FuncOp>(createMemOptFuseAttention());
  // Mixed-precision training: on the model before the loss and autodiff
  // (autocast's order: the backward inherits the forward's types, and
  // CastOp's rule returns f32 gradients to the f32 master parameters);
  // docs/training.md, "Mixed precision", says why.
  bool lowTraining = options.enabled && (lowType == "f16" || lowType == "bf16");
  if (lowTraining) {
    MemOptMixedPrecisionOptions precision;
    precision.precision = lowType;
    precision.training = true;
    precision.report = options.report;
    pm.addNestedPass<func::FuncOp>(createMemOptMixedPrecision(precision));
    pm.addPass(createCanonicalizerPass());
  }
  if (options.enabled) {
    MemOptAppendLossOptions loss;
    loss.kind = options.loss;
    loss.output = options.lossOutput;
    loss.ignoreIndex = options.ignoreIndex;
    loss.fuseHead = options.fuseHead;
    pm.addNestedPass<func::FuncOp>(createMemOptAppendLoss(loss));
    MemOptAutodiffOptions autodiff;
    autodiff.optimizer = options.optimizer;
    autodiff.learningRate = options.getLearningRate();
    autodiff.momentum = options.momentum;
    autodiff.weightDecay = options.weightDecay;
    autodiff.beta1 = options.beta1;
    autodiff.beta2 = options.beta2;
    autodiff.eps = options.eps;
    autodiff.accumulate = options.accumulate;
    autodiff.lossScale = options.getLossScale();
    autodiff.lossScaleInit = options.lossScaleInit;
    autodiff.lossScaleGrowth = options.lossScaleGrowth;
    autodiff.lossScaleBackoff = options.lossScaleBackoff;
    autodiff.lossScaleInterval = options.lossScaleInterval;
    autodiff.report = options.report;
    pm.addNestedPass<func::FuncOp>(createMemOptAutodiff(autodiff));
    pm.addPass(createCanonicalizerPass());
    if (options.dataParallel > 0) {
      MemOptDataParallelOptions dataParallel;
      dataParallel.ranks = options.dataParallel;
      dataParallel.shard = options.getShard();
      dataParallel.reduceDtype = options.getReduceDtype();
      dataParallel.report = options.report;
      pm.addNestedPass<func::FuncOp>(createMemOptDataParallel(dataParallel));
    }
  }
  // After autodiff and its canonicalization: the updates and their state
  // exist; the placement is what planning and lowering read.
  if (options.enabled && options.offloads("optimizer")) {
    MemOptOffloadOptimizerOptions offload;
    offload.report = options.report;
    offload.accumulatorsOnDevice = options.offloadAccumulators == "device";
    pm.addNestedPass<func::FuncOp>(createMemOptOffloadOptimizer(offload));
  }
  if (lowTraining) {
    MemOptWeightCastsOptions casts;
    casts.policy = options.weightCasts;
    casts.report = options.report;
    pm.addNestedPass<func::FuncOp>(createMemOptWeightCasts(casts));
  }
  if (options.fuseEpilogues)
    pm.addNestedPass<func::FuncOp>(createMemOptFuseEpilogues());
  if (!lowType.empty() && !lowTraining) {
    // After fusion (its patterns see no casts), before scheduling and
    // planning, so that they see the narrow tensors.
    MemOptMixedPrecisionOptions precision;
    precision.precision = lowType;
    precision.outputPrecision = options.outputPrecision;
    precision.report = options.report;
    pm.addNestedPass<func::FuncOp>(createMemOptMixedPrecision(precision));
    pm.addPass(createCanonicalizerPass());
  }
  // After mixed precision (the layout is chosen per element type), before
  // elementwise fusion (the ops that follow the layout are still single).
  MemOptLayoutOptions layout;
  layout.layout = options.layout;
  layout.target = options.target;
  pm.addNestedPass<func::FuncOp>(createMemOptLayout(layout));
  // After the layout (cuDNN's fused engines are channels-last) and mixed
  // precision (they take f16 / bf16), before elementwise fusion (which would
  // take the relu gradient into a group) and scheduling.
  MemOptFuseNormConvOptions normConv;
  normConv.mode = options.fuseNormConv;
  normConv.target = options.target;
  normConv.report = options.report;
  pm.addNestedPass<func::FuncOp>(createMemOptFuseNormConv(normConv));
  // After mixed precision (cuDNN's SDPA runs f16 / bf16) and autodiff (the
  // gradients exist), before scheduling, remat and planning, which must see
  // the bytes it reserves.
  MemOptAttentionEngineOptions engine;
  engine.target = options.target;
  engine.dropoutRng = options.attentionDropoutRng;
  pm.addNestedPass<func::FuncOp>(createMemOptAttentionEngine(engine));
  // Last of the graph rewrites: the chains it fuses are what epilogue
  // fusion and mixed precision left.
  if (options.fuseElementwise)
    pm.addNestedPass<func::FuncOp>(createMemOptFuseElementwise());
  if (options.stopAfter == "graph")
    return;

  pm.addNestedPass<func::FuncOp>(createMemOptSchedule());
  if (options.memoryBudget > 0 && !options.noPlan) {
    // Recompute from the scheduler's order until the planned arena fits;
    // the pass returns the chosen function scheduled as its arena was
    // measured, so the memory phase goes on from there.
    MemOptRematerializeOptions remat;
    remat.memoryBudget = options.memoryBudget;
    remat.allow.assign(options.rematAllow.begin(), options.rematAllow.end());
    remat.timeLimit = options.rematTimeLimit;
    remat.maxComputations = options.rematMaxComputations;
    remat.kernelTimes = options.rematKernelTimes;
    remat.offload = options.offloads("activations");
    remat.offloadBandwidth = options.offloadBandwidth;
    remat.outputsInArena = options.outputsInArena;
    if (options.enabled && options.dataParallel > 0) {
      remat.bucketMib = options.bucketMib;
      remat.gatherMib = options.gatherMib;
    }
    pm.addPass(createMemOptRematerialize(remat));
  }
  // After scheduling (the buckets follow the order gradients complete in;
  // with a memory budget, the order the remat search measured), before
  // bufferization (the planner sees the in-flight
  // buffers alive until their wait).
  if (options.enabled && options.dataParallel > 0 &&
      (options.bucketMib > 0 || options.gatherMib > 0)) {
    MemOptBucketCollectivesOptions buckets;
    buckets.bucketMib = options.bucketMib;
    buckets.firstBucketMib = getFirstBucketMib(options.bucketMib);
    buckets.gatherMib = options.gatherMib;
    buckets.report = options.report;
    pm.addNestedPass<func::FuncOp>(createMemOptBucketCollectives(buckets));
  }
  if (!options.noPlan)
    pm.addNestedPass<func::FuncOp>(createMemOptBufferize());
  MemOptPlanMemoryOptions plan;
  plan.capacity = options.noPlan ? 0 : int64_t(options.memoryBudget);
  plan.printReport = options.report;
  plan.reportJson = options.reportPath;
  plan.reportSvg = options.reportSvg;
  plan.outputsInArena = options.outputsInArena && !options.noPlan;
  pm.addPass(createMemOptPlanMemory(plan));
}

void mlir::memopt::registerCompilePipeline() {
  registerPassPipeline(
      "memopt-compile-pipeline",
      "memopt-compile's passes from the imported graph to the planned IR "
      "(docs/lowering.md)",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        CompilePipelineOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        std::string message;
        if (failed(options.verify(message)))
          return errorHandler("memopt-compile-pipeline: " + message);
        buildCompilePipeline(pm, options);
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> handler) {
        handler(CompilePipelineOptions());
      });
}

//===----------------------------------------------------------------------===//
// Phase lines
//===----------------------------------------------------------------------===//

namespace {

size_t countOps(Operation *root) {
  size_t count = 0;
  root->walk([&](Operation *op) {
    if (op->getDialect() && op->getDialect()->getNamespace() == "memopt")
      ++count;
  });
  return count;
}

/// What the driver prints around one pass: a line before it runs, a line
/// after it succeeded (built from the module), the error when it fails.
struct PhaseLines {
  std::string before;
  std::function<std::string(ModuleOp)> after;
  std::string failure;
};

} // namespace

struct CompilePhaseLog::State {
  std::string lowType, layout;
  std::string loss, optimizer;
  bool train = false;
  bool noPlan = false;
  int64_t memoryBudget = 0;
  llvm::raw_ostream &log;
  bool quiet;
  /// The last memopt pass that ran on the program: a canonicalize closes
  /// the phase that pass opened.
  std::string previousPass;
  std::mutex mutex;

  State(llvm::raw_ostream &log, bool quiet) : log(log), quiet(quiet) {}

  /// The phase table. `pass` is the pass argument; canonicalize is told
  /// apart by the memopt pass before it.
  PhaseLines describePhase(StringRef pass) const {
    PhaseLines lines;
    if (pass == "canonicalize") {
      if (previousPass.empty() || previousPass == "memopt-make-trainable") {
        lines.after = [](ModuleOp module) {
          return "[canonicalize] " + std::to_string(countOps(module)) +
                 " memopt ops";
        };
        lines.failure = "canonicalization failed";
      } else if (previousPass == "memopt-autodiff") {
        lines.after = [this](ModuleOp module) {
          return "[train] " + loss + " loss, reverse-mode gradients, " +
                 optimizer + " updates: " + std::to_string(countOps(module)) +
                 " memopt ops";
        };
      }
    } else if (pass == "memopt-data-parallel") {
      lines.after = [](ModuleOp module) -> std::string {
        size_t allReduces = 0, reduceScatters = 0, allGathers = 0, flags = 0,
               lowGradients = 0, parameterGathers = 0;
        std::string text;
        module.walk([&](Operation *op) {
          auto reduce = dyn_cast<AllReduceOp>(op);
          bool flag = reduce && reduce.getReduction() == "max";
          flags += flag;
          allReduces += reduce && !flag;
          if (isa<AllReduceOp, ReduceScatterOp>(op) && !flag)
            lowGradients +=
                !getElementTypeOrSelf(op->getOperand(0).getType()).isF32();
          reduceScatters += isa<ReduceScatterOp>(op);
          allGathers += isa<AllGatherOp>(op);
          parameterGathers += isa<GatherParameterOp>(op);
          auto function = dyn_cast<func::FuncOp>(op);
          auto attr = function ? function->getAttrOfType<DictionaryAttr>(
                                     "memopt.data_parallel")
                               : DictionaryAttr();
          if (!attr)
            return;
          StringRef shard = attr.getAs<StringAttr>("shard").getValue();
          text = "[data-parallel] " +
                 std::to_string(attr.getAs<IntegerAttr>("ranks").getInt()) +
                 " ranks, shard " + shard.str() +
                 (shard == "none"         ? std::string(" (DDP)")
                  : shard == "optimizer"  ? std::string(" (ZeRO-1)")
                  : shard == "parameters" ? std::string(" (ZeRO-3)")
                                          : std::string(" (ZeRO-2)"));
        });
        if (allReduces)
          text += ": " + std::to_string(allReduces) + " gradient all-reduces";
        if (reduceScatters)
          text += ": " + std::to_string(reduceScatters) +
                  " gradient reduce-scatters, " +
                  (parameterGathers
                       ? std::to_string(parameterGathers) + " parameter gathers"
                       : std::to_string(allGathers) + " parameter all-gathers");
        if (lowGradients)
          text +=
              "; " + std::to_string(lowGradients) + " reduced in the low type";
        if (flags)
          text += "; the overflow flag all-reduced (max): every rank skips "
                  "the same steps";
        return text;
      };
      lines.failure = "data-parallel rewrite failed";
    } else if (pass == "memopt-fuse-attention") {
      // Then one line per softmax over attention scores: fused with which
      // mask, or the node that broke the pattern.
      lines.after = [](ModuleOp module) {
        size_t fused = 0;
        module.walk([&](AttentionOp) { ++fused; });
        std::string text = "[fuse-attention] " + std::to_string(fused) +
                           " memopt.attention ops";
        SmallVector<AttentionSite> sites;
        module.walk([&](func::FuncOp function) {
          sites.append(describeAttentionSites(function));
        });
        if (sites.empty())
          return text;
        size_t fusedSites = llvm::count_if(
            sites, [](const AttentionSite &site) { return site.fused; });
        text += "; " + std::to_string(fusedSites) + " of " +
                std::to_string(sites.size()) + " attention sites fused";
        for (const AttentionSite &site : sites)
          text += "\n  " + formatAttentionSite(site);
        return text;
      };
      lines.failure = "attention fusion failed";
    } else if (pass == "memopt-fuse-epilogues") {
      lines.after = [](ModuleOp module) {
        return "[fuse] bias and activation epilogues: " +
               std::to_string(countOps(module)) + " memopt ops";
      };
      lines.failure = "epilogue fusion failed";
    } else if (pass == "memopt-mixed-precision") {
      lines.before = lowType == "tf32"
                         ? "[precision] tf32: f32 tensors, TF32 math in "
                           "convolutions and matrix products (CUDA)"
                     : train ? "[precision] " + lowType +
                                   " forward where safe, f32 master "
                                   "parameters (memopt-mixed-precision "
                                   "training=true); the backward follows"
                             : "[precision] " + lowType +
                                   " where safe (memopt-mixed-precision), "
                                   "inputs and outputs f32";
    } else if (pass == "memopt-weight-casts") {
      lines.after = [](ModuleOp module) -> std::string {
        for (auto function : module.getOps<func::FuncOp>())
          if (auto casts = function->getAttrOfType<DictionaryAttr>(
                  "memopt.weight_casts")) {
            auto decision = casts.getAs<StringAttr>("decision");
            auto count = casts.getAs<IntegerAttr>("recast");
            auto held = casts.getAs<IntegerAttr>("held_bytes");
            return "[weight-casts] " +
                   (decision ? decision.str() : std::string("?")) + ": " +
                   std::to_string(count ? count.getInt() : 0) +
                   " low copies of parameters cast again for the backward "
                   "(" +
                   std::to_string(held ? held.getInt() : 0) +
                   " bytes of copies held across the step otherwise)";
          }
        return "";
      };
    } else if (pass == "memopt-layout") {
      lines.after = [this](ModuleOp module) {
        size_t convs = 0, channelsLast = 0, transposes = 0;
        module.walk([&](Operation *op) {
          if (isa<ConvOp, ConvResidualOp>(op)) {
            ++convs;
            channelsLast += op->hasAttr("channels_last");
          }
          transposes += isa<TransposeOp>(op);
        });
        if (convs == 0)
          return std::string();
        return "[layout] " + layout + ": " + std::to_string(channelsLast) +
               " of " + std::to_string(convs) +
               " convolutions channels-last, " + std::to_string(transposes) +
               " transposes in the program";
      };
      lines.failure = "layout assignment failed";
    } else if (pass == "memopt-attention-engine") {
      lines.after = [](ModuleOp module) {
        int64_t calls = 0, reserved = 0, largest = 0, dropouts = 0,
                cudnnRng = 0;
        module.walk([&](Operation *op) {
          if (!isa<AttentionOp, AttentionGradOp>(op))
            return;
          ++calls;
          if (auto bytes =
                  op->getAttrOfType<IntegerAttr>(kCudnnWorkspaceAttrName)) {
            ++reserved;
            largest = std::max(largest, bytes.getInt());
          }
          auto attention = dyn_cast<AttentionOp>(op);
          auto grad = dyn_cast<AttentionGradOp>(op);
          dropouts += attention ? attention.hasDropout() : grad.hasDropout();
          cudnnRng += attention ? attention.getDropoutCudnnRng()
                                : grad.getDropoutCudnnRng();
        });
        if (!reserved)
          return std::string();
        std::string dropout;
        if (dropouts)
          dropout = "; " + std::to_string(cudnnRng) + " of " +
                    std::to_string(dropouts) +
                    " with dropout draw cuDNN's mask";
        return "[attention-engine] " + std::to_string(reserved) + " of " +
               std::to_string(calls) +
               " attention calls on cuDNN's SDPA: its workspace planned in "
               "the arena (largest " +
               std::to_string(largest) + " bytes)" + dropout;
      };
      lines.failure = "attention engine choice failed";
    } else if (pass == "memopt-fuse-elementwise") {
      lines.after = [](ModuleOp module) {
        size_t groups = 0, steps = 0;
        module.walk([&](FusedElementwiseOp op) {
          ++groups;
          steps += op.getOps().size();
        });
        return "[fuse-elementwise] " + std::to_string(steps) + " ops in " +
               std::to_string(groups) + " memopt.fused_elementwise ops";
      };
      lines.failure = "elementwise fusion failed";
    } else if (pass == "memopt-rematerialize") {
      lines.after = [](ModuleOp module) -> std::string {
        for (auto function : module.getOps<func::FuncOp>()) {
          std::optional<RematSummary> remat = readRematSummary(function);
          if (!remat)
            continue;
          // Activation offload (docs/offload.md): what went to the host.
          std::string copies;
          if (auto offload =
                  function->getAttrOfType<DictionaryAttr>("memopt.offload")) {
            auto seconds = [&](StringRef name) {
              auto value = offload.getAs<FloatAttr>(name);
              return value ? value.getValueAsDouble() : 0.0;
            };
            auto bytes = offload.getAs<IntegerAttr>("bytes");
            auto values = offload.getAs<IntegerAttr>("offloaded");
            copies = llvm::formatv("; {0} activations offloaded ({1} bytes), "
                                   "{2:F1} of {3:F1} us of copies hidden",
                                   values ? values.getInt() : 0,
                                   bytes ? bytes.getInt() : 0,
                                   1e6 * (seconds("copy_seconds") -
                                          seconds("exposed_seconds")),
                                   1e6 * seconds("copy_seconds"))
                         .str();
          }
          if (remat->recomputations == 0 && copies.empty())
            return "[remat] the arena (" +
                   std::to_string(remat->unconstrainedArena) +
                   " bytes) fits memory-budget " +
                   std::to_string(remat->memoryBudget) +
                   " bytes: nothing recomputed";
          return llvm::formatv(
                     "[remat] memory-budget {0} bytes: {1} ops recomputed "
                     "(+{2:F2}% estimated step time), arena {3} -> {4} bytes "
                     "({5} solver runs)",
                     remat->memoryBudget, remat->recomputations,
                     100.0 * remat->addedTimeFraction,
                     remat->unconstrainedArena, remat->plannedArena,
                     remat->solverRuns)
                     .str() +
                 copies;
        }
        return "";
      };
    } else if ((pass == "memopt-schedule" && (memoryBudget == 0 || noPlan)) ||
               ((pass == "memopt-bucket-collectives" ||
                 pass == "memopt-bufferize") &&
                previousPass == "memopt-rematerialize")) {
      // With a memory budget the remat search schedules the function (and
      // plans its candidates): the line comes before the passes after it.
      lines.before =
          std::string("[memory] schedule") +
          (noPlan ? "" : ", bufferize (in-place)") + ", plan-memory" +
          (memoryBudget > 0 && !noPlan
               ? " (budget " + std::to_string(memoryBudget) + " bytes)"
               : "");
    }
    return lines;
  }

  /// The module of `op`, if `op` is the module or the program function (a
  /// function pass runs once per function; the driver lowers one).
  static ModuleOp getProgramModule(Operation *op) {
    if (auto module = dyn_cast<ModuleOp>(op))
      return module;
    auto function = dyn_cast<func::FuncOp>(op);
    if (!function)
      return nullptr;
    auto module = function->getParentOfType<ModuleOp>();
    if (!module)
      return nullptr;
    size_t defined = 0;
    for (auto other : module.getOps<func::FuncOp>())
      defined += other.isExternal() ? 0 : 1;
    if (defined == 1 || function.getSymName() == "main")
      return module;
    return nullptr;
  }

  void say(StringRef line) {
    if (!quiet && !line.empty())
      log << line << "\n";
  }
};

CompilePhaseLog::CompilePhaseLog(const CompilePipelineOptions &options,
                                 llvm::raw_ostream &log, bool quiet)
    : state(std::make_unique<State>(log, quiet)) {
  state->lowType = options.getLowType();
  state->layout = options.layout;
  state->loss = options.loss;
  state->optimizer = options.optimizer;
  state->train = options.enabled;
  state->noPlan = options.noPlan;
  state->memoryBudget = options.memoryBudget;
}

CompilePhaseLog::~CompilePhaseLog() = default;

void CompilePhaseLog::runBeforePass(Pass *pass, Operation *op) {
  if (!State::getProgramModule(op))
    return;
  std::lock_guard<std::mutex> lock(state->mutex);
  state->say(state->describePhase(pass->getArgument()).before);
}

void CompilePhaseLog::runAfterPass(Pass *pass, Operation *op) {
  ModuleOp module = State::getProgramModule(op);
  if (!module)
    return;
  std::lock_guard<std::mutex> lock(state->mutex);
  StringRef argument = pass->getArgument();
  PhaseLines lines = state->describePhase(argument);
  if (lines.after)
    state->say(lines.after(module));
  if (argument.starts_with("memopt-"))
    state->previousPass = argument.str();
}

void CompilePhaseLog::runAfterPassFailed(Pass *pass, Operation *op) {
  std::lock_guard<std::mutex> lock(state->mutex);
  if (failureMessage.empty())
    failureMessage = state->describePhase(pass->getArgument()).failure;
}
