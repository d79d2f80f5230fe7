//===- EmitProgramInternal.h - the emitter's shared state -------*- C++ -*-===//
//
// Internal to lib/Conversion: the `ProgramEmitter` class (the emitter's
// state: TensorRef names, pointers, tables, the output stream) and the small
// helpers every op family uses (C++ literals, dtype names, shapes). The
// driver (EmitProgram.cpp) writes the program's skeleton and tables and
// dispatches each op to its family's file:
//
//   EmitElementwise.cpp   unary / binary / compare / logical / fused chains
//   EmitNeuralNet.cpp     matmul, conv, pooling, norms, softmax, attention
//   EmitTensorOps.cpp     reductions, layout, indexing, constant_of_shape
//   EmitTraining.cpp      losses, gradients, optimizer updates, loss scaling
//   EmitCollectives.cpp   collectives, buckets, activation offload copies
//
// Taken from: onnx-mlir's one folder per op group
// (Conversion/ONNXToKrnl/{Math,NN,Tensor}/) and torch-mlir's TorchToLinalg
// (Linear.cpp, Pooling.cpp, Reduction.cpp, ...). Different: no pattern
// driver and no registry: the ops come in schedule order, the emitter's
// state is one class, and each family is a member function that claims its
// ops (std::nullopt otherwise); emitCall tries the families in turn.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_CONVERSION_EMITPROGRAMINTERNAL_H
#define MEMOPT_LIB_CONVERSION_EMITPROGRAMINTERNAL_H

#include "memopt/Conversion/EmitProgram.h"
#include "memopt/Conversion/WeightImage.h"

#include "memopt/Analysis/BufferLiveness.h"
#include "memopt/Dialect/MemOpt/IR/HostUpdates.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/IR/OffloadOps.h"
#include "memopt/Runtime/WeightsFile.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>

namespace mlir::memopt::emit_program {

inline constexpr int kMaxRank = 8; // memopt::rt::kMaxRank

/// The ONNX node name carried by the importer's NameLoc, if any.
inline std::optional<std::string> findNodeName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (auto name = findNodeName(inner))
        return name;
  if (auto callSite = dyn_cast<CallSiteLoc>(loc))
    return findNodeName(callSite.getCallee());
  return std::nullopt;
}

/// A C++ string literal for `text` (octal escapes for anything unusual).
inline std::string cppString(StringRef text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\' || c == '?' || !llvm::isPrint(c)) {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\%03o", c);
      out += buffer;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

/// A float as a C++ literal that round-trips.
inline std::string cppFloat(double value) {
  if (std::isinf(value))
    return value > 0 ? "INFINITY" : "-INFINITY";
  if (std::isnan(value))
    return "NAN";
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.9g", value);
  std::string text = buffer;
  if (text.find_first_of(".eE") == std::string::npos)
    text += ".0";
  return text + "f";
}

/// A double as a C++ literal that round-trips.
inline std::string cppDouble(double value) {
  if (std::isinf(value))
    return value > 0 ? "INFINITY" : "-INFINITY";
  if (std::isnan(value))
    return "NAN";
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.17g", value);
  return buffer;
}

inline double toDouble(APFloat value) {
  bool losesInfo = false;
  value.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven,
                &losesInfo);
  return value.convertToDouble();
}

/// The CUDA element type of a float tensor (for generated kernels).
inline std::optional<StringRef> getCudaElementType(Type tensorType) {
  Type type = getElementTypeOrSelf(tensorType);
  if (type.isF32())
    return StringRef("float");
  if (type.isF16())
    return StringRef("__half");
  if (type.isBF16())
    return StringRef("__nv_bfloat16");
  return std::nullopt;
}

/// The runtime DType enumerator for an element type.
inline std::optional<StringRef> getDTypeName(Type type) {
  if (type.isF32())
    return StringRef("DType::F32");
  if (type.isF16())
    return StringRef("DType::F16");
  if (type.isBF16())
    return StringRef("DType::BF16");
  if (type.isF64())
    return StringRef("DType::F64");
  if (type.isInteger(64))
    return StringRef("DType::I64");
  if (type.isInteger(32))
    return StringRef("DType::I32");
  if (type.isSignlessInteger(8) || type.isSignedInteger(8))
    return StringRef("DType::I8");
  if (type.isUnsignedInteger(8))
    return StringRef("DType::U8");
  if (type.isInteger(1))
    return StringRef("DType::Bool");
  return std::nullopt;
}

/// Bytes per element as the runtime stores it (bool: one byte).
inline int64_t getElementBytes(Type type) {
  return getRuntimeElementBytes(type);
}

inline int64_t getBytes(RankedTensorType type) {
  return type.getNumElements() * getElementBytes(type.getElementType());
}

inline std::string shapeList(ArrayRef<int64_t> shape) {
  std::string text = "{";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(shape, os);
  return text + "}";
}

/// Normalizes a possibly negative axis.
inline int64_t normalizeAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

/// The runtime's Activation enumerator for a fused `activation` attribute
/// (the dialect verifies the spelling).
inline StringRef runtimeActivation(StringRef activation) {
  return StringSwitch<StringRef>(activation)
      .Case("relu", "Activation::Relu")
      .Case("gelu", "Activation::Gelu")
      .Case("gelu_tanh", "Activation::GeluTanh")
      .Default("Activation::None");
}

/// Writes the generated program of one planned function (EmitProgram.cpp's
/// header describes the program). One instance per emitProgram call.
class ProgramEmitter {
public:
  ProgramEmitter(func::FuncOp function, const EmitProgramOptions &options)
      : function(function), options(options), liveness(function) {}

  FailureOr<EmittedProgram> run();

private:
  // Checks and tables.
  LogicalResult checkPlanned();
  LogicalResult collectWeights();
  LogicalResult emitTables();

  // The run function.
  LogicalResult emitOp(Operation *op);
  /// Activation offload's copies and waits (docs/offload.md;
  /// EmitCollectives.cpp).
  LogicalResult emitCopyStreamOp(Operation *op);
  /// The runtime call(s) of `op` (emitOp adds the instrumentation).
  LogicalResult emitCall(Operation *op, const std::string &node);
  LogicalResult declareResults(Operation *op);
  LogicalResult declare(Value value, StringRef pointer);
  LogicalResult emitReturn(func::ReturnOp returnOp);

  // The op families (one file each; emitCall tries them in turn). Each
  // returns std::nullopt for an op outside its family.
  /// EmitElementwise.cpp: unary, binary, compare, logical, cast, where,
  /// range, fused elementwise chains.
  std::optional<LogicalResult> emitElementwiseOp(Operation *op,
                                                 const std::string &node);
  /// EmitNeuralNet.cpp: matmul / gemm, convolutions, pooling, the
  /// normalizations, softmax, attention.
  std::optional<LogicalResult> emitNeuralNetOp(Operation *op,
                                               const std::string &node);
  /// EmitTensorOps.cpp: reductions, cumsum, layout (transpose, concat,
  /// split, slice, expand, pad, resize), indexing (gather, scatter),
  /// constant_of_shape.
  std::optional<LogicalResult> emitTensorOp(Operation *op,
                                            const std::string &node);
  /// EmitTraining.cpp: losses, gradients, dropout, assign, optimizer
  /// updates (sharded and offloaded), loss scaling.
  std::optional<LogicalResult> emitTrainingOp(Operation *op,
                                              const std::string &node);
  /// EmitCollectives.cpp: all_reduce, reduce_scatter, all_gather,
  /// gather_parameter, bucket waits (the bucket boundaries and the
  /// activation offload copies live there too).
  std::optional<LogicalResult> emitCollectiveOp(Operation *op,
                                                const std::string &node);

  // The families' helpers: emitUnary and emitFusedElementwise in
  // EmitElementwise.cpp, emitMatMul to emitPool in EmitNeuralNet.cpp,
  // emitReduce to emitConstantOfShape in EmitTensorOps.cpp.
  LogicalResult emitUnary(Operation *op, StringRef kind, double alpha = 0,
                          double beta = 0);
  LogicalResult emitMatMul(MatMulOp op);
  /// setMatmulWorkspace(...) for the planned workspace of a matmul / gemm.
  LogicalResult emitMatmulWorkspace(Operation *op);
  /// "pointer, size_t(bytes)" of the op's planned workspace, or
  /// "nullptr, size_t(0)" without one.
  FailureOr<std::string> workspaceArguments(Operation *op);
  LogicalResult emitConv(Operation *op, ArrayRef<int64_t> kernel,
                         ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
                         ArrayRef<int64_t> dilations, int64_t group,
                         ArrayRef<int64_t> outputPadding, Value bias,
                         StringRef function, StringRef activation,
                         bool channelsLast = false);
  LogicalResult emitPool(Operation *op, StringRef kind,
                         ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                         ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations,
                         bool ceilMode, bool countIncludePad,
                         bool channelsLast = false);
  LogicalResult emitReduce(Operation *op, StringRef kind,
                           ArrayRef<int64_t> axes);
  LogicalResult emitSlice(SliceOp op);
  LogicalResult emitResize(ResizeOp op);
  LogicalResult emitPad(PadOp op);
  LogicalResult emitConstantOfShape(ConstantOfShapeOp op);
  LogicalResult emitFusedElementwise(FusedElementwiseOp op);

  /// The name of the ONNX node of `op` (or a stable stand-in).
  std::string nodeName(Operation *op);
  /// `nodeName` as a C++ literal.
  std::string nodeLiteral(Operation *op) { return cppString(nodeName(op)); }
  /// An error on `op` that names its node.
  InFlightDiagnostic error(Operation *op);
  /// The TensorRef local of a value (noted as used by the current segment:
  /// a chunk of a split program declares the locals it uses).
  std::string ref(Value value) {
    if (auto local = localOf.find(value); local != localOf.end())
      segmentUses.push_back(local->second);
    return names.lookup(value);
  }
  /// `value` ([..., C]) viewed as [rows, C], as the loss kernels take it.
  std::string rowsByClasses(Value value) {
    auto shape = cast<RankedTensorType>(value.getType()).getShape();
    return refWithShape(
        value, {ShapedType::getNumElements(shape.drop_back()), shape.back()});
  }
  /// The labels of `logits`' rows as a 1-D tensor.
  std::string rowsOf(Value labels, Value logits) {
    auto shape = cast<RankedTensorType>(logits.getType()).getShape();
    return refWithShape(labels,
                        {ShapedType::getNumElements(shape.drop_back())});
  }
  /// Micro-batches per optimizer step: the updates' accumulation_steps
  /// (ProgramInfo::accumulationSteps; 1 without accumulation).
  int64_t accumulationSteps() {
    int64_t steps = 1;
    function.walk([&](Operation *op) {
      if (auto sgd = dyn_cast<SGDUpdateOp>(op))
        steps = std::max<int64_t>(steps, sgd.getAccumulationSteps());
      else if (auto adamw = dyn_cast<AdamWUpdateOp>(op))
        steps = std::max<int64_t>(steps, adamw.getAccumulationSteps());
    });
    return steps;
  }
  /// The `GradientAccumulation accumulation` local of an op gated on the
  /// micro-step, with or without an accumulator ("" without a micro-step).
  /// `accumulatorRef` replaces ref(accumulator) (a shard's view).
  std::string accumulation(Value accumulator, Value microStep, int64_t steps,
                           const std::string &accumulatorRef = "") {
    if (!microStep)
      return "";
    std::string text = "    GradientAccumulation accumulation;\n";
    if (accumulator)
      text += "    accumulation.accumulator = " +
              (accumulatorRef.empty() ? ref(accumulator) : accumulatorRef) +
              ";\n";
    return text + "    accumulation.microStep = " + ref(microStep) +
           ";\n    accumulation.steps = " + std::to_string(steps) + ";\n";
  }
  /// --offload-accumulators device: the offloaded update's accumulation
  /// pass on the device (into its f32 accumulator), after which the
  /// `accumulation` local only gates the CPU update on the micro-step and
  /// the update stages the sum (HostUpdates.h). "" for any other update.
  std::string deviceAccumulation(Operation *op, const std::string &node) {
    if (!accumulatesOnDevice(op))
      return "";
    return "    accumulateGradient(ctx, " + node + ", " +
           ref(getHostUpdateOperands(op).grad) +
           ", accumulation);\n    accumulation.accumulator = TensorRef();\n";
  }
  /// The optional trailing arguments of an update call and its end: the
  /// accumulation (needed as nullptr when scaling follows) and the scaling.
  static std::string updateTail(Value microStep, Value lossScale) {
    return std::string(microStep ? ", &accumulation"
                                 : (lossScale ? ", nullptr" : "")) +
           (lossScale ? ", &scaling" : "") + ");\n  }\n";
  }
  /// The `LossScaling scaling` local of an update under loss scaling (""
  /// without).
  std::string lossScaling(Value scale, Value foundInf, Value state) {
    if (!scale)
      return "";
    return "    LossScaling scaling;\n    scaling.scale = " + ref(scale) +
           ";\n    scaling.foundInf = " + ref(foundInf) + ";\n" +
           (state ? "    scaling.state = " + ref(state) + ";\n" : "");
  }
  /// A 1-D f32 TensorRef over `count` elements of `value` from element
  /// `start` (a C++ expression, e.g. depending on the rank).
  std::string elementView(Value value, const std::string &start,
                          int64_t count) {
    // f32 state, or an f16 / bf16 gradient shard (reduce-dtype=low).
    Type element = cast<ShapedType>(value.getType()).getElementType();
    return "ref(" + pointers.lookup(value) + " + size_t(" + start + ") * " +
           std::to_string(element.getIntOrFloatBitWidth() / 8) + ", " +
           getDTypeName(element).value_or("DType::F32").str() + ", {" +
           std::to_string(count) + "})";
  }
  /// Emits the optimizer update `emitCall(views)` of a `shards = N` update
  /// (MemOpt_ShardedUpdate): once over the rank's chunk, once over the tail.
  /// `emitCall` gets a function that maps a shard-shaped operand to its
  /// view and the parameter's view (EmitTraining.cpp).
  LogicalResult emitShardedUpdate(
      Operation *op, Value param, int64_t shards,
      const std::function<void(const std::function<std::string(Value)> &,
                               const std::string &)> &emitCall);
  /// The weights table index of each weight-region op (collectWeights).
  llvm::DenseMap<Operation *, int64_t> weightIndex;
  /// --offload optimizer: the host state region's tables (kHostWeights,
  /// kMasterOf) from the host-placed variables.
  LogicalResult collectHostWeights();
  /// The host master of an offloaded update, or null.
  static Value offloadedMaster(Operation *op) {
    if (auto sgd = dyn_cast<SGDUpdateOp>(op))
      return sgd.getMaster();
    if (auto adamw = dyn_cast<AdamWUpdateOp>(op))
      return adamw.getMaster();
    return Value();
  }
  /// `H + OFFSET`: the staging slot of an offloaded update.
  std::string stagingPointer(Operation *op) {
    return "H + " + std::to_string(
                        op->getAttrOfType<IntegerAttr>("memopt.staging_offset")
                            .getInt());
  }
  int64_t hostStateSize = 0, hostWeightCount = 0, offloadSites = 0;
  /// --offload optimizer's low working parameters (f16 / bf16 variables an
  /// offloaded update writes) and the bytes of their masters, which the
  /// weight file holds after the region.
  llvm::DenseSet<Operation *> lowParameters;
  int64_t lowMasterBytes = 0;
  /// kWholeWeights (Program.h), when a parameter is sharded (ZeRO-3).
  std::string wholeWeightsTable;
  /// A TensorRef expression over `value`'s bytes with another shape.
  std::string refWithShape(Value value, ArrayRef<int64_t> shape);
  std::string arenaPointer(Operation *op, StringRef attr);

  /// Emits `params.allowTf32 = true;` for an f32 contraction of a
  /// `memopt.precision = "tf32"` function.
  void emitTf32(Operation *op);
  /// `params.dropout*` of an attention or its gradient (nothing without a
  /// dropout): ratio, stream, the key tensor's data and cuDNN's generator.
  void emitAttentionDropout(float ratio, uint64_t stream, Value key,
                            bool cudnnRng);

  func::FuncOp function;
  const EmitProgramOptions &options;
  /// `memopt.precision = "tf32"`: f32 storage, TF32 math in contractions.
  bool allowTf32 = false;
  BufferLiveness liveness;
  int64_t arenaSize = 0;
  int64_t weightsSize = 0;
  WeightImage weights;
  ::memopt::rt::WeightsFingerprint weightsFingerprint;
  llvm::DenseMap<Value, std::string> names;
  /// Pointer expression and dtype of each TensorRef local.
  llvm::DenseMap<Value, std::string> pointers;
  unsigned nextLocal = 0;
  unsigned nextOp = 0;
  /// memopt-bucket-collectives: the bucket whose collectives are being
  /// issued (between beginCollectives and endCollectives), and the buckets
  /// issued so far (a wait must come after its bucket).
  std::optional<int64_t> openBucket;
  llvm::DenseSet<int64_t> issuedBuckets;
  /// Closes or opens a bucket of collectives before `op` (null: the end;
  /// EmitCollectives.cpp).
  LogicalResult emitBucketBoundary(Operation *op);
  std::string tables;
  /// One Program type per distinct fused_elementwise chain, for the CUDA
  /// build.
  std::string kernels;
  /// Program type of each distinct step body (ops with the same chain share
  /// one type and so one set of kernels: less for nvcc to compile).
  llvm::StringMap<std::string> fusedPrograms;
  /// The (program, input type, output type) of each generated kernel
  /// launch, in the order of first use ("FusedProgram0, float, float").
  llvm::SmallVector<std::string> fusedInstances;
  llvm::StringMap<unsigned> fusedInstanceIndex;
  std::string body;
  llvm::raw_string_ostream os{body};

  // The split program (EmitProgramOptions::splitLines; EmitSplit.cpp).
  /// The text of one op in `body` (or the declarations of the inputs and
  /// weights, which a split program makes where they are used), with the
  /// locals it uses.
  struct BodySegment {
    size_t begin = 0, end = 0;
    int64_t lines = 0;
    bool declarationsOnly = false;
    std::vector<unsigned> uses;
    /// The generated kernel launches of the op (fusedInstances indices).
    std::vector<unsigned> kernels;
  };
  std::vector<BodySegment> segments;
  /// Where the current segment starts in `body`.
  size_t segmentBegin = 0;
  std::vector<unsigned> segmentUses, segmentKernels;
  /// Each local's declaration line and the segment that declares it.
  std::vector<std::string> declarations;
  std::vector<size_t> declaredIn;
  llvm::DenseMap<Value, unsigned> localOf;
  /// Ends the current segment at the end of `body`.
  void endSegment(bool declarationsOnly);
  /// Writes the split program's files into `program` (source, partsHeader,
  /// parts) from the banner comment, the includes and the ProgramInfo
  /// definition; false, and `program` untouched, when the body is small
  /// enough to stay one function (EmitProgramOptions::splitLines).
  bool splitProgram(EmittedProgram &program, StringRef banner,
                    StringRef includes, StringRef programInfo);
};

/// The generated program's `ref(data, dtype, shape)` helper (`inline` in a
/// split program's shared header).
std::string refFunction(bool inlined);

} // namespace mlir::memopt::emit_program

#endif // MEMOPT_LIB_CONVERSION_EMITPROGRAMINTERNAL_H
