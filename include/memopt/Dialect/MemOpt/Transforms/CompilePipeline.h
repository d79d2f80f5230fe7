//===- CompilePipeline.h - the memopt-compile pass pipeline -----*- C++ -*-===//
//
// The whole sequence of passes that memopt-compile runs between import and
// lowering, as one registered pass pipeline (`--memopt-compile-pipeline`)
// with options, and the pass instrumentation that prints the driver's
// "[phase] ..." lines. memopt-opt and memopt-compile build the pipeline with
// the same function, so they run the same passes (docs/lowering.md).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_TRANSFORMS_COMPILEPIPELINE_H
#define MEMOPT_DIALECT_MEMOPT_TRANSFORMS_COMPILEPIPELINE_H

#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>

namespace mlir::memopt {

/// The options of `--memopt-compile-pipeline`; memopt-compile's flags map
/// onto them one to one (CompileDriver.cpp).
struct CompilePipelineOptions
    : public PassPipelineOptions<CompilePipelineOptions> {
  // Training (docs/training.md).
  Option<bool> train{*this, "train",
                     llvm::cl::desc("Compile one training step: loss, "
                                    "gradients and the optimizer update"),
                     llvm::cl::init(false)};
  Option<std::string> loss{*this, "loss",
                           llvm::cl::desc("cross-entropy, mse or output"),
                           llvm::cl::init("cross-entropy")};
  Option<std::string> lossOutput{
      *this, "loss-output", llvm::cl::desc("The model output the loss reads")};
  Option<int64_t> ignoreIndex{
      *this, "ignore-index",
      llvm::cl::desc("cross-entropy: rows with this label count nothing"),
      llvm::cl::init(-100)};
  Option<bool> fuseHead{
      *this, "fuse-head",
      llvm::cl::desc("cross-entropy of a bias-free linear layer (a language "
                     "model's head) as one memopt.linear_cross_entropy, "
                     "without the logits"),
      llvm::cl::init(true)};
  Option<std::string> optimizer{*this, "optimizer",
                                llvm::cl::desc("sgd or adamw"),
                                llvm::cl::init("sgd")};
  Option<double> learningRate{
      *this, "lr",
      llvm::cl::desc("Learning rate (< 0: 0.01 for sgd, 0.001 for adamw)"),
      llvm::cl::init(-1.0)};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                          llvm::cl::init(0.0)};
  Option<double> weightDecay{
      *this, "weight-decay",
      llvm::cl::desc("Weight decay (< 0: 0 for sgd, 0.01 for adamw)"),
      llvm::cl::init(-1.0)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("AdamW beta1"),
                       llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("AdamW beta2"),
                       llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::desc("AdamW epsilon"),
                     llvm::cl::init(1e-8)};
  Option<bool> batchStatistics{
      *this, "bn-batch-stats",
      llvm::cl::desc("BatchNormalization uses batch statistics and updates "
                     "its running mean and variance"),
      llvm::cl::init(false)};
  Option<int64_t> accumulate{
      *this, "accumulate",
      llvm::cl::desc("Micro-batches per optimizer step (gradient "
                     "accumulation)"),
      llvm::cl::init(1)};
  ListOption<std::string> freeze{
      *this, "freeze",
      llvm::cl::desc("Initializer name patterns (globs or prefixes) that are "
                     "not trained")};
  ListOption<std::string> trainParams{
      *this, "train-params",
      llvm::cl::desc("Initializer name patterns (globs or prefixes) trained "
                     "whatever the exporter calls them")};
  Option<std::string> lossScale{
      *this, "loss-scale",
      llvm::cl::desc("Mixed-precision training: dynamic (GradScaler's "
                     "dynamic loss scaling), none, or auto (dynamic for "
                     "fp16, none otherwise)"),
      llvm::cl::init("auto")};
  Option<double> lossScaleInit{*this, "loss-scale-init",
                               llvm::cl::desc("Initial loss scale"),
                               llvm::cl::init(65536.0)};
  Option<double> lossScaleGrowth{
      *this, "loss-scale-growth",
      llvm::cl::desc("Loss scale factor after loss-scale-interval clean "
                     "steps"),
      llvm::cl::init(2.0)};
  Option<double> lossScaleBackoff{
      *this, "loss-scale-backoff",
      llvm::cl::desc("Loss scale factor after a step with inf / NaN "
                     "gradients (the step is skipped)"),
      llvm::cl::init(0.5)};
  Option<int64_t> lossScaleInterval{
      *this, "loss-scale-interval",
      llvm::cl::desc("Clean steps before the loss scale grows"),
      llvm::cl::init(2000)};
  Option<std::string> weightCasts{
      *this, "weight-casts",
      llvm::cl::desc("Mixed-precision training: keep each parameter's low "
                     "copy for the backward, recast it there, or auto "
                     "(memopt-weight-casts decides by bytes and time)"),
      llvm::cl::init("auto")};
  Option<int64_t> dataParallel{
      *this, "data-parallel",
      llvm::cl::desc("Data-parallel ranks (memopt-data-parallel; 0: a "
                     "single-process step). The inputs are one rank's "
                     "micro-batch"),
      llvm::cl::init(0)};
  Option<std::string> shard{
      *this, "shard",
      llvm::cl::desc("With data-parallel: none (all-reduce), optimizer "
                     "(ZeRO-1) or gradients (ZeRO-2)"),
      llvm::cl::init("none")};
  Option<std::string> reduceDtype{
      *this, "reduce-dtype",
      llvm::cl::desc("With data-parallel and precision fp16 / bf16: reduce "
                     "the gradients in f32 (PyTorch DDP + AMP) or in the "
                     "low type (half the bytes sent)"),
      llvm::cl::init("f32")};

  // Graph rewrites.
  Option<std::string> precision{
      *this, "precision",
      llvm::cl::desc("fp32, tf32 (f32 tensors, TF32 math in contractions), "
                     "fp16 or bf16 (with train: f32 master weights, see "
                     "docs/training.md)"),
      llvm::cl::init("fp32")};
  Option<std::string> layout{
      *this, "layout",
      llvm::cl::desc("Convolution layout (memopt-layout): auto, nchw or nhwc"),
      llvm::cl::init("auto")};
  Option<std::string> target{
      *this, "target",
      llvm::cl::desc("The backend whose kernels layout=auto decides for: "
                     "host or cuda"),
      llvm::cl::init("host")};
  Option<bool> fuseAttention{
      *this, "fuse-attention",
      llvm::cl::desc("Run memopt-fuse-attention (with train: before autodiff)"),
      llvm::cl::init(true)};
  Option<bool> fuseEpilogues{*this, "fuse-epilogues",
                             llvm::cl::desc("Run memopt-fuse-epilogues"),
                             llvm::cl::init(true)};
  Option<bool> fuseElementwise{*this, "fuse-elementwise",
                               llvm::cl::desc("Run memopt-fuse-elementwise"),
                               llvm::cl::init(true)};

  // Memory.
  Option<int64_t> memoryBudget{
      *this, "memory-budget",
      llvm::cl::desc("Arena capacity in bytes (0: no limit); ops are "
                     "recomputed until the planned arena fits"),
      llvm::cl::init(0)};
  ListOption<std::string> rematAllow{
      *this, "remat-allow",
      llvm::cl::desc("Op kinds that may be recomputed to meet memory-budget "
                     "(default: every op with a cost)")};
  Option<double> rematTimeLimit{
      *this, "remat-time-limit",
      llvm::cl::desc("Seconds the rematerialization solver may search per "
                     "attempt"),
      llvm::cl::init(5.0)};
  Option<int> rematMaxComputations{
      *this, "remat-max-computations",
      llvm::cl::desc("The most times one op may be computed to meet "
                     "memory-budget (2: the forward and one recomputation)"),
      llvm::cl::init(2)};
  Option<std::string> rematKernelTimes{
      *this, "remat-kernel-times",
      llvm::cl::desc("JSON file of measured kernel times {\"ONNX node\": "
                     "seconds} that replace the roofline estimate")};
  Option<bool> noPlan{
      *this, "no-plan",
      llvm::cl::desc("No in-place reuse (memopt-compile then gives every "
                     "tensor its own slot)"),
      llvm::cl::init(false)};
  Option<bool> outputsInArena{
      *this, "outputs-in-arena",
      llvm::cl::desc("Plan the function's outputs inside the arena"),
      llvm::cl::init(true)};

  // What to run and print.
  Option<std::string> stopAfter{
      *this, "stop-after",
      llvm::cl::desc("graph (after the graph rewrites, memopt-compile's "
                     "--emit mlir) or plan (after planning)"),
      llvm::cl::init("plan")};
  Option<std::string> reportJson{
      *this, "report-json",
      llvm::cl::desc("Write the memory report (JSON) to this file")};
  Option<std::string> reportSvg{
      *this, "report-svg",
      llvm::cl::desc("Write the memory timeline (SVG) to this file")};
  Option<bool> report{
      *this, "report",
      llvm::cl::desc("The passes print their reports (autodiff, mixed "
                     "precision, the plan's text report)"),
      llvm::cl::init(false)};

  /// memopt-mixed-precision's setting for `precision` ("f16", "bf16",
  /// "tf32"), "" for fp32.
  std::string getLowType() const;
  /// The learning rate and weight decay after the optimizer's defaults.
  double getLearningRate() const;
  /// memopt-autodiff's loss-scale after `auto`: dynamic for fp16 training.
  std::string getLossScale() const;
  /// Checks the values the passes do not check themselves (precision,
  /// stop-after, a training option set without `train`); the message
  /// names the option.
  LogicalResult verify(std::string &message) const;
};

/// Adds the compile pipeline to `pm` (anchored on builtin.module).
/// To add a pass: put it in its place here, add its phase line (if any) to
/// describePhase in CompilePipeline.cpp, and document it in
/// docs/lowering.md.
void buildCompilePipeline(OpPassManager &pm,
                          const CompilePipelineOptions &options);

/// Registers `--memopt-compile-pipeline` (memopt-opt).
void registerCompilePipeline();

/// The instrumentation that prints memopt-compile's "[phase] ..." lines
/// before or after the passes that open or close a phase, and remembers
/// the driver's message for a pass that failed (getFailureMessage).
class CompilePhaseLog : public PassInstrumentation {
public:
  CompilePhaseLog(const CompilePipelineOptions &options, llvm::raw_ostream &log,
                  bool quiet);
  ~CompilePhaseLog() override;

  void runBeforePass(Pass *pass, Operation *op) override;
  void runAfterPass(Pass *pass, Operation *op) override;
  void runAfterPassFailed(Pass *pass, Operation *op) override;

  /// The driver's error for the pass that failed ("" when the pass printed
  /// its own diagnostic, which is enough).
  StringRef getFailureMessage() const { return failureMessage; }

private:
  struct State;
  std::unique_ptr<State> state;
  std::string failureMessage;
};

} // namespace mlir::memopt

#endif // MEMOPT_DIALECT_MEMOPT_TRANSFORMS_COMPILEPIPELINE_H
