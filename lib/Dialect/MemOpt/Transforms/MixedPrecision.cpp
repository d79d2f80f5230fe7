//===- MixedPrecision.cpp - f16 / bf16 where it is safe -------------------===//
//
// Inference mixed precision in one forward walk over the function. Each op
// asks PrecisionOpInterface how it may run (policies and the reason for each
// op: lib/Dialect/MemOpt/IR/PrecisionPolicies.cpp); ops without the interface
// follow type promotion.
//
// Taken from:
// - PyTorch autocast: the three categories (lower_precision_fp ops, fp32 ops,
//   and every other op running in the widest type of its inputs), so an
//   overflow-prone result (exp, pow, sum) keeps its consumers in f32 instead
//   of being cast down at once.
// - onnxconverter-common's float16 converter (and onnxruntime's copy of it):
//   graph inputs and outputs keep f32 (`keep_io_types`), initializers are
//   converted once at compile time, values beyond the f16 range are clamped
//   and tiny non-zero values are kept non-zero; a block list of ops stays f32.
//   Here a weight's conversion is recorded, not applied (#memopt.converted,
//   MemOptAttributes.h, as IREE's lazily materialized constants): the
//   weight-file writer converts it window by window, so the compiler never
//   holds a converted copy of the model.
// - TensorRT's precision constraints: a per-layer precision with reformat
//   (cast) layers only where two precisions meet.
// Further than those:
// - Values whose type is free to change (constants, graph inputs, integer
//   casts, bounded results computed in f32) never force a consumer into f32:
//   autocast promotes `x_f16 + const_f32` to f32, memopt narrows the constant.
// - An f32 island ends at an op whose result is bounded (tanh, softmax,
//   layer_normalization, ...), not only at the next matmul.
// - A matmul whose result only leaves the function stores its f32 result
//   directly (PrecisionOpInterface::acceptsF32Result): the output cast is
//   folded into the GEMM epilogue, as TensorRT does when it fuses output
//   reformatting, so a model's largest tensor (a language model's logits)
//   has no low copy in the arena.
// - `output-precision=low`: outputs computed in the low type are returned
//   in it, as autocast returns them and as onnxconverter's
//   `keep_io_types=False` and TensorRT (which keeps the network's output
//   types unless told) allow; unlike those, an output computed in f32 (an
//   f32 island) stays f32 instead of being cast down, so it loses nothing.
// - A value gets at most one cast per type, placed before its first user,
//   and every user asks for a version of the value itself (never of a cast),
//   so the pass creates no f16 -> f32 -> f16 round trips.
//
// Training (`training=true`, before memopt-autodiff): PyTorch AMP's shape,
// autocast on the forward with the backward inheriting its types, so every
// gradient rule builds its backward in the types of the forward it reads.
// Parameters stay f32 masters (Apex O2 / DeepSpeed keep an f32 master copy
// next to f16 model weights; here the low copy is an arena buffer, see
// memopt-weight-casts). Further than autocast: normalization scale and bias
// are read in f32 by the kernels, so they get no low copy and an f32
// gradient; an embedding gather reads the f32 table and casts the gathered
// rows (autocast leaves embedding in f32 too, but then runs the following
// elementwise ops in f32); an op whose gradient has no low-precision kernel
// falls back to f32 and the pass says so, where autocast would fail or cast
// silently.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/MemoryReport.h"
#include "memopt/Dialect/MemOpt/IR/MemOptAttributes.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/IR/WeightBlobs.h"
#include "memopt/Dialect/MemOpt/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

namespace mlir::memopt {
#define GEN_PASS_DEF_MEMOPTMIXEDPRECISION
#include "memopt/Dialect/MemOpt/Transforms/Passes.h.inc"
} // namespace mlir::memopt

using namespace mlir;
using namespace mlir::memopt;

namespace {

//===----------------------------------------------------------------------===//
// f32 -> f16 / bf16 conversion of constants
//===----------------------------------------------------------------------===//

/// Converts `count` f32 values at `source` (any alignment) into `target`.
void convertFloats(const char *source, int64_t count, bool toHalf,
                   uint16_t *target, ConversionCounts &counts) {
  for (int64_t i = 0; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, source + i * 4, 4);
    target[i] = toHalf ? convertF32ToHalfBits(bits, counts)
                       : convertF32ToBFloat16Bits(bits, counts);
  }
}

/// The f32 constant's value in the low type, or null when it has no readable
/// data (an elided resource).
ElementsAttr convertConstant(ElementsAttr value, RankedTensorType type,
                             ConversionCounts &counts) {
  bool toHalf = type.getElementType().isF16();
  int64_t count = type.getNumElements();
  if (auto dense = dyn_cast<DenseElementsAttr>(value)) {
    ArrayRef<char> raw = dense.getRawData();
    int64_t stored = dense.isSplat() ? 1 : count;
    if (int64_t(raw.size()) != stored * 4)
      return {};
    SmallVector<uint16_t> bits(stored);
    ConversionCounts storedCounts;
    convertFloats(raw.data(), stored, toHalf, bits.data(), storedCounts);
    // A splat stands for every element: count its changes once per element.
    int64_t repeat = count / stored;
    counts.clamped += storedCounts.clamped * repeat;
    counts.raised += storedCounts.raised * repeat;
    if (dense.isSplat()) {
      auto floatType = cast<FloatType>(type.getElementType());
      return DenseElementsAttr::get(
          type, APFloat(floatType.getFloatSemantics(), APInt(16, bits[0])));
    }
    return DenseElementsAttr::getFromRawBuffer(
        type, ArrayRef<char>(reinterpret_cast<const char *>(bits.data()),
                             bits.size() * sizeof(uint16_t)));
  }
  // A weight (a resource, or one a pass already permuted) is converted when
  // it is read (#memopt.converted, MemOptAttributes.h): no copy is made
  // here. Its values are scanned once, through a bounded window, for what
  // the conversion will clamp or raise; the pages read are given back.
  DenseResourceElementsAttr source = dyn_cast<DenseResourceElementsAttr>(value);
  ArrayRef<int64_t> permutation;
  if (auto converted = dyn_cast<ConvertedWeightAttr>(value)) {
    if (!converted.getType().getElementType().isF32())
      return {};
    source = converted.getSource();
    permutation = converted.getPermutation();
  }
  if (!source ||
      int64_t(getWeightData(source).size()) != count * int64_t(sizeof(float)))
    return {};
  auto result =
      ConvertedWeightAttr::get(type.getContext(), type, source, permutation);
  // The counts do not depend on the order: the source is read as stored.
  ArrayRef<char> raw = getWeightData(source);
  WeightConversion cast({count}, {}, sizeof(float),
                        toHalf ? ElementCast::F32ToF16
                               : ElementCast::F32ToBF16);
  constexpr int64_t kWindowElements = int64_t(1) << 20;
  SmallVector<char> window(kWindowElements * sizeof(uint16_t));
  for (int64_t first = 0; first < count; first += kWindowElements) {
    int64_t now = std::min(kWindowElements, count - first);
    cast.convert(raw, first, now, window.data(), counts);
    releaseWeightPages(raw.slice(first * sizeof(float), now * sizeof(float)));
  }
  return result;
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

/// How a value that was f32 before the pass constrains its consumers.
enum class ValueKind {
  /// Holds the low type.
  Low,
  /// f32 that must stay f32: consumers that promote run in f32.
  Strict,
  /// f32 whose type is free: a consumer running low gets a cast (or, for a
  /// constant, a converted copy). Constants, function inputs, results of
  /// ops left unchanged and bounded results computed in f32.
  Flexible,
};

class MixedPrecision {
public:
  MixedPrecision(func::FuncOp function, FloatType lowType, bool training,
                 bool lowOutputs)
      : function(function), lowType(lowType),
        f32Type(Float32Type::get(function.getContext())), training(training),
        lowOutputs(lowOutputs) {}

  LogicalResult run();

  int64_t numCasts = 0;
  /// Low results given their f32 output type directly (acceptsF32Result).
  int64_t numWidened = 0;
  /// output-precision=low: results returned in the low type.
  int64_t numLowOutputs = 0;
  int64_t numConvertedConstants = 0;
  ConversionCounts counts;
  /// Training: ops run in f32 because their gradient has no low form, and
  /// parameter operands read in f32 by an op that runs low.
  int64_t numFallbacks = 0;
  int64_t numF32Parameters = 0;

private:
  StringRef lowTypeName() const { return lowType.isF16() ? "f16" : "bf16"; }
  void processOp(Operation *op);
  /// Gives `value`, a low result read only by `returnOp` (directly or through
  /// aliasing views), the f32 type when its producer can store its f32
  /// accumulator (PrecisionOpInterface::acceptsF32Result).
  bool storeInF32(Value value, Operation *returnOp);
  /// `value` (f32 before the pass) as a tensor of `elementType`, inserting a
  /// cast before `user` or converting a constant when needed.
  Value getVersion(Value value, Type elementType, Operation *user);
  Value convertConstantOp(ConstantOp constant, RankedTensorType type);

  /// A parameter variable (training): f32 master state.
  bool isParameter(Value value) const {
    auto variable = value.getDefiningOp<VariableOp>();
    return training && variable && variable.getRole() == "parameter";
  }
  /// Training: a Promote op that only moves data out of parameters into a
  /// smaller result (an embedding gather, a slice of a table) reads them in
  /// f32; casting the whole table would cost more than casting the result.
  bool readsParametersInF32(Operation *op,
                            ArrayRef<OpOperand *> floatOperands) const;

  func::FuncOp function;
  FloatType lowType;
  FloatType f32Type;
  bool training;
  /// output-precision=low (inference only): results computed in the low
  /// type are returned in it.
  bool lowOutputs;
  /// Every value that was f32 before the pass.
  DenseMap<Value, ValueKind> kinds;
  DenseMap<std::pair<Value, Type>, Value> versions;
  /// Constants that received a converted copy and integer casts that got a
  /// second target type; erased when left unused.
  SmallVector<ConstantOp> convertedConstants;
  SmallVector<CastOp> replacedCasts;
  bool failed = false;
};

bool isF32Tensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.getElementType().isF32();
}

/// The cast that defines `value` from an integer or bool tensor, if any.
CastOp getIntegerCast(Value value) {
  auto cast = value.getDefiningOp<CastOp>();
  if (!cast || !isa<IntegerType>(cast.getInput().getType().getElementType()))
    return {};
  return cast;
}

Value MixedPrecision::convertConstantOp(ConstantOp constant,
                                        RankedTensorType type) {
  ConversionCounts local;
  ElementsAttr converted = convertConstant(constant.getValue(), type, local);
  if (!converted) {
    constant.emitError("'")
        << getValueName(constant.getResult()) << "' cannot be converted to "
        << lowTypeName() << ": its value holds no readable f32 data";
    failed = true;
    return {};
  }
  if (local.clamped) {
    std::string largest;
    llvm::raw_string_ostream(largest) << llvm::format(
        "%g",
        APFloat::getLargest(lowType.getFloatSemantics()).convertToDouble());
    constant.emitWarning("'")
        << getValueName(constant.getResult()) << "': " << local.clamped
        << " value(s) beyond the " << lowTypeName() << " range clamped to +-"
        << largest;
  }
  counts.clamped += local.clamped;
  counts.raised += local.raised;
  OpBuilder builder(constant->getContext());
  builder.setInsertionPointAfter(constant);
  auto result = ConstantOp::create(builder, constant.getLoc(), converted);
  if (constant->getAttrDictionary().size() > 1)
    for (NamedAttribute attribute : constant->getAttrs())
      if (attribute.getName() != constant.getValueAttrName())
        result->setAttr(attribute.getName(), attribute.getValue());
  ++numConvertedConstants;
  convertedConstants.push_back(constant);
  return result;
}

bool MixedPrecision::storeInF32(Value value, Operation *returnOp) {
  // Through aliasing views (a reshape of the product is common: a matmul
  // over [B, S, K] runs as a 2-D gemm between views), each used only by the
  // next one, to the producer.
  SmallVector<Value> chain;
  Operation *user = returnOp;
  while (true) {
    if (!llvm::all_of(value.getUsers(),
                      [&](Operation *other) { return other == user; }))
      return false;
    chain.push_back(value);
    auto view = value.getDefiningOp<BufferBehaviorOpInterface>();
    if (!view || !view.isAliasingView() || view->getNumOperands() != 1 ||
        view->getNumResults() != 1)
      break;
    user = view;
    value = view->getOperand(0);
  }
  auto producer = value.getDefiningOp<PrecisionOpInterface>();
  if (!producer || producer->getNumResults() != 1 ||
      !producer.acceptsF32Result())
    return false;
  for (Value link : chain) {
    link.setType(cast<RankedTensorType>(link.getType()).clone(f32Type));
    kinds[link] = ValueKind::Strict;
  }
  ++numWidened;
  return true;
}

Value MixedPrecision::getVersion(Value value, Type elementType,
                                 Operation *user) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getElementType() == elementType)
    return value;
  auto key = std::make_pair(value, elementType);
  if (auto it = versions.find(key); it != versions.end())
    return it->second;
  RankedTensorType targetType = type.clone(elementType);
  Value version;
  if (auto constant = value.getDefiningOp<ConstantOp>()) {
    version = convertConstantOp(constant, targetType);
    if (!version)
      return value;
  } else if (CastOp fromInteger = getIntegerCast(value)) {
    // Cast the integer (or bool) straight to the type asked for: one
    // rounding instead of two, and no f32 tensor.
    OpBuilder builder(fromInteger->getContext());
    builder.setInsertionPointAfter(fromInteger);
    version = CastOp::create(builder, fromInteger.getLoc(), targetType,
                             fromInteger.getInput());
    replacedCasts.push_back(fromInteger);
  } else {
    OpBuilder builder(user);
    std::string name = getValueName(value) + ".to_";
    llvm::raw_string_ostream(name) << elementType;
    Location loc = NameLoc::get(builder.getStringAttr(name), value.getLoc());
    version = CastOp::create(builder, loc, targetType, value);
    ++numCasts;
  }
  versions[key] = version;
  return version;
}

bool MixedPrecision::readsParametersInF32(
    Operation *op, ArrayRef<OpOperand *> floatOperands) const {
  if (!training || floatOperands.empty() || op->getNumResults() != 1 ||
      !isF32Tensor(op->getResult(0).getType()))
    return false;
  int64_t operandElements = 0;
  for (OpOperand *operand : floatOperands) {
    if (!isParameter(operand->get()))
      return false;
    operandElements +=
        cast<ShapedType>(operand->get().getType()).getNumElements();
  }
  return cast<ShapedType>(op->getResult(0).getType()).getNumElements() <
         operandElements;
}

void MixedPrecision::processOp(Operation *op) {
  if (auto constant = dyn_cast<ConstantOp>(op)) {
    if (isF32Tensor(constant.getType()))
      kinds[constant.getResult()] = ValueKind::Flexible;
    return;
  }
  // f32 operands (as they were before the pass) and whether another float
  // type takes part, in which case the op is left as it is.
  SmallVector<OpOperand *> floatOperands;
  bool otherFloat = false;
  for (OpOperand &operand : op->getOpOperands()) {
    if (kinds.count(operand.get()))
      floatOperands.push_back(&operand);
    else if (auto tensor = dyn_cast<RankedTensorType>(operand.get().getType());
             tensor && isa<FloatType>(tensor.getElementType()))
      otherFloat = true;
  }

  if (isa<func::ReturnOp>(op)) {
    // keep_io_types: the function's results keep their f32 type. A low
    // result that only leaves the function, of an op that can store its f32
    // accumulator, becomes f32 itself (no low copy in the arena, no cast).
    // Training: the loss reads the low result itself (memopt-append-loss).
    // output-precision=low: a low result is returned as it is (run() gives
    // the function its type); an f32 one stays f32.
    for (OpOperand *operand : floatOperands) {
      Value value = operand->get();
      if (lowOutputs && kinds.lookup(value) == ValueKind::Low) {
        ++numLowOutputs;
        continue;
      }
      if (!training && kinds.lookup(value) == ValueKind::Low &&
          storeInF32(value, op))
        continue;
      operand->set(getVersion(value, f32Type, op));
    }
    return;
  }

  PrecisionPolicy policy = PrecisionPolicy::Unchanged;
  auto precision = dyn_cast<PrecisionOpInterface>(op);
  if (op->getDialect() ==
      function->getContext()->getLoadedDialect<MemOptDialect>()) {
    policy = PrecisionPolicy::Promote;
    if (precision)
      policy = precision.getPrecisionPolicy();
  }
  if (otherFloat && policy != PrecisionPolicy::AnyOperandType)
    policy = PrecisionPolicy::Unchanged;

  // f32 values an op reads in f32 (normalization scale and bias) stay out of
  // the decision and keep their type: a parameter gets no low copy (and an
  // f32 gradient). Constants are still converted (the weight bytes halve).
  if (precision) {
    llvm::erase_if(floatOperands, [&](OpOperand *operand) {
      Value value = operand->get();
      if (kinds.lookup(value) == ValueKind::Low ||
          value.getDefiningOp<ConstantOp>() ||
          !precision.acceptsF32Operand(operand->getOperandNumber()))
        return false;
      numF32Parameters += isParameter(value);
      return true;
    });
  }

  Type runType;
  switch (policy) {
  case PrecisionPolicy::LowPrecision:
    runType = lowType;
    break;
  case PrecisionPolicy::Float32:
    runType = f32Type;
    break;
  case PrecisionPolicy::Promote:
  case PrecisionPolicy::BoundedResult:
    if (floatOperands.empty())
      break;
    runType = lowType;
    for (OpOperand *operand : floatOperands)
      if (kinds.lookup(operand->get()) == ValueKind::Strict)
        runType = f32Type;
    if (policy == PrecisionPolicy::Promote &&
        readsParametersInF32(op, floatOperands)) {
      // Its f32 result is free: consumers that run low cast it.
      for (Value result : op->getResults())
        kinds[result] = ValueKind::Flexible;
      return;
    }
    break;
  case PrecisionPolicy::AnyOperandType:
    break;
  case PrecisionPolicy::Unchanged:
    for (OpOperand *operand : floatOperands)
      operand->set(getVersion(operand->get(), f32Type, op));
    break;
  }

  if (!runType) {
    // Results keep their types; f32 ones may still be narrowed by users.
    for (Value result : op->getResults())
      if (isF32Tensor(result.getType()))
        kinds[result] = ValueKind::Flexible;
    return;
  }
  // Training: an op whose gradient has no low-precision kernel runs in f32.
  // Its result is what the low op would have stored, so consumers may cast
  // it down (free), as after a bounded op.
  bool fallback = false;
  if (training && runType == lowType && precision &&
      !precision.hasLowPrecisionGradient()) {
    runType = f32Type;
    fallback = true;
    ++numFallbacks;
    op->emitWarning() << describeNode(op) << " runs in f32: its gradient has "
                      << "no " << lowTypeName() << " kernel";
  }
  for (OpOperand *operand : floatOperands)
    operand->set(getVersion(operand->get(), runType, op));
  ValueKind resultKind = ValueKind::Low;
  if (runType == f32Type)
    resultKind = policy == PrecisionPolicy::BoundedResult || fallback
                     ? ValueKind::Flexible
                     : ValueKind::Strict;
  for (auto [index, result] : llvm::enumerate(op->getResults())) {
    if (!isF32Tensor(result.getType()))
      continue;
    // Statistics a training normalization saves stay f32.
    if (precision && precision.hasF32Result(index)) {
      kinds[result] = ValueKind::Strict;
      continue;
    }
    result.setType(cast<RankedTensorType>(result.getType()).clone(runType));
    kinds[result] = resultKind;
  }
}

LogicalResult MixedPrecision::run() {
  if (!function.getBody().hasOneBlock())
    return function.emitError(
        "memopt-mixed-precision expects a single-block function");
  Block &block = function.getBody().front();
  for (BlockArgument argument : block.getArguments())
    if (isF32Tensor(argument.getType()))
      kinds[argument] = ValueKind::Flexible;
  // Casts are inserted before the op being processed and converted
  // constants after their original, so neither is visited.
  for (Operation &op : llvm::make_early_inc_range(block)) {
    processOp(&op);
    if (failed)
      return failure();
  }
  for (ConstantOp constant : convertedConstants)
    if (constant->use_empty())
      constant->erase();
  for (CastOp cast : replacedCasts)
    if (cast->use_empty())
      cast->erase();
  if (numLowOutputs)
    function.setFunctionType(
        FunctionType::get(function.getContext(), function.getArgumentTypes(),
                          block.getTerminator()->getOperandTypes()));
  return success();
}

int64_t getWeightBytes(func::FuncOp function) {
  int64_t bytes = 0;
  function.walk([&](ConstantOp constant) {
    bytes += getTensorBytes(constant.getType());
  });
  return bytes;
}

struct MemOptMixedPrecisionPass
    : public mlir::memopt::impl::MemOptMixedPrecisionBase<
          MemOptMixedPrecisionPass> {
  using MemOptMixedPrecisionBase::MemOptMixedPrecisionBase;

  /// TF32 changes no type: every tensor stays f32 and the lowering lets the
  /// f32 contractions (matmul, gemm, conv, conv_transpose, the conv filter
  /// gradient, attention's library calls) multiply in TF32 on tensor cores,
  /// as PyTorch's `allow_tf32` and TensorRT's default do. So it holds for
  /// training programs too.
  void markTf32(func::FuncOp function) {
    function->setAttr("memopt.precision",
                      StringAttr::get(function.getContext(), "tf32"));
    if (!report)
      return;
    int64_t contractions = 0;
    function.walk([&](Operation *op) {
      if (isa<MatMulOp, GemmOp, ConvOp, ConvTransposeOp, ConvBackwardFilterOp,
              AttentionOp>(op) &&
          cast<ShapedType>(op->getOperand(0).getType())
              .getElementType()
              .isF32())
        ++contractions;
    });
    llvm::outs() << "memopt-mixed-precision @" << function.getSymName()
                 << ": tf32: " << contractions
                 << " f32 contractions may use TF32, every tensor stays f32\n";
  }

  void runOnOperation() override {
    func::FuncOp function = getOperation();
    MLIRContext *context = &getContext();
    if (precision == "tf32")
      return markTf32(function);
    FloatType lowType;
    if (precision == "f16")
      lowType = Float16Type::get(context);
    else if (precision == "bf16")
      lowType = BFloat16Type::get(context);
    if (!lowType) {
      function.emitError("memopt-mixed-precision: precision '")
          << precision << "' is not f16, bf16 or tf32";
      return signalPassFailure();
    }
    if (training) {
      // As memopt-autodiff does before differentiating: GPT-2's tanh GELU
      // as eight ops would be an f32 island (pow) differentiated op by op.
      RewritePatternSet patterns(context);
      populateGeluTanhFusionPatterns(patterns);
      GreedyRewriteConfig config;
      config.enableFolding(false);
      if (failed(applyPatternsGreedily(function, std::move(patterns), config)))
        return signalPassFailure();
    }
    int64_t weightsBefore = report ? getWeightBytes(function) : 0;
    if (outputPrecision != "f32" && outputPrecision != "low") {
      function.emitError("memopt-mixed-precision: output-precision '")
          << outputPrecision << "' is not f32 or low";
      return signalPassFailure();
    }
    // Training: the results are what the loss reads, and the step returns
    // only its f32 loss (memopt-append-loss), so the option changes nothing.
    MixedPrecision mixed(function, lowType, training,
                         outputPrecision == "low" && !training);
    if (failed(mixed.run()))
      return signalPassFailure();
    function->setAttr("memopt.precision", StringAttr::get(context, precision));
    if (!report)
      return;
    int64_t lowOps = 0, f32Ops = 0;
    function.walk([&](Operation *op) {
      if (isa<ConstantOp, CastOp, VariableOp>(op) ||
          op->getDialect() !=
              function->getContext()->getLoadedDialect<MemOptDialect>())
        return;
      for (Type type : op->getResultTypes()) {
        Type element = cast<ShapedType>(type).getElementType();
        if (element == lowType || element.isF32()) {
          ++(element == lowType ? lowOps : f32Ops);
          return;
        }
      }
    });
    llvm::outs() << "memopt-mixed-precision @" << function.getSymName() << ": "
                 << precision << ": " << lowOps << " ops in " << precision
                 << ", " << f32Ops << " in f32, " << mixed.numCasts
                 << " casts, " << mixed.numWidened << " results stored in f32";
    if (outputPrecision == "low" && !training)
      llvm::outs() << ", " << mixed.numLowOutputs << " returned in "
                   << precision;
    llvm::outs() << "; weights " << weightsBefore << " -> "
                 << getWeightBytes(function) << " bytes ("
                 << mixed.numConvertedConstants << " constants converted, "
                 << mixed.counts.clamped << " values clamped, "
                 << mixed.counts.raised << " raised from zero)";
    if (training) {
      int64_t parameters = 0, castParameters = 0;
      function.walk([&](VariableOp variable) {
        if (variable.getRole() != "parameter")
          return;
        ++parameters;
        if (llvm::any_of(variable->getUsers(),
                         [](Operation *user) { return isa<CastOp>(user); }))
          ++castParameters;
      });
      llvm::outs() << "; training: " << parameters << " f32 master parameters, "
                   << castParameters << " read through a " << precision
                   << " copy, " << mixed.numF32Parameters
                   << " normalization parameter operands read in f32, "
                   << mixed.numFallbacks
                   << " ops in f32 for want of a low-precision gradient";
    }
    llvm::outs() << "\n";
  }
};
} // namespace
