//===- Training.cpp - from an inference graph to one training step --------===//
//
// Three passes turn an imported model into a training step that the rest of
// the pipeline (fusion, scheduling, bufferization, planning, lowering) plans
// like any other function:
//   memopt-make-trainable  float initializers -> memopt.variable parameters
//   memopt-append-loss     the loss, a labels / target argument, one result
//   memopt-autodiff        reverse-mode gradients + the optimizer updates
//
// Taken from: JAX's linearize-then-transpose split (the pass only walks the
// graph; every rule lives with its op, GradientOpInterface), PyTorch's
// derivatives.yaml (which forward tensors a backward reads), onnxruntime-
// training's gradient graph builder (the whole step as one static graph) and
// its optimizer semantics, which follow torch.optim. Further than all three:
// the update of a parameter is emitted right where its gradient is complete,
// so the gradient is an ordinary short-lived arena buffer; PyTorch and
// onnxruntime-training hold every gradient until the optimizer runs.
//
// Dynamic loss scaling (loss-scale=dynamic, f16 training) is PyTorch
// GradScaler's (scale 2^16, growth 2 after 2000 clean steps, backoff 0.5;
// torch.amp.grad_scaler, aten's AmpKernels.cu) and Apex's / DeepSpeed's
// DynamicLossScaler, with every decision on the device: the seed is the
// scale, `memopt.found_inf` reduces all gradients to one flag
// (_amp_foreach_non_finite_check_and_unscale_ without the unscale), the
// update kernels unscale and skip as PyTorch's fused optimizers do with
// `grad_scale` / `found_inf`, and `memopt.update_loss_scale` is
// _amp_update_scale_. GradScaler.step syncs the host to read found_inf
// unless the optimizer is a fused one; DeepSpeed's has_overflow always does.
// A skip decision needs every gradient, so with scaling the updates wait for
// the check (LOMO, which fuses updates into the backward like memopt, runs
// a second backward instead); the gradients that wait are the f16 ones the
// backward produced (the kernels widen them), half of PyTorch's f32 .grad.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/IR/WeightBlobs.h"
#include "memopt/Dialect/MemOpt/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace mlir::memopt {
#define GEN_PASS_DEF_MEMOPTMAKETRAINABLE
#define GEN_PASS_DEF_MEMOPTAPPENDLOSS
#define GEN_PASS_DEF_MEMOPTAUTODIFF
#include "memopt/Dialect/MemOpt/Transforms/Passes.h.inc"
} // namespace mlir::memopt

using namespace mlir;
using namespace mlir::memopt;

namespace {

bool isFloatTensor(Value value) {
  return isa<FloatType>(getElementTypeOrSelf(value.getType()));
}

/// True unless an f32 element of `value` is inf or NaN.
bool hasOnlyFiniteValues(ElementsAttr value) {
  if (!getElementTypeOrSelf(value.getType()).isF32())
    return true;
  // Read in slices whose pages go back to the kernel once read, so a
  // weight mapped from its file is not kept resident (WeightBlobs.h).
  ArrayRef<char> raw = getWeightData(value);
  constexpr size_t kSlice = size_t(1) << 24;
  for (size_t begin = 0; begin < raw.size(); begin += kSlice) {
    ArrayRef<char> slice =
        raw.slice(begin, std::min(kSlice, raw.size() - begin));
    for (size_t offset = 0; offset + sizeof(float) <= slice.size();
         offset += sizeof(float)) {
      float element;
      std::memcpy(&element, slice.data() + offset, sizeof(float));
      if (!std::isfinite(element))
        return false;
    }
    releaseWeightPages(slice);
  }
  return true;
}

//===----------------------------------------------------------------------===//
// memopt-make-trainable
//===----------------------------------------------------------------------===//

/// A --freeze / --train-params pattern: a glob (`*`, `?`, `[...]`) when it
/// has one of those characters, else a prefix of the initializer's name.
struct NamePattern {
  StringRef option;
  std::string text;
  std::optional<llvm::GlobPattern> glob;
  bool used = false;

  bool match(StringRef name) const {
    return glob ? glob->match(name) : name.starts_with(text);
  }
};

LogicalResult parsePatterns(func::FuncOp function, StringRef option,
                            ArrayRef<std::string> texts,
                            SmallVectorImpl<NamePattern> &patterns) {
  for (const std::string &text : texts) {
    NamePattern pattern{option, text, std::nullopt};
    if (StringRef(text).find_first_of("*?[") != StringRef::npos) {
      auto glob = llvm::GlobPattern::create(text);
      if (!glob) {
        function.emitError() << option << " pattern '" << text
                             << "': " << llvm::toString(glob.takeError());
        return failure();
      }
      pattern.glob = std::move(*glob);
    }
    patterns.push_back(std::move(pattern));
  }
  return success();
}

/// Whether any pattern matches `name` (marking every one that does).
bool matchAny(MutableArrayRef<NamePattern> patterns, StringRef name) {
  bool matched = false;
  for (NamePattern &pattern : patterns)
    if (pattern.match(name)) {
      pattern.used = true;
      matched = true;
    }
  return matched;
}

struct MakeTrainablePass
    : public mlir::memopt::impl::MemOptMakeTrainableBase<MakeTrainablePass> {
  using MemOptMakeTrainableBase::MemOptMakeTrainableBase;

  void runOnOperation() override {
    func::FuncOp function = getOperation();
    SmallVector<NamePattern> frozen, forced;
    if (failed(parsePatterns(function, "--freeze", freeze, frozen)) ||
        failed(parsePatterns(function, "--train-params", trainParams, forced)))
      return signalPassFailure();
    SmallVector<ConstantOp> initializers;
    function.walk([&](ConstantOp constant) {
      auto name = constant->getAttrOfType<StringAttr>(kInitializerAttrName);
      if (!name || !isFloatTensor(constant.getResult()))
        return;
      // A float initializer holding inf or NaN (an exporter's -inf causal
      // mask) is a constant of the graph, not something to train.
      if (!hasOnlyFiniteValues(constant.getValue()))
        return;
      // By default only what the exporter calls a parameter is trained
      // (the importer's memopt.state_kind; absent means nothing decided).
      auto kind = constant->getAttrOfType<StringAttr>(kStateKindAttrName);
      bool trained = !kind || kind.getValue() == "parameter";
      if (matchAny(forced, name.getValue()))
        trained = true;
      if (matchAny(frozen, name.getValue()))
        trained = false;
      if (trained)
        initializers.push_back(constant);
    });
    for (auto *patterns : {&frozen, &forced})
      for (const NamePattern &pattern : *patterns)
        if (!pattern.used) {
          function.emitError() << pattern.option << " pattern '" << pattern.text
                               << "' matches no float initializer of the model";
          return signalPassFailure();
        }
    for (ConstantOp constant : initializers) {
      OpBuilder builder(constant);
      auto name = constant->getAttrOfType<StringAttr>(kInitializerAttrName);
      auto variable = VariableOp::create(
          builder, constant.getLoc(), constant.getType(), name,
          builder.getStringAttr("parameter"), constant.getValue());
      constant.replaceAllUsesWith(variable.getValue());
      constant.erase();
    }
    keyDropouts(function);
    // Training-mode BatchNormalization: every one with --bn-batch-stats,
    // those exported with training_mode=1 always.
    SmallVector<BatchNormalizationOp> norms;
    function.walk([&](BatchNormalizationOp norm) {
      if (batchStatistics || norm.getTrainingMode() != 0)
        norms.push_back(norm);
    });
    for (BatchNormalizationOp norm : norms)
      if (failed(useBatchStatistics(norm)))
        return signalPassFailure();
  }

  /// Training-mode dropouts (keyless from the importer) and random number
  /// generators (a constant key from the importer) get the program's random
  /// key and a stream of their own, numbered in program order, so every one
  /// draws its own numbers each micro-batch and recomputing one redraws them.
  void keyDropouts(func::FuncOp function) {
    SmallVector<Operation *> dropouts;
    function.walk([&](Operation *op) {
      if (auto drop = dyn_cast<DropoutOp>(op); drop && !drop.getKey())
        dropouts.push_back(op);
      if (auto random = dyn_cast<RandomUniformOp>(op);
          random &&
          !isa_and_present<VariableOp>(random.getKey().getDefiningOp()))
        dropouts.push_back(op);
    });
    if (dropouts.empty())
      return;
    OpBuilder builder(&getContext());
    builder.setInsertionPointToStart(&function.getBody().front());
    auto keyType = RankedTensorType::get({2}, builder.getI64Type());
    Value key = VariableOp::create(
        builder, NameLoc::get(builder.getStringAttr("dropout")), keyType,
        builder.getStringAttr("memopt.random_key"),
        builder.getStringAttr("random_key"),
        DenseElementsAttr::get(keyType, ArrayRef<int64_t>{0, 0}));
    int64_t stream = 0;
    for (Operation *op : dropouts) {
      if (auto drop = dyn_cast<DropoutOp>(op)) {
        drop.getKeyMutable().assign(key);
        drop.setStream(++stream);
      } else {
        auto random = cast<RandomUniformOp>(op);
        random.getKeyMutable().assign(key);
        random.setStream(++stream);
      }
    }
  }

  /// Rewrites `norm` into its training-mode form (see the pass description):
  /// one batch_norm_training (batch statistics; it saves mean and 1/std for
  /// its gradient) and one batch_norm_running_update of the running
  /// statistics, which become variables of role `statistic`.
  LogicalResult useBatchStatistics(BatchNormalizationOp norm) {
    OpBuilder builder(norm);
    Location loc = norm.getLoc();
    Value x = norm.getX();
    auto xType = cast<RankedTensorType>(x.getType());
    int64_t channels = xType.getRank() >= 2 ? xType.getDimSize(1) : 0;
    auto isChannelVector = [&](Value v) {
      auto type = cast<RankedTensorType>(v.getType());
      return type.getElementType().isF32() && type.getNumElements() == channels;
    };
    if (!xType.getElementType().isF32() || xType.getRank() < 2 ||
        !isChannelVector(norm.getScale()) || !isChannelVector(norm.getB()))
      return norm.emitError()
             << describeNode(norm)
             << ": --bn-batch-stats needs f32 [N, C, ...] input and f32 "
                "scale and bias of C elements";
    // Running statistics: state updated in place, never trained.
    SmallVector<Value, 2> statistics;
    for (Value running : {norm.getInputMean(), norm.getInputVar()}) {
      Operation *def = running.getDefiningOp();
      auto name = def ? def->getAttrOfType<StringAttr>(kInitializerAttrName)
                      : StringAttr();
      if (auto variable = dyn_cast_or_null<VariableOp>(def))
        name = variable.getNameAttr();
      if (!name ||
          (!isa_and_nonnull<VariableOp>(def) &&
           !isa_and_nonnull<ConstantOp>(def)) ||
          !isChannelVector(running))
        return norm.emitError()
               << describeNode(norm)
               << ": --bn-batch-stats needs f32 running statistics stored "
                  "as initializers";
      ElementsAttr initial = isa<VariableOp>(def)
                                 ? *cast<VariableOp>(def).getInitialValue()
                                 : cast<ConstantOp>(def).getValue();
      OpBuilder stateBuilder(def);
      auto statistic = VariableOp::create(
          stateBuilder, def->getLoc(), running.getType(), name,
          stateBuilder.getStringAttr("statistic"), initial);
      statistics.push_back(statistic.getValue());
    }
    auto channelType = RankedTensorType::get({channels}, builder.getF32Type());
    auto training = BatchNormTrainingOp::create(
        builder, loc, TypeRange{xType, channelType, channelType}, x,
        norm.getScale(), norm.getB(), /*Z=*/Value(), norm.getEpsilonAttr(),
        builder.getStringAttr("none"));
    norm.getY().replaceAllUsesWith(training.getY());
    BatchNormRunningUpdateOp::create(
        builder, loc, statistics[0], statistics[1], training.getMean(),
        training.getInvStd(), norm.getMomentumAttr(), norm.getEpsilonAttr());
    SmallVector<Operation *, 2> replaced = {norm.getInputMean().getDefiningOp(),
                                            norm.getInputVar().getDefiningOp()};
    norm.erase();
    for (Operation *def : replaced)
      if (def && def->use_empty())
        def->erase();
    return success();
  }
};

//===----------------------------------------------------------------------===//
// memopt-append-loss
//===----------------------------------------------------------------------===//

/// x [..., K] and w [C, K] of logits = x w^T from a bias-free linear layer.
struct LinearHead {
  Value x, w;
};

/// The language-model head behind `logits`: MatMul(x, B) or Gemm(x, B)
/// without C, alpha 1 and no activation, B [K, C] a 2-D operand, possibly
/// behind a Reshape of its [R, C] result to [..., C] (the canonical form of
/// a 3-D MatMul by a matrix). w is B's transposed source where B is a
/// Transpose (the exporters' nn.Linear and tied embeddings: no copy), else a
/// transpose of B built here; x is brought to logits' leading shape. nullopt
/// when logits come from anything else (the unfused loss then runs).
std::optional<LinearHead> matchLinearHead(OpBuilder &builder, Value logits) {
  auto logitsType = cast<RankedTensorType>(logits.getType());
  Value product = logits;
  if (auto reshape = logits.getDefiningOp<ReshapeOp>()) {
    auto source = cast<RankedTensorType>(reshape.getData().getType());
    if (source.getRank() != 2 || logitsType.getRank() < 1 ||
        source.getDimSize(1) != logitsType.getShape().back() ||
        !reshape.getData().hasOneUse())
      return std::nullopt;
    product = reshape.getData();
  }
  Value x, b;
  bool bTransposed = false;
  if (auto matmul = product.getDefiningOp<MatMulOp>()) {
    x = matmul.getA();
    b = matmul.getB();
  } else if (auto gemm = product.getDefiningOp<GemmOp>()) {
    if (gemm.getC() || gemm.getAlpha().convertToDouble() != 1.0 ||
        gemm.getTransA() || gemm.getActivation() != "none")
      return std::nullopt;
    x = gemm.getA();
    b = gemm.getB();
    bTransposed = gemm.getTransB() != 0;
  } else {
    return std::nullopt;
  }
  auto xType = dyn_cast<RankedTensorType>(x.getType());
  auto bType = dyn_cast<RankedTensorType>(b.getType());
  auto productType = cast<RankedTensorType>(product.getType());
  if (!xType || !bType || !xType.hasStaticShape() || !bType.hasStaticShape() ||
      bType.getRank() != 2 || xType.getRank() < 1 ||
      xType.getElementType() != bType.getElementType() ||
      xType.getShape().drop_back() != productType.getShape().drop_back())
    return std::nullopt;
  int64_t features = xType.getShape().back();

  int64_t classes = logitsType.getShape().back();
  ArrayRef<int64_t> bShape = bType.getShape();
  if (bTransposed ? bShape != ArrayRef<int64_t>({classes, features})
                  : bShape != ArrayRef<int64_t>({features, classes}))
    return std::nullopt;
  if (xType.getShape().drop_back() != logitsType.getShape().drop_back()) {
    SmallVector<int64_t> shape(logitsType.getShape().drop_back());
    shape.push_back(features);
    x = ReshapeOp::create(builder, x.getLoc(),
                          RankedTensorType::get(shape, xType.getElementType()),
                          x);
  }
  if (bTransposed)
    return LinearHead{x, b};
  if (auto transpose = b.getDefiningOp<TransposeOp>()) {
    std::optional<ArrayRef<int64_t>> perm = transpose.getPerm();
    if (!perm || *perm == ArrayRef<int64_t>({1, 0}))
      return LinearHead{x, transpose.getData()};
  }
  Value w = TransposeOp::create(builder, b.getLoc(), b,
                                builder.getDenseI64ArrayAttr({1, 0}));
  return LinearHead{x, w};
}

struct AppendLossPass
    : public mlir::memopt::impl::MemOptAppendLossBase<AppendLossPass> {
  using MemOptAppendLossBase::MemOptAppendLossBase;

  void runOnOperation() override {
    func::FuncOp function = getOperation();
    if (function.isExternal())
      return;
    if (kind != "cross-entropy" && kind != "mse" && kind != "output") {
      function.emitError("loss kind '")
          << kind << "' is not one of cross-entropy, mse, output";
      return signalPassFailure();
    }
    auto returnOp =
        cast<func::ReturnOp>(function.getBody().front().getTerminator());
    // The output the loss reads.
    std::optional<unsigned> chosen;
    SmallVector<std::string> names;
    for (unsigned i = 0; i < function.getNumResults(); ++i) {
      auto name = function.getResultAttrOfType<StringAttr>(i, "memopt.name");
      names.push_back(name ? name.str() : "result" + std::to_string(i));
      if (!output.empty() && names.back() == output)
        chosen = i;
    }
    if (!output.empty() && !chosen) {
      function.emitError("--loss-output '")
          << output << "' is not an output of the model (outputs: "
          << llvm::join(names, ", ") << ")";
      return signalPassFailure();
    }
    if (!chosen) {
      for (unsigned i = 0; i < function.getNumResults(); ++i)
        if (isFloatTensor(returnOp.getOperand(i))) {
          if (chosen) {
            function.emitError("the model has several float outputs (")
                << llvm::join(names, ", ")
                << "); choose the one the loss reads with --loss-output";
            return signalPassFailure();
          }
          chosen = i;
        }
      if (!chosen) {
        function.emitError("the model has no float output to train");
        return signalPassFailure();
      }
    }
    Value prediction = returnOp.getOperand(*chosen);
    auto predictionType = cast<RankedTensorType>(prediction.getType());
    if (!predictionType.getElementType().isF32()) {
      function.emitError("output '")
          << names[*chosen] << "' is " << predictionType.getElementType()
          << "; training needs an f32 output";
      return signalPassFailure();
    }

    OpBuilder builder(returnOp);
    Location loc = NameLoc::get(builder.getStringAttr("loss"));
    Value loss;
    unsigned numArguments = function.getNumArguments();
    auto addArgument = [&](StringRef name, Type type) -> Value {
      for (unsigned i = 0; i < numArguments; ++i)
        if (auto existing =
                function.getArgAttrOfType<StringAttr>(i, "memopt.name"))
          if (existing.getValue() == name) {
            function.emitError("the model already has an input named '")
                << name << "'";
            return Value();
          }
      DictionaryAttr attrs = builder.getDictionaryAttr(
          builder.getNamedAttr("memopt.name", builder.getStringAttr(name)));
      (void)function.insertArgument(numArguments, type, attrs, loc);
      return function.getArgument(numArguments);
    };
    if (kind == "output") {
      if (predictionType.getNumElements() != 1) {
        function.emitError("--loss output: output '")
            << names[*chosen] << "' has shape [" << predictionType.getShape()
            << "]; it must be a scalar loss";
        return signalPassFailure();
      }
      loss = prediction;
      if (predictionType.getRank() != 0)
        loss = ReshapeOp::create(
            builder, loc,
            RankedTensorType::get({}, predictionType.getElementType()), loss);
    } else if (kind == "cross-entropy") {
      if (predictionType.getRank() < 1) {
        function.emitError("cross-entropy needs an output with a class axis; '")
            << names[*chosen] << "' is a scalar";
        return signalPassFailure();
      }
      Value labels = addArgument(
          "labels", RankedTensorType::get(predictionType.getShape().drop_back(),
                                          builder.getI64Type()));
      if (!labels)
        return signalPassFailure();
      // After mixed precision the output is a cast of low logits: the loss
      // kernel computes in f32 from them (the same loss as from the widened
      // copy), and their gradient is low too, so no f32 [rows, classes]
      // tensor exists at all (autocast casts the logits to f32 first).
      Value logits = prediction;
      if (auto widen = prediction.getDefiningOp<CastOp>()) {
        Type source = getElementTypeOrSelf(widen.getInput().getType());
        if (source.isF16() || source.isBF16())
          logits = widen.getInput();
      }
      auto scalar = RankedTensorType::get({}, builder.getF32Type());
      // The head is fused when the loss is the logits' only reader.
      bool onlyLoss = prediction.hasOneUse() &&
                      (logits == prediction || logits.hasOneUse());
      if (std::optional<LinearHead> head =
              fuseHead && onlyLoss ? matchLinearHead(builder, logits)
                                   : std::nullopt) {
        auto lseType =
            RankedTensorType::get(cast<ShapedType>(labels.getType()).getShape(),
                                  builder.getF32Type());
        loss = LinearCrossEntropyOp::create(
                   builder, loc, TypeRange{scalar, lseType}, head->x, head->w,
                   labels, builder.getI64IntegerAttr(ignoreIndex))
                   .getLoss();
      } else {
        loss = SoftmaxCrossEntropyOp::create(
            builder, loc, scalar, logits, labels,
            builder.getI64IntegerAttr(ignoreIndex));
      }
    } else {
      Value target = addArgument("target", predictionType);
      if (!target)
        return signalPassFailure();
      Value difference = SubOp::create(builder, loc, prediction, target);
      Value squared = MulOp::create(builder, loc, difference, difference);
      SmallVector<int64_t> axes;
      for (int64_t axis = 0; axis < predictionType.getRank(); ++axis)
        axes.push_back(axis);
      loss = axes.empty()
                 ? squared
                 : ReduceMeanOp::create(builder, loc, squared,
                                        builder.getDenseI64ArrayAttr(axes),
                                        builder.getI64IntegerAttr(0))
                       .getResult();
    }
    func::ReturnOp::create(builder, returnOp.getLoc(), loss);
    returnOp.erase();
    function.setFunctionType(FunctionType::get(
        &getContext(), function.getArgumentTypes(), {loss.getType()}));
    SmallVector<DictionaryAttr> resultAttrs = {builder.getDictionaryAttr(
        builder.getNamedAttr("memopt.name", builder.getStringAttr("loss")))};
    function.setAllResultAttrs(resultAttrs);
  }
};

//===----------------------------------------------------------------------===//
// memopt-autodiff
//===----------------------------------------------------------------------===//

struct AutodiffPass
    : public mlir::memopt::impl::MemOptAutodiffBase<AutodiffPass> {
  using MemOptAutodiffBase::MemOptAutodiffBase;

  void runOnOperation() override;

private:
  /// Emits the optimizer update of `param` with its complete gradient;
  /// `accumulator` when already made, `foundInf` with loss scaling.
  void emitUpdate(OpBuilder &builder, VariableOp param, Value gradient,
                  Value accumulator = Value(), Value foundInf = Value());
  VariableOp createState(OpBuilder &builder, VariableOp param, StringRef suffix,
                         StringRef role = "optimizer_state");
  LogicalResult verifyLossScaleOptions(func::FuncOp function);

  Block *entry = nullptr;
  Value lrValue, stepValue, microStepValue;
  /// Dynamic loss scaling: the loss_scale and loss_scale_state variables.
  Value lossScaleValue, lossScaleState;
  int64_t stateBytes = 0, accumulatorBytes = 0;
};

/// `value` as printf's %g writes it (diagnostics print doubles in full).
std::string shortNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

LogicalResult AutodiffPass::verifyLossScaleOptions(func::FuncOp function) {
  if (lossScale != "none" && lossScale != "dynamic")
    return function.emitError("loss-scale '")
           << lossScale << "' is not one of none, dynamic";
  if (lossScale == "none")
    return success();
  if (!(lossScaleInit > 0) || !std::isfinite(float(lossScaleInit)))
    return function.emitError("loss-scale-init ")
           << shortNumber(lossScaleInit) << " must be a positive finite f32";
  if (!(lossScaleGrowth >= 1) || !std::isfinite(float(lossScaleGrowth)))
    return function.emitError("loss-scale-growth ")
           << shortNumber(lossScaleGrowth) << " must be at least 1";
  if (!(lossScaleBackoff > 0 && lossScaleBackoff <= 1))
    return function.emitError("loss-scale-backoff ")
           << shortNumber(lossScaleBackoff) << " must be in (0, 1]";
  if (lossScaleInterval < 1)
    return function.emitError("loss-scale-interval ")
           << int64_t(lossScaleInterval) << " must be at least 1 step";
  return success();
}

VariableOp AutodiffPass::createState(OpBuilder &builder, VariableOp param,
                                     StringRef suffix, StringRef role) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(entry);
  (role == "gradient_accumulator" ? accumulatorBytes : stateBytes) +=
      getTensorBytes(param.getType());
  return VariableOp::create(builder, param.getLoc(), param.getType(),
                            builder.getStringAttr(param.getName() + suffix),
                            builder.getStringAttr(role), ElementsAttr());
}

void AutodiffPass::emitUpdate(OpBuilder &builder, VariableOp param,
                              Value gradient, Value accumulator,
                              Value foundInf) {
  Location loc = param.getLoc();
  double decay =
      weightDecay >= 0 ? weightDecay : (optimizer == "adamw" ? 0.01 : 0.0);
  // With accumulation the gradient is summed into a persistent accumulator
  // (PyTorch's .grad) by the update op itself; the update runs on the last
  // micro-step only.
  if (accumulate > 1 && !accumulator)
    accumulator =
        createState(builder, param, ".grad", "gradient_accumulator").getValue();
  IntegerAttr steps = builder.getI64IntegerAttr(accumulate);
  Value scale = foundInf ? lossScaleValue : Value();
  if (optimizer == "adamw") {
    VariableOp expAvg = createState(builder, param, ".exp_avg");
    VariableOp expAvgSq = createState(builder, param, ".exp_avg_sq");
    AdamWUpdateOp::create(
        builder, loc, param.getValue(), gradient, expAvg.getValue(),
        expAvgSq.getValue(), lrValue, stepValue, accumulator, microStepValue,
        scale, foundInf, foundInf ? lossScaleState : Value(),
        /*master=*/Value(), builder.getF32FloatAttr(beta1),
        builder.getF32FloatAttr(beta2), builder.getF32FloatAttr(eps),
        builder.getF32FloatAttr(decay), steps);
    return;
  }
  Value buffer;
  if (momentum != 0.0)
    buffer = createState(builder, param, ".momentum_buffer").getValue();
  SGDUpdateOp::create(builder, loc, param.getValue(), gradient, buffer, lrValue,
                      accumulator, microStepValue, scale, foundInf,
                      /*master=*/Value(), builder.getF32FloatAttr(momentum),
                      builder.getF32FloatAttr(decay), steps);
}

void AutodiffPass::runOnOperation() {
  func::FuncOp function = getOperation();
  if (function.isExternal())
    return;
  if (optimizer != "sgd" && optimizer != "adamw") {
    function.emitError("optimizer '")
        << optimizer << "' is not one of sgd, adamw";
    return signalPassFailure();
  }
  if (accumulate < 1) {
    function.emitError("--accumulate ")
        << int64_t(accumulate) << " must be at least 1 micro-batch per step";
    return signalPassFailure();
  }
  if (failed(verifyLossScaleOptions(function)))
    return signalPassFailure();
  bool scaled = lossScale == "dynamic";
  // GPT-2's tanh GELU, exported as eight elementwise ops, becomes one gelu
  // first: differentiated op by op it would save tanh's output and four
  // other [tokens, 4 * features] intermediates for its backward.
  {
    RewritePatternSet patterns(&getContext());
    populateGeluTanhFusionPatterns(patterns);
    GreedyRewriteConfig config;
    config.enableFolding(false);
    if (failed(applyPatternsGreedily(function, std::move(patterns), config)))
      return signalPassFailure();
  }
  entry = &function.getBody().front();
  auto returnOp = cast<func::ReturnOp>(entry->getTerminator());
  if (returnOp.getNumOperands() != 1 ||
      cast<ShapedType>(returnOp.getOperand(0).getType()).getRank() != 0 ||
      !getElementTypeOrSelf(returnOp.getOperand(0).getType()).isF32()) {
    function.emitError("memopt-autodiff needs a function that returns one f32 "
                       "scalar loss (run memopt-append-loss first)");
    return signalPassFailure();
  }
  Value loss = returnOp.getOperand(0);

  // Forward: values that depend on a parameter (only they need gradients).
  llvm::DenseSet<Value> active;
  SmallVector<VariableOp> params;
  SmallVector<Operation *> forwardOps;
  // Backward: ops whose results reach the loss.
  llvm::DenseSet<Operation *> reachesLoss;
  auto analyze = [&] {
    active.clear();
    params.clear();
    forwardOps.clear();
    reachesLoss.clear();
    for (Operation &op : entry->without_terminator()) {
      forwardOps.push_back(&op);
      if (auto variable = dyn_cast<VariableOp>(op)) {
        if (variable.getRole() == "parameter") {
          params.push_back(variable);
          active.insert(variable.getValue());
        }
        continue;
      }
      if (llvm::any_of(op.getOperands(),
                       [&](Value operand) { return active.contains(operand); }))
        for (Value result : op.getResults())
          if (isFloatTensor(result))
            active.insert(result);
    }
    llvm::DenseSet<Value> needed = {loss};
    for (Operation *op : llvm::reverse(forwardOps))
      if (llvm::any_of(op->getResults(),
                       [&](Value result) { return needed.contains(result); })) {
        reachesLoss.insert(op);
        for (Value operand : op->getOperands())
          needed.insert(operand);
      }
  };
  analyze();
  // Ops whose rule reads more of the forward than its results (attention:
  // the row log-sum-exp) replace their forward now; then analyze again.
  bool prepared = false;
  for (Operation *op : forwardOps) {
    auto rule = dyn_cast<GradientOpInterface>(op);
    if (!rule || !reachesLoss.contains(op) ||
        llvm::none_of(op->getOperands(),
                      [&](Value operand) { return active.contains(operand); }))
      continue;
    OpBuilder prepareBuilder(op);
    prepared |= rule.prepareForGradient(prepareBuilder) != op;
  }
  if (prepared)
    analyze();
  if (!active.contains(loss)) {
    function.emitError("no trainable parameter reaches the loss");
    return signalPassFailure();
  }

  // Uses of each parameter that the sweep will visit: when the last one is
  // visited the gradient is complete and the update goes right there.
  llvm::DenseMap<Value, int64_t> pendingUses;
  for (VariableOp param : params)
    for (Operation *user : param.getValue().getUsers())
      if (reachesLoss.contains(user))
        ++pendingUses[param.getValue()];

  OpBuilder builder(returnOp);
  {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(entry);
    Location loc = NameLoc::get(builder.getStringAttr("optimizer"));
    auto scalarType = RankedTensorType::get({}, builder.getF32Type());
    lrValue = VariableOp::create(
        builder, loc, scalarType, builder.getStringAttr("memopt.learning_rate"),
        builder.getStringAttr("learning_rate"),
        DenseElementsAttr::get(scalarType, float(learningRate.getValue())));
    if (optimizer == "adamw")
      stepValue = VariableOp::create(builder, loc, scalarType,
                                     builder.getStringAttr("memopt.step"),
                                     builder.getStringAttr("step"),
                                     DenseElementsAttr::get(scalarType, 0.0f));
    if (accumulate > 1)
      microStepValue = VariableOp::create(
          builder, loc, scalarType, builder.getStringAttr("memopt.micro_step"),
          builder.getStringAttr("micro_step"),
          DenseElementsAttr::get(scalarType, 0.0f));
    if (scaled) {
      Location scaleLoc = NameLoc::get(builder.getStringAttr("loss_scale"));
      lossScaleValue = VariableOp::create(
          builder, scaleLoc, scalarType,
          builder.getStringAttr("memopt.loss_scale"),
          builder.getStringAttr("loss_scale"),
          DenseElementsAttr::get(scalarType, float(lossScaleInit.getValue())));
      auto stateType = RankedTensorType::get({2}, builder.getF32Type());
      lossScaleState =
          VariableOp::create(builder, scaleLoc, stateType,
                             builder.getStringAttr("memopt.loss_scale_state"),
                             builder.getStringAttr("loss_scale_state"),
                             DenseElementsAttr::get(stateType, 0.0f));
    }
  }

  llvm::DenseMap<Value, Value> gradients;
  {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPoint(returnOp);
    Location loc = NameLoc::get(builder.getStringAttr("loss"));
    auto scalarType = RankedTensorType::get({}, builder.getF32Type());
    // PyTorch's accumulation: each micro-batch backpropagates loss / K;
    // GradScaler's: scale * loss.
    Value seed = ConstantOp::create(
        builder, loc,
        DenseElementsAttr::get(scalarType,
                               1.0f / float(accumulate.getValue())));
    if (scaled)
      seed = MulOp::create(builder, loc, lossScaleValue, seed);
    gradients[loss] = seed;
  }
  // With loss scaling the updates wait for the overflow check.
  SmallVector<std::pair<VariableOp, Value>> deferred;
  int64_t trained = 0, trainedBytes = 0;
  for (Operation *op : llvm::reverse(forwardOps)) {
    if (!reachesLoss.contains(op) || isa<VariableOp>(op))
      continue;
    SmallVector<Value> resultGradients;
    bool any = false;
    for (Value result : op->getResults()) {
      resultGradients.push_back(gradients.lookup(result));
      any |= bool(resultGradients.back());
    }
    bool needsGradient =
        any && llvm::any_of(op->getOperands(), [&](Value operand) {
          return active.contains(operand);
        });
    if (needsGradient) {
      auto rule = dyn_cast<GradientOpInterface>(op);
      if (!rule) {
        op->emitError() << describeNode(op)
                        << " is on the path from a trainable parameter to "
                           "the loss but has no gradient";
        return signalPassFailure();
      }
      builder.setInsertionPoint(returnOp);
      SmallVector<Value> operandGradients;
      if (failed(
              rule.buildGradient(builder, resultGradients, operandGradients)))
        return signalPassFailure();
      for (auto [operand, gradient] :
           llvm::zip(op->getOperands(), operandGradients)) {
        if (!gradient || !active.contains(operand))
          continue;
        if (gradient.getType() != operand.getType()) {
          op->emitError() << describeNode(op) << ": gradient rule built "
                          << gradient.getType() << " for an operand of type "
                          << operand.getType();
          return signalPassFailure();
        }
        Value &slot = gradients[operand];
        slot = slot ? AddOp::create(builder, op->getLoc(), slot, gradient)
                          .getResult()
                    : gradient;
      }
    }
    // Parameters whose last visited use this was: update them now.
    for (Value operand :
         llvm::SetVector<Value>(op->operand_begin(), op->operand_end())) {
      auto it = pendingUses.find(operand);
      if (it == pendingUses.end())
        continue;
      it->second -= llvm::count(op->getOperands(), operand);
      if (it->second > 0)
        continue;
      if (Value gradient = gradients.lookup(operand)) {
        builder.setInsertionPoint(returnOp);
        if (scaled)
          deferred.emplace_back(operand.getDefiningOp<VariableOp>(), gradient);
        else
          emitUpdate(builder, operand.getDefiningOp<VariableOp>(), gradient);
        ++trained;
        trainedBytes += getTensorBytes(operand.getType());
      }
    }
  }
  if (scaled && !deferred.empty()) {
    // One flag over every gradient (and, with accumulation, over the sums
    // of the earlier micro-batches), then the updates, then the scale.
    builder.setInsertionPoint(returnOp);
    Location loc = NameLoc::get(builder.getStringAttr("loss_scale"));
    SmallVector<Value> stepGradients, accumulators;
    for (auto [param, gradient] : deferred) {
      stepGradients.push_back(gradient);
      if (accumulate > 1)
        accumulators.push_back(
            createState(builder, param, ".grad", "gradient_accumulator")
                .getValue());
    }
    auto scalarType = RankedTensorType::get({}, builder.getF32Type());
    Value found = FoundInfOp::create(builder, loc, scalarType, stepGradients,
                                     accumulators,
                                     accumulate > 1 ? microStepValue : Value());
    for (auto [index, entry] : llvm::enumerate(deferred))
      emitUpdate(builder, entry.first, entry.second,
                 accumulate > 1 ? accumulators[index] : Value(), found);
    UpdateLossScaleOp::create(builder, loc, lossScaleValue, lossScaleState,
                              found, accumulate > 1 ? microStepValue : Value(),
                              builder.getF32FloatAttr(lossScaleGrowth),
                              builder.getF32FloatAttr(lossScaleBackoff),
                              builder.getI64IntegerAttr(lossScaleInterval),
                              builder.getI64IntegerAttr(accumulate));
  }

  // Parameters that got no gradient are constants after all.
  SmallVector<std::string> untrained;
  for (VariableOp param : params) {
    if (gradients.lookup(param.getValue()) &&
        pendingUses.lookup(param.getValue()) <= 0)
      continue;
    OpBuilder constantBuilder(param);
    auto constant = ConstantOp::create(constantBuilder, param.getLoc(),
                                       *param.getInitialValue());
    constant->setAttr(kInitializerAttrName, param.getNameAttr());
    param.getValue().replaceAllUsesWith(constant.getResult());
    untrained.push_back(param.getName().str());
    param.erase();
  }
  if (trained == 0) {
    function.emitError("no trainable parameter reaches the loss");
    return signalPassFailure();
  }
  if (report) {
    llvm::outs() << "memopt-autodiff: " << trained << " parameters ("
                 << trainedBytes << " bytes) trained with " << optimizer
                 << ", optimizer state " << stateBytes << " bytes";
    if (accumulate > 1)
      llvm::outs() << ", gradient accumulators " << accumulatorBytes
                   << " bytes (" << accumulate << " micro-batches per step)";
    if (scaled)
      llvm::outs() << ", dynamic loss scale " << shortNumber(lossScaleInit)
                   << " (x" << shortNumber(lossScaleGrowth) << " after "
                   << lossScaleInterval << " clean steps, x"
                   << shortNumber(lossScaleBackoff)
                   << " on overflow; updates after one found_inf over "
                   << deferred.size() << " gradients)";
    llvm::outs() << "; " << untrained.size()
                 << " float initializers get no gradient";
    if (!untrained.empty()) {
      llvm::outs() << " (";
      for (size_t i = 0; i < untrained.size() && i < 4; ++i)
        llvm::outs() << (i ? ", " : "") << untrained[i];
      llvm::outs() << (untrained.size() > 4 ? ", ..." : "") << ")";
    }
    llvm::outs() << "\n";
  }
}

} // namespace
