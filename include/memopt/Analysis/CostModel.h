//===- CostModel.h - estimated op times on a roofline ------------*- C++
//-*-===//
//
// How long an op takes on the target GPU, for passes that trade compute for
// memory (rematerialization) and for the report that states what that trade
// cost. An op's time is the larger of its floating-point work at the GPU's
// peak rate and its bytes moved at the memory bandwidth (the roofline model
// of Williams et al., the one XLA's GpuHloCostAnalysis and TVM's and Ansor's
// simple cost models use), plus a fixed per-kernel overhead. Where a kernel's
// time was measured, that time replaces the estimate.
//
// The FLOPs and bytes come from CostOpInterface, so the passes, the report
// and the tests read one cost per op.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_ANALYSIS_COSTMODEL_H
#define MEMOPT_ANALYSIS_COSTMODEL_H

#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringMap.h"

#include <string>

namespace mlir::memopt {

/// Peak rates of a GPU.
struct Roofline {
  std::string name;
  /// FLOP/s of f32 arithmetic on the CUDA cores (TF32 tensor cores off, as
  /// memopt's fp32 programs run by default).
  double f32FlopsPerSecond = 0;
  /// FLOP/s of f16/bf16 arithmetic on the tensor cores (dense).
  double lowFlopsPerSecond = 0;
  /// FLOP/s of f32 contractions in TF32 on the tensor cores (dense): the
  /// peak of a function compiled with --precision tf32
  /// (`memopt.precision = "tf32"`).
  double tf32FlopsPerSecond = 0;
  /// Device-memory bandwidth in bytes per second.
  double bytesPerSecond = 0;
  /// Fixed cost of one kernel (launch and tail), in seconds.
  double kernelSeconds = 0;

  /// NVIDIA H100 SXM5 80 GB (the datasheet's figures): 67 TFLOP/s f32,
  /// 989 TFLOP/s dense f16/bf16 tensor cores, 3.35 TB/s HBM3, and 2 us per
  /// kernel (a launch replayed from a CUDA graph plus the kernel's ramp).
  static Roofline h100();
};

/// Measured kernel times in seconds, by ONNX node name (the name the report
/// gives an op). An op whose name is listed takes that time instead of the
/// roofline estimate. A training step gives one name to many ops (a
/// convolution, its transposes, its data and filter gradients), so
/// --profile-times also writes the first op of each kind under a name as
/// kernelTimeKey(name, kind); an op takes that entry before the name's.
using KernelTimes = llvm::StringMap<double>;

/// The key of the first op of `kind` ("memopt.conv_backward_filter") named
/// `name` in a kernel-times file: "NAME @ KIND".
std::string kernelTimeKey(StringRef name, StringRef kind);

/// Reads `{"NODE": seconds, ...}` from a JSON file. On failure returns an
/// error message naming the file and the bad entry.
FailureOr<KernelTimes> readKernelTimes(StringRef path, std::string &error);

/// The estimated time of one execution of `op`: zero for ops without a cost
/// (views, shape queries: both FLOPs and bytes are 0), otherwise
/// max(flops / peak, bytes / bandwidth) + the per-kernel overhead, or the
/// measured time when `times` names the op.
double estimateOpSeconds(Operation *op, const Roofline &roofline,
                         const KernelTimes *times = nullptr);

/// True for the contractions that run on tensor cores (matmul, gemm, the
/// convolutions and the conv filter gradient, attention and its gradient,
/// the fused LM head): in f32 they multiply in TF32 where the function says
/// `memopt.precision = "tf32"`.
bool isTensorCoreContraction(Operation *op);

/// FLOPs of one execution of `op` (CostOpInterface; 0 without it).
int64_t getOpFlops(Operation *op);

} // namespace mlir::memopt

#endif // MEMOPT_ANALYSIS_COSTMODEL_H
