//===- CompileDriver.h - the memopt-compile driver --------------*- C++ -*-===//
//
// The library behind `memopt-compile`: import an ONNX model (or read MLIR),
// run the compile pipeline (memopt/Dialect/MemOpt/Transforms/
// CompilePipeline.h: the registered `--memopt-compile-pipeline`), lower the
// planned function to a C++ program (EmitProgram.h) and, on request, build it
// with the system compiler against a runtime backend. The tool only parses
// flags into CompileOptions.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_CONVERSION_COMPILEDRIVER_H
#define MEMOPT_CONVERSION_COMPILEDRIVER_H

#include "mlir/Support/LLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::memopt {

enum class CompileTarget { Host, Cuda };
enum class CompilePrecision { FP32, TF32, FP16, BF16 };
enum class EmitKind { Mlir, Plan, Source, Exe, Lib };

/// What `--train` compiles: one training step (loss, gradients, update).
struct TrainingOptions {
  bool enabled = false;
  /// cross-entropy, mse or output (memopt-append-loss).
  std::string loss = "cross-entropy";
  std::string lossOutput;
  int64_t ignoreIndex = -100;
  /// Cross-entropy of a language model's head as one op that never holds the
  /// logits (memopt.linear_cross_entropy): "on" or "off" (docs/training.md,
  /// "The fused head").
  std::string fuseHead = "on";
  /// sgd or adamw (memopt-autodiff), PyTorch's defaults.
  std::string optimizer = "sgd";
  double learningRate = 0.01;
  double momentum = 0.0;
  /// < 0: the optimizer's default (0 for SGD, 0.01 for AdamW).
  double weightDecay = -1.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  /// Micro-batches per optimizer step (--accumulate K).
  int64_t accumulate = 1;
  /// BatchNormalization uses batch statistics (training mode).
  bool batchStatistics = false;
  /// Initializer name patterns (globs or prefixes) that are not trained, and
  /// those trained whatever the exporter calls them (by default only the
  /// model's parameters are).
  std::vector<std::string> freeze;
  std::vector<std::string> trainParams;
  /// Mixed-precision training: auto, dynamic or none, and GradScaler's
  /// settings; how parameters' low copies are made (auto, keep, recast).
  std::string lossScale = "auto";
  double lossScaleInit = 65536.0, lossScaleGrowth = 2.0, lossScaleBackoff = 0.5;
  int64_t lossScaleInterval = 2000;
  std::string weightCasts = "auto";
  /// --data-parallel N: one rank's step of N data-parallel ranks (the
  /// inputs are one rank's micro-batch); 0 when not given. A value below 1
  /// given on the command line is an error (dataParallelGiven).
  int64_t dataParallel = 0;
  bool dataParallelGiven = false;
  /// --shard none|optimizer|gradients ("" when not given: none).
  std::string shard;
  /// --reduce-dtype f32|low: the type a data-parallel fp16 / bf16 step
  /// reduces its gradients in ("" when not given: f32, PyTorch DDP + AMP's).
  std::string reduceDtype;
};

struct CompileOptions {
  std::string inputPath;
  /// Output path: a file for mlir/plan, a prefix for source (OUT.cpp,
  /// OUT.weights, OUT.build.sh), exe (OUT, OUT.weights) and lib (OUT.so
  /// exporting the C API of memopt_c_api.h, OUT.weights).
  std::string outputPath;
  CompileTarget target = CompileTarget::Host;
  CompilePrecision precision = CompilePrecision::FP32;
  /// Arena capacity in bytes; 0 = no limit. When the planned arena is
  /// larger, ops are recomputed (memopt-rematerialize) until it fits.
  int64_t memoryBudget = 0;
  /// Op kinds that may be recomputed to meet the budget (empty: every op
  /// with a cost).
  std::vector<std::string> rematAllow;
  /// Seconds the rematerialization solver may search per attempt.
  double rematTimeLimit = 5.0;
  /// The most times one op may be computed (the solver's C).
  int rematMaxComputations = 2;
  /// Measured kernel times (JSON, by ONNX node name) for the solver's costs.
  std::string rematKernelTimes;
  /// "NAME=DIMS" entries (importer syntax).
  std::vector<std::string> inputShapes;
  EmitKind emit = EmitKind::Exe;
  std::string reportPath;
  /// The memory report's timeline (SVG), written next to the JSON one.
  std::string reportSvgPath;
  std::string cudaArch = "sm_90";
  /// Where the runtime the program links lives: a folder with include/
  /// (memopt/Runtime/*.h) and lib/ (libmemopt_runtime_*.a), as the Python
  /// package installs it. Empty: the source and build trees this driver was
  /// configured with.
  std::string runtimeDir;
  /// Every tensor gets its own arena slot (no reuse, no in-place).
  bool noPlan = false;
  /// Plan the model's outputs inside the arena (the driver reads them from
  /// there); off: each output gets a buffer of its own.
  bool outputsInArena = true;
  /// Run --memopt-fuse-attention after canonicalize.
  bool fuseAttention = true;
  /// Run --memopt-fuse-epilogues (bias / activation into gemm and conv).
  bool fuseEpilogues = true;
  /// Run --memopt-fuse-elementwise (after mixed precision).
  bool fuseElementwise = true;
  /// --memopt-layout: auto (channels-last where the target's convolutions
  /// are faster in it), nchw or nhwc.
  std::string layout = "auto";
  /// The input is already planned MLIR: only lower it.
  bool lowerOnly = false;
  /// Phase lines and the memory report go here.
  bool quiet = false;
  /// Print the time of each phase and pass (MLIR's timing report: import,
  /// every pass of the pipeline, emission, the build) on stderr at the end.
  bool timing = false;
  TrainingOptions training;
};

/// Parses "2GiB", "512MiB", "1.5GB", "4096" (bytes) into bytes.
FailureOr<int64_t> parseByteSize(StringRef text);

/// The precision `--precision NAME` names, or failure.
FailureOr<CompilePrecision> parseCompilePrecision(StringRef name);
/// The names parseCompilePrecision accepts, comma-separated (for messages).
StringRef getCompilePrecisionNames();

/// Runs the whole pipeline. Returns 0 on success; on failure one clear
/// message is printed on `errors` (stderr by default) and the result is
/// non-zero. Phase lines, the reports and the build command go to `log`
/// (unless CompileOptions::quiet).
int runCompile(const CompileOptions &options, llvm::raw_ostream &log);
int runCompile(const CompileOptions &options, llvm::raw_ostream &log,
               llvm::raw_ostream &errors);

} // namespace mlir::memopt

#endif // MEMOPT_CONVERSION_COMPILEDRIVER_H
