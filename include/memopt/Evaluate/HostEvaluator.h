//===- HostEvaluator.h - constants evaluated by the host kernels -*- C++
//-*-===//
//
// Compile-time evaluation of a memopt op whose operands are all constants:
// the op's bytes go through the host runtime's kernel (memopt_runtime_host,
// the backend the CUDA one is checked against) and its results become
// `memopt.constant`s. The importer calls it on every op that its folder
// could not fold (so a mask or position formula of any op with a host
// kernel folds at import), and `memopt-fold-constants` runs it as a pass.
//
// Taken from XLA's HloConstantFolding (evaluate an instruction whose
// operands are constants with the HloEvaluator, skip large results and
// side-effecting or random ops) and onnxruntime's constant folding (which
// runs the CPU execution provider's kernels on initializers). Different:
// memopt has no second interpreter: the evaluator calls the same host
// kernels that run compiled programs, so there is one definition of each
// op's numbers; and trained parameters never fold (docs/import.md).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_EVALUATE_HOSTEVALUATOR_H
#define MEMOPT_EVALUATE_HOSTEVALUATOR_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <memory>

namespace mlir::memopt {

/// What the evaluator may fold.
struct HostEvaluationLimits {
  /// The most elements any one operand or result may have (1 Mi: a 1024 x
  /// 1024 causal mask). 0 disables the evaluator.
  int64_t maxElements = int64_t(1) << 20;
  /// Results with more elements than this become `dense_resource` blobs,
  /// as the importer's large initializers do; smaller ones (and booleans)
  /// stay inline `dense` so the folders can read them.
  int64_t maxInlineElements = 1024;
};

/// Whether `op` reads a float initializer that training would train: a
/// `memopt.constant` named by `memopt.initializer` whose `memopt.state_kind`
/// is absent or `parameter` (docs/import.md, "Parameters, buffers and
/// constants"). Such an op is never evaluated: its constant result would
/// replace the parameter with an untrained copy.
bool readsTrainableInitializer(Operation *op);

/// Evaluates constant ops through the host kernels. One instance per
/// import or pass run; it holds a single-threaded host runtime context.
class HostConstantEvaluator {
public:
  explicit HostConstantEvaluator(
      const HostEvaluationLimits &limits = HostEvaluationLimits());
  ~HostConstantEvaluator();
  HostConstantEvaluator(const HostConstantEvaluator &) = delete;
  HostConstantEvaluator &operator=(const HostConstantEvaluator &) = delete;

  /// Whether the evaluator knows `op`'s host kernel (its kind, not its
  /// operands: random and side-effecting ops never qualify).
  static bool hasHostKernel(Operation *op);

  /// `op`'s results as attributes when every operand is a constant (inline
  /// `dense` or a `dense_resource` blob), the op has a host kernel, no
  /// operand or result exceeds the limits, and the kernel accepts the
  /// operands; failure otherwise (the op then simply stays). Nothing is
  /// emitted as a diagnostic: an op that does not fold here runs in the
  /// program, where its kernel reports any error.
  FailureOr<SmallVector<Attribute>> evaluate(Operation *op);

  /// evaluate(), then `memopt.constant`s for the results created before
  /// `op` with `builder` (at op's location); `op` itself is left to the
  /// caller. Failure when evaluate fails.
  FailureOr<SmallVector<Value>> fold(OpBuilder &builder, Operation *op);

  /// Ops evaluated so far (for the passes' statistics and the tests).
  int64_t getEvaluatedCount() const { return evaluated; }

private:
  FailureOr<SmallVector<Attribute>> evaluateSplats(Operation *op);

  struct Runtime;
  HostEvaluationLimits limits;
  std::unique_ptr<Runtime> runtime;
  int64_t evaluated = 0;
};

} // namespace mlir::memopt

#endif // MEMOPT_EVALUATE_HOSTEVALUATOR_H
