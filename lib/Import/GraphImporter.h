//===- GraphImporter.h - the ONNX graph walk, shared by its files -*- C++
//-*-===//
//
// Private to the importer. GraphImporter walks one ONNX graph and builds the
// memopt function; its node handlers live in several files by subject:
//   OnnxImporter.cpp      the walk, values, attributes, op creation, the
//                         dispatch table of handlers, entry points
//   OnnxOpImporters.cpp   ops whose shape-deciding inputs become attributes
//                         (Reshape, Slice, Split, Resize, Conv, Pad, ...)
//   OnnxComposedOps.cpp   ONNX ops imported as compositions of memopt ops
//                         (LessOrEqual, Tile, ReduceL2, GroupNormalization,
//                         RMSNormalization, sequences from a split, ...)
//   OnnxComposedLosses.cpp      LogSoftmax, NegativeLogLikelihoodLoss,
//                               SoftmaxCrossEntropyLoss
//   OnnxComposedAttention.cpp   Attention (opset 23) as matmul / softmax
//   OnnxComposedMath.cpp        activations and unary math (Elu, Softplus,
//                               Sinh, Atan, Floor, IsInf, ...), Mean, PRelu
//   OnnxComposedReductions.cpp  ArgMax / ArgMin, Hardmax, ReduceProd,
//                               LpNormalization, LpPool, LayerNormalization's
//                               statistics, TopK, Det, ...
//   OnnxIndexOps.cpp            Trilu, ScatterElements, CenterCropPad,
//                               RotaryEmbedding, AffineGrid, MaxUnpool,
//                               Col2Im, NonZero of a constant
//   OnnxComposedEinsum.cpp      Einsum as reduce_sum, transposes, matmuls
//   OnnxComposedRecurrent.cpp   RNN, GRU, LSTM unrolled over the sequence
//   OnnxComposedSignal.cpp      DFT, STFT as products with cos / sin matrices
//   OnnxComposedSampling.cpp    GridSample as weighted gathers
//   OnnxComposedResize.cpp      Resize forms the kernels lack (cubic,
//                               antialias, ...) as interpolation matrices
// Taken from torch-mlir's OnnxToTorch (one registration per op with its
// opset range) and onnx-mlir (one file per op group).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_LIB_IMPORT_GRAPHIMPORTER_H
#define MEMOPT_LIB_IMPORT_GRAPHIMPORTER_H

#include "OnnxStateKinds.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Evaluate/HostEvaluator.h"
#include "memopt/Import/OnnxImporter.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Path.h"

#include "onnx/onnx_pb.h"

#include <optional>
#include <string>

namespace mlir::memopt::onnx_import {

/// `memopt.<snake_case>` of an ONNX op type ("ConvTranspose" ->
/// "conv_transpose"), with the few names the contract spells differently.
std::string memoptOpName(StringRef opType);
/// The default ONNX domain ("" or "ai.onnx").
bool isDefaultDomain(StringRef domain);
/// Runs `fn` and returns every diagnostic it emitted, joined.
std::string captureDiagnostics(MLIRContext *context, function_ref<void()> fn);
/// Whether a size computed in floating point converts to a dimension.
bool isDimension(double size);
/// "2x3x4".
std::string formatShape(ArrayRef<int64_t> dims);
/// Axes normalized to [0, rank), sorted, without repeats; an error naming
/// `what` for one out of range.
FailureOr<SmallVector<int64_t>> normalizeAxes(ArrayRef<int64_t> axes,
                                              int64_t rank, Location loc,
                                              StringRef what);

/// The node being imported: its proto, display name and location.
struct Node {
  const onnx::NodeProto &proto;
  std::string name;
  Location loc;

  StringRef type() const { return proto.op_type(); }
  /// "node 'conv_1' (Conv)": the prefix of every node diagnostic.
  std::string describe() const {
    return ("node '" + name + "' (" + proto.op_type() + ")");
  }
  bool hasInput(int index) const {
    return index < proto.input_size() && !proto.input(index).empty();
  }
  const onnx::AttributeProto *attribute(StringRef attrName) const {
    for (const onnx::AttributeProto &attr : proto.attribute())
      if (attr.name() == attrName)
        return &attr;
    return nullptr;
  }
};

/// Float attribute `name` of `node`, or `defaultValue` when absent.
inline float floatAttr(const Node &node, StringRef name, float defaultValue) {
  const onnx::AttributeProto *attr = node.attribute(name);
  return attr ? attr->f() : defaultValue;
}

//===----------------------------------------------------------------------===//
// GraphImporter
//===----------------------------------------------------------------------===//

class GraphImporter;

/// Imports one node; returns the values of its outputs in order.
using NodeHandler =
    FailureOr<SmallVector<Value>> (GraphImporter::*)(const Node &node);

/// One entry of the importer's dispatch table: the handler of `opType` at
/// the default-domain opsets `minOpset`..`maxOpset`. An op type without an
/// entry imports as `memopt.<snake_case>` (importGeneric) when the dialect
/// has that op.
struct ImportRule {
  StringRef opType;
  int64_t minOpset;
  int64_t maxOpset;
  NodeHandler handler;
};

/// The opsets of the default domain memopt imports.
inline constexpr int64_t kMinOpset = 13;
inline constexpr int64_t kMaxOpset = 28;

class GraphImporter {
public:
  GraphImporter(MLIRContext &context, const onnx::ModelProto &model,
                StringRef path, const ImportOptions &options)
      : context(context), builder(&context), model(model), graph(model.graph()),
        path(path), options(options),
        evaluator(HostEvaluationLimits{options.foldLimitElements}) {
    modelFolder = llvm::sys::path::parent_path(path).str();
  }

  FailureOr<OwningOpRef<ModuleOp>> run();

private:
  /// The location of a node or value: its ONNX name, in the model file (so
  /// diagnostics start with the file name).
  Location nameLoc(StringRef name) {
    return NameLoc::get(builder.getStringAttr(name),
                        FileLineColLoc::get(&context, path, 0, 0));
  }

  // Model-level checks.
  LogicalResult readOpset();
  LogicalResult checkSupportedOps();
  FailureOr<RankedTensorType> graphInputType(const onnx::ValueInfoProto &);
  FailureOr<RankedTensorType> boundedInputType(StringRef name, Location loc,
                                               ArrayRef<int64_t> dims,
                                               Type elementType);

  // Values.
  FailureOr<Value> lookup(const Node &node, int inputIndex);
  /// The value called `name`; `user` says who reads it, for the error.
  FailureOr<Value> lookupName(StringRef name, Location useLoc,
                              const Twine &user);
  RankedTensorType typeOf(Value value) {
    return cast<RankedTensorType>(value.getType());
  }
  FailureOr<SmallVector<int64_t>> constantInts(const Node &node,
                                               int inputIndex);
  FailureOr<SmallVector<double>> constantFloats(const Node &node,
                                                int inputIndex);
  LogicalResult notConstantError(const Node &node, int inputIndex);
  LogicalResult checkUnusedOutputs(const Node &node, int firstUnsupported,
                                   StringRef opName);

  // Attributes.
  FailureOr<Attribute> convertAttribute(const Node &node,
                                        const onnx::AttributeProto &attr);
  FailureOr<SmallVector<NamedAttribute>>
  nodeAttributes(const Node &node, ArrayRef<StringRef> resolved = {});
  int64_t intAttr(const Node &node, StringRef name, int64_t defaultValue);
  std::string stringAttr(const Node &node, StringRef name,
                         StringRef defaultValue);
  std::optional<SmallVector<int64_t>> intsAttr(const Node &node,
                                               StringRef name);
  static void setAttr(SmallVectorImpl<NamedAttribute> &attrs, StringAttr name,
                      Attribute value);
  void setAttr(SmallVectorImpl<NamedAttribute> &attrs, StringRef name,
               Attribute value) {
    setAttr(attrs, builder.getStringAttr(name), value);
  }

  // Op creation.
  FailureOr<SmallVector<Value>> createOp(const Node &node, StringRef opName,
                                         ArrayRef<Value> operands,
                                         ArrayRef<NamedAttribute> attrs,
                                         unsigned numResults,
                                         ArrayRef<Type> explicitTypes = {});
  FailureOr<Value> createOne(const Node &node, StringRef opName,
                             ArrayRef<Value> operands,
                             ArrayRef<NamedAttribute> attrs,
                             ArrayRef<Type> explicitTypes = {}) {
    auto results = createOp(node, opName, operands, attrs, 1, explicitTypes);
    if (failed(results))
      return failure();
    return (*results)[0];
  }
  Value createConstant(Location loc, ElementsAttr value) {
    return ConstantOp::create(builder, loc, value).getResult();
  }

  // Node import (dispatch table in OnnxImporter.cpp).
  static ArrayRef<ImportRule> importRules();
  /// The rule for `opType` at this model's opset, if any.
  const ImportRule *findRule(StringRef opType) const;
  LogicalResult importNode(const onnx::NodeProto &proto, size_t index);
  /// The op named after the ONNX type, `numResults` results (0: one per
  /// ONNX output, at least one).
  FailureOr<SmallVector<Value>> importGeneric(const Node &node,
                                              unsigned numResults = 0);
  FailureOr<SmallVector<Value>> importConstant(const Node &node);
  FailureOr<SmallVector<Value>> importReshape(const Node &node);
  FailureOr<SmallVector<Value>> importExpand(const Node &node);
  FailureOr<SmallVector<Value>> importCast(const Node &node);
  FailureOr<SmallVector<Value>> importConstantOfShape(const Node &node);
  FailureOr<SmallVector<Value>> importRange(const Node &node);
  FailureOr<SmallVector<Value>> importBatchNormalization(const Node &node);
  FailureOr<SmallVector<Value>> importSqueeze(const Node &node, bool squeeze);
  FailureOr<SmallVector<Value>> importSqueezeOp(const Node &node) {
    return importSqueeze(node, /*squeeze=*/true);
  }
  FailureOr<SmallVector<Value>> importUnsqueezeOp(const Node &node) {
    return importSqueeze(node, /*squeeze=*/false);
  }
  FailureOr<SmallVector<Value>> importSize(const Node &node);
  FailureOr<SmallVector<Value>> importSlice(const Node &node);
  FailureOr<SmallVector<Value>> importSplit(const Node &node);
  FailureOr<SmallVector<Value>> importReduce(const Node &node);
  /// The normalized `axes` and `keepdims` of a Reduce* node (attribute or
  /// input, all axes when empty); std::nullopt for an empty `axes` with
  /// noop_with_empty_axes (the node is the identity).
  FailureOr<std::optional<std::pair<SmallVector<int64_t>, int64_t>>>
  reduceAxes(const Node &node, RankedTensorType inputType);
  FailureOr<SmallVector<Value>> importPad(const Node &node);
  FailureOr<SmallVector<Value>> importClip(const Node &node);
  FailureOr<SmallVector<Value>> importResize(const Node &node);
  FailureOr<SmallVector<Value>> importWindowOp(const Node &node);
  FailureOr<SmallVector<Value>> importVariadic(const Node &node);
  Value foldIntegerMinMax(const Node &node, Value lhs, Value rhs);
  FailureOr<SmallVector<Value>> importDropout(const Node &node);
  FailureOr<SmallVector<Value>> importTranspose(const Node &node);
  FailureOr<SmallVector<Value>> importGatherND(const Node &node);
  FailureOr<SmallVector<Value>> importCumSum(const Node &node);

  // ONNX ops imported as compositions of memopt ops (OnnxComposedOps.cpp).
  FailureOr<SmallVector<Value>> importCastLike(const Node &node);
  FailureOr<SmallVector<Value>> importOrEqual(const Node &node);
  FailureOr<SmallVector<Value>> importTile(const Node &node);
  FailureOr<SmallVector<Value>> importComposedReduce(const Node &node);
  FailureOr<SmallVector<Value>> importGroupNormalization(const Node &node);
  FailureOr<SmallVector<Value>> importRMSNormalization(const Node &node);
  FailureOr<SmallVector<Value>> importSplitToSequence(const Node &node);
  FailureOr<SmallVector<Value>> importSequenceAt(const Node &node);
  FailureOr<SmallVector<Value>> importConcatFromSequence(const Node &node);
  FailureOr<SmallVector<Value>> importSequenceLength(const Node &node);
  FailureOr<SmallVector<Value>> importPow(const Node &node);
  // OnnxComposedLosses.cpp
  FailureOr<SmallVector<Value>> importLogSoftmax(const Node &node);
  FailureOr<SmallVector<Value>> importLoss(const Node &node);
  // OnnxComposedAttention.cpp
  FailureOr<SmallVector<Value>> importAttention(const Node &node);

  // OnnxComposedMath.cpp
  FailureOr<SmallVector<Value>> importUnaryMath(const Node &node);
  FailureOr<SmallVector<Value>> importPRelu(const Node &node);
  FailureOr<SmallVector<Value>> importMean(const Node &node);
  // OnnxComposedReductions.cpp
  FailureOr<SmallVector<Value>> importArgExtreme(const Node &node);
  FailureOr<SmallVector<Value>> importHardmax(const Node &node);
  FailureOr<SmallVector<Value>> importReduceProd(const Node &node);
  FailureOr<SmallVector<Value>> importGlobalMaxPool(const Node &node);
  FailureOr<SmallVector<Value>> importLpNormalization(const Node &node);
  FailureOr<SmallVector<Value>>
  importMeanVarianceNormalization(const Node &node);
  FailureOr<SmallVector<Value>> importLpPool(const Node &node);
  FailureOr<SmallVector<Value>> importLayerNormalization(const Node &node);
  FailureOr<SmallVector<Value>> importLRN(const Node &node);
  FailureOr<SmallVector<Value>> importTopK(const Node &node);
  FailureOr<SmallVector<Value>> importDet(const Node &node);
  // OnnxComposedRecurrent.cpp
  FailureOr<SmallVector<Value>> importRecurrent(const Node &node);
  // OnnxComposedSignal.cpp
  FailureOr<SmallVector<Value>> importDFT(const Node &node);
  FailureOr<SmallVector<Value>> importSTFT(const Node &node);
  /// The DFT of `input` [..., parts] (parts 1: real, 2: complex) along
  /// `axis` with signal length `n`: [..., bins, 2], or [..., n, 1] for a
  /// one-sided inverse.
  FailureOr<Value> transformAlong(const Node &node, Value input, int64_t axis,
                                  int64_t n, bool inverse, bool onesided);
  // OnnxComposedSampling.cpp
  FailureOr<SmallVector<Value>> importGridSample(const Node &node);
  // OnnxIndexOps.cpp
  FailureOr<SmallVector<Value>> importTrilu(const Node &node);
  FailureOr<SmallVector<Value>> importScatterElements(const Node &node);
  FailureOr<SmallVector<Value>> importCenterCropPad(const Node &node);
  FailureOr<SmallVector<Value>> importRotaryEmbedding(const Node &node);
  FailureOr<SmallVector<Value>> importAffineGrid(const Node &node);
  FailureOr<SmallVector<Value>> importMaxUnpool(const Node &node);
  FailureOr<SmallVector<Value>> importCol2Im(const Node &node);
  FailureOr<SmallVector<Value>> importNonZero(const Node &node);
  // OnnxComposedEinsum.cpp
  FailureOr<SmallVector<Value>> importEinsum(const Node &node);
  // OnnxComposedRandom.cpp
  FailureOr<SmallVector<Value>> importRandom(const Node &node);

  // OnnxComposedResize.cpp
  /// Resize of `input` to `outShape` as products with constant
  /// interpolation matrices, one per resized axis (`scales`: one per axis;
  /// `roi`: begins then ends per axis, empty unless tf_crop_and_resize).
  FailureOr<Value> resizeByMatrices(const Node &node, Value input,
                                    ArrayRef<int64_t> outShape,
                                    ArrayRef<double> scales,
                                    ArrayRef<double> roi);

  // Helpers of the composed ops.
  /// createOne for compositions: null when an operand is null or creation
  /// fails (the error is emitted then), so a chain of ops is checked once,
  /// at its end.
  Value build(const Node &node, StringRef opName, ArrayRef<Value> operands,
              ArrayRef<NamedAttribute> attrs = {},
              ArrayRef<Type> explicitTypes = {});
  /// `axes` / `keepdims` attributes of a memopt reduction.
  SmallVector<NamedAttribute> reduceAttrs(ArrayRef<int64_t> axes,
                                          int64_t keepdims);
  /// value[..., start:end:step, ...] along `axis` (null propagates).
  Value sliceAlong(const Node &node, Value value, int64_t axis, int64_t start,
                   int64_t end, int64_t step = 1);
  /// `value` with its axes permuted by `perm` (null propagates).
  Value transposeBy(const Node &node, Value value, ArrayRef<int64_t> perm);
  /// `values` concatenated along `axis`; one value is returned as it is.
  Value concatAlong(const Node &node, ArrayRef<Value> values, int64_t axis);
  /// The attributes of a pooling or convolution node with auto_pad resolved
  /// into pads and every window attribute full length (`skipped`: node
  /// attributes the memopt op does not take).
  FailureOr<SmallVector<NamedAttribute>>
  windowAttributes(const Node &node, ArrayRef<Value> operands,
                   ArrayRef<StringRef> skipped = {});
  /// A rank-0 constant of `elementType` holding `value`.
  Value scalarConstant(Location loc, Type elementType, double value);
  /// x - max - log(sum(exp(x - max))) along `axis` (in [0, rank)).
  FailureOr<Value> logSoftmax(const Node &node, Value x, int64_t axis);
  /// ONNX NegativeLogLikelihoodLoss of `logProb` [N, C, d...] and `target`
  /// [N, d...] with an optional `weight` [C] (null when absent); the node's
  /// `reduction` and `ignore_index` attributes apply.
  FailureOr<Value> negativeLogLikelihood(const Node &node, Value logProb,
                                         Value target, Value weight);
  /// `value` reshaped to `shape` (same element count).
  FailureOr<Value> reshapeTo(const Node &node, Value value,
                             ArrayRef<int64_t> shape);
  /// Normalizes `x` over its last axis with the layer-normalization op (no
  /// scale or bias: a constant 1 scale), `epsilon` as ONNX gives it.
  FailureOr<Value> normalizeLastAxis(const Node &node, Value x, float epsilon);
  /// `x` [N, C, ...] normalized over `groups` groups of channels, then
  /// scaled and shifted per channel (`channelScale`, `channelBias`: [C]):
  /// InstanceNormalization (a group per channel) and GroupNormalization.
  FailureOr<Value> normalizeGroups(const Node &node, Value x, int64_t groups,
                                   float epsilon, Value channelScale,
                                   Value channelBias);
  /// The sequence named by input `inputIndex`.
  FailureOr<ArrayRef<Value>> lookupSequence(const Node &node, int inputIndex);

  MLIRContext &context;
  OpBuilder builder;
  const onnx::ModelProto &model;
  const onnx::GraphProto &graph;
  StringRef path;
  std::string modelFolder;
  const ImportOptions &options;
  int64_t opset = 0;

  llvm::StringMap<Value> values;
  /// Sequence-valued names (SplitToSequence's output): their tensors.
  llvm::StringMap<SmallVector<Value>> sequences;
  llvm::StringMap<const onnx::TensorProto *> initializers;
  /// Parameter, buffer or constant, where the model says (OnnxStateKinds.h).
  llvm::StringMap<StateKind> stateKinds;
  /// Every name read by a node or returned by the graph.
  llvm::StringSet<> usedNames;
  /// Node inputs that read each name (a tied weight is read twice or more).
  llvm::StringMap<unsigned> readers;
  /// memopt.random_uniform ops made so far: each takes the next stream.
  int64_t randomStreams = 0;
  /// Ops of constants that no folder folds run through the host kernels.
  HostConstantEvaluator evaluator;
};

} // namespace mlir::memopt::onnx_import

#endif // MEMOPT_LIB_IMPORT_GRAPHIMPORTER_H
