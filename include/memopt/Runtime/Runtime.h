//===- Runtime.h - memopt runtime kernel interface --------------*- C++ -*-===//
//
// The interface between a generated memopt program and a backend (CUDA or
// host). A generated program is plain C++ that calls one free function per op
// family with TensorRefs pointing into one pre-planned activation arena and one
// weight region. Two backends implement this header with identical semantics:
// `memopt_runtime_cuda` (cuBLASLt, cuDNN and own kernels) and
// `memopt_runtime_host` (straightforward loops; the correctness reference).
//
// This header knows nothing about MLIR. See docs/runtime.md for the contract.
//
// Shape of the API taken from: ONNX operator semantics (broadcasting, attribute
// names), TFLite's reference kernels (one free function per op family with a
// params struct), onnxruntime's CUDA EP (cuBLASLt / cuDNN dispatch).
// Different: no tensor allocation at all inside kernels; every buffer,
// including convolution workspace, is decided by the compiler.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_RUNTIME_RUNTIME_H
#define MEMOPT_RUNTIME_RUNTIME_H

#include <cstddef>
#include <cstdint>
#include <cstdio>

namespace memopt::rt {

/// Element types. The numeric values are part of the program ABI
/// (ProgramInfo tables store them), so never renumber.
enum class DType : int32_t {
  F32 = 0,
  F16 = 1,
  BF16 = 2,
  F64 = 3,
  I64 = 4,
  I32 = 5,
  I8 = 6,
  U8 = 7,
  Bool = 8, ///< stored as one uint8_t per element (0 or 1)
};

/// Bytes per element.
size_t dtypeSize(DType dtype);
/// Short name ("f32", "bf16", "bool", ...); "?" for an invalid value.
const char *dtypeName(DType dtype);
/// True for F32, F16, BF16 (the types float kernels accept).
bool isFloatType(DType dtype);

constexpr int kMaxRank = 8;

/// A contiguous row-major tensor view. Rank 0 is a scalar (one element).
struct TensorRef {
  void *data = nullptr;
  DType dtype = DType::F32;
  int rank = 0;
  int64_t shape[kMaxRank] = {};

  int64_t numElements() const;
  size_t bytes() const { return size_t(numElements()) * dtypeSize(dtype); }
};

/// Builds a TensorRef; `shape` has `rank` entries.
TensorRef makeTensor(void *data, DType dtype, int rank, const int64_t *shape);

//===----------------------------------------------------------------------===//
// Context
//===----------------------------------------------------------------------===//

/// Backend state: CUDA stream, cuBLASLt / cuDNN handles, algorithm caches and
/// the first error. Opaque; each backend defines it. Not thread-safe: one
/// context runs one program at a time.
///
/// Errors: a failing op records "node 'NAME': message" and every later op call
/// on the context returns immediately. Callers check `contextError` after a
/// run. Nothing in the runtime throws or aborts.
struct Context;
class Communicator; // memopt/Runtime/Communicator.h
/// ncclSum, ncclAvg (the sum divided by the number of ranks) and ncclMax
/// (the loss scale's overflow flag, agreed over the ranks).
enum class CollectiveReduction : int32_t { Sum = 0, Average = 1, Max = 2 };

/// Which engine runs a convolution that both cuDNN and memopt's own kernels
/// can run (CUDA: channels-last depthwise, docs/layout.md; normReluConv and
/// its filter gradient: cuDNN's fusion or memopt's apply + conv,
/// docs/runtime.md): the faster when the call site's first eager run times
/// both, or the one forced.
enum class ConvEngine : int32_t { Measured = 0, Cudnn = 1, Memopt = 2 };

/// Which engine runs an attention or attention gradient call that both
/// cuDNN's fused SDPA and memopt's kernels can run (CUDA, f16 / bf16;
/// docs/attention.md, "Engines"): the faster when the call site's first
/// eager run times both, or the one forced. Values as ConvEngine's.
enum class AttentionEngine : int32_t { Measured = 0, Cudnn = 1, Memopt = 2 };

struct ContextOptions {
  int device = 0;
  /// cuBLASLt workspace owned by the context (allocated once at creation),
  /// for matmul calls that get no planned workspace (setMatmulWorkspace).
  /// Generated programs plan one per call inside the arena, so 0 by default.
  size_t matmulWorkspaceBytes = 0;
  /// Let f32 matmuls and convolutions use TF32 tensor cores (about 1e-3
  /// relative error). Off by default: f32 results then match the host backend
  /// closely; the mixed-precision pass is the way to fast math.
  bool allowTf32 = false;
  /// When attention runs chunk by chunk through its workspace (CUDA): one
  /// chunk always; several when there are at most attentionMaxChunks of at
  /// least attentionMinChunkScores scores each, or the library calls are too
  /// small to fill the GPU and the fused kernel is faster (H100, f32, 12
  /// heads of 512 x 512 x 64: 1 head per chunk took 2.1x the fused kernel's
  /// time, 3 heads 0.74x, 6 heads 0.46x; docs/attention.md). Tests set them
  /// to force the chunked path on small shapes.
  int64_t attentionMaxChunks = 16;
  int64_t attentionMinChunkScores = int64_t(1) << 19;
  /// False: attention always runs the fused kernel (the executable's
  /// --fused-attention, to compare the two CUDA paths on a whole model).
  bool chunkedAttention = true;
  /// CUDA: the engine of f16 / bf16 attention and its gradient where both
  /// cuDNN's fused SDPA (sm80+) and memopt's kernels can run the call
  /// (docs/attention.md, "Engines"): Measured (the default) times both at
  /// the call site's first eager run and keeps the faster, Cudnn takes
  /// cuDNN wherever it accepts the call, Memopt always memopt's kernels.
  /// The environment variable MEMOPT_ATTENTION_ENGINE (`measured`, `cudnn`
  /// or `memopt`) overrides this (read at the context's first attention
  /// call). The host ignores it.
  AttentionEngine attentionEngine = AttentionEngine::Measured;
  /// CUDA: the engine of the convolutions memopt's depthwise kernel can run
  /// and of the fused normalization-ReLU convolutions (ConvEngine); the
  /// environment variable MEMOPT_CONV_ENGINE (`measured`, `cudnn` or
  /// `memopt`) overrides this. The host ignores it.
  ConvEngine convEngine = ConvEngine::Measured;
  /// Per-op timing (the executable's --profile): generated programs call
  /// opDone after every op; with this set, the CUDA backend runs every step
  /// eagerly (no CUDA graph) and times each op with events, the host backend
  /// with the steady clock. printProfile reports the totals.
  bool profile = false;
  /// When not empty (the executable's --dump-ops DIR): the results of every
  /// op of the first run are written to DIR as NNNNN.npy, with DIR/ops.txt
  /// naming each (index, op kind, node, shape); the CUDA backend then runs
  /// eagerly. Two backends' dumps of one program compare op by op.
  const char *dumpDirectory = nullptr;
  /// Data parallel: this rank's end of the ranks' communicator (owned by
  /// the caller, outliving the context); the program's collectives use it.
  /// nullptr: a single process (collectives over one rank are copies).
  Communicator *communicator = nullptr;
  /// Host backend: threads an op may use (0: MEMOPT_HOST_THREADS or every
  /// core). N data-parallel ranks in one process share the cores.
  int hostThreads = 0;
};

Context *createContext(const ContextOptions &options = ContextOptions());
void destroyContext(Context *ctx);
/// The first recorded error, or nullptr.
const char *contextError(Context &ctx);
/// Records an error (first one wins). Used by drivers and generated code.
void contextFail(Context &ctx, const char *nodeName, const char *message);
/// "cuda" or "host".
const char *backendName();

/// Device memory, owned by the caller. Host backend: 256-byte aligned heap.
void *deviceAlloc(Context &ctx, size_t bytes, const char *what);
void deviceFree(Context &ctx, void *ptr);
void copyToDevice(Context &ctx, void *dst, const void *src, size_t bytes);
void copyToHost(Context &ctx, void *dst, const void *src, size_t bytes);
/// Copies between two buffers that may each be host or device memory
/// (CUDA: unified addressing tells them apart), queued on the context's
/// stream. The Python package's device path uses it for tensors it does not
/// own (DLPack), so that no copy goes through the host.
void copyAnywhere(Context &ctx, void *dst, const void *src, size_t bytes);
/// Page-locks `bytes` of the caller's host memory at `ptr` so that copies
/// from it run at the bus's speed (CUDA: cudaHostRegister; pageable memory
/// is staged by the driver at a fraction of it: 154 MB of ResNet-50 inputs
/// took longer to upload than the step's convolutions). False where it
/// could not (the caller goes on with pageable memory); the host backend
/// has nothing to do and returns true. unpinHostMemory undoes it.
bool pinHostMemory(Context &ctx, void *ptr, size_t bytes);
void unpinHostMemory(Context &ctx, void *ptr);
/// Waits for all queued work; reports asynchronous errors.
void synchronize(Context &ctx);
/// Orders the context's stream after the work queued so far on a caller's
/// `stream` (CUDA: a cudaStream_t, nullptr = the legacy default stream),
/// without waiting on the host. Host backend: nothing to do.
void waitForStream(Context &ctx, void *stream);
/// Orders the work queued later on the caller's `stream` after the work
/// queued so far on the context's stream, without waiting on the host.
void signalStream(Context &ctx, void *stream);

/// Runs `body` on the context's stream. CUDA: the first call runs eagerly
/// (algorithm selection happens here), the second captures the calls into a
/// CUDA graph and launches it, later calls replay that graph. Pointers passed
/// to the ops must therefore stay the same between calls.
void execute(Context &ctx, void (*body)(Context &ctx, void *user), void *user);

/// Stream-ordered timing: CUDA events, or the steady clock on the host.
void timerStart(Context &ctx);
double timerStopMs(Context &ctx);

struct MemoryInfo {
  size_t usedBytes = 0;      ///< total - free from cudaMemGetInfo now
  size_t peakUsedBytes = 0;  ///< largest usedBytes seen by this context
  size_t totalBytes = 0;     ///< device capacity (0 on the host)
  size_t workspaceBytes = 0; ///< context-owned workspace (cuBLASLt)
};
/// Samples device memory (updates the peak). Host: zeros except workspace.
MemoryInfo memoryInfo(Context &ctx);

/// Called by generated programs after op number `index` (`kind` is the
/// memopt op name) with its results; does nothing unless the context has
/// `profile` or `dumpDirectory` (see ContextOptions).
void opDone(Context &ctx, int index, const char *nodeName, const char *kind,
            const TensorRef *results, int numResults);
/// Writes the profile gathered over the runs after the first (which includes
/// algorithm selection): time per op kind and the `top` slowest ops.
void printProfile(Context &ctx, FILE *out, int top);
/// Which engine ran each attention and attention gradient call site, one
/// line per site in first-call order: `NODE forward|backward: cuDNN SDPA
/// (measured 0.020 ms against memopt's 0.128 ms; ...)`, `... memopt kernel
/// (measured ...)`, `... cuDNN SDPA (forced: ...)` or `... memopt kernel
/// (reason)`. CUDA only (the host returns ""); printProfile
/// appends it, and MEMOPT_ATTENTION_REPORT=1 prints each line to stderr when
/// the site first runs. The text stays valid until the next attention call.
const char *attentionEngineReport(Context &ctx);
/// Which engine ran each channels-last grouped convolution call site and
/// each normReluConv / normReluConvBackwardFilter site, one line per site in
/// first-call order: `NODE: memopt depthwise kernel (...)`, `NODE: cudnn
/// (...)`, `NODE: cuDNN scale-bias-relu-conv fusion ...` or `NODE: apply +
/// conv (...)` with the timings or the reason. CUDA only (the
/// host returns ""); printProfile appends it, and MEMOPT_CONV_LOG=1 prints
/// each line to stderr when the choice is made. Valid until the next call.
const char *convolutionEngineReport(Context &ctx);
/// Writes the profile as `{"NODE": seconds, ...}`, the format of
/// memopt-compile --remat-kernel-times: for each ONNX node name, the time per
/// run of its first op in program order (the forward computation, which the
/// rematerialization solver may repeat; gradient ops that share the name come
/// later and are left out). `microBatch` > 0 is written as "<micro-batch>"
/// (the batch the times were measured at: memopt-compile --fit scales them
/// to the others, docs/fit.md), and the CUDA backend measures "<op
/// overhead>", the fixed cost of one kernel replayed from a CUDA graph.
void writeProfileTimes(Context &ctx, FILE *out, int64_t microBatch = 0);

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

enum class UnaryOp : int32_t {
  Identity,
  Relu,
  LeakyRelu, ///< alpha = slope
  Elu,       ///< alpha
  Sigmoid,
  HardSigmoid, ///< max(0, min(1, alpha * x + beta))
  HardSwish,
  Tanh,
  Gelu,     ///< erf form
  GeluTanh, ///< tanh approximation
  Silu,
  Softplus,
  Exp,
  Log,
  Sqrt,
  Reciprocal,
  Neg,
  Abs,
  Erf,
  Sin,
  Cos,
  Floor,
  Ceil,
  Round,     ///< half to even
  Clip,      ///< alpha = min, beta = max
  Not,       ///< Bool only
  PowScalar, ///< x ** alpha
};

/// Mod: floored remainder for integers (the sign of the divisor: ONNX Mod
/// with fmod = 0, Python's %), C fmod for floats. FMod: truncated remainder
/// (the sign of the dividend: ONNX fmod = 1, C's % and fmod) for every type.
/// Integer Div/Mod/FMod by zero give 0. ReluGrad (floats only): a where
/// b > 0, else 0 (ReLU's gradient from its output, PyTorch's
/// threshold_backward; a NaN b gives 0, as where(b > 0, a, 0) does).
enum class BinaryOp : int32_t {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Max,
  Min,
  Mod,
  FMod,
  ReluGrad
};
enum class CompareOp : int32_t {
  Equal,
  Less,
  LessOrEqual,
  Greater,
  GreaterOrEqual
};
enum class LogicalOp : int32_t { And, Or, Xor };

/// y = op(x). Float types (x, y same dtype, same element count); Not: Bool;
/// Neg/Abs/Relu/Identity also accept I32/I64.
void unary(Context &ctx, const char *nodeName, UnaryOp op, float alpha,
           float beta, TensorRef x, TensorRef y);
/// c = a op b with numpy broadcasting; a, b, c share one dtype (float or
/// I32/I64; see BinaryOp for Mod and FMod).
void binary(Context &ctx, const char *nodeName, BinaryOp op, TensorRef a,
            TensorRef b, TensorRef c);

/// One step of a fused elementwise program. Registers 0 .. numInputs - 1
/// hold the inputs' elements, step i writes register numInputs + i, the last
/// step's register is the output.
struct ElementwiseStep {
  static constexpr int32_t kUnary = 0, kBinary = 1;
  int32_t kind;      ///< kUnary or kBinary
  int32_t op;        ///< a UnaryOp or BinaryOp value
  int32_t a, b;      ///< operand registers (b: binary only)
  float alpha, beta; ///< UnaryOp parameters
};
constexpr int kMaxFusedInputs = 8;
constexpr int kMaxFusedSteps = 16;
/// y = a chain (a DAG) of float unary / binary ops in one pass: each output
/// element reads each input once (numpy broadcasting to y's shape) and
/// computes the steps in f32 registers (double on the host), with no
/// intermediate tensors. The inputs share one float dtype and y has that or
/// another float dtype (the last step's value converted, as by cast); y may
/// alias an input of its own shape and dtype (in place), not a broadcast one.
void fusedElementwise(Context &ctx, const char *nodeName,
                      const ElementwiseStep *steps, int numSteps,
                      const TensorRef *inputs, int numInputs, TensorRef y);
/// c (Bool) = a cmp b with broadcasting.
void compare(Context &ctx, const char *nodeName, CompareOp op, TensorRef a,
             TensorRef b, TensorRef c);
/// c (Bool) = a op b (Bool) with broadcasting.
void logical(Context &ctx, const char *nodeName, LogicalOp op, TensorRef a,
             TensorRef b, TensorRef c);
/// y = cond ? x : z with three-way broadcasting; cond is Bool.
void where(Context &ctx, const char *nodeName, TensorRef cond, TensorRef x,
           TensorRef z, TensorRef y);
/// y (Bool) = isnan(x) elementwise (ONNX IsNaN); x is a float dtype of y's
/// shape.
void isNaN(Context &ctx, const char *nodeName, TensorRef x, TensorRef y);
/// Converts between any two dtypes (float→int truncates toward zero,
/// →Bool is x != 0).
void cast(Context &ctx, const char *nodeName, TensorRef x, TensorRef y);
/// Byte copy x → y (same byte size). For Identity into a different buffer and
/// for reshapes whose source cannot alias.
void copy(Context &ctx, const char *nodeName, TensorRef x, TensorRef y);
/// Sets every element of y to `value` converted to y's dtype.
void fill(Context &ctx, const char *nodeName, double value, TensorRef y);
/// ONNX Range: y[i] = start + i * delta; start and delta hold one element of
/// y's dtype (F32, F16, BF16, F64, I32 or I64), y is 1-D. Range usually
/// folds to a constant at compile time; this runs the ones that do not.
void range(Context &ctx, const char *nodeName, TensorRef start, TensorRef delta,
           TensorRef y);
/// Broadcasting copy (ONNX Expand; y's shape is the broadcast result).
void expand(Context &ctx, const char *nodeName, TensorRef x, TensorRef y);

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

enum class Activation : int32_t { None, Relu, Gelu, GeluTanh };

struct MatmulParams {
  bool transA = false;
  bool transB = false;
  float alpha = 1.0f;
  float beta = 1.0f; ///< scales `bias` when one is given
  Activation activation = Activation::None;
  /// f32 operands may be multiplied in TF32 on tensor cores (10-bit
  /// mantissa, f32 accumulation: about 1e-3 relative error), as PyTorch's
  /// `allow_tf32` and TensorRT's default allow. Ignored for f16/bf16 and on
  /// the host (which computes in double).
  bool allowTf32 = false;
};

/// c = act(alpha * op(a) @ op(b) + beta * bias). a: [..., M, K] ([..., K, M]
/// if transA), b: [..., K, N] ([..., N, K] if transB), c: [..., M, N]; batch
/// dims broadcast numpy-style (rank >= 2 each: the caller turns ONNX's 1-D
/// MatMul operands into matrices). bias broadcasts to [M, N] (ONNX Gemm's C)
/// and has c's dtype. a, b, c share one float dtype, except that c may be F32
/// when a and b are F16 or BF16 (the f32 accumulator is stored as it is);
/// accumulation is f32.
void matmul(Context &ctx, const char *nodeName, const MatmulParams &params,
            TensorRef a, TensorRef b, const TensorRef *bias, TensorRef c);
/// Scratch for the next matmul call only (a slice of the arena the compiler
/// planned for it, 256-byte aligned); that call picks the fastest cuBLASLt
/// algorithm within `bytes`. Without it a call uses the context's own
/// workspace (ContextOptions::matmulWorkspaceBytes). The host ignores it.
void setMatmulWorkspace(Context &ctx, void *workspace, size_t bytes);

//===----------------------------------------------------------------------===//
// Convolution and pooling (NCHW or channels-last, 1-D / 2-D / 3-D spatial)
//===----------------------------------------------------------------------===//

struct ConvParams {
  int spatialRank = 2;
  int64_t padsBegin[3] = {0, 0, 0};
  int64_t padsEnd[3] = {0, 0, 0};
  int64_t strides[3] = {1, 1, 1};
  int64_t dilations[3] = {1, 1, 1};
  int64_t group = 1;
  /// ConvTranspose only: ONNX output_padding (already reflected in y's shape).
  int64_t outputPadding[3] = {0, 0, 0};
  Activation activation = Activation::None; ///< applied after the bias
  /// f32 convolutions may use TF32 tensor cores (see MatmulParams).
  bool allowTf32 = false;
  /// Channels-last tensors (memopt-layout): x [N, spatial..., C], w [M, k...,
  /// C/group], y [N, out..., M] (cuDNN's NHWC and KRSC); convTranspose: x
  /// [N, in..., C], w [C, k..., M/group], y [N, out..., M];
  /// convBackwardFilter: x, dy and dw as conv's x, y and w.
  bool channelsLast = false;
};

/// The workspace bound the compiler reserves for one conv call (host
/// function, no GPU needed): min(max(bytes(x), bytes(y), bytes(w)), 64 MiB)
/// rounded up to 256 bytes, and at least 1 MiB. The CUDA backend picks the
/// fastest algorithm whose workspace fits in what the call receives.
size_t convWorkspaceBound(const ConvParams &params, const TensorRef &x,
                          const TensorRef &w, const TensorRef &y);

/// y = act(conv(x, w) + bias). x [N, C, spatial...], w [M, C/group, k...],
/// bias [M] or null, y [N, M, out...] (or their channels-last forms, see
/// ConvParams::channelsLast). Float dtypes, all the same.
void conv(Context &ctx, const char *nodeName, const ConvParams &params,
          TensorRef x, TensorRef w, const TensorRef *bias, TensorRef y,
          void *workspace, size_t workspaceBytes);
/// y = act(conv(x, w) + bias + residual): a convolution whose output is
/// added to `residual` (y's shape and dtype) before the activation, ResNet's
/// `relu(conv(x) + shortcut)`. y may be `residual` itself (in place). CUDA:
/// one cudnnConvolutionBiasActivationForward where cuDNN offers it (relu or
/// no activation, with a bias), else the convolution and one epilogue kernel.
void convResidual(Context &ctx, const char *nodeName, const ConvParams &params,
                  TensorRef x, TensorRef w, const TensorRef *bias,
                  TensorRef residual, TensorRef y, void *workspace,
                  size_t workspaceBytes);
/// ONNX ConvTranspose: w [C, M/group, k...], y [N, M, out...].
void convTranspose(Context &ctx, const char *nodeName, const ConvParams &params,
                   TensorRef x, TensorRef w, const TensorRef *bias, TensorRef y,
                   void *workspace, size_t workspaceBytes);

enum class PoolKind : int32_t { Max, Avg };

struct PoolParams {
  PoolKind kind = PoolKind::Max;
  int spatialRank = 2;
  int64_t kernel[3] = {1, 1, 1};
  int64_t padsBegin[3] = {0, 0, 0};
  int64_t padsEnd[3] = {0, 0, 0};
  int64_t strides[3] = {1, 1, 1};
  int64_t dilations[3] = {1, 1, 1};
  bool countIncludePad = false;
  /// ceil_mode only shapes y (already reflected in y's shape): windows that
  /// start inside the padded input are kept and clipped.
  bool ceilMode = false;
  /// x [N, spatial..., C] and y [N, out..., C] (`pool`; `poolGrad`: x, dy
  /// and dx).
  bool channelsLast = false;
};

void pool(Context &ctx, const char *nodeName, const PoolParams &params,
          TensorRef x, TensorRef y);
/// y [N, C, 1, ...] = mean over spatial dims of x [N, C, ...]; with
/// `channelsLast`, y [N, 1, ..., C] from x [N, ..., C].
void globalAvgPool(Context &ctx, const char *nodeName, TensorRef x, TensorRef y,
                   bool channelsLast = false);

//===----------------------------------------------------------------------===//
// Normalization, softmax, reductions
//===----------------------------------------------------------------------===//

/// Inference BatchNormalization over axis 1 (the last axis with
/// `channelsLast`): scale, bias, mean, var are [C] (any float dtype each;
/// computed in f32).
void batchNorm(Context &ctx, const char *nodeName, float epsilon, TensorRef x,
               TensorRef scale, TensorRef bias, TensorRef mean, TensorRef var,
               TensorRef y, bool channelsLast = false);
/// LayerNormalization: normalizes over dims [axis, rank); scale (and bias if
/// given) have the shape of those dims (or broadcast to it).
void layerNorm(Context &ctx, const char *nodeName, int axis, float epsilon,
               TensorRef x, TensorRef scale, const TensorRef *bias,
               TensorRef y);
/// Softmax (ONNX opset 13: over the single axis `axis`), or LogSoftmax.
void softmax(Context &ctx, const char *nodeName, int axis, bool logSoftmax,
             TensorRef x, TensorRef y);

struct AttentionParams {
  float scale = 1.0f;
  /// Mask key j > i of query row i (top-left aligned, PyTorch's is_causal).
  bool causal = false;
  /// k is [..., D, Sk] instead of [..., Sk, D].
  bool keyTransposed = false;
  /// A row whose scores are all -inf (fully masked) gives zeros instead of
  /// NaN: PyTorch's safe softmax, exported as Where(IsNaN(P), 0, P).
  bool safeSoftmax = false;
  /// f32 attention run as library calls (the chunked path) may multiply in
  /// TF32 (see MatmulParams); the fused kernel is unaffected.
  bool allowTf32 = false;
  /// attentionBackward: dK and dV in K's and V's own shapes, summed over the
  /// query heads that share each K / V entry (grouped-query attention: K
  /// and V have the same batch dims, y's up to a trailing run they
  /// broadcast along; memopt.attention_grad's `grouped_gradients`).
  bool groupedGradients = false;
  /// Training dropout of the probabilities (memopt.attention's
  /// `dropout_ratio`, in [0, 1); 0: none): y = (P * keep / (1 - ratio)) v,
  /// P[..., i, j] kept unless the Philox word of its index in the row-major
  /// [y's batch dims..., S, Sk] probabilities, keyed by `dropoutKey` and
  /// counted with `dropoutStream`, is below ratio * 2^32: exactly the mask
  /// dropout(ratio, dropoutStream) draws on the unfused graph's
  /// probabilities (lib/Runtime/Philox.h). The backward (same params)
  /// regenerates the mask; nothing is saved.
  float dropoutRatio = 0.0f;
  uint32_t dropoutStream = 0;
  /// I64 [2] [seed, micro-batch] in the backend's memory (the program's
  /// random_key; on CUDA a device pointer, written before each run so a
  /// captured graph stays valid). Required when dropoutRatio > 0.
  const int64_t *dropoutKey = nullptr;
  /// CUDA: draw the mask with cuDNN's own generator (seeded from
  /// dropoutKey and dropoutStream) instead of memopt's Philox mask, so
  /// cuDNN's fused SDPA may run the call. The compiler sets it on a forward
  /// and its gradient together, only where cuDNN runs both (the mask of the
  /// forward must be the backward's); such a call then runs cuDNN or fails
  /// with an error naming the node, never memopt's kernels with another
  /// mask. The host ignores it (its masks are memopt's).
  bool dropoutCudnnRng = false;
};

/// Scaled dot-product attention (ONNX Attention, 4-D form):
/// y[..., i, :] = softmax_j(scale * q[..., i, :] . k[..., j, :] +
/// bias[..., i, j]) @ v. q [..., S, D], k [..., Sk, D] (or [..., D, Sk]),
/// v [..., Sk, Dv], y [..., S, Dv]; batch dims broadcast numpy-style, bias
/// (optional, y's dtype) broadcasts to [..., S, Sk]. One float dtype for all;
/// softmax statistics and accumulation in f32 (double on the host). y must
/// not alias an input. A row whose scores are all -inf gives NaN, or zeros
/// with `params.safeSoftmax`.
///
/// CUDA, f16 / bf16: cuDNN's fused SDPA engine may run the call where cuDNN
/// accepts its shape, mask and layout and its plan fits `workspace` (the
/// plan is built on the first call of each distinct shape and kept);
/// ContextOptions::attentionEngine decides between it and memopt's kernels
/// below (by default the faster at the call site's first eager run;
/// attentionEngineReport says which ran and why).
///
/// `workspace` (optional, 256-byte aligned) is scratch the compiler found
/// free while the op runs. CUDA: when Q, K and V hold the whole batch and the
/// workspace holds the scores of the whole batch, or of chunks of it that are
/// large enough (ContextOptions::attentionMinChunkScores), the attention runs
/// chunk by chunk
/// as cuBLASLt (Q K^T into f32 scores), a masked softmax, cuBLASLt (P V);
/// otherwise a fused flash-attention kernel keeps the scores in shared memory
/// (D and Dv at most 128 then). The host keeps one row of scores and overwrites
/// the whole workspace with NaN before and after the call, so a workspace that
/// overlaps live data breaks the results there rather than only on a GPU.
///
/// `lse` (optional, F32 [..., S, 2] with y's batch dims): per query row two
/// numbers whose sum is the row's log-sum-exp, what attentionBackward reads
/// instead of the probabilities. memopt's kernels store the maximum of the
/// row's scores and log(sum_j exp(score_j - maximum)); cuDNN stores the
/// log-sum-exp and 0 (a backward on either engine reads both forms). Scores
/// below -2.35e38 count as -2.3587e38 (-FLT_MAX / log2(e)) in the statistics
/// and the backward: the CUDA kernels work in the log2 domain and saturate
/// there. A row whose scores are all -inf stores (-inf, -inf).
void attention(Context &ctx, const char *nodeName,
               const AttentionParams &params, TensorRef q, TensorRef k,
               TensorRef v, const TensorRef *bias, TensorRef y,
               void *workspace = nullptr, size_t workspaceBytes = 0,
               const TensorRef *lse = nullptr);

/// The gradients of attention (FlashAttention-2's backward): with
/// P = exp(S - lse) recomputed block by block from q, k, bias and the
/// forward's row statistics `lse`, and D = rowsum(dy * y):
///   dv = P^T dy, dP = dy v^T, dS = P * (dP - D),
///   dq = scale * dS k, dk = scale * dS^T q, dbias = dS.
/// `params`, q, k, v and bias are the forward's, y its output and dy the
/// output's gradient. dq, dk and dv have the shapes of q, k (in its layout)
/// and v with y's batch dims (no broadcast: summing broadcast axes back is
/// the caller's); `dbias` (optional) has the bias's own shape and receives
/// dS summed over the axes the bias broadcasts along. A fully masked row
/// gives zero gradients with params.safeSoftmax, NaN otherwise. F32, or F16 /
/// BF16 operands and gradients (f32 statistics and accumulation; a `dbias`
/// is F32 only). Outputs must not alias inputs or each other.
///
/// CUDA, f16 / bf16 without `dbias`: cuDNN's fused SDPA backward runs the
/// call where it can, as for attention.
///
/// `workspace` (optional, 256-byte aligned): CUDA runs the backward chunk by
/// chunk through cuBLASLt when q, k and v hold the whole batch and the
/// workspace holds attentionBackwardChunkBytes of a large enough chunk (the
/// forward's rules), fused kernels otherwise (D and Dv at most 128). The
/// host poisons the workspace as for attention.
void attentionBackward(Context &ctx, const char *nodeName,
                       const AttentionParams &params, TensorRef q, TensorRef k,
                       TensorRef v, const TensorRef *bias, TensorRef y,
                       TensorRef dy, TensorRef lse, TensorRef dq, TensorRef dk,
                       TensorRef dv, const TensorRef *dbias,
                       void *workspace = nullptr, size_t workspaceBytes = 0);

/// Workspace bytes of a chunk of `items` batch entries of attentionBackward
/// with operands of `dtype`: two f32 score buffers (S then P, dP then dS),
/// each rounded up to 256; for F16 / BF16 two more of `dtype` that P and dS
/// are rounded into for the three gradient GEMMs.
size_t attentionBackwardChunkBytes(int64_t items, int64_t queries, int64_t keys,
                                   DType dtype = DType::F32);

/// Workspace bytes of a chunk of `items` batch entries of attention with
/// `queries` x `keys` scores of `dtype`: f32 scores (rounded up to 256
/// bytes), plus the probabilities in `dtype` when it is not F32.
size_t attentionChunkBytes(int64_t items, int64_t queries, int64_t keys,
                           DType dtype);

/// The workspace an attention forward (`backward` false; `statistics` when
/// it returns them) or backward on cuDNN's fused SDPA is planned: the bound
/// of workspace::cudnnAttentionBytes / cudnnAttentionBackwardBytes for these
/// shapes, what the compiler reserves in the arena for a call on target cuda
/// (`memopt.cudnn_workspace`); 0 where the compiler plans none
/// (workspace::cudnnAttentionPlanned; a backward with K stored [D, Sk] and
/// grouped heads). A call given less runs memopt's kernels.
size_t cudnnAttentionWorkspaceBound(const AttentionParams &params,
                                    const TensorRef &q, const TensorRef &k,
                                    const TensorRef &v, const TensorRef *bias,
                                    bool statistics, bool backward);

enum class ReduceOp : int32_t { Sum, Mean, Max, Min, Prod, SumSquare, L2 };
/// Reduces x over `axes` (sorted, unique, non-negative). y holds the result
/// with the reduced dims removed or kept as 1: only its element count matters.
/// `workspace` (optional, f32-aligned): CUDA splits a long reduction into
/// that many partial results per output as fit (reduceWorkspaceBytes gives
/// what it can use), so that few outputs over many elements (a bias
/// gradient) still fill the GPU; the host ignores it.
void reduce(Context &ctx, const char *nodeName, ReduceOp op, const int *axes,
            int numAxes, TensorRef x, TensorRef y, void *workspace = nullptr,
            size_t workspaceBytes = 0);
/// ArgMax/ArgMin over one axis; y is I64 (first occurrence wins).
void argReduce(Context &ctx, const char *nodeName, bool isMax, int axis,
               TensorRef x, TensorRef y);
/// ONNX CumSum: y[..., i, ...] = sum of x[..., j, ...] over j <= i along
/// `axis` (j < i with `exclusive`; j >= i, or j > i, with `reverse`). x and y
/// have one shape and dtype: F32, F16, BF16 (accumulated in f32 on CUDA, in
/// double on the host), I32 or I64 (wrapping). y may be x (in place).
void cumSum(Context &ctx, const char *nodeName, int axis, bool exclusive,
            bool reverse, TensorRef x, TensorRef y);

//===----------------------------------------------------------------------===//
// Data movement (any dtype)
//===----------------------------------------------------------------------===//

/// y = x transposed by `perm` (y.shape[i] = x.shape[perm[i]]).
void transpose(Context &ctx, const char *nodeName, const int *perm, TensorRef x,
               TensorRef y);
/// y = concat(inputs[0..n), axis).
void concat(Context &ctx, const char *nodeName, int axis,
            const TensorRef *inputs, int numInputs, TensorRef y);
/// outputs[i] = consecutive slices of x along axis (sizes from the outputs).
void split(Context &ctx, const char *nodeName, int axis, TensorRef x,
           const TensorRef *outputs, int numOutputs);
/// y[i...] = x[starts + i * steps]; starts/steps per axis of x (normalized by
/// the caller: 0 <= start < dim, step != 0); y's shape is the result shape.
void slice(Context &ctx, const char *nodeName, const int64_t *starts,
           const int64_t *steps, TensorRef x, TensorRef y);
/// ONNX Gather: indices I64 or I32, negative indices wrap; out-of-range
/// indices are an error (host) or clamped (CUDA).
void gather(Context &ctx, const char *nodeName, int axis, TensorRef x,
            TensorRef indices, TensorRef y);
/// ONNX GatherElements (indices has y's shape).
void gatherElements(Context &ctx, const char *nodeName, int axis, TensorRef x,
                    TensorRef indices, TensorRef y);

enum class ScatterReduction : int32_t { None, Add, Mul, Max, Min };
/// ONNX ScatterND (opsets 13-18): y = data, then for each index tuple t of
/// indices [..., k] (I64 or I32; negative values wrap),
/// y[t, :...] = updates[t-position, :...] (None) or combined with it (Add,
/// Mul, Max, Min). updates has shape indices.shape[:-1] + data.shape[k:]; y
/// has data's shape and dtype (any dtype; reductions not on Bool). y may be
/// data itself (in place: the copy is skipped); indices and updates must not
/// overlap y. With None, repeated tuples leave the result undefined (ONNX):
/// the host takes the last, CUDA any one. Reductions with repeated tuples are
/// exact on the host (in order) and atomic on CUDA (every update is applied;
/// float sums may differ in rounding). Out-of-range indices are an error
/// (host) or skipped (CUDA).
void scatterND(Context &ctx, const char *nodeName, ScatterReduction reduction,
               TensorRef data, TensorRef indices, TensorRef updates,
               TensorRef y);

enum class PadMode : int32_t { Constant, Reflect, Edge };
/// padsBegin/padsEnd per axis of x (may be negative = crop).
void pad(Context &ctx, const char *nodeName, PadMode mode,
         const int64_t *padsBegin, const int64_t *padsEnd, double value,
         TensorRef x, TensorRef y);

enum class ResizeMode : int32_t { Nearest, Linear };
enum class CoordinateMode : int32_t {
  HalfPixel,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfHalfPixelForCenters,
};
enum class NearestMode : int32_t {
  RoundPreferFloor,
  RoundPreferCeil,
  Floor,
  Ceil
};

struct ResizeParams {
  ResizeMode mode = ResizeMode::Nearest;
  CoordinateMode coordinateMode = CoordinateMode::HalfPixel;
  NearestMode nearestMode = NearestMode::RoundPreferFloor;
  /// Per-axis scales (output/input); <= 0 means "derive from the shapes".
  float scales[kMaxRank] = {0, 0, 0, 0, 0, 0, 0, 0};
};
/// ONNX Resize over any axes whose sizes differ (linear: at most the last two
/// axes may be resized, i.e. bilinear / linear; float dtypes).
void resize(Context &ctx, const char *nodeName, const ResizeParams &params,
            TensorRef x, TensorRef y);

//===----------------------------------------------------------------------===//
// Training: losses, gradients without a forward twin, optimizer updates
//===----------------------------------------------------------------------===//

/// Softmax cross-entropy over the last axis: logits [R, C] (float; the caller
/// views any [..., C] tensor as [R, C]), labels [R] (I64 or I32). A row whose
/// label equals `ignoreIndex` counts nothing. loss (F32, one element) = the
/// mean over counted rows of -log softmax(logits[r])[labels[r]], 0 when no
/// row counts. A label outside [0, C) that is not `ignoreIndex` is an error
/// naming the row (host) and gives NaN for that row (CUDA).
void softmaxCrossEntropy(Context &ctx, const char *nodeName,
                         int64_t ignoreIndex, TensorRef logits,
                         TensorRef labels, TensorRef loss);
/// dlogits [R, C] (logits' dtype) = dloss * (softmax(logits[r]) -
/// onehot(labels[r])) / count for counted rows, 0 for ignored rows; dloss is
/// an F32 scalar on the device.
void softmaxCrossEntropyGrad(Context &ctx, const char *nodeName,
                             int64_t ignoreIndex, TensorRef logits,
                             TensorRef labels, TensorRef dloss,
                             TensorRef dlogits);

/// The language-model head and its loss in one op (a linear layer without
/// bias followed by softmax cross-entropy), which never holds the [R, C]
/// logits: logits = x w^T with x [R, K] (any [..., K] view), w [C, K] (the
/// classes' rows, as nn.Linear and a tied embedding store them), labels [R].
/// The loss is softmaxCrossEntropy's; lse [R] (F32) receives each row's
/// log-sum-exp for the gradient. x and w share one float dtype; the logits
/// are formed in that dtype (f32 accumulation), as the separate matmul
/// would store them. CUDA walks the classes in chunks through `workspace`
/// (linearCrossEntropyWorkspaceBytes of at least one chunk; the host ignores
/// it); every chunk but the last is a multiple of 8 classes, so its GEMMs get
/// aligned tensor-core kernels even for an odd vocabulary.
struct LinearCrossEntropyParams {
  int64_t ignoreIndex = -100;
  /// f32 operands may be multiplied in TF32 (MatmulParams::allowTf32).
  bool allowTf32 = false;
};
void linearCrossEntropy(Context &ctx, const char *nodeName,
                        const LinearCrossEntropyParams &params, TensorRef x,
                        TensorRef w, TensorRef labels, TensorRef loss,
                        TensorRef lse, void *workspace, size_t workspaceBytes);
/// Its gradient: with d = dloss * (softmax(x w^T) - onehot(labels)) / count
/// (0 for ignored rows; the logits recomputed chunk by chunk from x, w and
/// lse), dx = d w [R, K] and dw = d^T x [C, K], in x's dtype.
void linearCrossEntropyGrad(Context &ctx, const char *nodeName,
                            const LinearCrossEntropyParams &params, TensorRef x,
                            TensorRef w, TensorRef labels, TensorRef lse,
                            TensorRef dloss, TensorRef dx, TensorRef dw,
                            void *workspace, size_t workspaceBytes);
/// Workspace of linearCrossEntropy(Grad) walking `rows` rows in chunks of
/// `chunkClasses` classes of `dtype`: the chunk's logits plus three f32 row
/// statistics, each part rounded up to 256 bytes.
size_t linearCrossEntropyWorkspaceBytes(int64_t rows, int64_t chunkClasses,
                                        DType dtype);

/// The filter gradient of `conv` with the same params (activation and bias
/// ignored): dw [M, C/group, k...] = sum over the batch and output positions
/// of dy [N, M, out...] times the matching x [N, C, in...] window. One float
/// dtype for all. Workspace as for `conv` (convWorkspaceBound bounds it).
void convBackwardFilter(Context &ctx, const char *nodeName,
                        const ConvParams &params, TensorRef x, TensorRef dy,
                        TensorRef dw, void *workspace, size_t workspaceBytes);

/// The input gradient of `pool` with the same params: dx (x's shape) = 0,
/// then each output element's dy goes to the window's first maximum of x
/// (Max) or is spread over the window as `pool` divided (Avg:
/// countIncludePad as in the forward). Overlapping windows accumulate.
void poolGrad(Context &ctx, const char *nodeName, const PoolParams &params,
              TensorRef x, TensorRef dy, TensorRef dx);

/// Training-mode BatchNormalization over axis 1 with batch statistics: x
/// [N, C, ...] (F32, F16 or BF16; y has its dtype); mean [C] and invStd [C]
/// (F32 whatever x is) get each channel's mean
/// and 1 / sqrt(var + epsilon) over N and the spatial dims (biased variance,
/// as ONNX's training mode and PyTorch normalize); y = (x - mean) * invStd *
/// scale + bias, then `activation` (None or Relu). scale, bias [C] F32. y may
/// alias x. `workspace`: room for per-channel partial statistics
/// (batchNormWorkspaceBytes), so that few channels of many elements fill the
/// GPU; the CUDA backend uses what fits (none: one block per channel).
/// `channelsLast`: x and y are [N, ..., C] (memopt-layout).
void batchNormTraining(Context &ctx, const char *nodeName, float epsilon,
                       Activation activation, TensorRef x, TensorRef scale,
                       TensorRef bias, TensorRef y, TensorRef mean,
                       TensorRef invStd, void *workspace = nullptr,
                       size_t workspaceBytes = 0, bool channelsLast = false);
/// batch_norm_training with a residual (NormAddRelu: ResNet's normalization
/// before the block's add): y = activation(batchNormTraining's y before its
/// activation + z), rounded once (z of x's shape and dtype; y may alias x or
/// z). Statistics, workspace and `channelsLast` as batchNormTraining (the
/// same launches: mean and invStd agree bit for bit).
void batchNormTrainingAdd(Context &ctx, const char *nodeName, float epsilon,
                          Activation activation, TensorRef x, TensorRef scale,
                          TensorRef bias, TensorRef z, TensorRef y,
                          TensorRef mean, TensorRef invStd,
                          void *workspace = nullptr, size_t workspaceBytes = 0,
                          bool channelsLast = false);
/// Its gradient with the ReLU (DReluForkDNorm): dz = y > 0 ? dy : 0 (y the
/// forward's output, as reluGrad), then exactly batchNormTrainingGrad(x, dz,
/// ...) -> dx, dscale, dbias. dz (x's shape and dtype) is the gradient the
/// residual branch reads. dx may alias dy; dz may alias dy but not dx.
/// Workspace and `channelsLast` as batchNormTrainingGrad.
void batchNormAddReluGrad(Context &ctx, const char *nodeName, TensorRef x,
                          TensorRef dy, TensorRef y, TensorRef scale,
                          TensorRef mean, TensorRef invStd, TensorRef dx,
                          TensorRef dscale, TensorRef dbias, TensorRef dz,
                          void *workspace = nullptr, size_t workspaceBytes = 0,
                          bool channelsLast = false);
/// batchNormTraining's gradient: with xhat = (x - mean) * invStd and
/// M = N * spatial, dbias = sum dy, dscale = sum dy * xhat, dx = scale *
/// invStd * (dy - dbias / M - xhat * dscale / M) (PyTorch's
/// batch_norm_backward). x, dy and dx share one float dtype; scale, mean,
/// invStd, dscale, dbias are F32. dx may alias dy. Workspace and `channelsLast`
/// as for batchNormTraining.
void batchNormTrainingGrad(Context &ctx, const char *nodeName, TensorRef x,
                           TensorRef dy, TensorRef scale, TensorRef mean,
                           TensorRef invStd, TensorRef dx, TensorRef dscale,
                           TensorRef dbias, void *workspace = nullptr,
                           size_t workspaceBytes = 0,
                           bool channelsLast = false);
/// The fused batch-norm -> ReLU -> convolution of a channels-last training
/// step (docs/runtime.md, "Normalization fused into convolutions"): R =
/// relu(batch_norm_training(X)) is never stored; the convolutions that read
/// it apply the normalization and the ReLU to X as they load it, and the
/// gradient recomputes the ReLU mask from X. With appliedScale[c] = gamma[c]
/// * invStd[c] (f32) and appliedBias[c] = fmaf(-mean[c], appliedScale[c],
/// beta[c]), the prologue is r = max(fmaf(float(x), appliedScale[c],
/// appliedBias[c]), 0) rounded to x's dtype and the mask fmaf(...) > 0.
///
/// batch_norm_stats: mean and invStd exactly as batchNormTraining computes
/// them for x, then appliedScale and appliedBias; all [C] F32. Workspace and
/// `channelsLast` as for batchNormTraining (the same bound).
void batchNormStats(Context &ctx, const char *nodeName, float epsilon,
                    TensorRef x, TensorRef gamma, TensorRef beta,
                    TensorRef mean, TensorRef invStd, TensorRef appliedScale,
                    TensorRef appliedBias, void *workspace = nullptr,
                    size_t workspaceBytes = 0, bool channelsLast = false);
/// norm_relu_apply: r = max(fmaf(x, scale[c], bias[c]), 0) in x's dtype
/// (x, r [N, C, ...] or channels-last [N, ..., C]; scale / bias the
/// appliedScale / appliedBias [C] F32 of batchNormStats). r may be x.
void normReluApply(Context &ctx, const char *nodeName, TensorRef x,
                   TensorRef scale, TensorRef bias, TensorRef r,
                   bool channelsLast = false);
/// norm_relu_conv: y = conv(r, w) + convBias with r the prologue of x (params
/// as for `conv`; params.activation must be None; convBias [M] of x's dtype
/// or null, as `conv`'s bias). scale / bias are
/// appliedScale / appliedBias [C] F32, C = x's channels. The workspace holds
/// at least workspace::normReluConvTempBytes(x.bytes()): a backend that
/// cannot fuse writes r there and gives the rest to the convolution.
void normReluConv(Context &ctx, const char *nodeName, const ConvParams &params,
                  TensorRef x, TensorRef w, TensorRef scale, TensorRef bias,
                  const TensorRef *convBias, TensorRef y, void *workspace,
                  size_t workspaceBytes);
/// norm_relu_conv_backward_filter: dw = convBackwardFilter(r, dy) (params
/// as there). Workspace as for normReluConv.
void normReluConvBackwardFilter(Context &ctx, const char *nodeName,
                                const ConvParams &params, TensorRef x,
                                TensorRef dy, TensorRef scale, TensorRef bias,
                                TensorRef dw, void *workspace,
                                size_t workspaceBytes);
/// batch_norm_relu_grad: g = mask ? dy : 0 (the mask recomputed from x,
/// appliedScale and appliedBias), then exactly batchNormTrainingGrad(x, g,
/// gamma, mean, invStd) -> dx, dgamma, dbeta. dy is not modified unless dx
/// aliases it. Workspace and `channelsLast` as for batchNormTrainingGrad.
void batchNormReluGrad(Context &ctx, const char *nodeName, TensorRef x,
                       TensorRef dy, TensorRef gamma, TensorRef mean,
                       TensorRef invStd, TensorRef appliedScale,
                       TensorRef appliedBias, TensorRef dx, TensorRef dgamma,
                       TensorRef dbeta, void *workspace = nullptr,
                       size_t workspaceBytes = 0, bool channelsLast = false);
/// Running statistics of a training-mode BatchNormalization, in place (ONNX
/// convention): running = momentum * running + (1 - momentum) * batch, with
/// the batch variance recovered as 1 / invStd^2 - epsilon. All [C] F32.
void batchNormRunningUpdate(Context &ctx, const char *nodeName, float momentum,
                            float epsilon, TensorRef mean, TensorRef invStd,
                            TensorRef runningMean, TensorRef runningVar);
/// LayerNormalization's gradient over the last `cols` elements of each row
/// (x, dy, dx [rows, cols] of one float dtype; scale, dscale, dbias [cols]
/// F32): the row mean and 1/std are
/// recomputed from x; dx = invStd * (g - mean(g) - xhat * mean(g * xhat))
/// with g = dy * scale; dscale = sum over rows of dy * xhat, dbias = sum of
/// dy (PyTorch's layer_norm_backward). `workspace` holds per-block column
/// partials (layerNormGradWorkspaceBytes; CUDA needs at least one block's).
void layerNormGrad(Context &ctx, const char *nodeName, float epsilon,
                   TensorRef x, TensorRef dy, TensorRef scale, TensorRef dx,
                   TensorRef dscale, TensorRef dbias, void *workspace,
                   size_t workspaceBytes);

/// Training-mode dropout: y = x * keep / (1 - ratio), with element i kept
/// unless its Philox 4x32-10 word is below ratio * 2^32 (lib/Runtime/
/// Philox.h). `key` is the program's I64 [2] [seed, micro-batch number] on
/// the device (the driver writes it before each run, so a captured CUDA
/// graph stays valid) and `stream` the op's id: the same (key, stream,
/// shape) gives the same mask on every backend, which the backward (dropout
/// of dy) and recomputation rely on. x and y are float tensors of one type
/// and shape; y may be x (in place). ratio is in [0, 1).
void dropout(Context &ctx, const char *nodeName, float ratio, uint32_t stream,
             TensorRef x, TensorRef key, TensorRef y);

/// Uniform random numbers: element i of y is low + (high - low) * u, u =
/// (w >> 8) * 2^-24 in [0, 1) and w the Philox word dropout would test for
/// element i with the same (key, stream) (lib/Runtime/Philox.h), computed in
/// f32 and rounded once to y's float type. `key` is I64 [2] [seed,
/// micro-batch] on the device; low <= high, both finite.
void randomUniform(Context &ctx, const char *nodeName, float low, float high,
                   uint32_t stream, TensorRef key, TensorRef y);

/// Gradient accumulation of an update (--accumulate K): on micro-step 0 the
/// accumulator becomes the gradient, on the others the gradient is added to
/// it; the update itself runs on micro-step K - 1 only, with the
/// accumulator as its gradient. `microStep` is an F32 scalar on the device
/// (0 .. K - 1, written by the driver before each micro-batch), so one
/// captured CUDA graph serves every micro-batch. `accumulator` is F32 of the
/// parameter's shape. An accumulator with null data gates only: the update
/// runs on micro-step K - 1 with its own gradient (data parallel: a
/// collective accumulated and reduced it).
struct GradientAccumulation {
  TensorRef accumulator;
  TensorRef microStep;
  int64_t steps = 1;
};

/// Dynamic loss scaling of an update (f16 mixed-precision training, PyTorch
/// GradScaler's semantics with a fused optimizer): the gradient, or the
/// accumulator on the last micro-step, is multiplied by 1 / *scale before
/// use, and when *foundInf is not 0 the update writes nothing (the step is
/// skipped; with accumulation the accumulator is still summed). `state` is
/// the F32 [2] loss-scale state [clean steps, skipped steps]: AdamW's bias
/// correction counts the steps that were not skipped (t - state[1]), as
/// PyTorch's fused AdamW under a GradScaler does; SGD ignores it (may be
/// empty). scale and foundInf are F32 scalars on the device.
struct LossScaling {
  TensorRef scale;
  TensorRef foundInf;
  TensorRef state;
};

/// SGD with momentum, PyTorch's torch.optim.SGD (dampening 0, no Nesterov),
/// in place: g = grad + weightDecay * param; buf = momentum * buf + g (buf
/// starts at zero, so the first step stores g as PyTorch does); param -= lr *
/// (momentum != 0 ? buf : g). `momentumBuffer` may be null when momentum is 0.
/// `lr` is an F32 scalar on the device (the executable may change it between
/// steps without recompiling or re-capturing). param and buf are F32; grad
/// is F32, F16 or BF16 (a mixed-precision gradient, widened on load).
void sgdUpdate(Context &ctx, const char *nodeName, float momentum,
               float weightDecay, TensorRef param, TensorRef grad,
               const TensorRef *momentumBuffer, TensorRef lr,
               const GradientAccumulation *accumulation = nullptr,
               const LossScaling *scaling = nullptr);
/// AdamW, PyTorch's torch.optim.AdamW (amsgrad off), in place: param *= 1 -
/// lr * weightDecay; m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2)
/// g^2; param -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) +
/// eps), with t the 1-based step number read from `step` (an F32 scalar on
/// the device, like `lr`). param, m, v are F32; grad F32, F16 or BF16.
void adamwUpdate(Context &ctx, const char *nodeName, float beta1, float beta2,
                 float eps, float weightDecay, TensorRef param, TensorRef grad,
                 TensorRef m, TensorRef v, TensorRef lr, TensorRef step,
                 const GradientAccumulation *accumulation = nullptr,
                 const LossScaling *scaling = nullptr);

/// The accumulation pass of an update alone (GradientAccumulation, with its
/// accumulator): on micro-step 0 the accumulator becomes `grad` (F32, F16
/// or BF16, widened), on the others `grad` is added to it in f32, as the
/// update kernels do. --offload optimizer with --offload-accumulators
/// device runs it before the offloaded update, which then stages the sum
/// (docs/offload.md).
void accumulateGradient(Context &ctx, const char *nodeName, TensorRef grad,
                        const GradientAccumulation &accumulation);

/// found (F32 scalar on the device) = 1 if any element of the `count`
/// gradients (F32, F16 or BF16) is inf or NaN, else 0: the found_inf of
/// PyTorch's _amp_foreach_non_finite_check_and_unscale_, without the unscale
/// (the update kernels unscale). With accumulators (F32, `accumulatorCount`
/// of them) and `microStep` (F32 scalar), the accumulators are checked too
/// on micro-steps after the first: they hold the earlier micro-batches' sum.
/// CUDA: one launch per up to 64 tensors (PyTorch's multi_tensor_apply
/// shape), no host synchronization.
void foundInf(Context &ctx, const char *nodeName, const TensorRef *gradients,
              int count, const TensorRef *accumulators, int accumulatorCount,
              const TensorRef *microStep, TensorRef found);

/// PyTorch's _amp_update_scale_, in place: if *foundInf != 0, scale *=
/// backoffFactor, state[0] (clean steps) = 0, state[1] (skipped steps) += 1;
/// else state[0] += 1 and, when it reaches growthInterval, scale *=
/// growthFactor (kept only if finite) and state[0] = 0. With `microStep`
/// and accumulationSteps = K it acts on micro-step K - 1 only. scale and
/// foundInf are F32 scalars, state F32 [2], all on the device.
void updateLossScale(Context &ctx, const char *nodeName, float growthFactor,
                     float backoffFactor, int64_t growthInterval,
                     TensorRef scale, TensorRef state, TensorRef foundInf,
                     const TensorRef *microStep = nullptr,
                     int64_t accumulationSteps = 1);

//===----------------------------------------------------------------------===//
// Optimizer offload: masters and state on the host (docs/offload.md)
//===----------------------------------------------------------------------===//

/// The scalars at the head of an offloaded update's staging slot (F32:
/// learning rate, step, micro-step, loss scale, found_inf, skipped steps),
/// copied with its gradient. The compiler's memopt.staging_offset slots
/// use the same size.
constexpr int64_t kHostStagingScalarBytes = 64;

/// Where a low working parameter's rounded copy lies in its update's
/// staging slot (f16 / bf16 `param` of offloadSgdUpdate / offloadAdamwUpdate):
/// after the scalars and the staged tensor of `stagedBytes`, rounded up to
/// kHostStagingScalarBytes (the compiler's getStagingSlotBytes). The CPU
/// writes it, the copy back reads it.
inline int64_t getHostLowCopyOffset(size_t stagedBytes) {
  int64_t staged = int64_t(stagedBytes);
  return kHostStagingScalarBytes + (staged + kHostStagingScalarBytes - 1) /
                                       kHostStagingScalarBytes *
                                       kHostStagingScalarBytes;
}

/// The host state region (ProgramInfo::hostStateBytes): zeroed host memory,
/// pinned on CUDA (cudaHostAlloc) so that the copies are asynchronous and
/// can be captured in a CUDA graph; 256-byte aligned heap on the host.
void *hostStateAlloc(Context &ctx, size_t bytes);
void hostStateFree(Context &ctx, void *ptr);
/// Hands the region to the context; generated programs read it back with
/// hostState (their run function has no argument for it).
void setHostState(Context &ctx, uint8_t *region, size_t bytes);
uint8_t *hostState(Context &ctx);

/// An optimizer update whose f32 master and state live on the host (ZeRO-
/// Offload's split): `master`, the momentum buffer / moments and the
/// accumulator are host memory; `param` (the device's working copy),
/// `grad`, `lr`, `step` and the accumulation's micro-step and the scaling's
/// tensors are device memory. `site` numbers the update within the program
/// (0, 1, ...) and `staging` is its slot in the host state region
/// (kHostStagingScalarBytes of scalars, then the gradient's bytes, then for
/// an f16 / bf16 `param` its copy: getHostLowCopyOffset). A low `param` (a
/// low working parameter, MemOpt_MasterArg) receives the master rounded to
/// nearest even, as a cast would round it. The
/// gradient and the scalars are copied to `staging` after the work queued
/// so far, the update runs on a pool of CPU threads while the device goes
/// on, and the master is copied into `param` before the step ends
/// (offloadFinish). The arithmetic is the host backend's sgdUpdate /
/// adamwUpdate (in double, rounded to f32 where they round), so an
/// offloaded step gives the same bits as the plain one on the host.
void offloadSgdUpdate(Context &ctx, const char *nodeName, int site,
                      void *staging, float momentum, float weightDecay,
                      TensorRef param, TensorRef grad, TensorRef master,
                      const TensorRef *momentumBuffer, TensorRef lr,
                      const GradientAccumulation *accumulation = nullptr,
                      const LossScaling *scaling = nullptr);
void offloadAdamwUpdate(Context &ctx, const char *nodeName, int site,
                        void *staging, float beta1, float beta2, float eps,
                        float weightDecay, TensorRef param, TensorRef grad,
                        TensorRef master, TensorRef m, TensorRef v,
                        TensorRef lr, TensorRef step,
                        const GradientAccumulation *accumulation = nullptr,
                        const LossScaling *scaling = nullptr);
/// The end of a step with offloaded updates: the context's stream waits
/// for every update's copy back (CUDA: an event of the copy stream; host:
/// the CPU pool's tasks).
void offloadFinish(Context &ctx);
/// Records an error of an offloaded update on the context (the CPU tasks of
/// a replayed CUDA graph have no other way to report); drivers call it
/// after a run.
void offloadCheck(Context &ctx);

//===----------------------------------------------------------------------===//
// Data parallel: collectives between ranks (docs/data-parallel.md)
//===----------------------------------------------------------------------===//

/// The context's communicator (ContextOptions::communicator), or nullptr.
Communicator *contextCommunicator(Context &ctx);
/// This rank and the number of ranks: the communicator's, 0 and 1 without
/// one.
int communicatorRank(Context &ctx);
int communicatorSize(Context &ctx);

/// The micro-step (0 .. K - 1) of the next run as the host knows it: the
/// driver calls this with the value it writes into the MicroStep weight.
/// The CUDA collectives decide on the host whether this micro-batch
/// communicates (an NCCL call cannot be skipped from the device); the host
/// backend reads the weight itself and ignores this. -1: unknown.
void setMicroStep(Context &ctx, int64_t microStep);

/// The ops of memopt-data-parallel. `accumulation` as for the updates:
/// with an accumulator, x is summed into it (x on micro-step 0, added on the
/// others); with a micro-step, the collective runs on micro-step K - 1
/// only (over the accumulator when there is one) and does nothing on the
/// others. x and y are F32, or F16 / BF16 (a gradient reduced in its low
/// type; the reduction adds in at least f32 and rounds once); accumulators
/// are F32, so accumulation needs F32 x. Both backends run them on the
/// context's communicator
/// (a program compiled for one rank runs without one): the host backend
/// with the micro-step read from the weight, the CUDA backend (NCCL, on
/// the context's stream) with the one setMicroStep gave.

/// y = reduction over the ranks of x (y may be x: in place).
void allReduce(Context &ctx, const char *nodeName,
               CollectiveReduction reduction, TensorRef x, TensorRef y,
               const GradientAccumulation *accumulation = nullptr);
/// A tensor of E elements sharded over `ranks` (the communicator's size):
/// chunks of F = E / ranks elements (rank r owns [r F, (r + 1) F)) and a
/// tail of T = E % ranks elements every rank owns. y (F + T elements) =
/// this rank's chunk of the reduction of x, then the reduced tail.
void reduceScatter(Context &ctx, const char *nodeName,
                   CollectiveReduction reduction, int64_t ranks, TensorRef x,
                   TensorRef y,
                   const GradientAccumulation *accumulation = nullptr);
/// In place on `param` sharded over `ranks`: every rank's chunk to every
/// rank (the tail is the same on every rank already).
void allGather(Context &ctx, const char *nodeName, int64_t ranks,
               TensorRef param,
               const GradientAccumulation *accumulation = nullptr);
/// ZeRO-3 (memopt.gather_parameter): `whole` (E elements, f32) gets every
/// rank's chunk of the parameter from its `shard` (F + T elements: the
/// rank's chunk, then the tail every rank holds), the tail from this rank's.
void gatherParameter(Context &ctx, const char *nodeName, int64_t ranks,
                     TensorRef shard, TensorRef whole);

// ---- Activation offload (docs/offload.md, "Activations") -----------------
// A saved activation goes to the context's pinned host pool after its last
// forward read and comes back before its first backward read. CUDA: the
// copies run on two copy streams (one per direction) ordered by events: a
// copy starts after everything the compute stream enqueued before it (the
// producer, or the last reader of the buffer a reload writes), and the
// compute stream waits on the copy's event at the matching *Wait call.
// Host: the copies are memcpy calls, the waits nothing.

/// Allocates the pinned host pool (ProgramInfo::hostPoolBytes; once, at
/// load, before the first run; 0: none) and, on CUDA, the copy streams.
void reserveHostPool(Context &ctx, size_t bytes);
/// The pool's bytes (nullptr when none was reserved).
uint8_t *hostPool(Context &ctx);
/// Copies `bytes` from `src` (device) to pool + hostOffset for `slot`.
void offloadStart(Context &ctx, const char *nodeName, int64_t slot,
                  const void *src, int64_t hostOffset, int64_t bytes);
/// The compute stream waits until slot's offload has completed.
void offloadWait(Context &ctx, const char *nodeName, int64_t slot);
/// Copies `bytes` from pool + hostOffset back to `dst` (device) for `slot`.
void reloadStart(Context &ctx, const char *nodeName, int64_t slot, void *dst,
                 int64_t hostOffset, int64_t bytes);
/// The compute stream waits until slot's reload has completed.
void reloadWait(Context &ctx, const char *nodeName, int64_t slot);

} // namespace memopt::rt

#endif // MEMOPT_RUNTIME_RUNTIME_H
