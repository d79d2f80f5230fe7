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

#include "memopt/Conversion/CompileOptions.h"

#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>

namespace mlir::memopt {

/// The options of `--memopt-compile-pipeline`: every MEMOPT_OPTION line of
/// CompileOptions.def (memopt-compile's flags that reach a pass), named by
/// its PIPELINE column, typed and defaulted as its CompileOptions field
/// (enums by their names), plus the driver's stop point and reports below.
/// The driver fills them from its CompileOptions with assign().
struct CompilePipelineOptions
    : public PassPipelineOptions<CompilePipelineOptions> {
#define MEMOPT_OPTION(STRUCT, FIELD, TYPE, DEFAULT, KIND, FLAG, PIPELINE,      \
                      PYTHON, CATEGORY, META, SHOWN, HELP)                     \
  MEMOPT_PIPELINE_OPTION_##KIND(FIELD, TYPE, DEFAULT, FLAG, PIPELINE, HELP)
#define MEMOPT_DRIVER_OPTION(...)
#define MEMOPT_PIPELINE_OPTION_Value(FIELD, TYPE, DEFAULT, FLAG, PIPELINE,     \
                                     HELP)                                     \
  Option<TYPE> FIELD{*this, PIPELINE, llvm::cl::desc(HELP),                    \
                     llvm::cl::init(TYPE(DEFAULT))};
// The help of a Negated option says what its flag does: false is that.
#define MEMOPT_PIPELINE_OPTION_Negated(FIELD, TYPE, DEFAULT, FLAG, PIPELINE,   \
                                       HELP)                                   \
  MEMOPT_PIPELINE_OPTION_Value(FIELD, TYPE, DEFAULT, FLAG, PIPELINE,           \
                               "false (memopt-compile --" FLAG "): " HELP)
#define MEMOPT_PIPELINE_OPTION_OnOff MEMOPT_PIPELINE_OPTION_Value
#define MEMOPT_PIPELINE_OPTION_Bytes MEMOPT_PIPELINE_OPTION_Value
#define MEMOPT_PIPELINE_OPTION_Enum(FIELD, TYPE, DEFAULT, FLAG, PIPELINE,      \
                                    HELP)                                      \
  Option<std::string> FIELD{*this, PIPELINE, llvm::cl::desc(HELP),             \
                            llvm::cl::init(getEnumName(DEFAULT))};
#define MEMOPT_PIPELINE_OPTION_List(FIELD, TYPE, DEFAULT, FLAG, PIPELINE,      \
                                    HELP)                                      \
  ListOption<std::string> FIELD{*this, PIPELINE, llvm::cl::desc(HELP)};
#define MEMOPT_PIPELINE_OPTION_Repeated MEMOPT_PIPELINE_OPTION_List
#include "memopt/Conversion/CompileOptions.def"
#undef MEMOPT_PIPELINE_OPTION_Value
#undef MEMOPT_PIPELINE_OPTION_Negated
#undef MEMOPT_PIPELINE_OPTION_OnOff
#undef MEMOPT_PIPELINE_OPTION_Bytes
#undef MEMOPT_PIPELINE_OPTION_Enum
#undef MEMOPT_PIPELINE_OPTION_List
#undef MEMOPT_PIPELINE_OPTION_Repeated

  // What to run and print.
  Option<std::string> stopAfter{
      *this, "stop-after",
      llvm::cl::desc("graph (after the graph rewrites, memopt-compile's "
                     "--emit mlir) or plan (after planning)"),
      llvm::cl::init("plan")};
  Option<std::string> reportSvg{
      *this, "report-svg",
      llvm::cl::desc("Write the memory timeline (SVG) to this file")};
  Option<bool> report{
      *this, "report",
      llvm::cl::desc("The passes print their reports (autodiff, mixed "
                     "precision, the plan's text report)"),
      llvm::cl::init(false)};

  /// Sets the table's options from the driver's CompileOptions (the
  /// stop point and the reports are the driver's to set).
  void assign(const CompileOptions &options);

  /// memopt-mixed-precision's setting for `precision` ("f16", "bf16",
  /// "tf32"), "" for fp32.
  std::string getLowType() const;
  /// The learning rate and weight decay after the optimizer's defaults.
  double getLearningRate() const;
  /// memopt-autodiff's loss-scale after `auto`: dynamic for fp16 training.
  std::string getLossScale() const;
  /// shard and reduce-dtype with their defaults ("" is none / f32).
  std::string getShard() const;
  std::string getReduceDtype() const;
  /// Whether `offload` lists `what` (activations, optimizer).
  bool offloads(StringRef what) const;
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
