//===- memopt-compile.cpp - ONNX model -> executable ----------------------===//
//
//   memopt-compile model.onnx -o OUT [--target cuda|host]
//       [--precision fp32|tf32|fp16|bf16] [--layout auto|nchw|nhwc]
//       [--memory-budget 2GiB]
//       [--remat-allow KIND,...] [--remat-time-limit S]
//       [--remat-max-computations C]
//       [--remat-kernel-times FILE.json]
//       [--input-shape NAME=DIMS] [--emit mlir|plan|source|exe|lib]
//       [--report FILE.json] [--arch sm_90] [--no-plan] [--no-fuse-attention]
//       [--no-fuse-epilogues] [--no-fuse-elementwise] [--lower-only]
//
// Thin: flags become CompileOptions; the pipeline is in lib/Conversion
// (CompileDriver.cpp).
//
//===----------------------------------------------------------------------===//

#include "memopt/Conversion/CompileDriver.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"

using namespace mlir::memopt;
namespace cl = llvm::cl;

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::OptionCategory category("memopt-compile options");
  cl::opt<std::string> input(cl::Positional, cl::desc("<model.onnx|.mlir>"),
                             cl::Required, cl::cat(category));
  cl::opt<std::string> output("o", cl::desc("Output path (prefix)"),
                              cl::value_desc("OUT"), cl::Required,
                              cl::cat(category));
  cl::opt<CompileTarget> target(
      "target", cl::desc("Runtime backend"), cl::init(CompileTarget::Host),
      cl::values(clEnumValN(CompileTarget::Host, "host", "CPU backend"),
                 clEnumValN(CompileTarget::Cuda, "cuda", "CUDA backend")),
      cl::cat(category));
  cl::opt<CompilePrecision> precision(
      "precision", cl::desc("Compute precision"),
      cl::init(CompilePrecision::FP32),
      cl::values(clEnumValN(CompilePrecision::FP32, "fp32", "float32"),
                 clEnumValN(CompilePrecision::TF32, "tf32",
                            "float32 storage, TF32 math in convolutions and "
                            "matrix products (CUDA; the host computes f32)"),
                 clEnumValN(CompilePrecision::FP16, "fp16", "float16"),
                 clEnumValN(CompilePrecision::BF16, "bf16", "bfloat16")),
      cl::cat(category));
  cl::opt<std::string> layout(
      "layout",
      cl::desc("Convolution layout: auto (channels-last where the target's "
               "kernels are faster, e.g. f16 on CUDA), nchw or nhwc"),
      cl::init("auto"), cl::cat(category));
  cl::opt<std::string> budget(
      "memory-budget", cl::desc("Arena capacity, e.g. 2GiB, 512MiB, 4096"),
      cl::cat(category));
  cl::list<std::string> inputShapes(
      "input-shape", cl::desc("Static input shape NAME=DIMS (e.g. x=1x3x8x8)"),
      cl::cat(category));
  cl::opt<EmitKind> emit(
      "emit", cl::desc("What to produce"), cl::init(EmitKind::Exe),
      cl::values(clEnumValN(EmitKind::Mlir, "mlir", "graph IR (OUT)"),
                 clEnumValN(EmitKind::Plan, "plan", "planned IR (OUT)"),
                 clEnumValN(EmitKind::Source, "source",
                            "OUT.cpp, OUT.weights, OUT.build.sh"),
                 clEnumValN(EmitKind::Exe, "exe", "executable OUT"),
                 clEnumValN(EmitKind::Lib, "lib",
                            "shared library OUT.so with the C API "
                            "(memopt_c_api.h)")),
      cl::cat(category));
  cl::opt<std::string> report("report",
                              cl::desc("Write the memory report (JSON)"),
                              cl::value_desc("FILE.json"), cl::cat(category));
  cl::opt<std::string> arch("arch", cl::desc("GPU architecture for nvcc"),
                            cl::init("sm_90"), cl::cat(category));
  cl::opt<bool> noPlan("no-plan",
                       cl::desc("No reuse: every tensor its own arena slot"),
                       cl::cat(category));
  cl::opt<bool> separateOutputs(
      "separate-outputs",
      cl::desc("Give each output a buffer of its own instead of an arena slot"),
      cl::cat(category));
  cl::opt<bool> noFuseAttention(
      "no-fuse-attention",
      cl::desc(
          "Keep attention as MatMul -> Softmax -> MatMul (for comparison)"),
      cl::cat(category));
  cl::opt<bool> noFuseEpilogues(
      "no-fuse-epilogues",
      cl::desc("Keep bias adds and activations as separate ops"),
      cl::cat(category));
  cl::opt<bool> noFuseElementwise(
      "no-fuse-elementwise",
      cl::desc("Keep elementwise chains as one op (and one kernel) each"),
      cl::cat(category));
  cl::opt<bool> lowerOnly(
      "lower-only",
      cl::desc("The input is planned MLIR: only lower (and build) it"),
      cl::cat(category));
  cl::opt<bool> quiet("quiet", cl::desc("Print errors only"),
                      cl::cat(category));
  cl::opt<bool> timing(
      "timing",
      cl::desc("Print the time of each phase and pass at the end (stderr)"),
      cl::cat(category));
  // Training (docs/training.md).
  cl::opt<bool> train("train",
                      cl::desc("Compile one training step: loss, gradients "
                               "and the optimizer update"),
                      cl::cat(category));
  cl::opt<std::string> loss(
      "loss",
      cl::desc("cross-entropy (labels input), mse (target input) or "
               "output (the model returns its loss)"),
      cl::init("cross-entropy"), cl::cat(category));
  cl::opt<std::string> lossOutput("loss-output",
                                  cl::desc("The model output the loss reads"),
                                  cl::cat(category));
  cl::opt<int64_t> ignoreIndex(
      "ignore-index",
      cl::desc("cross-entropy: label of rows that count "
               "nothing (default -100, as PyTorch)"),
      cl::init(-100), cl::cat(category));
  cl::opt<std::string> fuseHead(
      "fuse-head",
      cl::desc("cross-entropy of a language model's head (a bias-free linear "
               "layer) as one op without the [rows, classes] logits: on "
               "(default) or off"),
      cl::init("on"), cl::cat(category));
  cl::opt<std::string> optimizer("optimizer", cl::desc("sgd or adamw"),
                                 cl::init("sgd"), cl::cat(category));
  cl::opt<double> lr("lr",
                     cl::desc("Learning rate (default 0.01 for sgd, "
                              "0.001 for adamw)"),
                     cl::init(-1.0), cl::cat(category));
  cl::opt<double> momentum("momentum", cl::desc("SGD momentum"), cl::init(0.0),
                           cl::cat(category));
  cl::opt<double> weightDecay(
      "weight-decay",
      cl::desc("Weight decay (default 0 for sgd, 0.01 for adamw)"),
      cl::init(-1.0), cl::cat(category));
  cl::opt<double> beta1("beta1", cl::desc("AdamW beta1"), cl::init(0.9),
                        cl::cat(category));
  cl::opt<double> beta2("beta2", cl::desc("AdamW beta2"), cl::init(0.999),
                        cl::cat(category));
  cl::opt<double> eps("eps", cl::desc("AdamW epsilon"), cl::init(1e-8),
                      cl::cat(category));
  cl::opt<bool> bnBatchStats(
      "bn-batch-stats",
      cl::desc("BatchNormalization normalizes with batch statistics and "
               "updates its running mean/var (for models exported in eval "
               "mode)"),
      cl::cat(category));
  cl::list<std::string> rematAllow(
      "remat-allow",
      cl::desc("Op kinds that may be recomputed to meet --memory-budget "
               "(KIND,KIND, e.g. relu,fused_elementwise; default: every op "
               "with a cost)"),
      cl::CommaSeparated, cl::cat(category));
  cl::opt<double> rematTimeLimit(
      "remat-time-limit",
      cl::desc("Seconds the rematerialization solver may search per attempt"),
      cl::init(5.0), cl::cat(category));
  cl::opt<int> rematMaxComputations(
      "remat-max-computations",
      cl::desc("The most times one op may be computed to meet --memory-budget "
               "(default 2: the forward and one recomputation; 3 reaches "
               "smaller arenas at a longer solve)"),
      cl::init(2), cl::cat(category));
  cl::opt<std::string> rematKernelTimes(
      "remat-kernel-times",
      cl::desc("Measured kernel times, JSON {\"ONNX node\": seconds}, for "
               "the rematerialization solver's costs (default: an H100 "
               "roofline)"),
      cl::cat(category));
  cl::opt<int64_t> accumulate(
      "accumulate",
      cl::desc("Micro-batches per optimizer step: gradients are summed over "
               "K micro-batches (of loss / K) and the update runs on the "
               "last one"),
      cl::init(1), cl::cat(category));
  cl::opt<int64_t> dataParallel(
      "data-parallel",
      cl::desc("Data-parallel training over N ranks (threads on the host "
               "backend): the inputs are one rank's micro-batch, gradients "
               "are averaged over the ranks before the update "
               "(docs/data-parallel.md)"),
      cl::init(0), cl::cat(category));
  cl::opt<std::string> shard(
      "shard",
      cl::desc("With --data-parallel: none (all-reduce, as DDP), optimizer "
               "(ZeRO-1: optimizer state sharded over the ranks) or gradients "
               "(ZeRO-2: accumulated gradients sharded too)"),
      cl::cat(category));
  cl::opt<std::string> reduceDtype(
      "reduce-dtype",
      cl::desc("With --data-parallel and --precision fp16|bf16: reduce the "
               "gradients in f32 (default, PyTorch DDP + AMP's numerics) or "
               "in the low type (half the bytes sent)"),
      cl::cat(category));
  cl::list<std::string> freeze(
      "freeze",
      cl::desc("Initializers that are not trained: name prefixes or globs "
               "(PATTERN,PATTERN)"),
      cl::CommaSeparated, cl::cat(category));
  cl::list<std::string> trainParams(
      "train-params",
      cl::desc("Initializers trained whatever the exporter calls them (by "
               "default only the model's parameters are): name prefixes or "
               "globs (PATTERN,PATTERN)"),
      cl::CommaSeparated, cl::cat(category));
  // Mixed-precision training (--train --precision fp16|bf16).
  cl::opt<std::string> lossScale(
      "loss-scale",
      cl::desc("dynamic (PyTorch GradScaler's dynamic loss scaling, on the "
               "device), none, or auto: dynamic for fp16, none otherwise"),
      cl::init("auto"), cl::cat(category));
  cl::opt<double> lossScaleInit("loss-scale-init",
                                cl::desc("Initial loss scale (65536)"),
                                cl::init(65536.0), cl::cat(category));
  cl::opt<double> lossScaleGrowth(
      "loss-scale-growth",
      cl::desc("Loss scale factor after --loss-scale-interval clean steps (2)"),
      cl::init(2.0), cl::cat(category));
  cl::opt<double> lossScaleBackoff(
      "loss-scale-backoff",
      cl::desc("Loss scale factor after a step with inf / NaN gradients, "
               "which is skipped (0.5)"),
      cl::init(0.5), cl::cat(category));
  cl::opt<int64_t> lossScaleInterval(
      "loss-scale-interval",
      cl::desc("Clean steps before the loss scale grows (2000)"),
      cl::init(2000), cl::cat(category));
  cl::opt<std::string> weightCasts(
      "weight-casts",
      cl::desc("Low-precision copies of the parameters: keep (one per step, "
               "held for the backward), recast (cast again in the backward) "
               "or auto (decided by bytes and time)"),
      cl::init("auto"), cl::cat(category));
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "memopt ONNX compiler\n");

  CompileOptions options;
  options.inputPath = input;
  options.outputPath = output;
  options.target = target;
  options.precision = precision;
  options.layout = layout;
  if (!budget.empty()) {
    auto bytes = parseByteSize(budget);
    if (mlir::failed(bytes) || *bytes <= 0) {
      llvm::errs() << "memopt-compile: error: --memory-budget '" << budget
                   << "' is not a size (e.g. 2GiB, 512MiB, 4096)\n";
      return 1;
    }
    options.memoryBudget = *bytes;
  }
  options.rematAllow.assign(rematAllow.begin(), rematAllow.end());
  options.rematTimeLimit = rematTimeLimit;
  options.rematMaxComputations = rematMaxComputations;
  options.rematKernelTimes = rematKernelTimes;
  options.inputShapes.assign(inputShapes.begin(), inputShapes.end());
  options.emit = emit;
  options.reportPath = report;
  options.cudaArch = arch;
  options.noPlan = noPlan;
  options.fuseAttention = !noFuseAttention;
  options.fuseEpilogues = !noFuseEpilogues;
  options.fuseElementwise = !noFuseElementwise;
  options.outputsInArena = !separateOutputs;
  options.lowerOnly = lowerOnly;
  options.quiet = quiet;
  options.timing = timing;
  TrainingOptions &training = options.training;
  training.enabled = train;
  training.loss = loss;
  training.lossOutput = lossOutput;
  training.ignoreIndex = ignoreIndex;
  if (fuseHead != "on" && fuseHead != "off") {
    llvm::errs() << "memopt-compile: error: --fuse-head '" << fuseHead
                 << "' is not one of on, off\n";
    return 1;
  }
  training.fuseHead = fuseHead;
  training.optimizer = optimizer;
  training.learningRate = lr >= 0                ? double(lr)
                          : optimizer == "adamw" ? 0.001
                                                 : 0.01;
  training.momentum = momentum;
  training.weightDecay = weightDecay;
  training.beta1 = beta1;
  training.beta2 = beta2;
  training.eps = eps;
  training.batchStatistics = bnBatchStats;
  training.accumulate = accumulate;
  training.freeze.assign(freeze.begin(), freeze.end());
  training.trainParams.assign(trainParams.begin(), trainParams.end());
  training.lossScale = lossScale;
  training.lossScaleInit = lossScaleInit;
  training.lossScaleGrowth = lossScaleGrowth;
  training.lossScaleBackoff = lossScaleBackoff;
  training.lossScaleInterval = lossScaleInterval;
  training.weightCasts = weightCasts;
  training.dataParallel = dataParallel;
  training.dataParallelGiven = dataParallel.getNumOccurrences() > 0;
  training.shard = shard;
  training.reduceDtype = reduceDtype;
  return runCompile(options, llvm::outs());
}
