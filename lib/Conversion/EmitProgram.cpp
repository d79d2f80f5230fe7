//===- EmitProgram.cpp - planned memopt IR -> generated C++ program -------===//
//
// A direct emitter: `ProgramEmitter` walks the planned function once, in
// block order (the scheduler's order), and writes one runtime call per op.
// Every tensor becomes a `TensorRef` local whose pointer comes from where its
// storage lives (BufferLiveness): the arena at the op's `memopt.offsets`, the
// weight region at the constant's `memopt.weight_offset`, or the caller's
// input / output buffer. View ops only declare a new TensorRef over the same
// bytes. Returned values that do not already live in their output buffer are
// copied there at the end.
//
// Taken from: TVM's AOT executor (one generated `run` function calling
// operator entry points with pointers into a pre-planned workspace), IREE's
// HAL (the executable table describing inputs, outputs and constants next to
// the code), onnx-mlir (node names carried into the generated calls for
// error messages). Different: offsets are compile-time constants from the
// planner, including convolution workspaces, and the runtime allocates
// nothing. Why not EmitC: see docs/lowering.md.
//
//===----------------------------------------------------------------------===//

#include "memopt/Conversion/EmitProgram.h"
#include "memopt/Conversion/WeightImage.h"

#include "memopt/Analysis/BufferLiveness.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/IR/OffloadOps.h"
#include "memopt/Runtime/WeightsFile.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>

using namespace mlir;
using namespace mlir::memopt;

namespace {

constexpr int kMaxRank = 8; // memopt::rt::kMaxRank

/// The ONNX node name carried by the importer's NameLoc, if any.
std::optional<std::string> findNodeName(Location loc) {
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
std::string cppString(StringRef text) {
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
std::string cppFloat(double value) {
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
std::string cppDouble(double value) {
  if (std::isinf(value))
    return value > 0 ? "INFINITY" : "-INFINITY";
  if (std::isnan(value))
    return "NAN";
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.17g", value);
  return buffer;
}

double toDouble(APFloat value) {
  bool losesInfo = false;
  value.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven,
                &losesInfo);
  return value.convertToDouble();
}

/// The CUDA element type of a float tensor (for generated kernels).
std::optional<StringRef> getCudaElementType(Type tensorType) {
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
std::optional<StringRef> getDTypeName(Type type) {
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
int64_t getElementBytes(Type type) { return getRuntimeElementBytes(type); }

int64_t getBytes(RankedTensorType type) {
  return type.getNumElements() * getElementBytes(type.getElementType());
}

std::string shapeList(ArrayRef<int64_t> shape) {
  std::string text = "{";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(shape, os);
  return text + "}";
}

/// Normalizes a possibly negative axis.
int64_t normalizeAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

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
  /// Activation offload's copies and waits (docs/offload.md).
  LogicalResult emitCopyStreamOp(Operation *op);
  /// The runtime call(s) of `op` (emitOp adds the instrumentation).
  LogicalResult emitCall(Operation *op, const std::string &node);
  LogicalResult declareResults(Operation *op);
  LogicalResult declare(Value value, StringRef pointer);
  LogicalResult emitReturn(func::ReturnOp returnOp);

  // Per-family lowering.
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
  /// The TensorRef local of a value.
  std::string ref(Value value) { return names.lookup(value); }
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
  /// view and the parameter's view.
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
  /// kWholeWeights (Program.h), when a parameter is sharded (ZeRO-3).
  std::string wholeWeightsTable;
  /// A TensorRef expression over `value`'s bytes with another shape.
  std::string refWithShape(Value value, ArrayRef<int64_t> shape);
  std::string arenaPointer(Operation *op, StringRef attr);

  /// Emits `params.allowTf32 = true;` for an f32 contraction of a
  /// `memopt.precision = "tf32"` function.
  void emitTf32(Operation *op);

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
  /// Closes or opens a bucket of collectives before `op` (null: the end).
  LogicalResult emitBucketBoundary(Operation *op);
  std::string tables;
  /// One Program type per distinct fused_elementwise chain, for the CUDA
  /// build.
  std::string kernels;
  /// Program type of each distinct step body (ops with the same chain share
  /// one type and so one set of kernels: less for nvcc to compile).
  llvm::StringMap<std::string> fusedPrograms;
  std::string body;
  llvm::raw_string_ostream os{body};
};

void ProgramEmitter::emitTf32(Operation *op) {
  if (allowTf32 &&
      cast<ShapedType>(op->getOperand(0).getType()).getElementType().isF32())
    os << "    params.allowTf32 = true;\n";
}

std::string ProgramEmitter::nodeName(Operation *op) {
  if (auto name = findNodeName(op->getLoc()))
    return *name;
  return (op->getName().stripDialect() + "_" + Twine(nextOp)).str();
}

InFlightDiagnostic ProgramEmitter::error(Operation *op) {
  InFlightDiagnostic diag = op->emitError();
  diag << "'" << op->getName() << "' (ONNX node '" << nodeName(op) << "') ";
  return diag;
}

LogicalResult ProgramEmitter::checkPlanned() {
  auto arena = function->getAttrOfType<IntegerAttr>("memopt.arena_size");
  auto weightRegion =
      function->getAttrOfType<IntegerAttr>("memopt.weights_size");
  if (!arena || !weightRegion)
    return function.emitError("function @")
           << function.getName()
           << " is not planned (no memopt.arena_size / memopt.weights_size): "
              "run --memopt-plan-memory before lowering";
  arenaSize = arena.getInt();
  weightsSize = weightRegion.getInt();
  if (!function.getBody().hasOneBlock())
    return function.emitError("lowering expects a single-block function");
  for (Operation &op : function.getBody().front().without_terminator()) {
    if (isWeightRegionOp(&op)) {
      bool host = isHostPlaced(op.getResult(0));
      if (!op.getAttrOfType<IntegerAttr>(host ? "memopt.host_offset"
                                              : "memopt.weight_offset"))
        return error(&op) << "has no "
                          << (host ? "memopt.host_offset"
                                   : "memopt.weight_offset")
                          << ": the function is not planned; run "
                             "--memopt-plan-memory first";
      continue;
    }
    if (offloadedMaster(&op) &&
        !op.getAttrOfType<IntegerAttr>("memopt.staging_offset"))
      return error(&op) << "has a host master but no memopt.staging_offset: "
                           "run --memopt-plan-memory first";
    auto offsets = op.getAttrOfType<DenseI64ArrayAttr>("memopt.offsets");
    if (!offsets)
      return error(&op) << "has no memopt.offsets: the function is not "
                           "planned; run --memopt-plan-memory first";
    if (offsets.size() != int64_t(op.getNumResults()))
      return error(&op) << "has " << offsets.size() << " memopt.offsets for "
                        << op.getNumResults() << " results";
    for (Value result : op.getResults()) {
      auto type = dyn_cast<RankedTensorType>(result.getType());
      if (!type || !type.hasStaticShape())
        return error(&op) << "has a result that is not a static tensor";
      if (type.getRank() > kMaxRank)
        return error(&op) << "has a result of rank " << type.getRank()
                          << "; the runtime supports rank <= " << kMaxRank;
      if (!getDTypeName(type.getElementType()))
        return error(&op) << "has a result of element type "
                          << type.getElementType()
                          << " that the runtime does not support";
    }
  }
  for (BlockArgument argument : function.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(argument.getType());
    if (!type || !type.hasStaticShape() || type.getRank() > kMaxRank ||
        !getDTypeName(type.getElementType()))
      return function.emitError("input #")
             << argument.getArgNumber() << " has type " << argument.getType()
             << ", which the runtime does not support";
  }
  return success();
}

LogicalResult ProgramEmitter::collectWeights() {
  weights.size = weightsSize;
  llvm::raw_string_ostream table(tables);
  std::string initData;
  llvm::raw_string_ostream init(initData);
  std::string entries, wholeEntries;
  llvm::raw_string_ostream entry(entries), wholeEntry(wholeEntries);
  bool anySharded = false;
  unsigned count = 0;
  for (Operation &op : function.getBody().front().without_terminator()) {
    if (!isWeightRegionOp(&op) || isHostPlaced(op.getResult(0)))
      continue;
    auto variable = dyn_cast<VariableOp>(op);
    Attribute value = variable ? Attribute(variable.getInitialValueAttr())
                               : cast<ConstantOp>(op).getValue();
    auto type = cast<RankedTensorType>(op.getResult(0).getType());
    int64_t offset =
        op.getAttrOfType<IntegerAttr>("memopt.weight_offset").getInt();
    std::optional<StringRef> dtype = getDTypeName(type.getElementType());
    if (!dtype || type.getRank() > kMaxRank)
      return error(&op) << "has type " << type
                        << ", which the runtime does not support";
    int64_t bytes = getBytes(type);
    if (offset < 0 || offset + bytes > weightsSize)
      return error(&op) << "has memopt.weight_offset " << offset << " and "
                        << bytes << " bytes, outside the weight region of "
                        << weightsSize << " bytes";
    // The bytes are written later, straight from the value's storage
    // (WeightImage.h): the region is never built in memory.
    // ZeRO-3: a sharded parameter's initial value is the whole parameter;
    // the weight file holds rank r's shard of it in region r.
    auto shards = variable
                      ? variable->getAttrOfType<IntegerAttr>("memopt.shards")
                      : IntegerAttr();
    weights.entries.push_back(
        {offset, type, value, &op, shards ? shards.getInt() : 0});
    // Non-float constants (indices, shapes) and scalars keep their bytes in
    // the program too, so a run with random weights stays meaningful.
    std::string initPointer = "nullptr";
    // (Not a sharded parameter's: its bytes differ from rank to rank.)
    if (!shards && (!isa<FloatType>(type.getElementType()) ||
                    type.getNumElements() <= 1)) {
      FailureOr<std::vector<char>> data = getConstantBytes(value, type);
      if (failed(data))
        return error(&op) << "has a value whose bytes cannot be read (expected "
                             "a dense or dense_resource attribute of "
                          << bytes << " bytes)";
      initPointer = "kInit" + std::to_string(count);
      init << "alignas(8) const unsigned char " << initPointer << "[] = {";
      for (int64_t i = 0; i < std::max<int64_t>(bytes, 1); ++i)
        init << (i ? "," : "")
             << (i < bytes ? unsigned((unsigned char)(*data)[i]) : 0u);
      init << "};\n";
    }
    std::string name = variable
                           ? variable.getName().str()
                           : findNodeName(op.getLoc())
                                 .value_or("weight" + std::to_string(count));
    StringRef role = "Constant";
    if (variable)
      role = StringSwitch<StringRef>(variable.getRole())
                 .Case("parameter", "Parameter")
                 .Case("optimizer_state", "OptimizerState")
                 .Case("statistic", "Statistic")
                 .Case("learning_rate", "LearningRate")
                 .Case("step", "StepCount")
                 .Case("gradient_accumulator", "GradientAccumulator")
                 .Case("micro_step", "MicroStep")
                 .Case("random_key", "RandomKey")
                 .Case("loss_scale", "LossScale")
                 .Case("loss_scale_state", "LossScaleState")
                 .Default("Constant");
    if (variable && variable.getRole() == "master")
      return error(&op) << "is a master weight outside the host state region "
                           "(memopt.placement = \"host\" expected)";
    weightIndex[&op] = count;
    weightsFingerprint.addWeight(name.c_str(), type.getRank(),
                                 type.getShape().data(), offset, bytes);
    entry << "    {" << cppString(name) << ", " << *dtype << ", "
          << type.getRank() << ", " << shapeList(type.getShape()) << ", "
          << offset << ", " << initPointer << ", WeightRole::" << role
          << "},\n";
    auto whole = shards
                     ? cast<RankedTensorType>(cast<TypedAttr>(value).getType())
                     : type;
    if (whole.getRank() > kMaxRank)
      return error(&op) << "shards a parameter of type " << whole
                        << ", which the runtime does not support";
    wholeEntry << "    {" << cppString(name) << ", " << *dtype << ", "
               << whole.getRank() << ", " << shapeList(whole.getShape()) << ", "
               << (shards ? -1 : offset) << ", " << initPointer
               << ", WeightRole::" << role << "},\n";
    anySharded |= bool(shards);
    ++count;
  }
  table << initData;
  if (count)
    table << "const TensorInfo kWeights[] = {\n" << entries << "};\n";
  if (anySharded)
    wholeWeightsTable =
        "const TensorInfo kWholeWeights[] = {\n" + wholeEntries + "};\n";
  if (count == 0)
    table << "const TensorInfo *const kWeights = nullptr;\n";
  return success();
}

LogicalResult ProgramEmitter::collectHostWeights() {
  if (auto size = function->getAttrOfType<IntegerAttr>("memopt.host_size"))
    hostStateSize = size.getInt();
  // The parameter each master belongs to, from the updates.
  llvm::DenseMap<Operation *, Operation *> paramOfMaster;
  function.walk([&](Operation *op) {
    Value master = offloadedMaster(op);
    if (master && master.getDefiningOp())
      paramOfMaster[master.getDefiningOp()] = op->getOperand(0).getDefiningOp();
  });
  std::string entries, masterOf;
  llvm::raw_string_ostream entry(entries), masters(masterOf);
  for (Operation &op : function.getBody().front().without_terminator()) {
    if (!isWeightRegionOp(&op) || !isHostPlaced(op.getResult(0)))
      continue;
    auto variable = cast<VariableOp>(op);
    auto type = cast<RankedTensorType>(variable.getType());
    int64_t offset =
        op.getAttrOfType<IntegerAttr>("memopt.host_offset").getInt();
    if (offset < 0 || offset + getBytes(type) > hostStateSize)
      return error(&op) << "has memopt.host_offset " << offset << " and "
                        << getBytes(type)
                        << " bytes, outside the host state region of "
                        << hostStateSize << " bytes";
    StringRef role = StringSwitch<StringRef>(variable.getRole())
                         .Case("master", "Master")
                         .Case("optimizer_state", "OptimizerState")
                         .Case("gradient_accumulator", "GradientAccumulator")
                         .Default("");
    if (role.empty())
      return error(&op) << "is a '" << variable.getRole()
                        << "' variable placed on the host; only masters, "
                           "optimizer state and gradient accumulators may be";
    int64_t param = -1;
    if (Operation *owner = paramOfMaster.lookup(&op))
      param = weightIndex.lookup(owner);
    else if (role == "Master")
      return error(&op) << "is a master that no update writes";
    entry << "    {" << cppString(variable.getName()) << ", "
          << *getDTypeName(type.getElementType()) << ", " << type.getRank()
          << ", " << shapeList(type.getShape()) << ", " << offset
          << ", nullptr, WeightRole::" << role << "},\n";
    masters << (hostWeightCount ? ", " : "") << param;
    ++hostWeightCount;
  }
  if (hostWeightCount)
    tables += "const TensorInfo kHostWeights[] = {\n" + entries +
              "};\nconst int32_t kMasterOf[] = {" + masterOf + "};\n";
  return success();
}

LogicalResult ProgramEmitter::emitTables() {
  llvm::raw_string_ostream table(tables);
  auto outputOffsets =
      function->getAttrOfType<DenseI64ArrayAttr>("memopt.output_offsets");
  if (outputOffsets &&
      outputOffsets.size() != int64_t(function.getNumResults()))
    return function.emitError("memopt.output_offsets has ")
           << outputOffsets.size() << " entries for "
           << function.getNumResults() << " results";
  for (auto [index, type] : llvm::enumerate(function.getResultTypes())) {
    int64_t offset = outputOffsets ? outputOffsets[index] : -1;
    if (offset >= 0 &&
        offset + getBytes(cast<RankedTensorType>(type)) > arenaSize)
      return function.emitError("output #")
             << index << " at arena offset " << offset
             << " lies outside the arena of " << arenaSize << " bytes";
  }
  // Inputs are the caller's buffers (-1); outputs may live in the arena.
  auto emitIo = [&](StringRef tableName, StringRef prefix, ArrayRef<Type> types,
                    auto getName, auto getOffset) {
    if (types.empty()) {
      table << "const TensorInfo *const " << tableName << " = nullptr;\n";
      return;
    }
    table << "const TensorInfo " << tableName << "[] = {\n";
    for (auto [index, type] : llvm::enumerate(types)) {
      auto tensor = cast<RankedTensorType>(type);
      std::string name = getName(index);
      if (name.empty())
        name = (prefix + Twine(index)).str();
      table << "    {" << cppString(name) << ", "
            << *getDTypeName(tensor.getElementType()) << ", "
            << tensor.getRank() << ", " << shapeList(tensor.getShape()) << ", "
            << getOffset(index) << ", nullptr, WeightRole::Constant},\n";
    }
    table << "};\n";
  };
  emitIo(
      "kInputs", "input", function.getArgumentTypes(),
      [&](size_t i) {
        auto name = function.getArgAttrOfType<StringAttr>(i, "memopt.name");
        return name ? name.str() : std::string();
      },
      [](size_t) { return int64_t(-1); });
  for (Type type : function.getResultTypes()) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !tensor.hasStaticShape() || tensor.getRank() > kMaxRank ||
        !getDTypeName(tensor.getElementType()))
      return function.emitError("result type ")
             << type << " is not supported by the runtime";
  }
  emitIo(
      "kOutputs", "output", function.getResultTypes(),
      [&](size_t i) {
        auto name = function.getResultAttrOfType<StringAttr>(i, "memopt.name");
        return name ? name.str() : std::string();
      },
      [&](size_t i) { return outputOffsets ? outputOffsets[i] : int64_t(-1); });
  return success();
}

LogicalResult ProgramEmitter::declare(Value value, StringRef pointer) {
  auto type = cast<RankedTensorType>(value.getType());
  std::string name = "t" + std::to_string(nextLocal++);
  os << "  TensorRef " << name << " = ref(" << pointer << ", "
     << *getDTypeName(type.getElementType()) << ", "
     << shapeList(type.getShape()) << ");\n";
  names[value] = name;
  pointers[value] = pointer.str();
  return success();
}

std::string ProgramEmitter::refWithShape(Value value, ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(value.getType());
  return "ref(" + pointers.lookup(value) + ", " +
         getDTypeName(type.getElementType())->str() + ", " + shapeList(shape) +
         ")";
}

/// Declares the results of `op` at the places the plan gave them.
LogicalResult ProgramEmitter::declareResults(Operation *op) {
  ArrayRef<int64_t> offsets =
      op->getAttrOfType<DenseI64ArrayAttr>("memopt.offsets").asArrayRef();
  for (auto [result, offset] : llvm::zip_equal(op->getResults(), offsets)) {
    const Storage &storage = liveness.getStorage(result);
    auto type = cast<RankedTensorType>(result.getType());
    std::string pointer;
    switch (storage.kind) {
    case StorageKind::Arena:
      if (offset < 0 || offset + getBytes(type) > arenaSize)
        return error(op) << "has arena offset " << offset << " for "
                         << getBytes(type) << " bytes, outside the arena of "
                         << arenaSize << " bytes";
      pointer = "arena + " + std::to_string(offset);
      break;
    case StorageKind::Output:
      pointer = "outputs[" + std::to_string(storage.ioIndex) + "]";
      break;
    case StorageKind::Input:
    case StorageKind::Weight:
      // Only views reach here: a view of an input or a weight.
      pointer = pointers.lookup(storage.values.front());
      break;
    }
    if (failed(declare(result, pointer)))
      return failure();
  }
  return success();
}

std::string ProgramEmitter::arenaPointer(Operation *op, StringRef attr) {
  auto offset = op->getAttrOfType<IntegerAttr>(attr);
  return offset ? "arena + " + std::to_string(offset.getInt()) : "nullptr";
}

LogicalResult ProgramEmitter::emitUnary(Operation *op, StringRef kind,
                                        double alpha, double beta) {
  os << "  unary(ctx, " << nodeLiteral(op) << ", UnaryOp::" << kind << ", "
     << cppFloat(alpha) << ", " << cppFloat(beta) << ", "
     << ref(op->getOperand(0)) << ", " << ref(op->getResult(0)) << ");\n";
  return success();
}

/// The runtime's Activation enumerator for a fused `activation` attribute
/// (the dialect verifies the spelling).
static StringRef runtimeActivation(StringRef activation) {
  return StringSwitch<StringRef>(activation)
      .Case("relu", "Activation::Relu")
      .Case("gelu", "Activation::Gelu")
      .Case("gelu_tanh", "Activation::GeluTanh")
      .Default("Activation::None");
}

LogicalResult ProgramEmitter::emitMatmulWorkspace(Operation *op) {
  auto size = op->getAttrOfType<IntegerAttr>("memopt.workspace_size");
  auto offset = op->getAttrOfType<IntegerAttr>("memopt.workspace_offset");
  if (!size || !offset || size.getInt() <= 0)
    return success();
  if (offset.getInt() < 0 || offset.getInt() + size.getInt() > arenaSize)
    return error(op) << "has a workspace outside the arena of " << arenaSize
                     << " bytes";
  os << "  setMatmulWorkspace(ctx, arena + " << offset.getInt() << ", size_t("
     << size.getInt() << "));\n";
  return success();
}

LogicalResult ProgramEmitter::emitMatMul(MatMulOp op) {
  // The runtime takes operands of rank >= 2: ONNX's 1-D operands become a
  // row (A) or a column (B) and the result gets the dropped unit dimension.
  auto aType = cast<RankedTensorType>(op.getA().getType());
  auto bType = cast<RankedTensorType>(op.getB().getType());
  auto cType = cast<RankedTensorType>(op.getResult().getType());
  SmallVector<int64_t> aShape(aType.getShape()), bShape(bType.getShape()),
      cShape(cType.getShape());
  if (aShape.size() == 1) {
    aShape.insert(aShape.begin(), 1);
    cShape.insert(cShape.end() - (bShape.size() == 1 ? 0 : 1), 1);
  }
  if (bShape.size() == 1) {
    bShape.push_back(1);
    cShape.push_back(1);
  }
  if (failed(emitMatmulWorkspace(op)))
    return failure();
  os << "  {\n    MatmulParams params;\n";
  emitTf32(op);
  os << "    matmul(ctx, " << nodeLiteral(op) << ", params, "
     << refWithShape(op.getA(), aShape) << ", "
     << refWithShape(op.getB(), bShape) << ", nullptr, "
     << refWithShape(op.getResult(), cShape) << ");\n  }\n";
  return success();
}

LogicalResult ProgramEmitter::emitConv(
    Operation *op, ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
    ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations, int64_t group,
    ArrayRef<int64_t> outputPadding, Value bias, StringRef callee,
    StringRef activation, bool channelsLast) {
  size_t spatial = kernel.size();
  if (spatial < 1 || spatial > 3)
    return error(op) << "has " << spatial
                     << " spatial dimensions; the runtime supports 1 to 3";
  os << "  {\n    ConvParams params;\n    params.spatialRank = " << spatial
     << ";\n";
  for (size_t i = 0; i < spatial; ++i) {
    os << "    params.padsBegin[" << i << "] = " << pads[i] << ";\n"
       << "    params.padsEnd[" << i << "] = " << pads[spatial + i] << ";\n"
       << "    params.strides[" << i << "] = " << strides[i] << ";\n"
       << "    params.dilations[" << i << "] = " << dilations[i] << ";\n";
    if (i < outputPadding.size())
      os << "    params.outputPadding[" << i << "] = " << outputPadding[i]
         << ";\n";
  }
  os << "    params.group = " << group << ";\n";
  emitTf32(op);
  if (channelsLast)
    os << "    params.channelsLast = true;\n";
  if (activation != "none")
    os << "    params.activation = " << runtimeActivation(activation) << ";\n";
  FailureOr<std::string> workspace = workspaceArguments(op);
  if (failed(workspace))
    return failure();
  // The filter gradient takes (x, dy, dw): no bias operand; the residual
  // conv takes (x, w, bias, residual, y).
  bool hasBiasArgument = callee != "convBackwardFilter";
  os << "    " << callee << "(ctx, " << nodeLiteral(op) << ", params, "
     << ref(op->getOperand(0)) << ", " << ref(op->getOperand(1)) << ", "
     << (!hasBiasArgument ? std::string()
         : bias           ? "&" + ref(bias) + ", "
                          : std::string("nullptr, "))
     << (callee == "convResidual" ? ref(op->getOperand(3)) + ", " : "")
     << ref(op->getResult(0)) << ", " << *workspace << ");\n  }\n";
  return success();
}

FailureOr<std::string> ProgramEmitter::workspaceArguments(Operation *op) {
  auto workspaceSize = op->getAttrOfType<IntegerAttr>("memopt.workspace_size");
  std::string workspace = arenaPointer(op, "memopt.workspace_offset");
  if (!workspaceSize || workspaceSize.getInt() == 0 || workspace == "nullptr")
    return std::string("nullptr, size_t(0)");
  if (op->getAttrOfType<IntegerAttr>("memopt.workspace_offset").getInt() +
          workspaceSize.getInt() >
      arenaSize)
    return error(op) << "has a workspace outside the arena of " << arenaSize
                     << " bytes";
  return workspace + ", size_t(" + std::to_string(workspaceSize.getInt()) + ")";
}

LogicalResult ProgramEmitter::emitPool(Operation *op, StringRef kind,
                                       ArrayRef<int64_t> kernel,
                                       ArrayRef<int64_t> strides,
                                       ArrayRef<int64_t> pads,
                                       ArrayRef<int64_t> dilations,
                                       bool ceilMode, bool countIncludePad,
                                       bool channelsLast) {
  size_t spatial = kernel.size();
  if (spatial < 1 || spatial > 3)
    return error(op) << "has " << spatial
                     << " spatial dimensions; the runtime supports 1 to 3";
  os << "  {\n    PoolParams params;\n    params.kind = PoolKind::" << kind
     << ";\n    params.spatialRank = " << spatial << ";\n";
  for (size_t i = 0; i < spatial; ++i)
    os << "    params.kernel[" << i << "] = " << kernel[i] << ";\n"
       << "    params.padsBegin[" << i << "] = " << pads[i] << ";\n"
       << "    params.padsEnd[" << i << "] = " << pads[spatial + i] << ";\n"
       << "    params.strides[" << i << "] = " << strides[i] << ";\n"
       << "    params.dilations[" << i
       << "] = " << (i < dilations.size() ? dilations[i] : 1) << ";\n";
  os << "    params.ceilMode = " << (ceilMode ? "true" : "false") << ";\n"
     << "    params.countIncludePad = " << (countIncludePad ? "true" : "false")
     << ";\n";
  if (channelsLast)
    os << "    params.channelsLast = true;\n";
  // The gradient reads (x, dy) and writes dx; the forward reads x.
  if (isa<PoolGradOp>(op))
    os << "    poolGrad(ctx, " << nodeLiteral(op) << ", params, "
       << ref(op->getOperand(0)) << ", " << ref(op->getOperand(1)) << ", "
       << ref(op->getResult(0)) << ");\n  }\n";
  else
    os << "    pool(ctx, " << nodeLiteral(op) << ", params, "
       << ref(op->getOperand(0)) << ", " << ref(op->getResult(0))
       << ");\n  }\n";
  return success();
}

LogicalResult ProgramEmitter::emitReduce(Operation *op, StringRef kind,
                                         ArrayRef<int64_t> axes) {
  int64_t rank = cast<RankedTensorType>(op->getOperand(0).getType()).getRank();
  SmallVector<int64_t> normalized;
  for (int64_t axis : axes)
    normalized.push_back(normalizeAxis(axis, rank));
  if (normalized.empty())
    for (int64_t axis = 0; axis < rank; ++axis)
      normalized.push_back(axis);
  llvm::sort(normalized);
  normalized.erase(llvm::unique(normalized), normalized.end());
  FailureOr<std::string> workspace = workspaceArguments(op);
  if (failed(workspace))
    return failure();
  os << "  {\n    const int axes[] = " << shapeList(normalized) << ";\n"
     << "    reduce(ctx, " << nodeLiteral(op) << ", ReduceOp::" << kind
     << ", axes, " << normalized.size() << ", " << ref(op->getOperand(0))
     << ", " << ref(op->getResult(0)) << ", " << *workspace << ");\n  }\n";
  return success();
}

LogicalResult ProgramEmitter::emitSlice(SliceOp op) {
  ArrayRef<int64_t> shape =
      cast<RankedTensorType>(op.getData().getType()).getShape();
  int64_t rank = shape.size();
  SmallVector<int64_t> starts(rank, 0), steps(rank, 1);
  ArrayRef<int64_t> axes = op.getAxes();
  for (auto [i, axisValue] : llvm::enumerate(axes)) {
    int64_t axis = normalizeAxis(axisValue, rank);
    if (axis < 0 || axis >= rank || i >= op.getStarts().size() ||
        i >= op.getSteps().size())
      return error(op) << "has an invalid axis " << axisValue;
    int64_t dim = shape[axis];
    int64_t step = op.getSteps()[i];
    int64_t start = op.getStarts()[i];
    if (start < 0)
      start += dim;
    // ONNX clamping: [0, dim] for positive steps, [0, dim - 1] otherwise.
    start = step > 0 ? std::clamp<int64_t>(start, 0, dim)
                     : std::clamp<int64_t>(start, 0, dim - 1);
    starts[axis] = std::min<int64_t>(start, std::max<int64_t>(dim - 1, 0));
    steps[axis] = step;
  }
  os << "  {\n    const int64_t starts[] = " << shapeList(starts) << ";\n"
     << "    const int64_t steps[] = " << shapeList(steps) << ";\n"
     << "    slice(ctx, " << nodeLiteral(op) << ", starts, steps, "
     << ref(op.getData()) << ", " << ref(op.getResult()) << ");\n  }\n";
  return success();
}

LogicalResult ProgramEmitter::emitResize(ResizeOp op) {
  StringRef mode = op.getMode();
  StringRef resizeMode;
  if (mode == "nearest")
    resizeMode = "Nearest";
  else if (mode == "linear")
    resizeMode = "Linear";
  else
    return error(op) << "uses mode '" << mode
                     << "'; the runtime supports nearest and linear";
  StringRef coordinate =
      llvm::StringSwitch<StringRef>(op.getCoordinateTransformationMode())
          .Case("half_pixel", "HalfPixel")
          .Case("pytorch_half_pixel", "PytorchHalfPixel")
          .Case("align_corners", "AlignCorners")
          .Case("asymmetric", "Asymmetric")
          .Case("tf_half_pixel_for_centers", "TfHalfPixelForCenters")
          .Default("");
  if (coordinate.empty())
    return error(op) << "uses coordinate_transformation_mode '"
                     << op.getCoordinateTransformationMode()
                     << "', which the runtime does not support";
  StringRef nearest = llvm::StringSwitch<StringRef>(op.getNearestMode())
                          .Case("round_prefer_floor", "RoundPreferFloor")
                          .Case("round_prefer_ceil", "RoundPreferCeil")
                          .Case("floor", "Floor")
                          .Case("ceil", "Ceil")
                          .Default("");
  if (nearest.empty())
    return error(op) << "uses nearest_mode '" << op.getNearestMode()
                     << "', which the runtime does not support";
  os << "  {\n    ResizeParams params;\n    params.mode = ResizeMode::"
     << resizeMode
     << ";\n    params.coordinateMode = CoordinateMode::" << coordinate
     << ";\n    params.nearestMode = NearestMode::" << nearest
     << ";\n    resize(ctx, " << nodeLiteral(op) << ", params, "
     << ref(op->getOperand(0)) << ", " << ref(op->getResult(0)) << ");\n  }\n";
  return success();
}

LogicalResult ProgramEmitter::emitPad(PadOp op) {
  StringRef mode = llvm::StringSwitch<StringRef>(op.getMode())
                       .Case("constant", "Constant")
                       .Case("reflect", "Reflect")
                       .Case("edge", "Edge")
                       .Default("");
  if (mode.empty())
    return error(op) << "uses mode '" << op.getMode()
                     << "', which the runtime does not support";
  ArrayRef<int64_t> pads = op.getPads();
  size_t rank = pads.size() / 2;
  os << "  {\n    const int64_t padsBegin[] = "
     << shapeList(pads.take_front(rank))
     << ";\n    const int64_t padsEnd[] = " << shapeList(pads.drop_front(rank))
     << ";\n    pad(ctx, " << nodeLiteral(op) << ", PadMode::" << mode
     << ", padsBegin, padsEnd, " << cppDouble(toDouble(op.getConstantValue()))
     << ", " << ref(op.getData()) << ", " << ref(op.getResult()) << ");\n  }\n";
  return success();
}

LogicalResult ProgramEmitter::emitConstantOfShape(ConstantOfShapeOp op) {
  double value = 0;
  if (auto attr = op.getValueAttr()) {
    auto dense = dyn_cast<DenseElementsAttr>(attr);
    if (!dense || dense.getNumElements() != 1)
      return error(op) << "has a value that is not one dense element";
    Type elementType = dense.getElementType();
    if (isa<FloatType>(elementType))
      value = toDouble(*dense.value_begin<APFloat>());
    else if (elementType.isInteger(1))
      value = *dense.value_begin<bool>() ? 1 : 0;
    else
      value = double((*dense.value_begin<APInt>()).getSExtValue());
  }
  os << "  fill(ctx, " << nodeLiteral(op) << ", " << cppDouble(value) << ", "
     << ref(op.getResult()) << ");\n";
  return success();
}

LogicalResult ProgramEmitter::emitFusedElementwise(FusedElementwiseOp op) {
  // Step names (the op's verifier knows them) -> the runtime's enumerators.
  auto runtimeStep = [](StringRef name) {
    return StringSwitch<const char *>(name)
        .Case("add", "BinaryOp::Add")
        .Case("sub", "BinaryOp::Sub")
        .Case("mul", "BinaryOp::Mul")
        .Case("div", "BinaryOp::Div")
        .Case("pow", "BinaryOp::Pow")
        .Case("min", "BinaryOp::Min")
        .Case("max", "BinaryOp::Max")
        .Case("relu_grad", "BinaryOp::ReluGrad")
        .Case("relu", "UnaryOp::Relu")
        .Case("exp", "UnaryOp::Exp")
        .Case("log", "UnaryOp::Log")
        .Case("sqrt", "UnaryOp::Sqrt")
        .Case("reciprocal", "UnaryOp::Reciprocal")
        .Case("neg", "UnaryOp::Neg")
        .Case("abs", "UnaryOp::Abs")
        .Case("sigmoid", "UnaryOp::Sigmoid")
        .Case("tanh", "UnaryOp::Tanh")
        .Case("erf", "UnaryOp::Erf")
        .Case("sin", "UnaryOp::Sin")
        .Case("cos", "UnaryOp::Cos")
        .Case("hard_swish", "UnaryOp::HardSwish")
        .Case("leaky_relu", "UnaryOp::LeakyRelu")
        .Case("hard_sigmoid", "UnaryOp::HardSigmoid")
        .Case("gelu", "UnaryOp::Gelu")
        .Case("gelu_tanh", "UnaryOp::GeluTanh")
        .Case("clip", "UnaryOp::Clip")
        .Default(nullptr);
  };
  ArrayRef<int64_t> registers = op.getRegisters();
  int64_t numInputs = op.getInputs().size();
  // The CUDA build gets the steps as code (FusedKernel.cuh): one kernel per
  // distinct chain, the chain inlined on registers.
  std::string apply;
  llvm::raw_string_ostream kernel(apply);
  auto operand = [&](int64_t reg) {
    return reg < numInputs ? "x[" + std::to_string(reg) + "]"
                           : "r" + std::to_string(reg);
  };
  // The interpreter's table, for the host build and the layouts the kernel
  // does not address.
  os << "  {\n    static const ElementwiseStep steps[] = {\n";
  for (auto [index, attr] : llvm::enumerate(op.getOps())) {
    StringRef name = cast<StringAttr>(attr).getValue();
    const char *step = runtimeStep(name);
    if (!step)
      return error(op) << "has an unknown fused step '" << name << "'";
    bool binary = FusedElementwiseOp::isBinaryStep(name);
    int64_t a = registers[2 * index], b = registers[2 * index + 1];
    std::string alpha = cppFloat(op.getAlphas()[index]);
    std::string beta = cppFloat(op.getBetas()[index]);
    os << "        {ElementwiseStep::" << (binary ? "kBinary" : "kUnary")
       << ", int32_t(" << step << "), " << a << ", " << b << ", " << alpha
       << ", " << beta << "},\n";
    kernel << "    const float r" << numInputs + int64_t(index) << " = ";
    if (binary)
      kernel << "binaryStep(" << step << ", " << operand(a) << ", "
             << operand(b) << ");\n";
    else
      kernel << "unaryStep(" << step << ", " << operand(a) << ", " << alpha
             << ", " << beta << ");\n";
  }
  kernel << "    return r" << numInputs + int64_t(op.getOps().size()) - 1
         << ";\n";
  std::string key = std::to_string(numInputs) + "\n" + apply;
  auto [entry, inserted] = fusedPrograms.try_emplace(
      key, "FusedProgram" + std::to_string(fusedPrograms.size()));
  std::string program = entry->second;
  if (inserted)
    kernels += "struct " + program + " {\n  static constexpr int kInputs = " +
               std::to_string(numInputs) +
               ";\n  __device__ __forceinline__ static float apply(const "
               "float *x) {\n" +
               apply + "  }\n};\n\n";
  std::optional<StringRef> type = getCudaElementType(op.getType()),
                           inputType =
                               getCudaElementType(op.getInputs()[0].getType());
  if (!type || !inputType)
    return error(op) << "has an element type generated kernels do not support";
  os << "    };\n    const TensorRef inputs[] = {";
  for (auto [index, input] : llvm::enumerate(op.getInputs()))
    os << (index ? ", " : "") << ref(input);
  std::string arguments = "(ctx, " + nodeLiteral(op) + ", steps, " +
                          std::to_string(op.getOps().size()) + ", inputs, " +
                          std::to_string(numInputs) + ", " +
                          ref(op.getResult()) + ");\n";
  os << "};\n#ifdef __CUDACC__\n    fusedElementwiseProgram<" << program << ", "
     << *inputType << ", " << *type << ">" << arguments
     << "#else\n    fusedElementwise" << arguments << "#endif\n  }\n";
  return success();
}

LogicalResult ProgramEmitter::emitOp(Operation *op) {
  for (Value operand : op->getOperands())
    if (!names.count(operand))
      return error(op) << "uses a value defined after it";
  if (isa<OffloadOp, OffloadWaitOp, ReloadOp, ReloadWaitOp>(op))
    return emitCopyStreamOp(op);
  // Views: a new TensorRef over the operand's bytes, no call.
  if (isa<ReshapeOp, FlattenOp, SqueezeOp, UnsqueezeOp, IdentityOp>(op)) {
    os << "  // " << nodeName(op) << " (" << op->getName()
       << "): view, no call\n";
    return declare(op->getResult(0), pointers.lookup(op->getOperand(0)));
  }
  // Shapes are static, so shape always folds (--canonicalize, which the
  // compile driver runs before planning).
  if (isa<ShapeOp>(op))
    return error(op) << "has no runtime kernel: it folds to a constant; run "
                        "--canonicalize before lowering";
  if (failed(declareResults(op)))
    return failure();
  std::string node = nodeLiteral(op);
  if (failed(emitCall(op, node)))
    return failure();
  // Per-op instrumentation (the executable's --profile and --dump-ops); a
  // no-op otherwise, and outside the CUDA graph's replays altogether.
  os << "  {\n    const TensorRef results[] = {";
  llvm::interleaveComma(op->getResults(), os,
                        [&](Value result) { os << ref(result); });
  os << (op->getNumResults() ? "" : "TensorRef()") << "};\n    opDone(ctx, "
     << nextOp << ", " << node << ", "
     << cppString(op->getName().getStringRef()) << ", results, "
     << op->getNumResults() << ");\n  }\n";
  return success();
}

LogicalResult ProgramEmitter::emitCopyStreamOp(Operation *op) {
  std::string node = nodeLiteral(op);
  auto hostOffset = [&](int64_t offset) -> FailureOr<int64_t> {
    if (offset < 0)
      return error(op) << "has no host pool offset (plan the pool first)";
    return offset;
  };
  if (auto wait = dyn_cast<ReloadWaitOp>(op)) {
    os << "  reloadWait(ctx, " << node << ", " << wait.getSlot() << ");\n";
    return declare(wait.getOutput(), pointers.lookup(wait.getInput()));
  }
  if (auto wait = dyn_cast<OffloadWaitOp>(op)) {
    os << "  offloadWait(ctx, " << node << ", " << wait.getSlot() << ");\n";
    return success();
  }
  if (auto offload = dyn_cast<OffloadOp>(op)) {
    FailureOr<int64_t> offset = hostOffset(int64_t(offload.getHostOffset()));
    if (failed(offset))
      return failure();
    os << "  offloadStart(ctx, " << node << ", " << offload.getSlot() << ", "
       << pointers.lookup(offload.getInput()) << ", " << *offset << ", "
       << getBytes(cast<RankedTensorType>(offload.getInput().getType()))
       << ");\n";
    return success();
  }
  auto reload = cast<ReloadOp>(op);
  FailureOr<int64_t> offset = hostOffset(int64_t(reload.getHostOffset()));
  if (failed(offset) || failed(declareResults(op)))
    return failure();
  os << "  reloadStart(ctx, " << node << ", " << reload.getSlot() << ", "
     << pointers.lookup(reload.getOutput()) << ", " << *offset << ", "
     << getBytes(cast<RankedTensorType>(reload.getOutput().getType()))
     << ");\n";
  return success();
}

LogicalResult ProgramEmitter::emitCall(Operation *op, const std::string &node) {
  auto binary = [&](StringRef function, StringRef kind) {
    os << "  " << function << "(ctx, " << node << ", " << kind << ", "
       << ref(op->getOperand(0)) << ", " << ref(op->getOperand(1)) << ", "
       << ref(op->getResult(0)) << ");\n";
    return success();
  };
  // The fused head + loss and its gradient: params, then every operand and
  // every result in order (the runtime's signatures), then the workspace.
  auto headCall = [&](StringRef function,
                      int64_t ignoreIndex) -> LogicalResult {
    FailureOr<std::string> workspace = workspaceArguments(op);
    if (failed(workspace))
      return failure();
    os << "  {\n    LinearCrossEntropyParams params;\n"
       << "    params.ignoreIndex = int64_t(" << ignoreIndex << ");\n";
    emitTf32(op);
    os << "    " << function << "(ctx, " << node << ", params";
    for (Value value : op->getOperands())
      os << ", " << ref(value);
    for (Value value : op->getResults())
      os << ", " << ref(value);
    os << ", " << *workspace << ");\n  }\n";
    return success();
  };
  constexpr double kFloatMax = std::numeric_limits<float>::infinity();
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ReluOp) { return emitUnary(op, "Relu"); })
      .Case([&](ExpOp) { return emitUnary(op, "Exp"); })
      .Case([&](LogOp) { return emitUnary(op, "Log"); })
      .Case([&](SqrtOp) { return emitUnary(op, "Sqrt"); })
      .Case([&](ReciprocalOp) { return emitUnary(op, "Reciprocal"); })
      .Case([&](NegOp) { return emitUnary(op, "Neg"); })
      .Case([&](AbsOp) { return emitUnary(op, "Abs"); })
      .Case([&](SigmoidOp) { return emitUnary(op, "Sigmoid"); })
      .Case([&](TanhOp) { return emitUnary(op, "Tanh"); })
      .Case([&](ErfOp) { return emitUnary(op, "Erf"); })
      .Case([&](SinOp) { return emitUnary(op, "Sin"); })
      .Case([&](CosOp) { return emitUnary(op, "Cos"); })
      .Case([&](NotOp) { return emitUnary(op, "Not"); })
      .Case([&](HardSwishOp) { return emitUnary(op, "HardSwish"); })
      .Case([&](LeakyReluOp leaky) {
        return emitUnary(op, "LeakyRelu", toDouble(leaky.getAlpha()));
      })
      .Case([&](HardSigmoidOp hard) {
        return emitUnary(op, "HardSigmoid", toDouble(hard.getAlpha()),
                         toDouble(hard.getBeta()));
      })
      .Case([&](GeluOp gelu) {
        return emitUnary(op,
                         gelu.getApproximate() == "tanh" ? "GeluTanh" : "Gelu");
      })
      .Case([&](ClipOp clip) {
        std::optional<APFloat> low = clip.getMin(), high = clip.getMax();
        return emitUnary(op, "Clip", low ? toDouble(*low) : -kFloatMax,
                         high ? toDouble(*high) : kFloatMax);
      })
      .Case(
          [&](FusedElementwiseOp fused) { return emitFusedElementwise(fused); })
      .Case([&](CastOp) {
        os << "  cast(ctx, " << node << ", " << ref(op->getOperand(0)) << ", "
           << ref(op->getResult(0)) << ");\n";
        return success();
      })
      .Case([&](AddOp) { return binary("binary", "BinaryOp::Add"); })
      .Case([&](SubOp) { return binary("binary", "BinaryOp::Sub"); })
      .Case([&](MulOp) { return binary("binary", "BinaryOp::Mul"); })
      .Case([&](DivOp) { return binary("binary", "BinaryOp::Div"); })
      .Case([&](PowOp) { return binary("binary", "BinaryOp::Pow"); })
      .Case([&](ModOp mod) {
        // fmod = 1 truncates (C fmod / %); fmod = 0 (integers only) floors.
        return binary("binary",
                      mod.getFmod() ? "BinaryOp::FMod" : "BinaryOp::Mod");
      })
      .Case([&](MinOp) { return binary("binary", "BinaryOp::Min"); })
      .Case([&](MaxOp) { return binary("binary", "BinaryOp::Max"); })
      .Case([&](ReluGradOp) { return binary("binary", "BinaryOp::ReluGrad"); })
      .Case([&](EqualOp) { return binary("compare", "CompareOp::Equal"); })
      .Case([&](LessOp) { return binary("compare", "CompareOp::Less"); })
      .Case([&](GreaterOp) { return binary("compare", "CompareOp::Greater"); })
      .Case([&](AndOp) { return binary("logical", "LogicalOp::And"); })
      .Case([&](OrOp) { return binary("logical", "LogicalOp::Or"); })
      .Case([&](IsNaNOp) {
        os << "  isNaN(ctx, " << node << ", " << ref(op->getOperand(0)) << ", "
           << ref(op->getResult(0)) << ");\n";
        return success();
      })
      .Case([&](RangeOp range) {
        os << "  range(ctx, " << node << ", " << ref(range.getStart()) << ", "
           << ref(range.getDelta()) << ", " << ref(range.getResult()) << ");\n";
        return success();
      })
      .Case([&](WhereOp) {
        os << "  where(ctx, " << node << ", " << ref(op->getOperand(0)) << ", "
           << ref(op->getOperand(1)) << ", " << ref(op->getOperand(2)) << ", "
           << ref(op->getResult(0)) << ");\n";
        return success();
      })
      .Case([&](MatMulOp matmul) { return emitMatMul(matmul); })
      .Case([&](GemmOp gemm) {
        if (failed(emitMatmulWorkspace(op)))
          return failure();
        os << "  {\n    MatmulParams params;\n    params.transA = "
           << (gemm.getTransA() ? "true" : "false")
           << ";\n    params.transB = " << (gemm.getTransB() ? "true" : "false")
           << ";\n    params.alpha = " << cppFloat(toDouble(gemm.getAlpha()))
           << ";\n    params.beta = " << cppFloat(toDouble(gemm.getBeta()))
           << ";\n";
        emitTf32(op);
        if (gemm.getActivation() != "none")
          os << "    params.activation = "
             << runtimeActivation(gemm.getActivation()) << ";\n";
        os << "    matmul(ctx, " << node << ", params, " << ref(gemm.getA())
           << ", " << ref(gemm.getB()) << ", "
           << (gemm.getC() ? "&" + ref(gemm.getC()) : std::string("nullptr"))
           << ", " << ref(gemm.getResult()) << ");\n  }\n";
        return success();
      })
      .Case([&](ConvOp conv) {
        return emitConv(op, conv.getKernelShape(), conv.getStrides(),
                        conv.getPads(), conv.getDilations(), conv.getGroup(),
                        {}, conv.getB(), "conv", conv.getActivation(),
                        conv.getChannelsLast());
      })
      .Case([&](ConvResidualOp conv) {
        return emitConv(op, conv.getKernelShape(), conv.getStrides(),
                        conv.getPads(), conv.getDilations(), conv.getGroup(),
                        {}, conv.getB(), "convResidual", conv.getActivation(),
                        conv.getChannelsLast());
      })
      .Case([&](ConvTransposeOp conv) {
        return emitConv(op, conv.getKernelShape(), conv.getStrides(),
                        conv.getPads(), conv.getDilations(), conv.getGroup(),
                        conv.getOutputPadding(), conv.getB(), "convTranspose",
                        "none");
      })
      .Case([&](MaxPoolOp pool) {
        return emitPool(op, "Max", pool.getKernelShape(), pool.getStrides(),
                        pool.getPads(), pool.getDilations(),
                        pool.getCeilMode() != 0, false, pool.getChannelsLast());
      })
      .Case([&](AveragePoolOp pool) {
        return emitPool(op, "Avg", pool.getKernelShape(), pool.getStrides(),
                        pool.getPads(), pool.getDilations(),
                        pool.getCeilMode() != 0, pool.getCountIncludePad() != 0,
                        pool.getChannelsLast());
      })
      .Case([&](GlobalAveragePoolOp pool) {
        os << "  globalAvgPool(ctx, " << node << ", " << ref(op->getOperand(0))
           << ", " << ref(op->getResult(0))
           << (pool.getChannelsLast() ? ", true" : "") << ");\n";
        return success();
      })
      .Case([&](BatchNormalizationOp norm) {
        os << "  batchNorm(ctx, " << node << ", "
           << cppFloat(toDouble(norm.getEpsilon()));
        for (Value operand : op->getOperands())
          os << ", " << ref(operand);
        os << ", " << ref(op->getResult(0))
           << (norm.getChannelsLast() ? ", true" : "") << ");\n";
        return success();
      })
      .Case([&](LayerNormalizationOp norm) {
        int64_t rank = cast<RankedTensorType>(norm.getX().getType()).getRank();
        os << "  layerNorm(ctx, " << node << ", "
           << normalizeAxis(norm.getAxis(), rank) << ", "
           << cppFloat(toDouble(norm.getEpsilon())) << ", " << ref(norm.getX())
           << ", " << ref(norm.getScale()) << ", "
           << (norm.getB() ? "&" + ref(norm.getB()) : std::string("nullptr"))
           << ", " << ref(op->getResult(0)) << ");\n";
        return success();
      })
      .Case([&](SoftmaxOp softmax) {
        int64_t rank =
            cast<RankedTensorType>(op->getOperand(0).getType()).getRank();
        os << "  softmax(ctx, " << node << ", "
           << normalizeAxis(softmax.getAxis(), rank) << ", false, "
           << ref(op->getOperand(0)) << ", " << ref(op->getResult(0)) << ");\n";
        return success();
      })
      .Case([&](AttentionOp attention) -> LogicalResult {
        FailureOr<std::string> workspace = workspaceArguments(op);
        if (failed(workspace))
          return failure();
        os << "  {\n    AttentionParams params;\n    params.scale = "
           << cppFloat(toDouble(attention.getScale()))
           << ";\n    params.causal = "
           << (attention.getCausal() ? "true" : "false")
           << ";\n    params.keyTransposed = "
           << (attention.getKeyTransposed() ? "true" : "false") << ";\n";
        if (attention.getSafeSoftmax())
          os << "    params.safeSoftmax = true;\n";
        emitTf32(op);
        if (attention.getLse())
          os << "    TensorRef lse = " << ref(attention.getLse()) << ";\n";
        os << "    attention(ctx, " << node << ", params, "
           << ref(attention.getQ()) << ", " << ref(attention.getK()) << ", "
           << ref(attention.getV()) << ", "
           << (attention.getBias() ? "&" + ref(attention.getBias())
                                   : std::string("nullptr"))
           << ", " << ref(attention.getY()) << ", " << *workspace
           << (attention.getLse() ? ", &lse" : "") << ");\n  }\n";
        return success();
      })
      .Case([&](AttentionGradOp grad) -> LogicalResult {
        FailureOr<std::string> workspace = workspaceArguments(op);
        if (failed(workspace))
          return failure();
        os << "  {\n    AttentionParams params;\n    params.scale = "
           << cppFloat(toDouble(grad.getScale()))
           << ";\n    params.causal = " << (grad.getCausal() ? "true" : "false")
           << ";\n    params.keyTransposed = "
           << (grad.getKeyTransposed() ? "true" : "false")
           << ";\n    params.safeSoftmax = "
           << (grad.getSafeSoftmax() ? "true" : "false") << ";\n";
        emitTf32(op);
        if (grad.getDbias())
          os << "    TensorRef dbias = " << ref(grad.getDbias()) << ";\n";
        os << "    attentionBackward(ctx, " << node << ", params, "
           << ref(grad.getQ()) << ", " << ref(grad.getK()) << ", "
           << ref(grad.getV()) << ", "
           << (grad.getBias() ? "&" + ref(grad.getBias())
                              : std::string("nullptr"))
           << ", " << ref(grad.getO()) << ", " << ref(grad.getDO()) << ", "
           << ref(grad.getLse()) << ", " << ref(grad.getDQ()) << ", "
           << ref(grad.getDK()) << ", " << ref(grad.getDV()) << ", "
           << (grad.getDbias() ? "&dbias" : "nullptr") << ", " << *workspace
           << ");\n  }\n";
        return success();
      })
      .Case([&](ReduceMeanOp reduce) {
        return emitReduce(op, "Mean", reduce.getAxes());
      })
      .Case([&](ReduceSumOp reduce) {
        return emitReduce(op, "Sum", reduce.getAxes());
      })
      .Case([&](ReduceMaxOp reduce) {
        return emitReduce(op, "Max", reduce.getAxes());
      })
      .Case([&](CumSumOp cumSum) {
        os << "  cumSum(ctx, " << node << ", " << cumSum.getAxis() << ", "
           << (cumSum.getExclusive() ? "true" : "false") << ", "
           << (cumSum.getReverse() ? "true" : "false") << ", "
           << ref(cumSum.getX()) << ", " << ref(cumSum.getY()) << ");\n";
        return success();
      })
      .Case([&](TransposeOp transpose) {
        int64_t rank =
            cast<RankedTensorType>(transpose.getData().getType()).getRank();
        SmallVector<int64_t> perm;
        if (auto given = transpose.getPerm())
          perm.assign(given->begin(), given->end());
        else
          for (int64_t i = rank - 1; i >= 0; --i)
            perm.push_back(i);
        os << "  {\n    const int perm[] = " << shapeList(perm)
           << ";\n    transpose(ctx, " << node << ", perm, "
           << ref(transpose.getData()) << ", " << ref(op->getResult(0))
           << ");\n  }\n";
        return success();
      })
      .Case([&](ConcatOp concat) {
        int64_t rank =
            cast<RankedTensorType>(concat.getResult().getType()).getRank();
        os << "  {\n    const TensorRef inputs[] = {";
        llvm::interleaveComma(concat.getInputs(), os,
                              [&](Value input) { os << ref(input); });
        os << "};\n    concat(ctx, " << node << ", "
           << normalizeAxis(concat.getAxis(), rank) << ", inputs, "
           << concat.getInputs().size() << ", " << ref(concat.getResult())
           << ");\n  }\n";
        return success();
      })
      .Case([&](SplitOp split) {
        int64_t rank =
            cast<RankedTensorType>(split.getInput().getType()).getRank();
        os << "  {\n    const TensorRef outputs[] = {";
        llvm::interleaveComma(split.getResults(), os,
                              [&](Value result) { os << ref(result); });
        os << "};\n    split(ctx, " << node << ", "
           << normalizeAxis(split.getAxis(), rank) << ", "
           << ref(split.getInput()) << ", outputs, " << split.getNumResults()
           << ");\n  }\n";
        return success();
      })
      .Case([&](SliceOp slice) { return emitSlice(slice); })
      .Case([&](GatherOp gather) {
        int64_t rank =
            cast<RankedTensorType>(gather.getData().getType()).getRank();
        os << "  gather(ctx, " << node << ", "
           << normalizeAxis(gather.getAxis(), rank) << ", "
           << ref(gather.getData()) << ", " << ref(gather.getIndices()) << ", "
           << ref(op->getResult(0)) << ");\n";
        return success();
      })
      .Case([&](GatherElementsOp gather) {
        int64_t rank =
            cast<RankedTensorType>(gather.getData().getType()).getRank();
        os << "  gatherElements(ctx, " << node << ", "
           << normalizeAxis(gather.getAxis(), rank) << ", "
           << ref(gather.getData()) << ", " << ref(gather.getIndices()) << ", "
           << ref(op->getResult(0)) << ");\n";
        return success();
      })
      .Case([&](ScatterNDOp scatter) -> LogicalResult {
        StringRef reduction =
            llvm::StringSwitch<StringRef>(scatter.getReduction())
                .Case("none", "None")
                .Case("add", "Add")
                .Case("mul", "Mul")
                .Case("max", "Max")
                .Case("min", "Min")
                .Default("");
        if (reduction.empty())
          return error(op) << "has reduction '" << scatter.getReduction()
                           << "', which the runtime does not support";
        os << "  scatterND(ctx, " << node << ", ScatterReduction::" << reduction
           << ", " << ref(scatter.getData()) << ", "
           << ref(scatter.getIndices()) << ", " << ref(scatter.getUpdates())
           << ", " << ref(scatter.getResult()) << ");\n";
        return success();
      })
      .Case([&](ExpandOp) {
        os << "  expand(ctx, " << node << ", " << ref(op->getOperand(0)) << ", "
           << ref(op->getResult(0)) << ");\n";
        return success();
      })
      .Case([&](PadOp pad) { return emitPad(pad); })
      .Case([&](ResizeOp resize) { return emitResize(resize); })
      .Case([&](ConstantOfShapeOp constant) {
        return emitConstantOfShape(constant);
      })
      .Case([&](SoftmaxCrossEntropyOp loss) {
        os << "  softmaxCrossEntropy(ctx, " << node << ", "
           << "int64_t(" << int64_t(loss.getIgnoreIndex()) << "), "
           << rowsByClasses(loss.getLogits()) << ", "
           << rowsOf(loss.getLabels(), loss.getLogits()) << ", "
           << ref(loss.getLoss()) << ");\n";
        return success();
      })
      .Case([&](SoftmaxCrossEntropyGradOp grad) {
        os << "  softmaxCrossEntropyGrad(ctx, " << node << ", "
           << "int64_t(" << int64_t(grad.getIgnoreIndex()) << "), "
           << rowsByClasses(grad.getLogits()) << ", "
           << rowsOf(grad.getLabels(), grad.getLogits()) << ", "
           << ref(grad.getDloss()) << ", " << rowsByClasses(grad.getDlogits())
           << ");\n";
        return success();
      })
      .Case([&](LinearCrossEntropyOp head) {
        return headCall("linearCrossEntropy", head.getIgnoreIndex());
      })
      .Case([&](LinearCrossEntropyGradOp grad) {
        return headCall("linearCrossEntropyGrad", grad.getIgnoreIndex());
      })
      .Case([&](ConvBackwardFilterOp grad) {
        return emitConv(op, grad.getKernelShape(), grad.getStrides(),
                        grad.getPads(), grad.getDilations(), grad.getGroup(),
                        {}, Value(), "convBackwardFilter", "none");
      })
      .Case([&](PoolGradOp grad) {
        return emitPool(
            op, grad.getKind() == "max" ? "Max" : "Avg", grad.getKernelShape(),
            grad.getStrides(), grad.getPads(), grad.getDilations(),
            grad.getCeilMode() != 0, grad.getCountIncludePad() != 0);
      })
      .Case([&](BatchNormTrainingOp norm) -> LogicalResult {
        FailureOr<std::string> workspace = workspaceArguments(op);
        if (failed(workspace))
          return failure();
        os << "  batchNormTraining(ctx, " << node << ", "
           << cppFloat(toDouble(norm.getEpsilon())) << ", "
           << runtimeActivation(norm.getActivation()) << ", "
           << ref(norm.getX()) << ", " << ref(norm.getScale()) << ", "
           << ref(norm.getB()) << ", " << ref(norm.getY()) << ", "
           << ref(norm.getMean()) << ", " << ref(norm.getInvStd()) << ", "
           << *workspace << ");\n";
        return success();
      })
      .Case([&](BatchNormTrainingGradOp grad) -> LogicalResult {
        FailureOr<std::string> workspace = workspaceArguments(op);
        if (failed(workspace))
          return failure();
        os << "  batchNormTrainingGrad(ctx, " << node << ", "
           << ref(grad.getX()) << ", " << ref(grad.getDY()) << ", "
           << ref(grad.getScale()) << ", " << ref(grad.getMean()) << ", "
           << ref(grad.getInvStd()) << ", " << ref(grad.getDX()) << ", "
           << ref(grad.getDscale()) << ", " << ref(grad.getDB()) << ", "
           << *workspace << ");\n";
        return success();
      })
      .Case([&](LayerNormalizationGradOp grad) -> LogicalResult {
        FailureOr<std::string> workspace = workspaceArguments(op);
        if (failed(workspace))
          return failure();
        os << "  layerNormGrad(ctx, " << node << ", "
           << cppFloat(toDouble(grad.getEpsilon())) << ", " << ref(grad.getX())
           << ", " << ref(grad.getDY()) << ", " << ref(grad.getScale()) << ", "
           << ref(grad.getDX()) << ", " << ref(grad.getDScale()) << ", "
           << ref(grad.getDB()) << ", " << *workspace << ");\n";
        return success();
      })
      .Case([&](BatchNormRunningUpdateOp update) {
        os << "  batchNormRunningUpdate(ctx, " << node << ", "
           << cppFloat(toDouble(update.getMomentum())) << ", "
           << cppFloat(toDouble(update.getEpsilon())) << ", "
           << ref(update.getMean()) << ", " << ref(update.getInvStd()) << ", "
           << ref(update.getRunningMean()) << ", "
           << ref(update.getRunningVar()) << ");\n";
        return success();
      })
      .Case([&](DropoutOp drop) -> LogicalResult {
        if (!drop.getKey())
          return error(op) << "has no random key: run memopt-make-trainable "
                              "(training) or --canonicalize (inference, "
                              "where it folds away) before lowering";
        os << "  dropout(ctx, " << node << ", "
           << cppFloat(toDouble(drop.getRatio())) << ", "
           << uint32_t(drop.getStream()) << "u, " << ref(drop.getX()) << ", "
           << ref(drop.getKey()) << ", " << ref(drop.getY()) << ");\n";
        return success();
      })
      .Case([&](AssignOp assign) {
        os << "  copy(ctx, " << node << ", " << ref(assign.getValue()) << ", "
           << ref(assign.getTarget()) << ");\n";
        return success();
      })
      .Case([&](SGDUpdateOp update) -> LogicalResult {
        if (Value master = update.getMaster()) {
          os << "  {\n    TensorRef buffer = "
             << (update.getMomentumBuffer() ? ref(update.getMomentumBuffer())
                                            : std::string("TensorRef()"))
             << ";\n"
             << accumulation(update.getAccumulator(), update.getMicroStep(),
                             update.getAccumulationSteps())
             << lossScaling(update.getLossScale(), update.getFoundInf(),
                            Value())
             << "    offloadSgdUpdate(ctx, " << node << ", " << offloadSites++
             << ", " << stagingPointer(op) << ", "
             << cppFloat(toDouble(update.getMomentum())) << ", "
             << cppFloat(toDouble(update.getWeightDecay())) << ", "
             << ref(update.getParam()) << ", " << ref(update.getGrad()) << ", "
             << ref(master) << ", "
             << (update.getMomentumBuffer() ? "&buffer" : "nullptr") << ", "
             << ref(update.getLr())
             << updateTail(update.getMicroStep(), update.getLossScale());
          return success();
        }
        auto call = [&](const std::function<std::string(Value)> &view,
                        const std::string &param) {
          os << "  {\n    TensorRef buffer = "
             << (update.getMomentumBuffer() ? view(update.getMomentumBuffer())
                                            : std::string("TensorRef()"))
             << ";\n"
             << accumulation(update.getAccumulator(), update.getMicroStep(),
                             update.getAccumulationSteps(),
                             update.getAccumulator()
                                 ? view(update.getAccumulator())
                                 : "")
             << lossScaling(update.getLossScale(), update.getFoundInf(),
                            Value())
             << "    sgdUpdate(ctx, " << node << ", "
             << cppFloat(toDouble(update.getMomentum())) << ", "
             << cppFloat(toDouble(update.getWeightDecay())) << ", " << param
             << ", " << view(update.getGrad()) << ", "
             << (update.getMomentumBuffer() ? "&buffer" : "nullptr") << ", "
             << ref(update.getLr())
             << updateTail(update.getMicroStep(), update.getLossScale());
        };
        if (update.getShards() > 1)
          return emitShardedUpdate(op, update.getParam(), update.getShards(),
                                   call);
        call([&](Value value) { return ref(value); }, ref(update.getParam()));
        return success();
      })
      .Case([&](AdamWUpdateOp update) -> LogicalResult {
        if (Value master = update.getMaster()) {
          os << "  {\n"
             << accumulation(update.getAccumulator(), update.getMicroStep(),
                             update.getAccumulationSteps())
             << lossScaling(update.getLossScale(), update.getFoundInf(),
                            update.getLossScaleState())
             << "    offloadAdamwUpdate(ctx, " << node << ", " << offloadSites++
             << ", " << stagingPointer(op) << ", "
             << cppFloat(toDouble(update.getBeta1())) << ", "
             << cppFloat(toDouble(update.getBeta2())) << ", "
             << cppFloat(toDouble(update.getEps())) << ", "
             << cppFloat(toDouble(update.getWeightDecay())) << ", "
             << ref(update.getParam()) << ", " << ref(update.getGrad()) << ", "
             << ref(master) << ", " << ref(update.getExpAvg()) << ", "
             << ref(update.getExpAvgSq()) << ", " << ref(update.getLr()) << ", "
             << ref(update.getStep())
             << updateTail(update.getMicroStep(), update.getLossScale());
          return success();
        }
        auto call = [&](const std::function<std::string(Value)> &view,
                        const std::string &param) {
          os << "  {\n"
             << accumulation(update.getAccumulator(), update.getMicroStep(),
                             update.getAccumulationSteps(),
                             update.getAccumulator()
                                 ? view(update.getAccumulator())
                                 : "")
             << lossScaling(update.getLossScale(), update.getFoundInf(),
                            update.getLossScaleState())
             << "    adamwUpdate(ctx, " << node << ", "
             << cppFloat(toDouble(update.getBeta1())) << ", "
             << cppFloat(toDouble(update.getBeta2())) << ", "
             << cppFloat(toDouble(update.getEps())) << ", "
             << cppFloat(toDouble(update.getWeightDecay())) << ", " << param
             << ", " << view(update.getGrad()) << ", "
             << view(update.getExpAvg()) << ", " << view(update.getExpAvgSq())
             << ", " << ref(update.getLr()) << ", " << ref(update.getStep())
             << updateTail(update.getMicroStep(), update.getLossScale());
        };
        if (update.getShards() > 1)
          return emitShardedUpdate(op, update.getParam(), update.getShards(),
                                   call);
        call([&](Value value) { return ref(value); }, ref(update.getParam()));
        return success();
      })
      .Case([&](FoundInfOp check) {
        os << "  {\n    const TensorRef gradients[] = {";
        llvm::interleaveComma(check.getGradients(), os,
                              [&](Value gradient) { os << ref(gradient); });
        os << "};\n";
        size_t accumulators = check.getAccumulators().size();
        if (accumulators) {
          os << "    const TensorRef accumulators[] = {";
          llvm::interleaveComma(check.getAccumulators(), os,
                                [&](Value sum) { os << ref(sum); });
          os << "};\n    const TensorRef microStep = "
             << ref(check.getMicroStep()) << ";\n";
        }
        os << "    foundInf(ctx, " << node << ", gradients, "
           << check.getGradients().size() << ", "
           << (accumulators ? "accumulators" : "nullptr") << ", "
           << accumulators << ", " << (accumulators ? "&microStep" : "nullptr")
           << ", " << ref(check.getFound()) << ");\n  }\n";
        return success();
      })
      .Case([&](UpdateLossScaleOp update) {
        os << "  {\n";
        if (Value micro = update.getMicroStep())
          os << "    const TensorRef microStep = " << ref(micro) << ";\n";
        os << "    updateLossScale(ctx, " << node << ", "
           << cppFloat(toDouble(update.getGrowthFactor())) << ", "
           << cppFloat(toDouble(update.getBackoffFactor())) << ", "
           << update.getGrowthInterval() << ", " << ref(update.getLossScale())
           << ", " << ref(update.getState()) << ", "
           << ref(update.getFoundInf()) << ", "
           << (update.getMicroStep() ? "&microStep" : "nullptr") << ", "
           << update.getAccumulationSteps() << ");\n  }\n";
        return success();
      })
      .Case([&](AllReduceOp reduce) {
        os << "  {\n"
           << accumulation(reduce.getAccumulator(), reduce.getMicroStep(),
                           reduce.getAccumulationSteps())
           << "    allReduce(ctx, " << node << ", CollectiveReduction::"
           << (reduce.getReduction() == "sum"   ? "Sum"
               : reduce.getReduction() == "max" ? "Max"
                                                : "Average")
           << ", " << ref(reduce.getInput()) << ", " << ref(reduce.getResult())
           << (reduce.getMicroStep() ? ", &accumulation" : "") << ");\n  }\n";
        return success();
      })
      .Case([&](ReduceScatterOp scatter) {
        os << "  {\n"
           << accumulation(scatter.getAccumulator(), scatter.getMicroStep(),
                           scatter.getAccumulationSteps())
           << "    reduceScatter(ctx, " << node << ", CollectiveReduction::"
           << (scatter.getReduction() == "sum" ? "Sum" : "Average") << ", "
           << scatter.getRanks() << ", " << ref(scatter.getInput()) << ", "
           << ref(scatter.getResult())
           << (scatter.getMicroStep() ? ", &accumulation" : "") << ");\n  }\n";
        return success();
      })
      .Case([&](WaitCollectivesOp wait) -> LogicalResult {
        int64_t bucket = wait.getBucketAttr().getInt();
        if (!issuedBuckets.contains(bucket))
          return error(op) << "waits for bucket " << bucket
                           << ", which no collective before it starts";
        os << "  waitCollectives(ctx, " << node << ", " << bucket << ");\n";
        return success();
      })
      .Case([&](GatherParameterOp gather) {
        os << "  gatherParameter(ctx, " << node << ", " << gather.getRanks()
           << ", " << ref(gather.getShard()) << ", " << ref(gather.getResult())
           << ");\n";
        return success();
      })
      .Case([&](AllGatherOp gather) {
        os << "  {\n"
           << accumulation(Value(), gather.getMicroStep(),
                           gather.getAccumulationSteps())
           << "    allGather(ctx, " << node << ", " << gather.getRanks() << ", "
           << ref(gather.getParam())
           << (gather.getMicroStep() ? ", &accumulation" : "") << ");\n  }\n";
        return success();
      })
      .Default([&](Operation *) {
        return error(op) << "has no runtime kernel yet";
      });
}

LogicalResult ProgramEmitter::emitBucketBoundary(Operation *op) {
  std::optional<int64_t> bucket;
  auto attr = op->getAttrOfType<IntegerAttr>("bucket");
  if (attr && !isa<WaitCollectivesOp>(op)) {
    if (!isa<AllReduceOp, ReduceScatterOp>(op))
      return error(op) << "has a bucket but is not an all_reduce or "
                          "reduce_scatter";
    bucket = attr.getInt();
  }
  if (bucket == openBucket)
    return success();
  // A bucket's collectives are issued together: one group on the
  // communication stream (memopt-bucket-collectives made them contiguous).
  if (openBucket)
    os << "  endCollectives(ctx, " << *openBucket << ");\n";
  openBucket = bucket;
  if (!bucket)
    return success();
  if (!issuedBuckets.insert(*bucket).second)
    return error(op) << "is in bucket " << *bucket
                     << ", whose collectives were issued already (a "
                        "bucket's collectives must be contiguous)";
  os << "  beginCollectives(ctx, " << *bucket << ");\n";
  return success();
}

LogicalResult ProgramEmitter::emitShardedUpdate(
    Operation *op, Value param, int64_t shards,
    const std::function<void(const std::function<std::string(Value)> &,
                             const std::string &)> &emitCall) {
  auto paramType = cast<RankedTensorType>(param.getType());
  if (!paramType.getElementType().isF32())
    return error(op) << "shards a non-f32 parameter";
  int64_t elements = paramType.getNumElements();
  int64_t chunk = elements / shards, tail = elements % shards;
  // The rank's chunk [rank * F, (rank + 1) * F) of the parameter is element
  // [0, F) of every shard; the tail [N * F, E) is shard element [F, F + T).
  os << "  {\n    const int64_t rank = communicatorRank(ctx);\n    (void)rank;"
        "\n";
  if (chunk > 0)
    emitCall([&](Value value) { return elementView(value, "0", chunk); },
             elementView(param, "rank * " + std::to_string(chunk), chunk));
  if (tail > 0)
    emitCall(
        [&](Value value) {
          return elementView(value, std::to_string(chunk), tail);
        },
        elementView(param, std::to_string(shards * chunk), tail));
  os << "  }\n";
  return success();
}

LogicalResult ProgramEmitter::emitReturn(func::ReturnOp returnOp) {
  for (auto [index, value] : llvm::enumerate(returnOp.getOperands())) {
    const Storage &storage = liveness.getStorage(value);
    if (storage.kind == StorageKind::Output &&
        storage.ioIndex == int64_t(index))
      continue;
    // The value lives in another output, an input, a weight or the arena
    // (a returned value shares its storage): copy it into its own buffer.
    auto type = cast<RankedTensorType>(value.getType());
    os << "  copy(ctx, " << cppString(("output #" + Twine(index)).str()) << ", "
       << ref(value) << ", ref(outputs[" << index << "], "
       << *getDTypeName(type.getElementType()) << ", "
       << shapeList(type.getShape()) << "));\n";
  }
  return success();
}

FailureOr<EmittedProgram> ProgramEmitter::run() {
  if (auto precision = function->getAttrOfType<StringAttr>("memopt.precision"))
    allowTf32 = precision.getValue() == "tf32";
  if (failed(checkPlanned()) || failed(emitTables()) ||
      failed(collectWeights()) || failed(collectHostWeights()))
    return failure();
  os << "  uint8_t *W = const_cast<uint8_t *>(weights);\n"
     << "  (void)W;\n  (void)arena;\n  (void)inputs;\n";
  if (hostStateSize > 0)
    os << "  uint8_t *H = hostState(ctx);\n";
  for (BlockArgument argument : function.getArguments())
    if (failed(declare(argument, ("static_cast<uint8_t *>(inputs[" +
                                  Twine(argument.getArgNumber()) + "])")
                                     .str())))
      return failure();
  for (Operation &op : function.getBody().front()) {
    if (isWeightRegionOp(&op) && isHostPlaced(op.getResult(0))) {
      if (failed(declare(op.getResult(0),
                         ("H + " + Twine(op.getAttrOfType<IntegerAttr>(
                                               "memopt.host_offset")
                                             .getInt()))
                             .str())))
        return failure();
      continue;
    }
    if (isWeightRegionOp(&op)) {
      if (failed(declare(op.getResult(0),
                         ("W + " + Twine(op.getAttrOfType<IntegerAttr>(
                                               "memopt.weight_offset")
                                             .getInt()))
                             .str())))
        return failure();
      continue;
    }
    if (failed(emitBucketBoundary(&op)))
      return failure();
    if (auto returnOp = dyn_cast<func::ReturnOp>(op)) {
      // The step ends when every offloaded update's master is back on the
      // device (the next step's forward reads it).
      if (offloadSites > 0)
        os << "  offloadFinish(ctx);\n";
      if (failed(emitReturn(returnOp)))
        return failure();
      continue;
    }
    if (failed(emitOp(&op)))
      return failure();
    ++nextOp;
  }

  // Data parallel: the ranks, the sharding and which weights are shards of
  // which parameter (the driver gathers them for --save-state).
  int64_t dataParallelSize = 0, shardMode = 0;
  if (auto attr =
          function->getAttrOfType<DictionaryAttr>("memopt.data_parallel")) {
    auto ranks = attr.getAs<IntegerAttr>("ranks");
    auto shard = attr.getAs<StringAttr>("shard");
    if (!ranks || !shard || ranks.getInt() < 1) {
      function.emitError("memopt.data_parallel needs ranks >= 1 and a shard "
                         "mode");
      return failure();
    }
    dataParallelSize = ranks.getInt();
    shardMode = shard.getValue() == "optimizer"    ? 1
                : shard.getValue() == "gradients"  ? 2
                : shard.getValue() == "parameters" ? 3
                                                   : 0;
  }
  std::string shardOfTable;
  {
    SmallVector<int64_t> shardOf(weightIndex.size(), -1);
    bool any = false;
    function.walk([&](Operation *op) {
      Value param;
      SmallVector<Value> sharded;
      if (auto sgd = dyn_cast<SGDUpdateOp>(op); sgd && sgd.getShards() > 1) {
        param = sgd.getParam();
        sharded = {sgd.getMomentumBuffer(), sgd.getAccumulator()};
      } else if (auto adamw = dyn_cast<AdamWUpdateOp>(op);
                 adamw && adamw.getShards() > 1) {
        param = adamw.getParam();
        sharded = {adamw.getExpAvg(), adamw.getExpAvgSq(),
                   adamw.getAccumulator()};
      }
      // ZeRO-3: a plain update of a sharded parameter, itself a shard.
      if (!param) {
        if (auto sgd = dyn_cast<SGDUpdateOp>(op)) {
          param = sgd.getParam();
          sharded = {sgd.getMomentumBuffer(), sgd.getAccumulator(), param};
        } else if (auto adamw = dyn_cast<AdamWUpdateOp>(op)) {
          param = adamw.getParam();
          sharded = {adamw.getExpAvg(), adamw.getExpAvgSq(),
                     adamw.getAccumulator(), param};
        }
        auto variable = param ? param.getDefiningOp<VariableOp>() : nullptr;
        if (!variable || !variable->hasAttr("memopt.shards"))
          return;
      }
      for (Value value : sharded)
        if (value && value.getDefiningOp())
          if (auto it = weightIndex.find(value.getDefiningOp());
              it != weightIndex.end()) {
            shardOf[it->second] = weightIndex.lookup(param.getDefiningOp());
            any = true;
          }
    });
    if (any) {
      llvm::raw_string_ostream table(shardOfTable);
      table << "const int32_t kShardOf[] = {";
      llvm::interleaveComma(shardOf, table);
      table << "};\n";
    }
  }
  tables += shardOfTable;
  tables += wholeWeightsTable;
  // ZeRO-3: one region per rank in the weight file.
  if (!wholeWeightsTable.empty() && dataParallelSize > 1) {
    std::vector<WeightImageEntry> perRank;
    for (int64_t r = 0; r < dataParallelSize; ++r)
      for (WeightImageEntry entry : weights.entries) {
        entry.offset += r * weightsSize;
        entry.shardRank = r;
        perRank.push_back(entry);
      }
    weights.entries = std::move(perRank);
    weights.size = dataParallelSize * weightsSize;
  }

  std::string programName = options.programName.empty()
                                ? function.getName().str()
                                : options.programName;
  auto hostPoolAttr =
      function->getAttrOfType<IntegerAttr>("memopt.host_pool_size");
  int64_t hostPoolBytes = hostPoolAttr ? hostPoolAttr.getInt() : 0;
  EmittedProgram program;
  llvm::raw_string_ostream out(program.source);
  out << "// Generated by memopt-compile from @" << function.getName()
      << ". Do not edit.\n"
      << "// Arena: " << arenaSize << " bytes; weight region: " << weightsSize
      << " bytes" << (hostStateSize ? "; host state region: " : "")
      << (hostStateSize ? std::to_string(hostStateSize) + " bytes" : "")
      << ".\n"
      << "#include \"memopt/Runtime/Program.h\"\n";
  if (!kernels.empty())
    out << "#ifdef __CUDACC__\n#include \"memopt/Runtime/FusedKernel.cuh\"\n"
        << "#endif\n";
  // Buckets of collectives (beginCollectives, ...; Communicator.h).
  if (!issuedBuckets.empty())
    out << "#include \"memopt/Runtime/Communicator.h\"\n";
  out << "\n#include <cmath>\n#include <initializer_list>\n\n"
      << "using namespace memopt::rt;\n\nnamespace {\n\n"
      << tables << "\n";
  if (!kernels.empty())
    out << "#ifdef __CUDACC__\n" << kernels << "#endif\n\n";
  out << "TensorRef ref(void *data, DType dtype,\n"
      << "              std::initializer_list<int64_t> shape) {\n"
      << "  TensorRef t;\n  t.data = data;\n  t.dtype = dtype;\n"
      << "  t.rank = int(shape.size());\n  int i = 0;\n"
      << "  for (int64_t d : shape)\n    t.shape[i++] = d;\n  return t;\n}\n\n"
      << "void run(Context &ctx, uint8_t *arena, const uint8_t *weights,\n"
      << "         void *const *inputs, void *const *outputs) {\n"
      << body << "}\n\n"
      << "const ProgramInfo kProgram = {kProgramAbiVersion, "
      << cppString(programName) << ", " << arenaSize << ", " << weightsSize
      << ", " << function.getNumArguments() << ", " << function.getNumResults()
      << ", "
      << llvm::count_if(function.getBody().front(),
                        [](Operation &op) {
                          return isWeightRegionOp(&op) &&
                                 !isHostPlaced(op.getResult(0));
                        })
      << ", kInputs, kOutputs, kWeights, run, "
      << (llvm::any_of(function.getBody().front(),
                       [](Operation &op) { return isa<VariableOp>(op); })
              ? 1
              : 0)
      << ", " << accumulationSteps() << ", " << dataParallelSize << ", "
      << shardMode << ", " << (shardOfTable.empty() ? "nullptr" : "kShardOf")
      << ", " << hostPoolBytes << ", " << hostStateSize << ", "
      << hostWeightCount << ", "
      << (hostWeightCount ? "kHostWeights, kMasterOf" : "nullptr, nullptr")
      << ", " << (wholeWeightsTable.empty() ? "nullptr" : "kWholeWeights")
      << "};\n\n"
      << "} // namespace\n\n"
      << "extern \"C\" const ProgramInfo *memopt_program(void) {\n"
      << "  return &kProgram;\n}\n";
  weights.fingerprint = weightsFingerprint.finish(weightsSize);
  program.weights = std::move(weights);
  return program;
}

} // namespace

FailureOr<EmittedProgram>
mlir::memopt::emitProgram(func::FuncOp function,
                          const EmitProgramOptions &options) {
  ProgramEmitter emitter(function, options);
  return emitter.run();
}

func::FuncOp mlir::memopt::getProgramFunction(ModuleOp module) {
  SmallVector<func::FuncOp> functions;
  for (auto function : module.getOps<func::FuncOp>())
    if (!function.isExternal())
      functions.push_back(function);
  if (functions.size() == 1)
    return functions.front();
  for (func::FuncOp function : functions)
    if (function.getName() == "main")
      return function;
  module.emitError("expected one function to lower (or one named @main), "
                   "found ")
      << functions.size();
  return nullptr;
}

LogicalResult mlir::memopt::assignNaiveOffsets(func::FuncOp function,
                                               int64_t alignment) {
  if (!function->hasAttr("memopt.arena_size"))
    return function.emitError("assignNaiveOffsets expects a planned function");
  // Reuse-free twin: outputs go back to the caller's buffers.
  function->removeAttr("memopt.output_offsets");
  function->removeAttr(kOutputsInArenaAttrName);
  BufferLiveness liveness(function);
  auto alignUp = [&](int64_t value) {
    return (value + alignment - 1) / alignment * alignment;
  };
  int64_t arenaSize = 0;
  llvm::DenseMap<unsigned, int64_t> storageOffset;
  for (const Storage &storage : liveness.getStorages()) {
    if (storage.kind != StorageKind::Arena || storage.values.empty())
      continue;
    storageOffset[storage.id] = arenaSize;
    arenaSize = alignUp(arenaSize + storage.size);
  }
  Builder builder(function.getContext());
  for (Operation &op : function.getBody().front().without_terminator()) {
    if (isWeightRegionOp(&op))
      continue;
    SmallVector<int64_t> offsets;
    for (Value result : op.getResults()) {
      const Storage &storage = liveness.getStorage(result);
      offsets.push_back(storage.kind == StorageKind::Arena
                            ? storageOffset.lookup(storage.id)
                            : -1);
    }
    op.setAttr("memopt.offsets", builder.getDenseI64ArrayAttr(offsets));
    if (auto size = op.getAttrOfType<IntegerAttr>("memopt.workspace_size")) {
      op.setAttr("memopt.workspace_offset",
                 builder.getI64IntegerAttr(arenaSize));
      arenaSize = alignUp(arenaSize + size.getInt());
    }
  }
  function->setAttr("memopt.arena_size", builder.getI64IntegerAttr(arenaSize));
  return success();
}
