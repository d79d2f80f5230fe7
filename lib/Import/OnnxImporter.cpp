//===- OnnxImporter.cpp - ONNX model -> memopt dialect --------------------===//
//
// Walks an ONNX GraphProto in its (topological) node order and builds one
// `func.func` of memopt ops.
//
// Taken from onnx-mlir's FrontendDialectTransformer: the overall walk (graph
// inputs become block arguments unless they are initializers, initializers
// become constants, nodes are imported in order through a name -> Value map,
// graph outputs are returned), the node-name locations and the handling of
// the default domain's opset version.
//
// Where memopt differs: onnx-mlir keeps dynamic shapes and imports every
// ONNX input as an operand, inferring shapes later in a pass. Here every
// value gets a static type at import time: ops are created generically by
// name (`memopt.<snake_case>`), their result types come from the op's own
// InferTypeOpInterface, and each op is folded as soon as it is built, so
// shape sub-graphs (Shape -> Gather -> Concat -> Reshape, Range,
// ConstantOfShape, Cast, ...) collapse to constants during import.
// Inputs that decide shapes (Reshape's shape, Slice's starts, reduction
// axes, ...) must then be constants and become attributes; ONNX attributes
// that moved to inputs across opsets 13..21 land in the same attribute.
//
//===----------------------------------------------------------------------===//

#include "memopt/Import/OnnxImporter.h"

#include "OnnxChecker.h"
#include "OnnxTensors.h"

#include "memopt/Dialect/MemOpt/IR/MemOptDialect.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/IR/ShapeUtils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "onnx/defs/parser.h"
#include "onnx/defs/schema.h"

#include <cmath>
#include <cstdio>
#include <map>

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::onnx_import;

static constexpr int64_t kMinOpset = 13;
static constexpr int64_t kMaxOpset = 21;

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

LogicalResult mlir::memopt::parseInputShapeSpec(StringRef spec,
                                                ImportOptions &options,
                                                std::string &errorMessage) {
  SmallVector<StringRef> entries;
  spec.split(entries, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  for (StringRef entry : entries) {
    entry = entry.trim();
    size_t equal = entry.rfind('=');
    if (equal == StringRef::npos || equal == 0) {
      errorMessage =
          ("--input-shape expects NAME=DIMxDIMx..., got '" + entry + "'").str();
      return failure();
    }
    StringRef name = entry.take_front(equal);
    StringRef dimsText = entry.drop_front(equal + 1);
    SmallVector<int64_t> dims;
    if (!dimsText.empty()) {
      SmallVector<StringRef> parts;
      dimsText.split(parts, 'x');
      for (StringRef part : parts) {
        int64_t dim;
        if (part.getAsInteger(10, dim) || dim < 0) {
          errorMessage = ("--input-shape for '" + name + "': dimension '" +
                          part + "' is not a non-negative integer")
                             .str();
          return failure();
        }
        dims.push_back(dim);
      }
    }
    options.inputShapes[name] = dims;
  }
  return success();
}

void mlir::memopt::registerImportDialects(DialectRegistry &registry) {
  registry.insert<MemOptDialect, func::FuncDialect>();
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// `memopt.<snake_case>` of an ONNX op type ("ConvTranspose" ->
/// "conv_transpose"), with the few names the contract spells differently and
/// the ONNX ops that import as another memopt op.
static std::string memoptOpName(StringRef opType) {
  static const llvm::StringMap<StringRef> special = {
      {"MatMul", "matmul"},     {"IsNaN", "is_nan"},
      {"Dropout", "identity"},  {"Sum", "add"},
      {"Constant", "constant"}, {"ConstantOfShape", "constant"},
      {"Size", "constant"},     {"GatherND", "gather"},
  };
  auto it = special.find(opType);
  if (it != special.end())
    return ("memopt." + it->second).str();
  std::string snake;
  for (size_t i = 0, e = opType.size(); i < e; ++i) {
    char c = opType[i];
    if (llvm::isUpper(c) && i > 0) {
      bool prevLowerOrDigit =
          llvm::isLower(opType[i - 1]) || llvm::isDigit(opType[i - 1]);
      bool acronymEnd = llvm::isUpper(opType[i - 1]) && i + 1 < e &&
                        llvm::isLower(opType[i + 1]);
      if (prevLowerOrDigit || acronymEnd)
        snake.push_back('_');
    }
    snake.push_back(llvm::toLower(c));
  }
  return "memopt." + snake;
}

static bool isDefaultDomain(StringRef domain) {
  return domain.empty() || domain == "ai.onnx";
}

/// Runs `fn` and returns every diagnostic it emitted, joined, instead of
/// letting them reach the user one by one.
static std::string captureDiagnostics(MLIRContext *context,
                                      function_ref<void()> fn) {
  std::string messages;
  {
    ScopedDiagnosticHandler handler(context, [&](Diagnostic &diag) {
      if (!messages.empty())
        messages += "; ";
      messages += diag.str();
      for (Diagnostic &note : diag.getNotes()) {
        // MLIR's dump of the failing op repeats what the node name says.
        std::string text = note.str();
        if (!StringRef(text).starts_with("see current operation"))
          messages += " (" + text + ")";
      }
      return success();
    });
    fn();
  }
  return messages;
}

/// Whether a size computed in floating point (Resize's scales) converts to a
/// dimension: finite, non-negative, and far from int64's range.
static bool isDimension(double size) {
  return std::isfinite(size) && size >= 0 && size <= double(int64_t(1) << 50);
}

static std::string formatShape(ArrayRef<int64_t> dims) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(dims, os, "x");
  return text;
}

namespace {

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

//===----------------------------------------------------------------------===//
// GraphImporter
//===----------------------------------------------------------------------===//

class GraphImporter {
public:
  GraphImporter(MLIRContext &context, const onnx::ModelProto &model,
                StringRef path, const ImportOptions &options)
      : context(context), builder(&context), model(model), graph(model.graph()),
        path(path), options(options) {
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

  // Node import.
  LogicalResult importNode(const onnx::NodeProto &proto, size_t index);
  FailureOr<SmallVector<Value>> importGeneric(const Node &node);
  FailureOr<SmallVector<Value>> importConstant(const Node &node);
  FailureOr<SmallVector<Value>> importReshape(const Node &node);
  FailureOr<SmallVector<Value>> importExpand(const Node &node);
  FailureOr<SmallVector<Value>> importCast(const Node &node);
  FailureOr<SmallVector<Value>> importConstantOfShape(const Node &node);
  FailureOr<SmallVector<Value>> importRange(const Node &node);
  FailureOr<SmallVector<Value>> importSqueeze(const Node &node, bool squeeze);
  FailureOr<SmallVector<Value>> importSlice(const Node &node);
  FailureOr<SmallVector<Value>> importSplit(const Node &node);
  FailureOr<SmallVector<Value>> importReduce(const Node &node);
  FailureOr<SmallVector<Value>> importPad(const Node &node);
  FailureOr<SmallVector<Value>> importClip(const Node &node);
  FailureOr<SmallVector<Value>> importResize(const Node &node);
  FailureOr<SmallVector<Value>> importWindowOp(const Node &node);
  FailureOr<SmallVector<Value>> importVariadic(const Node &node);
  FailureOr<SmallVector<Value>> importDropout(const Node &node);
  FailureOr<SmallVector<Value>> importTranspose(const Node &node);
  FailureOr<SmallVector<Value>> importGatherND(const Node &node);

  MLIRContext &context;
  OpBuilder builder;
  const onnx::ModelProto &model;
  const onnx::GraphProto &graph;
  StringRef path;
  std::string modelFolder;
  const ImportOptions &options;
  int64_t opset = 0;

  llvm::StringMap<Value> values;
  llvm::StringMap<const onnx::TensorProto *> initializers;
  /// Every name read by a node or returned by the graph.
  llvm::StringSet<> usedNames;
  /// Node inputs that read each name (a tied weight is read twice or more).
  llvm::StringMap<unsigned> readers;
};

} // namespace

//===----------------------------------------------------------------------===//
// Model-level checks
//===----------------------------------------------------------------------===//

LogicalResult GraphImporter::readOpset() {
  Location loc = FileLineColLoc::get(&context, path, 0, 0);
  bool found = false;
  for (const onnx::OperatorSetIdProto &entry : model.opset_import()) {
    if (isDefaultDomain(entry.domain())) {
      opset = entry.version();
      found = true;
    }
  }
  if (!found)
    return emitError(loc) << "the model imports no opset of the default ONNX "
                             "domain (ai.onnx)";
  if (opset < kMinOpset || opset > kMaxOpset)
    return emitError(loc) << "the model uses opset " << opset
                          << " of the default ONNX domain (ai.onnx); memopt "
                             "supports opsets "
                          << kMinOpset << " to " << kMaxOpset;
  return success();
}

LogicalResult GraphImporter::checkSupportedOps() {
  // Op type -> first node using it, sorted by op type.
  std::map<std::string, std::string> unsupported;
  for (auto [index, proto] : llvm::enumerate(graph.node())) {
    std::string opType = proto.op_type();
    bool supported = false;
    if (isDefaultDomain(proto.domain())) {
      supported =
          RegisteredOperationName::lookup(memoptOpName(opType), &context)
              .has_value();
    } else {
      opType = proto.domain() + "." + opType;
    }
    if (supported || unsupported.count(opType))
      continue;
    unsupported[opType] = proto.name().empty()
                              ? proto.op_type() + "_" + std::to_string(index)
                              : proto.name();
  }
  if (unsupported.empty())
    return success();
  std::string list;
  for (auto &[opType, nodeName] : unsupported) {
    if (!list.empty())
      list += ", ";
    list += opType + " (node '" + nodeName + "')";
  }
  return emitError(FileLineColLoc::get(&context, path, 0, 0))
         << "unsupported ONNX operators: " << list;
}

FailureOr<RankedTensorType>
GraphImporter::graphInputType(const onnx::ValueInfoProto &input) {
  Location loc = nameLoc(input.name());
  if (!input.type().has_tensor_type())
    return emitError(loc) << "input '" << input.name()
                          << "' is not a tensor; memopt imports tensors only";
  const onnx::TypeProto::Tensor &tensorType = input.type().tensor_type();
  Type elementType = convertElementType(tensorType.elem_type(), &context);
  if (!elementType)
    return emitError(loc) << "input '" << input.name() << "' has element type "
                          << onnxTypeName(tensorType.elem_type())
                          << ", which memopt does not support";
  auto fixed = options.inputShapes.find(input.name());
  if (!tensorType.has_shape()) {
    if (fixed == options.inputShapes.end())
      return emitError(loc) << "input '" << input.name()
                            << "' has no shape (not even a rank); fix it "
                               "with --input-shape "
                            << input.name() << "=DIMxDIMx...";
    return boundedInputType(input.name(), loc, fixed->second, elementType);
  }
  const onnx::TensorShapeProto &shape = tensorType.shape();
  SmallVector<int64_t> dims;
  for (const auto &dim : shape.dim())
    dims.push_back(dim.has_dim_value() ? dim.dim_value()
                                       : ShapedType::kDynamic);
  if (fixed != options.inputShapes.end()) {
    ArrayRef<int64_t> given = fixed->second;
    if (given.size() != dims.size())
      return emitError(loc)
             << "--input-shape gives input '" << input.name() << "' rank "
             << given.size() << ", but the model declares rank " << dims.size();
    for (auto [i, dim] : llvm::enumerate(dims)) {
      if (!ShapedType::isDynamic(dim) && dim != given[i])
        return emitError(loc) << "--input-shape gives input '" << input.name()
                              << "' dimension " << i << " = " << given[i]
                              << ", but the model fixes it to " << dim;
      dim = given[i];
    }
  }
  for (auto [i, dim] : llvm::enumerate(dims)) {
    if (!ShapedType::isDynamic(dim))
      continue;
    const auto &dimProto = shape.dim(i);
    std::string symbol = dimProto.has_dim_param()
                             ? " ('" + dimProto.dim_param() + "')"
                             : std::string(" (unnamed)");
    SmallVector<int64_t> example;
    for (int64_t d : dims)
      example.push_back(ShapedType::isDynamic(d) ? 1 : d);
    return emitError(loc) << "input '" << input.name()
                          << "' has a dynamic dimension " << i << symbol
                          << "; fix it with --input-shape " << input.name()
                          << "=" << formatShape(example)
                          << " (with the sizes you need)";
  }
  return boundedInputType(input.name(), loc, dims, elementType);
}

FailureOr<RankedTensorType>
GraphImporter::boundedInputType(StringRef name, Location loc,
                                ArrayRef<int64_t> dims, Type elementType) {
  auto type = RankedTensorType::get(dims, elementType);
  if (!isBoundedTensorType(type))
    return emitError(loc) << "input '" << name << "' has type " << type
                          << ", larger than memopt's limit of 2^50 bytes (or "
                             "with a negative dimension)";
  return type;
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

FailureOr<Value> GraphImporter::lookupName(StringRef name, Location useLoc,
                                           const Twine &user) {
  auto it = values.find(name);
  if (it != values.end())
    return it->second;
  auto init = initializers.find(name);
  if (init != initializers.end()) {
    // Initializers become constants on first use, at the top of the body.
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(builder.getInsertionBlock());
    Location loc = nameLoc(name);
    ElementsAttr value = convertTensor(*init->second, modelFolder, loc);
    if (!value)
      return failure();
    Value constant = createConstant(loc, value);
    // The ONNX name stays on the op: training makes float initializers
    // parameters and writes them back under this name (--save).
    constant.getDefiningOp()->setAttr(kInitializerAttrName,
                                      builder.getStringAttr(name));
    values[name] = constant;
    return constant;
  }
  return emitError(useLoc) << user << " ('" << name
                           << "') is not produced by any earlier node, "
                              "initializer or graph input";
}

FailureOr<Value> GraphImporter::lookup(const Node &node, int inputIndex) {
  if (!node.hasInput(inputIndex))
    return Value();
  return lookupName(node.proto.input(inputIndex), node.loc,
                    node.describe() + ": input " + std::to_string(inputIndex));
}

LogicalResult GraphImporter::notConstantError(const Node &node,
                                              int inputIndex) {
  if (!node.hasInput(inputIndex))
    return emitError(node.loc)
           << node.describe() << ": input " << inputIndex
           << " is missing; it decides a shape and must be given as a "
              "compile-time constant";
  return emitError(node.loc)
         << node.describe() << ": input " << inputIndex << " ('"
         << node.proto.input(inputIndex)
         << "') decides a shape and must be a compile-time constant, but it "
            "does not fold to one";
}

/// The constant elements behind `value`, if it folded to a dense constant.
static DenseElementsAttr denseConstant(Value value) {
  Attribute attr;
  if (!value || !matchPattern(value, m_Constant(&attr)))
    return {};
  return dyn_cast<DenseElementsAttr>(attr);
}

FailureOr<SmallVector<int64_t>> GraphImporter::constantInts(const Node &node,
                                                            int inputIndex) {
  auto value = lookup(node, inputIndex);
  if (failed(value))
    return failure();
  DenseElementsAttr dense = denseConstant(*value);
  if (!dense || !isa<IntegerType>(dense.getElementType()))
    return notConstantError(node, inputIndex);
  SmallVector<int64_t> result;
  for (const APInt &v : dense.getValues<APInt>())
    result.push_back(v.getSExtValue());
  return result;
}

FailureOr<SmallVector<double>> GraphImporter::constantFloats(const Node &node,
                                                             int inputIndex) {
  auto value = lookup(node, inputIndex);
  if (failed(value))
    return failure();
  DenseElementsAttr dense = denseConstant(*value);
  if (!dense)
    return notConstantError(node, inputIndex);
  SmallVector<double> result;
  if (isa<FloatType>(dense.getElementType())) {
    for (APFloat v : dense.getValues<APFloat>()) {
      bool lost;
      v.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
      result.push_back(v.convertToDouble());
    }
  } else {
    bool isUnsigned = dense.getElementType().isUnsignedInteger();
    for (const APInt &v : dense.getValues<APInt>())
      result.push_back(isUnsigned ? double(v.getZExtValue())
                                  : double(v.getSExtValue()));
  }
  return result;
}

LogicalResult GraphImporter::checkUnusedOutputs(const Node &node,
                                                int firstUnsupported,
                                                StringRef opName) {
  for (int i = firstUnsupported; i < node.proto.output_size(); ++i) {
    const std::string &output = node.proto.output(i);
    if (!output.empty() && usedNames.contains(output))
      return emitError(node.loc)
             << node.describe() << ": output " << i << " ('" << output
             << "') is used, but " << opName << " computes only the first "
             << firstUnsupported << " output(s) (inference mode)";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

FailureOr<Attribute>
GraphImporter::convertAttribute(const Node &node,
                                const onnx::AttributeProto &attr) {
  switch (attr.type()) {
  case onnx::AttributeProto::INT:
    return Attribute(builder.getI64IntegerAttr(attr.i()));
  case onnx::AttributeProto::INTS:
    return Attribute(builder.getDenseI64ArrayAttr(
        SmallVector<int64_t>(attr.ints().begin(), attr.ints().end())));
  case onnx::AttributeProto::FLOAT:
    return Attribute(builder.getF32FloatAttr(attr.f()));
  case onnx::AttributeProto::FLOATS:
    return Attribute(builder.getDenseF32ArrayAttr(
        SmallVector<float>(attr.floats().begin(), attr.floats().end())));
  case onnx::AttributeProto::STRING:
    return Attribute(builder.getStringAttr(attr.s()));
  case onnx::AttributeProto::TENSOR: {
    ElementsAttr value = convertTensor(attr.t(), modelFolder, node.loc);
    if (!value)
      return failure();
    return Attribute(value);
  }
  default:
    return emitError(node.loc)
           << node.describe() << ": attribute '" << attr.name()
           << "' has a kind memopt does not import (graphs, sparse tensors, "
              "type protos, string lists)";
  }
}

FailureOr<SmallVector<NamedAttribute>>
GraphImporter::nodeAttributes(const Node &node, ArrayRef<StringRef> resolved) {
  SmallVector<NamedAttribute> attrs;
  for (const onnx::AttributeProto &attr : node.proto.attribute()) {
    if (llvm::is_contained(resolved, attr.name()))
      continue;
    auto value = convertAttribute(node, attr);
    if (failed(value))
      return failure();
    attrs.push_back(builder.getNamedAttr(attr.name(), *value));
  }
  return attrs;
}

int64_t GraphImporter::intAttr(const Node &node, StringRef name,
                               int64_t defaultValue) {
  const onnx::AttributeProto *attr = node.attribute(name);
  return attr ? attr->i() : defaultValue;
}

std::string GraphImporter::stringAttr(const Node &node, StringRef name,
                                      StringRef defaultValue) {
  const onnx::AttributeProto *attr = node.attribute(name);
  return attr ? attr->s() : defaultValue.str();
}

std::optional<SmallVector<int64_t>> GraphImporter::intsAttr(const Node &node,
                                                            StringRef name) {
  const onnx::AttributeProto *attr = node.attribute(name);
  if (!attr)
    return std::nullopt;
  return SmallVector<int64_t>(attr->ints().begin(), attr->ints().end());
}

void GraphImporter::setAttr(SmallVectorImpl<NamedAttribute> &attrs,
                            StringAttr name, Attribute value) {
  for (NamedAttribute &attr : attrs) {
    if (attr.getName() == name) {
      attr.setValue(value);
      return;
    }
  }
  attrs.push_back(NamedAttribute(name, value));
}

//===----------------------------------------------------------------------===//
// Op creation
//===----------------------------------------------------------------------===//

/// ONNX attributes with no effect on inference-time results; dropped when
/// the memopt op does not declare them.
static bool isIgnorableAttribute(StringRef name) {
  return llvm::is_contained({"momentum", "stash_type", "saturate",
                             "storage_order", "seed", "training_mode"},
                            name);
}

FailureOr<SmallVector<Value>>
GraphImporter::createOp(const Node &node, StringRef opName,
                        ArrayRef<Value> operands,
                        ArrayRef<NamedAttribute> attrs, unsigned numResults,
                        ArrayRef<Type> explicitTypes) {
  std::optional<RegisteredOperationName> registered =
      RegisteredOperationName::lookup(opName, &context);
  if (!registered)
    return emitError(node.loc)
           << node.describe() << ": memopt has no '" << opName << "' operation";

  OperationState state(node.loc, opName);

  // Absent optional inputs: trailing ones are dropped; ops with several
  // optional operands carry `operandSegmentSizes`, one entry per ONNX input.
  size_t count = operands.size();
  while (count > 0 && !operands[count - 1])
    --count;
  ArrayRef<Value> present = operands.take_front(count);
  if (registered->hasTrait<OpTrait::AttrSizedOperandSegments>()) {
    int schemaInputs = static_cast<int>(present.size());
    if (const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(
            node.proto.op_type(), static_cast<int>(opset), ""))
      schemaInputs = std::max<int>(schemaInputs, schema->inputs().size());
    SmallVector<int32_t> segments;
    for (int i = 0; i < schemaInputs; ++i)
      segments.push_back(i < static_cast<int>(present.size()) && present[i]);
    state.addAttribute("operandSegmentSizes",
                       builder.getDenseI32ArrayAttr(segments));
  } else if (llvm::is_contained(present, Value())) {
    return emitError(node.loc)
           << node.describe() << ": an optional input before the last one is "
           << "omitted, which '" << opName << "' cannot represent";
  }
  for (Value operand : present)
    if (operand)
      state.addOperands(operand);

  ArrayRef<StringAttr> declared = registered->getAttributeNames();
  for (const NamedAttribute &attr : attrs) {
    if (llvm::is_contained(declared, attr.getName())) {
      state.addAttribute(attr.getName(), attr.getValue());
      continue;
    }
    if (isIgnorableAttribute(attr.getName().strref()))
      continue;
    return emitError(node.loc)
           << node.describe() << ": attribute '" << attr.getName().strref()
           << "' is not supported by '" << opName << "'";
  }
  // An attribute of the wrong kind (a float `axis`) would become a null
  // property that type inference reads; refuse it first.
  std::string problem;
  LogicalResult attributesValid = success();
  problem = captureDiagnostics(&context, [&] {
    attributesValid = registered->verifyInherentAttrs(
        state.attributes, [&] { return emitError(node.loc); });
  });
  if (failed(attributesValid))
    return emitError(node.loc) << node.describe() << ": " << problem;

  if (!explicitTypes.empty())
    state.addTypes(explicitTypes);
  else
    state.addTypes(SmallVector<Type>(numResults, builder.getNoneType()));
  Operation *op = builder.create(state);

  if (explicitTypes.empty()) {
    auto inferOp = dyn_cast<InferTypeOpInterface>(op);
    if (!inferOp) {
      op->erase();
      return emitError(node.loc)
             << node.describe() << ": '" << opName
             << "' does not infer its result type (dialect contract)";
    }
    SmallVector<Type> types;
    LogicalResult inferred = success();
    problem = captureDiagnostics(&context, [&] {
      inferred = inferOp.inferReturnTypes(
          &context, op->getLoc(), op->getOperands(),
          op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
          op->getRegions(), types);
    });
    if (failed(inferred) || types.size() != numResults) {
      op->erase();
      if (problem.empty())
        problem = "expected " + std::to_string(numResults) + " result(s), " +
                  "the op infers " + std::to_string(types.size());
      return emitError(node.loc)
             << node.describe() << ": cannot infer the result type of '"
             << opName << "': " << problem;
    }
    for (auto [result, type] : llvm::zip(op->getResults(), types))
      result.setType(type);
  }

  // Verify now, so the message names the node, and so folders only ever see
  // valid ops.
  LogicalResult verified = success();
  problem = captureDiagnostics(&context, [&] { verified = verify(op); });
  if (failed(verified)) {
    op->erase();
    return emitError(node.loc) << node.describe() << ": " << problem;
  }

  // The Transpose of a float initializer that other nodes read too is a tied
  // weight's other layout (GPT-2's embedding and head): it stays an op, since
  // a folded copy would be a second, untied parameter once --train makes
  // initializers trainable (inference loses nothing: canonicalization folds
  // it after import). Other ops on shared initializers still fold: the
  // dynamo exporter shares equal constants (masks, scalars) between nodes,
  // and their folded chains must not become trained tensors.
  bool tied =
      isa<TransposeOp>(op) &&
      llvm::any_of(op->getOperands(), [&](Value operand) {
        auto constant = operand.getDefiningOp<ConstantOp>();
        auto name =
            constant ? constant->getAttrOfType<StringAttr>(kInitializerAttrName)
                     : StringAttr();
        return name &&
               isa<FloatType>(getElementTypeOrSelf(operand.getType())) &&
               readers.lookup(name.getValue()) > 1;
      });
  SmallVector<Value> folded;
  if (!tied && succeeded(builder.tryFold(op, folded)) && !folded.empty()) {
    op->erase();
    return folded;
  }
  return SmallVector<Value>(op->getResults());
}

//===----------------------------------------------------------------------===//
// Node import
//===----------------------------------------------------------------------===//

LogicalResult GraphImporter::importNode(const onnx::NodeProto &proto,
                                        size_t index) {
  std::string name = proto.name().empty()
                         ? proto.op_type() + "_" + std::to_string(index)
                         : proto.name();
  Node node{proto, name, nameLoc(name)};
  StringRef type = proto.op_type();

  // Every operator memopt imports but Constant reads its first input; the
  // schema check skips operators newer than libonnx (OnnxChecker.cpp), so
  // this is not left to it.
  if (type != "Constant" && !node.hasInput(0))
    return emitError(node.loc) << node.describe() << ": input 0 is missing; "
                               << type << " requires it";

  FailureOr<SmallVector<Value>> results = failure();
  if (type == "Constant")
    results = importConstant(node);
  else if (type == "Reshape")
    results = importReshape(node);
  else if (type == "Expand")
    results = importExpand(node);
  else if (type == "Cast")
    results = importCast(node);
  else if (type == "ConstantOfShape")
    results = importConstantOfShape(node);
  else if (type == "Range")
    results = importRange(node);
  else if (type == "Squeeze" || type == "Unsqueeze")
    results = importSqueeze(node, type == "Squeeze");
  else if (type == "Slice")
    results = importSlice(node);
  else if (type == "Split")
    results = importSplit(node);
  else if (type.starts_with("Reduce"))
    results = importReduce(node);
  else if (type == "Pad")
    results = importPad(node);
  else if (type == "Clip")
    results = importClip(node);
  else if (type == "Resize")
    results = importResize(node);
  else if (type == "Conv" || type == "ConvTranspose" || type == "MaxPool" ||
           type == "AveragePool")
    results = importWindowOp(node);
  else if (type == "Min" || type == "Max" || type == "Sum")
    results = importVariadic(node);
  else if (type == "Dropout")
    results = importDropout(node);
  else if (type == "Transpose")
    results = importTranspose(node);
  else if (type == "GatherND")
    results = importGatherND(node);
  else if (type == "Size") {
    auto input = lookup(node, 0);
    if (failed(input))
      return failure();
    auto scalar = RankedTensorType::get({}, builder.getI64Type());
    results = SmallVector<Value>{createConstant(
        node.loc,
        DenseElementsAttr::get(scalar, typeOf(*input).getNumElements()))};
  } else {
    results = importGeneric(node);
  }
  if (failed(results))
    return failure();

  for (auto [i, output] : llvm::enumerate(proto.output())) {
    if (output.empty())
      continue;
    if (i >= results->size()) {
      if (usedNames.contains(output))
        return emitError(node.loc)
               << node.describe() << ": output " << i << " ('" << output
               << "') is used, but memopt computes only " << results->size()
               << " output(s)";
      continue;
    }
    values[output] = (*results)[i];
  }
  return success();
}

FailureOr<SmallVector<Value>> GraphImporter::importGeneric(const Node &node) {
  SmallVector<Value> operands;
  for (int i = 0; i < node.proto.input_size(); ++i) {
    auto value = lookup(node, i);
    if (failed(value))
      return failure();
    operands.push_back(*value);
  }
  auto attrs = nodeAttributes(node);
  if (failed(attrs))
    return failure();
  StringRef type = node.type();
  // Extra outputs of the normalizations exist for training only. A
  // BatchNormalization exported in training mode keeps training_mode = 1:
  // memopt-make-trainable turns it into batch statistics with running
  // statistic updates (its running mean / var outputs must be unused).
  if (type == "LayerNormalization" || type == "BatchNormalization") {
    if (failed(checkUnusedOutputs(node, 1, memoptOpName(type))))
      return failure();
  }
  unsigned numResults =
      type == "LayerNormalization" || type == "BatchNormalization"
          ? 1
          : std::max(node.proto.output_size(), 1);
  return createOp(node, memoptOpName(type), operands, *attrs, numResults);
}

FailureOr<SmallVector<Value>> GraphImporter::importConstant(const Node &node) {
  if (node.proto.attribute_size() != 1)
    return emitError(node.loc)
           << node.describe() << ": expected exactly one value attribute";
  const onnx::AttributeProto &attr = node.proto.attribute(0);
  StringRef name = attr.name();
  ElementsAttr value;
  if (name == "value") {
    value = convertTensor(attr.t(), modelFolder, node.loc);
    if (!value)
      return failure();
  } else if (name == "value_float") {
    value = DenseElementsAttr::get(
        RankedTensorType::get({}, builder.getF32Type()), attr.f());
  } else if (name == "value_floats") {
    SmallVector<float> data(attr.floats().begin(), attr.floats().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({int64_t(data.size())}, builder.getF32Type()),
        ArrayRef<float>(data));
  } else if (name == "value_int") {
    value = DenseElementsAttr::get(
        RankedTensorType::get({}, builder.getI64Type()), attr.i());
  } else if (name == "value_ints") {
    SmallVector<int64_t> data(attr.ints().begin(), attr.ints().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({int64_t(data.size())}, builder.getI64Type()),
        ArrayRef<int64_t>(data));
  } else {
    return emitError(node.loc) << node.describe() << ": attribute '" << name
                               << "' is not supported (string and sparse "
                                  "constants cannot be imported)";
  }
  return SmallVector<Value>{createConstant(node.loc, value)};
}

FailureOr<SmallVector<Value>> GraphImporter::importReshape(const Node &node) {
  auto data = lookup(node, 0);
  if (failed(data))
    return failure();
  auto requested = constantInts(node, 1);
  if (failed(requested))
    return failure();
  RankedTensorType inputType = typeOf(*data);
  bool allowZero = intAttr(node, "allowzero", 0) != 0;
  SmallVector<int64_t> shape;
  std::optional<size_t> inferredIndex;
  int64_t known = 1;
  for (auto [i, dim] : llvm::enumerate(*requested)) {
    if (dim == 0 && !allowZero) {
      if (i >= static_cast<size_t>(inputType.getRank()))
        return emitError(node.loc)
               << node.describe() << ": shape entry " << i
               << " is 0 (copy the input dimension), but the input "
               << inputType << " has rank " << inputType.getRank();
      dim = inputType.getDimSize(i);
    } else if (dim == -1) {
      if (inferredIndex)
        return emitError(node.loc)
               << node.describe() << ": shape has more than one -1";
      inferredIndex = i;
      shape.push_back(1);
      continue;
    } else if (dim < 0) {
      return emitError(node.loc)
             << node.describe() << ": shape entry " << i << " is " << dim;
    }
    shape.push_back(dim);
    if (llvm::MulOverflow(known, dim, known))
      return emitError(node.loc)
             << node.describe() << ": shape [" << formatShape(*requested)
             << "] has more elements than fit in 64 bits";
  }
  int64_t total = inputType.getNumElements();
  if (inferredIndex) {
    if (known == 0 || total % known != 0)
      return emitError(node.loc)
             << node.describe() << ": cannot infer the -1 of shape ["
             << formatShape(*requested) << "] for input " << inputType;
    shape[*inferredIndex] = total / known;
  } else if (known != total) {
    return emitError(node.loc)
           << node.describe() << ": cannot reshape " << inputType << " ("
           << total << " elements) to [" << formatShape(shape) << "]";
  }
  auto resultType = RankedTensorType::get(shape, inputType.getElementType());
  auto result = createOne(node, "memopt.reshape", {*data}, {}, {resultType});
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>> GraphImporter::importExpand(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  auto shape = constantInts(node, 1);
  if (failed(shape))
    return failure();
  RankedTensorType inputType = typeOf(*input);
  std::optional<SmallVector<int64_t>> broadcast =
      broadcastShapes(inputType.getShape(), *shape);
  if (!broadcast)
    return emitError(node.loc)
           << node.describe() << ": input " << inputType
           << " does not broadcast to shape [" << formatShape(*shape) << "]";
  auto resultType =
      RankedTensorType::get(*broadcast, inputType.getElementType());
  auto result = createOne(node, "memopt.expand", {*input}, {}, {resultType});
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>> GraphImporter::importCast(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  int64_t to = intAttr(node, "to", 0);
  Type elementType = convertElementType(static_cast<int32_t>(to), &context);
  if (!elementType)
    return emitError(node.loc) << node.describe() << ": target type "
                               << onnxTypeName(static_cast<int32_t>(to))
                               << " is not supported by memopt";
  auto attrs = nodeAttributes(node, {"to"});
  if (failed(attrs))
    return failure();
  auto resultType =
      RankedTensorType::get(typeOf(*input).getShape(), elementType);
  auto result = createOne(node, "memopt.cast", {*input}, *attrs, {resultType});
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>>
GraphImporter::importConstantOfShape(const Node &node) {
  auto shape = constantInts(node, 0);
  if (failed(shape))
    return failure();
  for (int64_t dim : *shape)
    if (dim < 0)
      return emitError(node.loc)
             << node.describe() << ": shape [" << formatShape(*shape)
             << "] has a negative dimension";
  DenseElementsAttr fill = DenseElementsAttr::get(
      RankedTensorType::get({1}, builder.getF32Type()), 0.0f);
  if (const onnx::AttributeProto *attr = node.attribute("value")) {
    ElementsAttr value = convertTensor(attr->t(), modelFolder, node.loc);
    if (!value)
      return failure();
    fill = dyn_cast<DenseElementsAttr>(value);
    if (!fill || fill.getNumElements() != 1)
      return emitError(node.loc)
             << node.describe() << ": 'value' must hold exactly one element";
  }
  auto type = RankedTensorType::get(*shape, fill.getElementType());
  return SmallVector<Value>{createConstant(
      node.loc, DenseElementsAttr::get(type, fill.getValues<Attribute>()[0]))};
}

FailureOr<SmallVector<Value>> GraphImporter::importRange(const Node &node) {
  SmallVector<Value> operands;
  SmallVector<double> bounds;
  for (int i = 0; i < 3; ++i) {
    auto value = lookup(node, i);
    if (failed(value))
      return failure();
    auto scalar = constantFloats(node, i);
    if (failed(scalar))
      return failure();
    if (scalar->size() != 1)
      return emitError(node.loc)
             << node.describe() << ": input " << i << " must be a scalar";
    operands.push_back(*value);
    bounds.push_back((*scalar)[0]);
  }
  if (bounds[2] == 0)
    return emitError(node.loc) << node.describe() << ": delta is 0";
  int64_t count = std::max<int64_t>(
      0, static_cast<int64_t>(std::ceil((bounds[1] - bounds[0]) / bounds[2])));
  auto resultType =
      RankedTensorType::get({count}, typeOf(operands[0]).getElementType());
  auto result = createOne(node, "memopt.range", operands, {}, {resultType});
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

/// Normalizes ONNX axes against `rank`, sorts them and drops repeats.
static FailureOr<SmallVector<int64_t>> normalizeAxes(ArrayRef<int64_t> axes,
                                                     int64_t rank, Location loc,
                                                     StringRef what) {
  SmallVector<int64_t> result;
  for (int64_t axis : axes) {
    std::optional<int64_t> normalized = normalizeAxis(axis, rank);
    if (!normalized)
      return emitError(loc) << what << ": axis " << axis
                            << " is out of range for rank " << rank;
    result.push_back(*normalized);
  }
  llvm::sort(result);
  result.erase(llvm::unique(result), result.end());
  return result;
}

FailureOr<SmallVector<Value>> GraphImporter::importSqueeze(const Node &node,
                                                           bool squeeze) {
  auto data = lookup(node, 0);
  if (failed(data))
    return failure();
  RankedTensorType inputType = typeOf(*data);
  // Opset 13 moved `axes` from an attribute to an input; accept both.
  SmallVector<int64_t> axes;
  if (node.hasInput(1)) {
    auto values = constantInts(node, 1);
    if (failed(values))
      return failure();
    axes = *values;
  } else if (auto attr = intsAttr(node, "axes")) {
    axes = *attr;
  } else if (squeeze) {
    for (auto [i, dim] : llvm::enumerate(inputType.getShape()))
      if (dim == 1)
        axes.push_back(i);
  } else {
    return emitError(node.loc) << node.describe() << ": 'axes' is missing";
  }
  int64_t rank = squeeze
                     ? inputType.getRank()
                     : inputType.getRank() + static_cast<int64_t>(axes.size());
  auto normalized = normalizeAxes(axes, rank, node.loc, node.describe());
  if (failed(normalized))
    return failure();
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "axes", builder.getDenseI64ArrayAttr(*normalized));
  auto result = createOne(node, squeeze ? "memopt.squeeze" : "memopt.unsqueeze",
                          {*data}, attrs);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>> GraphImporter::importSlice(const Node &node) {
  auto data = lookup(node, 0);
  if (failed(data))
    return failure();
  int64_t rank = typeOf(*data).getRank();
  auto starts = constantInts(node, 1);
  if (failed(starts))
    return failure();
  auto ends = constantInts(node, 2);
  if (failed(ends))
    return failure();
  if (starts->size() != ends->size())
    return emitError(node.loc)
           << node.describe() << ": starts and ends differ in length";
  SmallVector<int64_t> axes, steps(starts->size(), 1);
  if (node.hasInput(3)) {
    auto values = constantInts(node, 3);
    if (failed(values))
      return failure();
    axes = *values;
  } else {
    for (size_t i = 0; i < starts->size(); ++i)
      axes.push_back(i);
  }
  if (node.hasInput(4)) {
    auto values = constantInts(node, 4);
    if (failed(values))
      return failure();
    steps = *values;
  }
  if (axes.size() != starts->size() || steps.size() != starts->size())
    return emitError(node.loc)
           << node.describe()
           << ": starts, ends, axes and steps must have the same length";
  for (int64_t &axis : axes) {
    std::optional<int64_t> normalized = normalizeAxis(axis, rank);
    if (!normalized)
      return emitError(node.loc) << node.describe() << ": axis " << axis
                                 << " is out of range for rank " << rank;
    axis = *normalized;
  }
  for (int64_t step : steps)
    if (step == 0)
      return emitError(node.loc) << node.describe() << ": a step is 0";
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "starts", builder.getDenseI64ArrayAttr(*starts));
  setAttr(attrs, "ends", builder.getDenseI64ArrayAttr(*ends));
  setAttr(attrs, "axes", builder.getDenseI64ArrayAttr(axes));
  setAttr(attrs, "steps", builder.getDenseI64ArrayAttr(steps));
  auto result = createOne(node, "memopt.slice", {*data}, attrs);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>> GraphImporter::importSplit(const Node &node) {
  auto data = lookup(node, 0);
  if (failed(data))
    return failure();
  RankedTensorType inputType = typeOf(*data);
  int64_t axisAttr = intAttr(node, "axis", 0);
  std::optional<int64_t> axis = normalizeAxis(axisAttr, inputType.getRank());
  if (!axis)
    return emitError(node.loc) << node.describe() << ": axis " << axisAttr
                               << " is out of range for " << inputType;
  int64_t dim = inputType.getDimSize(*axis);
  int64_t numOutputs = node.proto.output_size();
  if (numOutputs == 0)
    return emitError(node.loc) << node.describe() << ": no outputs";
  SmallVector<int64_t> sizes;
  if (node.hasInput(1)) {
    auto values = constantInts(node, 1);
    if (failed(values))
      return failure();
    sizes = *values;
  } else if (auto attr = intsAttr(node, "split")) {
    sizes = *attr;
  } else if (const onnx::AttributeProto *count =
                 node.attribute("num_outputs")) {
    // Opset 18: ceil(dim / n) per output, the last one takes the remainder.
    if (count->i() != numOutputs)
      return emitError(node.loc)
             << node.describe() << ": num_outputs is " << count->i()
             << " but the node has " << numOutputs << " outputs";
    int64_t chunk = (dim + numOutputs - 1) / numOutputs;
    for (int64_t i = 0; i < numOutputs; ++i)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - chunk * i)));
  } else {
    if (dim % numOutputs != 0)
      return emitError(node.loc)
             << node.describe() << ": dimension " << dim << " of axis " << *axis
             << " does not split evenly into " << numOutputs << " outputs";
    sizes.assign(numOutputs, dim / numOutputs);
  }
  if (static_cast<int64_t>(sizes.size()) != numOutputs)
    return emitError(node.loc)
           << node.describe() << ": " << sizes.size() << " split sizes for "
           << numOutputs << " outputs";
  int64_t total = 0;
  for (int64_t size : sizes)
    if (size < 0 || llvm::AddOverflow(total, size, total))
      return emitError(node.loc)
             << node.describe() << ": split sizes [" << formatShape(sizes)
             << "] must be non-negative and add up to " << dim;
  if (total != dim)
    return emitError(node.loc)
           << node.describe() << ": split sizes [" << formatShape(sizes)
           << "] add up to " << total << ", not " << dim;
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "axis", builder.getI64IntegerAttr(*axis));
  setAttr(attrs, "split", builder.getDenseI64ArrayAttr(sizes));
  return createOp(node, "memopt.split", {*data}, attrs, numOutputs);
}

FailureOr<SmallVector<Value>> GraphImporter::importReduce(const Node &node) {
  auto data = lookup(node, 0);
  if (failed(data))
    return failure();
  RankedTensorType inputType = typeOf(*data);
  // ReduceSum takes `axes` as an input since opset 13, the others since 18;
  // accept whichever form the node carries.
  SmallVector<int64_t> axes;
  if (node.hasInput(1)) {
    auto values = constantInts(node, 1);
    if (failed(values))
      return failure();
    axes = *values;
  } else if (auto attr = intsAttr(node, "axes")) {
    axes = *attr;
  }
  if (axes.empty()) {
    if (intAttr(node, "noop_with_empty_axes", 0) != 0)
      return SmallVector<Value>{*data};
    for (int64_t i = 0; i < inputType.getRank(); ++i)
      axes.push_back(i);
  }
  auto normalized =
      normalizeAxes(axes, inputType.getRank(), node.loc, node.describe());
  if (failed(normalized))
    return failure();
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "axes", builder.getDenseI64ArrayAttr(*normalized));
  setAttr(attrs, "keepdims",
          builder.getI64IntegerAttr(intAttr(node, "keepdims", 1)));
  auto result = createOne(node, memoptOpName(node.type()), {*data}, attrs);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>> GraphImporter::importPad(const Node &node) {
  auto data = lookup(node, 0);
  if (failed(data))
    return failure();
  int64_t rank = typeOf(*data).getRank();
  auto pads = constantInts(node, 1);
  if (failed(pads))
    return failure();
  double constantValue = 0;
  if (node.hasInput(2)) {
    auto value = constantFloats(node, 2);
    if (failed(value))
      return failure();
    if (value->size() != 1)
      return emitError(node.loc)
             << node.describe() << ": constant_value must be a scalar";
    constantValue = (*value)[0];
  }
  // Opset 18's `axes` input names the axes `pads` refers to.
  SmallVector<int64_t> axes;
  if (node.hasInput(3)) {
    auto values = constantInts(node, 3);
    if (failed(values))
      return failure();
    for (int64_t axis : *values) {
      std::optional<int64_t> normalized = normalizeAxis(axis, rank);
      if (!normalized)
        return emitError(node.loc) << node.describe() << ": axis " << axis
                                   << " is out of range for rank " << rank;
      axes.push_back(*normalized);
    }
  } else {
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  int64_t numAxes = axes.size();
  if (static_cast<int64_t>(pads->size()) != 2 * numAxes)
    return emitError(node.loc)
           << node.describe() << ": pads has " << pads->size()
           << " values, expected " << 2 * numAxes;
  SmallVector<int64_t> fullPads(2 * rank, 0);
  for (auto [i, axis] : llvm::enumerate(axes)) {
    fullPads[axis] = (*pads)[i];
    fullPads[axis + rank] = (*pads)[i + numAxes];
  }
  SmallVector<NamedAttribute> attrs;
  setAttr(attrs, "pads", builder.getDenseI64ArrayAttr(fullPads));
  setAttr(attrs, "mode",
          builder.getStringAttr(stringAttr(node, "mode", "constant")));
  setAttr(attrs, "constant_value", builder.getF64FloatAttr(constantValue));
  auto result = createOne(node, "memopt.pad", {*data}, attrs);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>> GraphImporter::importClip(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  SmallVector<NamedAttribute> attrs;
  const std::pair<int, StringRef> bounds[] = {{1, "min"}, {2, "max"}};
  for (auto [index, name] : bounds) {
    if (!node.hasInput(index))
      continue;
    auto value = constantFloats(node, index);
    if (failed(value))
      return failure();
    if (value->size() != 1)
      return emitError(node.loc)
             << node.describe() << ": " << name << " must be a scalar";
    setAttr(attrs, name, builder.getF64FloatAttr((*value)[0]));
  }
  auto result = createOne(node, "memopt.clip", {*input}, attrs);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>> GraphImporter::importResize(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  RankedTensorType inputType = typeOf(*input);
  int64_t rank = inputType.getRank();
  SmallVector<int64_t> axes;
  if (auto attr = intsAttr(node, "axes")) {
    auto normalized = normalizeAxes(*attr, rank, node.loc, node.describe());
    if (failed(normalized))
      return failure();
    axes = *normalized;
  } else {
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  if (stringAttr(node, "coordinate_transformation_mode", "") ==
      "tf_crop_and_resize")
    return emitError(node.loc)
           << node.describe()
           << ": coordinate_transformation_mode 'tf_crop_and_resize' is not "
              "supported";
  if (intAttr(node, "antialias", 0) != 0)
    return emitError(node.loc)
           << node.describe() << ": antialias=1 is not supported";

  SmallVector<int64_t> shape(inputType.getShape());
  SmallVector<int64_t> sizes;
  SmallVector<double> scales;
  if (node.hasInput(3)) {
    auto values = constantInts(node, 3);
    if (failed(values))
      return failure();
    sizes = *values;
  }
  if (sizes.empty() && node.hasInput(2)) {
    auto values = constantFloats(node, 2);
    if (failed(values))
      return failure();
    scales = *values;
  }
  if (!sizes.empty()) {
    if (sizes.size() != axes.size())
      return emitError(node.loc)
             << node.describe() << ": sizes has " << sizes.size()
             << " values for " << axes.size() << " axes";
    std::string policy =
        stringAttr(node, "keep_aspect_ratio_policy", "stretch");
    if (policy == "stretch") {
      for (auto [axis, size] : llvm::zip(axes, sizes))
        shape[axis] = size;
    } else if (policy == "not_larger" || policy == "not_smaller") {
      double scale = policy == "not_larger" ? INFINITY : 0;
      for (auto [axis, size] : llvm::zip(axes, sizes)) {
        double ratio = double(size) / double(inputType.getDimSize(axis));
        scale = policy == "not_larger" ? std::min(scale, ratio)
                                       : std::max(scale, ratio);
      }
      for (int64_t axis : axes) {
        double size = std::round(scale * double(inputType.getDimSize(axis)));
        if (!isDimension(size))
          return emitError(node.loc)
                 << node.describe() << ": output size " << size << " on axis "
                 << axis << " is not a tensor dimension";
        shape[axis] = static_cast<int64_t>(size);
      }
    } else {
      return emitError(node.loc)
             << node.describe() << ": unknown keep_aspect_ratio_policy '"
             << policy << "'";
    }
  } else if (!scales.empty()) {
    if (scales.size() != axes.size())
      return emitError(node.loc)
             << node.describe() << ": scales has " << scales.size()
             << " values for " << axes.size() << " axes";
    for (auto [axis, scale] : llvm::zip(axes, scales)) {
      double size = std::floor(double(inputType.getDimSize(axis)) * scale);
      if (!isDimension(size))
        return emitError(node.loc)
               << node.describe() << ": scale " << scale << " on axis " << axis
               << " gives " << size << ", which is not a tensor dimension";
      shape[axis] = static_cast<int64_t>(size);
    }
  } else {
    return emitError(node.loc)
           << node.describe() << ": neither scales nor sizes is given";
  }
  auto attrs = nodeAttributes(node, {"axes", "keep_aspect_ratio_policy",
                                     "extrapolation_value", "antialias"});
  if (failed(attrs))
    return failure();
  auto resultType = RankedTensorType::get(shape, inputType.getElementType());
  auto result =
      createOne(node, "memopt.resize", {*input}, *attrs, {resultType});
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>> GraphImporter::importWindowOp(const Node &node) {
  StringRef type = node.type();
  bool isConv = type == "Conv" || type == "ConvTranspose";
  bool isTranspose = type == "ConvTranspose";
  SmallVector<Value> operands;
  for (int i = 0; i < node.proto.input_size(); ++i) {
    auto value = lookup(node, i);
    if (failed(value))
      return failure();
    operands.push_back(*value);
  }
  if (operands.empty() || !operands[0] ||
      (isConv && (operands.size() < 2 || !operands[1])))
    return emitError(node.loc) << node.describe() << ": missing inputs";
  if (isConv && typeOf(operands[1]).getRank() != typeOf(operands[0]).getRank())
    return emitError(node.loc)
           << node.describe() << ": weight " << typeOf(operands[1])
           << " must have the rank of the input " << typeOf(operands[0]);
  if (type == "MaxPool" &&
      failed(checkUnusedOutputs(node, 1, "memopt.max_pool")))
    return failure();
  RankedTensorType inputType = typeOf(operands[0]);
  int64_t spatial = inputType.getRank() - 2;
  if (spatial < 1)
    return emitError(node.loc) << node.describe() << ": input " << inputType
                               << " has no spatial dimensions";
  ArrayRef<int64_t> inputShape = inputType.getShape().drop_front(2);

  SmallVector<int64_t> kernel;
  if (auto attr = intsAttr(node, "kernel_shape"))
    kernel = *attr;
  else if (isConv)
    kernel.assign(typeOf(operands[1]).getShape().drop_front(2).begin(),
                  typeOf(operands[1]).getShape().drop_front(2).end());
  else
    return emitError(node.loc)
           << node.describe() << ": 'kernel_shape' is missing";
  auto orOnes = [&](StringRef name) {
    return intsAttr(node, name).value_or(SmallVector<int64_t>(spatial, 1));
  };
  SmallVector<int64_t> strides = orOnes("strides");
  SmallVector<int64_t> dilations = orOnes("dilations");
  SmallVector<int64_t> pads =
      intsAttr(node, "pads").value_or(SmallVector<int64_t>(2 * spatial, 0));
  if (static_cast<int64_t>(kernel.size()) != spatial ||
      static_cast<int64_t>(strides.size()) != spatial ||
      static_cast<int64_t>(dilations.size()) != spatial ||
      static_cast<int64_t>(pads.size()) != 2 * spatial)
    return emitError(node.loc)
           << node.describe()
           << ": kernel_shape, strides, dilations and pads must have one "
              "entry per spatial axis ("
           << spatial << "; pads 2x)";

  std::string autoPad = stringAttr(node, "auto_pad", "NOTSET");
  bool sameUpper = autoPad == "SAME_UPPER", sameLower = autoPad == "SAME_LOWER";
  if (autoPad != "NOTSET" && autoPad != "VALID" && !sameUpper && !sameLower)
    return emitError(node.loc)
           << node.describe() << ": unknown auto_pad '" << autoPad << "'";
  if (autoPad == "VALID")
    pads.assign(2 * spatial, 0);

  SmallVector<NamedAttribute> extra;
  if (isTranspose) {
    SmallVector<int64_t> outputPadding =
        intsAttr(node, "output_padding")
            .value_or(SmallVector<int64_t>(spatial, 0));
    std::optional<SmallVector<int64_t>> outputShape =
        intsAttr(node, "output_shape");
    if (!outputShape && (sameUpper || sameLower)) {
      outputShape.emplace();
      for (int64_t i = 0; i < spatial; ++i)
        outputShape->push_back(inputShape[i] * strides[i]);
    }
    if (outputShape) {
      // The ONNX spec's rule for the padding implied by output_shape.
      ArrayRef<int64_t> out(*outputShape);
      if (static_cast<int64_t>(out.size()) > spatial)
        out = out.take_back(spatial);
      if (static_cast<int64_t>(out.size()) != spatial ||
          static_cast<int64_t>(outputPadding.size()) != spatial)
        return emitError(node.loc)
               << node.describe()
               << ": output_shape and output_padding need one entry per "
                  "spatial axis";
      for (int64_t i = 0; i < spatial; ++i) {
        int64_t total = strides[i] * (inputShape[i] - 1) + outputPadding[i] +
                        (kernel[i] - 1) * dilations[i] + 1 - out[i];
        if (total < 0)
          return emitError(node.loc)
                 << node.describe() << ": output_shape " << out[i]
                 << " on spatial axis " << i
                 << " is larger than the convolution can produce";
        int64_t half = total / 2;
        pads[i] = sameUpper ? half : total - half;
        pads[i + spatial] = sameUpper ? total - half : half;
      }
    }
    setAttr(extra, "output_padding",
            builder.getDenseI64ArrayAttr(outputPadding));
  } else if (sameUpper || sameLower) {
    // Output = ceil(in / stride); the total padding that gives it is split
    // evenly, the odd element at the end (SAME_UPPER) or the start.
    for (int64_t i = 0; i < spatial; ++i) {
      int64_t out = (inputShape[i] + strides[i] - 1) / strides[i];
      int64_t window = (kernel[i] - 1) * dilations[i] + 1;
      int64_t total =
          std::max<int64_t>(0, (out - 1) * strides[i] + window - inputShape[i]);
      int64_t small = total / 2;
      pads[i] = sameUpper ? small : total - small;
      pads[i + spatial] = sameUpper ? total - small : small;
    }
  }

  auto attrs =
      nodeAttributes(node, {"auto_pad", "output_shape", "pads", "kernel_shape",
                            "strides", "dilations", "output_padding"});
  if (failed(attrs))
    return failure();
  setAttr(*attrs, "kernel_shape", builder.getDenseI64ArrayAttr(kernel));
  setAttr(*attrs, "strides", builder.getDenseI64ArrayAttr(strides));
  setAttr(*attrs, "dilations", builder.getDenseI64ArrayAttr(dilations));
  setAttr(*attrs, "pads", builder.getDenseI64ArrayAttr(pads));
  for (const NamedAttribute &attr : extra)
    setAttr(*attrs, attr.getName(), attr.getValue());
  auto result = createOne(node, memoptOpName(type), operands, *attrs);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>> GraphImporter::importVariadic(const Node &node) {
  if (node.proto.input_size() == 0)
    return emitError(node.loc) << node.describe() << ": no inputs";
  auto accumulated = lookup(node, 0);
  if (failed(accumulated) || !*accumulated)
    return failure();
  std::string opName = memoptOpName(node.type());
  // ONNX's variadic form is a left fold of the binary op.
  Value result = *accumulated;
  for (int i = 1; i < node.proto.input_size(); ++i) {
    auto next = lookup(node, i);
    if (failed(next))
      return failure();
    auto combined = createOne(node, opName, {result, *next}, {});
    if (failed(combined))
      return failure();
    result = *combined;
  }
  return SmallVector<Value>{result};
}

FailureOr<SmallVector<Value>> GraphImporter::importDropout(const Node &node) {
  auto data = lookup(node, 0);
  if (failed(data))
    return failure();
  if (failed(checkUnusedOutputs(node, 1, "memopt.identity")))
    return failure();
  if (node.hasInput(2)) {
    auto training = constantInts(node, 2);
    if (failed(training))
      return failure();
    // Training mode drops nothing when the ratio is 0 (the output is the
    // input, scaled by 1 / (1 - 0)): torchvision's swin_t calls F.dropout
    // with its default training=True and p=0, and the TorchScript exporter
    // keeps that node.
    double ratio = 0.5; // ONNX's default
    if (node.hasInput(1)) {
      auto ratios = constantFloats(node, 1);
      if (failed(ratios))
        return failure();
      if (ratios->size() != 1)
        return emitError(node.loc)
               << node.describe() << ": ratio must be a scalar";
      ratio = (*ratios)[0];
    }
    if (!(ratio >= 0 && ratio < 1)) {
      char ratioText[32];
      std::snprintf(ratioText, sizeof(ratioText), "%g", ratio);
      return emitError(node.loc) << node.describe() << ": ratio " << ratioText
                                 << " is not in [0, 1)";
    }
    // Training mode: a dropout without a key, the identity until
    // memopt-make-trainable (--train) keys it; an inference compile folds
    // it away (PyTorch's eval()).
    if (!training->empty() && (*training)[0] != 0 && ratio != 0) {
      auto result = createOne(
          node, "memopt.dropout", {*data},
          {builder.getNamedAttr("ratio", builder.getF32FloatAttr(ratio))},
          {data->getType()});
      if (failed(result))
        return failure();
      return SmallVector<Value>{*result};
    }
  }
  auto result = createOne(node, "memopt.identity", {*data}, {});
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

/// ONNX GatherND (batch_dims 0) with constant indices `[..., k]`: a Gather
/// over the first k axes of `data` viewed as one axis, the index tuples
/// turned into linear indices here, so it needs no op of its own. The dynamo
/// exporter writes it for transformers' padding masks
/// (`attention_mask[batch, key]` with index tensors computed from aranges).
FailureOr<SmallVector<Value>> GraphImporter::importGatherND(const Node &node) {
  auto data = lookup(node, 0);
  auto indices = lookup(node, 1);
  if (failed(data) || failed(indices))
    return failure();
  if (intAttr(node, "batch_dims", 0) != 0)
    return emitError(node.loc)
           << node.describe() << ": batch_dims other than 0 is not supported";
  auto tuples = constantInts(node, 1);
  if (failed(tuples))
    return failure();
  RankedTensorType dataType = typeOf(*data), indicesType = typeOf(*indices);
  int64_t rank = dataType.getRank();
  int64_t width =
      indicesType.getRank() ? indicesType.getShape().back() : int64_t(0);
  if (width < 1 || width > rank)
    return emitError(node.loc)
           << node.describe() << ": indices " << indicesType
           << " must end in a tuple of 1 to " << rank << " indices";
  SmallVector<int64_t> linear;
  for (size_t first = 0; first < tuples->size(); first += width) {
    int64_t index = 0;
    for (int64_t axis = 0; axis < width; ++axis) {
      int64_t dim = dataType.getDimSize(axis);
      int64_t value = (*tuples)[first + axis];
      if (value < -dim || value >= dim)
        return emitError(node.loc)
               << node.describe() << ": index " << value
               << " is out of range for axis " << axis << " of size " << dim;
      index = index * dim + (value < 0 ? value + dim : value);
    }
    linear.push_back(index);
  }
  SmallVector<int64_t> flatShape = {1};
  for (int64_t axis = 0; axis < width; ++axis)
    flatShape[0] *= dataType.getDimSize(axis);
  llvm::append_range(flatShape, dataType.getShape().drop_front(width));
  auto flat =
      createOne(node, "memopt.reshape", {*data}, {},
                {RankedTensorType::get(flatShape, dataType.getElementType())});
  if (failed(flat))
    return failure();
  auto linearType = RankedTensorType::get(indicesType.getShape().drop_back(),
                                          builder.getI64Type());
  Value linearIndices = createConstant(
      node.loc, DenseElementsAttr::get(linearType, ArrayRef<int64_t>(linear)));
  auto result =
      createOne(node, "memopt.gather", {*flat, linearIndices},
                {builder.getNamedAttr("axis", builder.getI64IntegerAttr(0))});
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

FailureOr<SmallVector<Value>> GraphImporter::importTranspose(const Node &node) {
  auto data = lookup(node, 0);
  if (failed(data))
    return failure();
  auto attrs = nodeAttributes(node);
  if (failed(attrs))
    return failure();
  if (!node.attribute("perm")) {
    // ONNX's default reverses the dimensions; the attribute is made explicit.
    SmallVector<int64_t> perm;
    for (int64_t i = typeOf(*data).getRank() - 1; i >= 0; --i)
      perm.push_back(i);
    setAttr(*attrs, "perm", builder.getDenseI64ArrayAttr(perm));
  }
  auto result = createOne(node, "memopt.transpose", {*data}, *attrs);
  if (failed(result))
    return failure();
  return SmallVector<Value>{*result};
}

//===----------------------------------------------------------------------===//
// Graph
//===----------------------------------------------------------------------===//

FailureOr<OwningOpRef<ModuleOp>> GraphImporter::run() {
  context.loadDialect<MemOptDialect, func::FuncDialect>();
  if (failed(readOpset()) || failed(checkSupportedOps()) ||
      failed(checkOnnxModel(model, path, context)))
    return failure();

  for (const onnx::TensorProto &tensor : graph.initializer())
    initializers[tensor.name()] = &tensor;
  for (const onnx::NodeProto &node : graph.node())
    for (const std::string &input : node.input()) {
      usedNames.insert(input);
      ++readers[input];
    }
  for (const onnx::ValueInfoProto &output : graph.output())
    usedNames.insert(output.name());

  for (const auto &entry : options.inputShapes) {
    bool isInput = llvm::any_of(graph.input(), [&](const auto &input) {
      return input.name() == entry.getKey() &&
             !initializers.count(input.name());
    });
    if (isInput)
      continue;
    std::string known;
    for (const onnx::ValueInfoProto &input : graph.input())
      if (!initializers.count(input.name()))
        known += (known.empty() ? "'" : ", '") + input.name() + "'";
    return emitError(FileLineColLoc::get(&context, path, 0, 0))
           << "--input-shape names '" << entry.getKey()
           << "', which is not a graph input (inputs: "
           << (known.empty() ? "none" : known) << ")";
  }

  // Graph inputs that are initializers (old exporters) are constants.
  SmallVector<const onnx::ValueInfoProto *> inputs;
  SmallVector<Type> inputTypes;
  SmallVector<Location> inputLocs;
  for (const onnx::ValueInfoProto &input : graph.input()) {
    if (initializers.count(input.name()))
      continue;
    auto type = graphInputType(input);
    if (failed(type))
      return failure();
    inputs.push_back(&input);
    inputTypes.push_back(*type);
    inputLocs.push_back(nameLoc(input.name()));
  }
  Location moduleLoc = FileLineColLoc::get(&context, path, 0, 0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(moduleLoc);
  builder.setInsertionPointToEnd(module->getBody());
  std::string functionName =
      options.functionName.empty() ? "main" : options.functionName;
  auto function = func::FuncOp::create(builder, moduleLoc, functionName,
                                       builder.getFunctionType(inputTypes, {}));
  Block *body = function.addEntryBlock();
  for (auto [i, input] : llvm::enumerate(inputs)) {
    BlockArgument argument = body->getArgument(i);
    argument.setLoc(inputLocs[i]);
    values[input->name()] = argument;
    function.setArgAttr(i, "memopt.name", builder.getStringAttr(input->name()));
  }
  builder.setInsertionPointToEnd(body);

  for (auto [index, node] : llvm::enumerate(graph.node()))
    if (failed(importNode(node, index)))
      return failure();

  SmallVector<Value> results;
  for (const onnx::ValueInfoProto &output : graph.output()) {
    auto value = lookupName(output.name(), nameLoc(output.name()),
                            "graph output '" + output.name() + "'");
    if (failed(value))
      return failure();
    results.push_back(*value);
  }
  func::ReturnOp::create(builder, moduleLoc, results);
  function.setType(builder.getFunctionType(inputTypes, ValueRange(results)));
  for (auto [i, output] : llvm::enumerate(graph.output()))
    function.setResultAttr(i, "memopt.name",
                           builder.getStringAttr(output.name()));

  // Constants that only fed shape-deciding inputs (now attributes), and
  // nodes whose results nothing reads, go away.
  for (Operation &op :
       llvm::make_early_inc_range(llvm::reverse(body->getOperations())))
    if (isOpTriviallyDead(&op))
      op.erase();

  if (failed(verify(*module)))
    return failure();
  return module;
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

/// Parses `contents` as a ModelProto, binary or text. Never throws (the ONNX
/// text parser may, so it is wrapped).
static LogicalResult parseModel(StringRef contents, StringRef path,
                                onnx::ModelProto &model, MLIRContext &context) {
  Location loc = FileLineColLoc::get(&context, path, 0, 0);
  bool text = path.ends_with(".onnxtext") || path.ends_with(".onnxtxt");
  if (!text) {
    if (contents.size() > static_cast<size_t>(INT32_MAX))
      return emitError(loc) << "'" << path
                            << "' is larger than 2 GiB; store the weights as "
                               "external data";
    if (!model.ParseFromArray(contents.data(),
                              static_cast<int>(contents.size())))
      return emitError(loc)
             << "'" << path
             << "' is not a valid ONNX model: the protobuf cannot be parsed "
                "(the file is truncated, corrupt, or not ONNX)";
  } else {
    // Lines starting with `//` or `#` are comments (lit RUN/CHECK lines);
    // they are blanked so the parser's line numbers stay right.
    std::string source;
    SmallVector<StringRef> lines;
    contents.split(lines, '\n');
    for (StringRef line : lines) {
      StringRef trimmed = line.ltrim();
      if (!trimmed.starts_with("//") && !trimmed.starts_with("#"))
        source += line.str();
      source += '\n';
    }
    std::string message;
    try {
      onnx::Common::Status status =
          onnx::OnnxParser::Parse(model, source.c_str());
      if (!status.IsOK())
        message = status.ErrorMessage();
    } catch (const std::exception &error) {
      message = error.what();
    } catch (...) {
      message = "unknown error";
    }
    if (!message.empty())
      return emitError(loc)
             << "'" << path << "' is not valid ONNX text: " << message;
  }
  if (!model.has_graph() || model.opset_import_size() == 0)
    return emitError(loc) << "'" << path
                          << "' is not an ONNX model: it has no graph or no "
                             "opset_import";
  return success();
}

FailureOr<OwningOpRef<ModuleOp>>
mlir::memopt::importOnnxModelFromBuffer(StringRef contents, StringRef path,
                                        MLIRContext &context,
                                        const ImportOptions &options) {
  onnx::ModelProto model;
  if (failed(parseModel(contents, path, model, context)))
    return failure();
  GraphImporter importer(context, model, path, options);
  return importer.run();
}

LogicalResult mlir::memopt::writeTrainingTemplate(StringRef path,
                                                  ArrayRef<std::string> omit,
                                                  StringRef outputPath,
                                                  MLIRContext &context) {
  Location loc = FileLineColLoc::get(&context, path, 0, 0);
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file)
    return emitError(loc) << "cannot open '" << path
                          << "': " << file.getError().message();
  onnx::ModelProto model;
  if (failed(parseModel((*file)->getBuffer(), path, model, context)))
    return failure();
  llvm::StringSet<> omitted;
  for (const std::string &name : omit)
    omitted.insert(name);
  StringRef folder = llvm::sys::path::parent_path(path);
  auto *initializers = model.mutable_graph()->mutable_initializer();
  for (int i = initializers->size() - 1; i >= 0; --i) {
    onnx::TensorProto &tensor = initializers->at(i);
    if (omitted.contains(tensor.name()))
      initializers->DeleteSubrange(i, 1);
    else if (failed(onnx_import::inlineExternalData(tensor, folder, loc)))
      return failure();
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return emitError(loc) << "cannot serialize the training template of '"
                          << path << "' (larger than 2 GiB?)";
  std::error_code error;
  llvm::raw_fd_ostream out(outputPath, error);
  if (error)
    return emitError(loc) << "cannot write '" << outputPath
                          << "': " << error.message();
  out << bytes;
  return success();
}

FailureOr<OwningOpRef<ModuleOp>>
mlir::memopt::importOnnxModel(StringRef path, MLIRContext &context,
                              const ImportOptions &options) {
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file)
    return emitError(FileLineColLoc::get(&context, path, 0, 0))
           << "cannot open '" << path << "': " << file.getError().message();
  return importOnnxModelFromBuffer((*file)->getBuffer(), path, context,
                                   options);
}
