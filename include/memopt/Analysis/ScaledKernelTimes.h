//===- ScaledKernelTimes.h - measured op times at another batch ---*- C++
//-*-===//
//
// `memopt-compile --fit` plans candidates at many micro-batches, but
// `--profile-times` measures one program at one micro-batch. This model
// carries the measured times to the other micro-batches (docs/fit.md,
// "Predicted time"):
//
//   time(op, m) = c + e(m) * w(op, m)
//
// where c is the target's fixed cost per op (launch and tail: the measured
// "<op overhead>" entry, else the roofline's constant), w(op, m) is the op's
// roofline work at micro-batch m (max of FLOPs at peak and bytes at the
// bandwidth, without the constant: affine in m for batched ops, constant
// for the weight-sized ones, so it carries the "fixed + per sample" split
// of each op), and e the measured efficiency of the op's name: at each
// measured micro-batch m_i, e_i = (t_i - c) / w_ref(name, m_i), with w_ref
// the work of the name's first op (the one --profile-times times) in a
// reference plan at m_i. Between measured micro-batches e is interpolated
// linearly in m, outside them held at the nearest. Gradient ops share their
// forward op's name: they take its efficiency times their own work, not its
// time, when they are the same kind of op (a matmul's gradients are
// matmuls). An op of another kind under the name takes the efficiency of
// the first op of its kind there, measured apart (the file's
// kernelTimeKey(name, kind) entries: a ResNet convolution's transposes and
// filter gradient, whose roofline made the fit's prediction 3x optimistic
// for ResNet-50 before); without such an entry (the embedding Gather's
// scatter gradient in an older file), like a name nothing measured, it
// takes the roofline, c + w(op, m): one op's ratio says nothing of another
// kind's. Constants are
// never the reference (Fit.cpp): the runtime does not run them, and a
// 4-byte one under the Gather's name once made the Gather's efficiency
// 10^7 and TinyLlama's predicted step 194,000 s.
//
// Where this comes from: XLA's and TVM's analytical cost models (the
// roofline), and the per-op efficiency correction of profile-guided cost
// models (Ansor's measured-throughput feedback, DeepSpeed's autotuner
// profiling one micro-batch and extrapolating). Further: the correction is
// per op and per micro-batch, fit from every measured size.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_ANALYSIS_SCALEDKERNELTIMES_H
#define MEMOPT_ANALYSIS_SCALEDKERNELTIMES_H

#include "memopt/Analysis/CostModel.h"

#include "llvm/ADT/StringMap.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mlir::memopt {

/// The entries --profile-times writes beside the ops' times: the
/// micro-batch (dimension 0 of the program's first input) the times were
/// measured at, and the target's fixed cost of one op (seconds; an empty
/// kernel replayed from a CUDA graph).
constexpr llvm::StringLiteral kMicroBatchTimeKey = "<micro-batch>";
constexpr llvm::StringLiteral kOpOverheadTimeKey = "<op overhead>";

class ScaledKernelTimes {
public:
  /// A file of measured times (readKernelTimes) taken at `microBatch` (its
  /// kMicroBatchTimeKey entry; 0: unknown, then its times are used as they
  /// are at every micro-batch, as estimateOpSeconds does). Entries named
  /// "<...>" are not ops. A later file's kOpOverheadTimeKey replaces an
  /// earlier one's.
  void addMeasurement(const KernelTimes &times, int64_t microBatch);
  /// The per-op fixed cost when no file measured one.
  void setDefaultOpOverhead(double seconds) { defaultOverhead = seconds; }
  double getOpOverhead() const {
    return measuredOverhead ? *measuredOverhead : defaultOverhead;
  }
  bool empty() const { return measured.empty(); }
  /// The known micro-batches measured at (each needs a reference plan).
  std::vector<int64_t> getMeasuredMicroBatches() const;
  /// The reference: the roofline work of the first op named `name` in a
  /// plan at `microBatch` (the op --profile-times timed), and its kind (the
  /// op's name, "memopt.gemm"; empty: any).
  void setReferenceWork(llvm::StringRef name, int64_t microBatch,
                        double workSeconds, llvm::StringRef kind = "");
  /// The predicted time of an op named `name` of `kind` whose roofline work
  /// at `microBatch` is `workSeconds`, by the name's efficiency; nullopt
  /// when nothing measured the name, or measured it on another kind of op
  /// (the caller takes the roofline: getOpOverhead() + work).
  std::optional<double> predict(llvm::StringRef name, int64_t microBatch,
                                double workSeconds,
                                llvm::StringRef kind = "") const;

private:
  struct Sample {
    int64_t microBatch = 0; ///< 0: unknown
    double seconds = 0;
  };
  llvm::StringMap<std::vector<Sample>> measured;
  struct Reference {
    double work = 0;
    std::string kind;
  };
  /// name -> micro-batch -> reference work.
  llvm::StringMap<std::map<int64_t, Reference>> reference;
  std::optional<double> measuredOverhead;
  double defaultOverhead = 0;
};

} // namespace mlir::memopt

#endif // MEMOPT_ANALYSIS_SCALEDKERNELTIMES_H
