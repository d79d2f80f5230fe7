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
// InferTypeOpInterface, and each op is folded as soon as it is built (by
// its folder, else by the host kernels when its operands are constants:
// lib/Evaluate/HostEvaluator.cpp), so shape sub-graphs (Shape -> Gather ->
// Concat -> Reshape, Range, ConstantOfShape, Cast, ReduceMax, TopK, ...)
// collapse to constants during import.
// Inputs that decide shapes (Reshape's shape, Slice's starts, reduction
// axes, ...) must then be constants and become attributes; ONNX attributes
// that moved to inputs across opsets 13..21 land in the same attribute.
//
//===----------------------------------------------------------------------===//

#include "memopt/Import/OnnxImporter.h"

#include "GraphImporter.h"
#include "OnnxChecker.h"
#include "OnnxStateKinds.h"
#include "OnnxTensors.h"

#include "memopt/Dialect/MemOpt/IR/MemOptDialect.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/IR/ShapeUtils.h"
#include "memopt/Dialect/MemOpt/IR/WeightBlobs.h"
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

namespace mlir::memopt::onnx_import {

/// `memopt.<snake_case>` of an ONNX op type ("ConvTranspose" ->
/// "conv_transpose"), with the few names the contract spells differently and
/// the ONNX ops that import as another memopt op.
std::string memoptOpName(StringRef opType) {
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

bool isDefaultDomain(StringRef domain) {
  return domain.empty() || domain == "ai.onnx";
}

/// Runs `fn` and returns every diagnostic it emitted, joined, instead of
/// letting them reach the user one by one.
std::string captureDiagnostics(MLIRContext *context, function_ref<void()> fn) {
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
bool isDimension(double size) {
  return std::isfinite(size) && size >= 0 && size <= double(int64_t(1) << 50);
}

std::string formatShape(ArrayRef<int64_t> dims) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(dims, os, "x");
  return text;
}

} // namespace mlir::memopt::onnx_import

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
      supported = findRule(opType) || RegisteredOperationName::lookup(
                                          memoptOpName(opType), &context)
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
      if (!options.replaceFixedDims && !ShapedType::isDynamic(dim) &&
          dim != given[i])
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
    auto kind = stateKinds.find(name);
    if (kind != stateKinds.end())
      constant.getDefiningOp()->setAttr(
          kStateKindAttrName,
          builder.getStringAttr(stateKindName(kind->second)));
    values[name] = constant;
    return constant;
  }
  if (sequences.count(name))
    return emitError(useLoc) << user << " ('" << name
                             << "') is a sequence; memopt reads sequences "
                                "only through SequenceAt, ConcatFromSequence "
                                "and SequenceLength";
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

/// The constant elements behind `value`, if it folded to a constant: an
/// inline dense attribute as it is, or a blob (a large initializer, or a
/// large folded result such as the index tuples transformers' packed-sequence
/// mask gathers at 2048 tokens) read into one, up to `limit` elements. Only
/// the operands that decide a shape or an attribute come here, never weights.
static DenseElementsAttr denseConstant(Value value, int64_t limit) {
  Attribute attr;
  if (!value || !matchPattern(value, m_Constant(&attr)))
    return {};
  if (auto dense = dyn_cast<DenseElementsAttr>(attr))
    return dense;
  auto resource = dyn_cast<DenseResourceElementsAttr>(attr);
  if (!resource || resource.getType().getElementType().isInteger(1) ||
      resource.getType().getNumElements() > limit)
    return {};
  ArrayRef<char> raw = getWeightData(cast<ElementsAttr>(attr));
  bool valid = false;
  if (raw.empty() ||
      !DenseElementsAttr::isValidRawBuffer(resource.getType(), raw, valid))
    return {};
  return DenseElementsAttr::getFromRawBuffer(resource.getType(), raw);
}

FailureOr<SmallVector<int64_t>> GraphImporter::constantInts(const Node &node,
                                                            int inputIndex) {
  auto value = lookup(node, inputIndex);
  if (failed(value))
    return failure();
  DenseElementsAttr dense = denseConstant(*value, options.foldLimitElements);
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
  DenseElementsAttr dense = denseConstant(*value, options.foldLimitElements);
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
  return llvm::is_contained({"momentum", "stash_type", "saturate", "round_mode",
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

  // An op on a parameter stays an op: folded, the parameter would become a
  // new, untrained constant once --train makes parameters variables
  // (Gemma's RMSNorm computes `1 + weight` from a weight that starts at
  // zero). Inference loses nothing: canonicalization folds it after import.
  // Where the model does not say what its initializers are, only the
  // Transpose of a float initializer that other nodes read too stays (a tied
  // weight's other layout, GPT-2's embedding and head); other ops on such
  // initializers fold, since the old exporters share equal constants
  // (masks, scalars) between nodes and their folded chains must not become
  // trained tensors.
  // (Shape reads only the type, so it always folds.)
  bool readsParameter =
      !isa<ShapeOp>(op) && llvm::any_of(op->getOperands(), [&](Value operand) {
        auto constant = operand.getDefiningOp<ConstantOp>();
        auto name =
            constant ? constant->getAttrOfType<StringAttr>(kInitializerAttrName)
                     : StringAttr();
        if (!name || !isa<FloatType>(getElementTypeOrSelf(operand.getType())))
          return false;
        if (auto kind = constant->getAttrOfType<StringAttr>(kStateKindAttrName))
          return kind.getValue() == "parameter";
        return isa<TransposeOp>(op) && readers.lookup(name.getValue()) > 1;
      });
  SmallVector<Value> folded;
  if (!readsParameter && succeeded(builder.tryFold(op, folded)) &&
      !folded.empty()) {
    op->erase();
    return folded;
  }
  // No folder: an op of constants with a host kernel is evaluated by it
  // (docs/import.md, "Fold what is known at compile time"), unless it reads
  // an initializer that --train would train: a parameter, or a float
  // initializer the model does not call a buffer or a constant (evaluated,
  // GPT-2's position embedding gathered by constant positions would stop
  // being trained).
  if (!readsParameter && !readsTrainableInitializer(op)) {
    FailureOr<SmallVector<Value>> evaluated = evaluator.fold(builder, op);
    if (succeeded(evaluated)) {
      op->erase();
      return *evaluated;
    }
  }
  return SmallVector<Value>(op->getResults());
}

//===----------------------------------------------------------------------===//
// Node import
//===----------------------------------------------------------------------===//

/// The handlers of the ONNX ops that do not import one-to-one by name:
/// inputs that must fold to attributes, opset differences, and ops composed
/// of memopt ops. Every other op imports through importGeneric.
ArrayRef<ImportRule> GraphImporter::importRules() {
  using G = GraphImporter;
  static const ImportRule rules[] = {
      // Shapes and data movement (OnnxOpImporters.cpp).
      {"Constant", kMinOpset, kMaxOpset, &G::importConstant},
      {"Reshape", kMinOpset, kMaxOpset, &G::importReshape},
      {"Expand", kMinOpset, kMaxOpset, &G::importExpand},
      {"Cast", kMinOpset, kMaxOpset, &G::importCast},
      {"ConstantOfShape", kMinOpset, kMaxOpset, &G::importConstantOfShape},
      {"Range", kMinOpset, kMaxOpset, &G::importRange},
      {"Squeeze", kMinOpset, kMaxOpset, &G::importSqueezeOp},
      {"Unsqueeze", kMinOpset, kMaxOpset, &G::importUnsqueezeOp},
      {"Slice", kMinOpset, kMaxOpset, &G::importSlice},
      {"Split", kMinOpset, kMaxOpset, &G::importSplit},
      {"Pad", kMinOpset, kMaxOpset, &G::importPad},
      {"Clip", kMinOpset, kMaxOpset, &G::importClip},
      {"Resize", kMinOpset, kMaxOpset, &G::importResize},
      {"Transpose", kMinOpset, kMaxOpset, &G::importTranspose},
      {"GatherND", kMinOpset, kMaxOpset, &G::importGatherND},
      {"Size", kMinOpset, kMaxOpset, &G::importSize},
      {"CumSum", kMinOpset, kMaxOpset, &G::importCumSum},
      {"Dropout", kMinOpset, kMaxOpset, &G::importDropout},
      {"Conv", kMinOpset, kMaxOpset, &G::importWindowOp},
      {"ConvTranspose", kMinOpset, kMaxOpset, &G::importWindowOp},
      {"MaxPool", kMinOpset, kMaxOpset, &G::importWindowOp},
      {"AveragePool", kMinOpset, kMaxOpset, &G::importWindowOp},
      {"Min", kMinOpset, kMaxOpset, &G::importVariadic},
      {"Max", kMinOpset, kMaxOpset, &G::importVariadic},
      {"Sum", kMinOpset, kMaxOpset, &G::importVariadic},
      {"ReduceMean", kMinOpset, kMaxOpset, &G::importReduce},
      {"ReduceSum", kMinOpset, kMaxOpset, &G::importReduce},
      {"ReduceMax", kMinOpset, kMaxOpset, &G::importReduce},
      {"ReduceMin", kMinOpset, kMaxOpset, &G::importReduce},
      {"BatchNormalization", kMinOpset, kMaxOpset,
       &G::importBatchNormalization},
      // Composed of memopt ops (OnnxComposedOps.cpp).
      {"CastLike", kMinOpset, kMaxOpset, &G::importCastLike},
      {"LessOrEqual", kMinOpset, kMaxOpset, &G::importOrEqual},
      {"GreaterOrEqual", kMinOpset, kMaxOpset, &G::importOrEqual},
      {"Tile", kMinOpset, kMaxOpset, &G::importTile},
      {"Pow", kMinOpset, kMaxOpset, &G::importPow},
      {"ReduceL1", kMinOpset, kMaxOpset, &G::importComposedReduce},
      {"ReduceL2", kMinOpset, kMaxOpset, &G::importComposedReduce},
      {"ReduceSumSquare", kMinOpset, kMaxOpset, &G::importComposedReduce},
      {"ReduceLogSum", kMinOpset, kMaxOpset, &G::importComposedReduce},
      {"ReduceLogSumExp", kMinOpset, kMaxOpset, &G::importComposedReduce},
      {"InstanceNormalization", kMinOpset, kMaxOpset,
       &G::importGroupNormalization},
      {"GroupNormalization", 18, kMaxOpset, &G::importGroupNormalization},
      {"RMSNormalization", 23, kMaxOpset, &G::importRMSNormalization},
      {"SplitToSequence", kMinOpset, kMaxOpset, &G::importSplitToSequence},
      {"SequenceAt", kMinOpset, kMaxOpset, &G::importSequenceAt},
      {"ConcatFromSequence", kMinOpset, kMaxOpset,
       &G::importConcatFromSequence},
      {"SequenceLength", kMinOpset, kMaxOpset, &G::importSequenceLength},
      // OnnxComposedLosses.cpp.
      {"LogSoftmax", kMinOpset, kMaxOpset, &G::importLogSoftmax},
      {"NegativeLogLikelihoodLoss", kMinOpset, kMaxOpset, &G::importLoss},
      {"SoftmaxCrossEntropyLoss", kMinOpset, kMaxOpset, &G::importLoss},
      // OnnxComposedAttention.cpp.
      {"Attention", 23, kMaxOpset, &G::importAttention},
      // OnnxComposedRandom.cpp.
      {"RandomUniform", kMinOpset, kMaxOpset, &G::importRandom},
      {"RandomUniformLike", kMinOpset, kMaxOpset, &G::importRandom},
      {"RandomNormal", kMinOpset, kMaxOpset, &G::importRandom},
      {"RandomNormalLike", kMinOpset, kMaxOpset, &G::importRandom},
      {"Bernoulli", 15, kMaxOpset, &G::importRandom},
      // OnnxComposedMath.cpp.
      {"Elu", kMinOpset, kMaxOpset, &G::importUnaryMath},
      {"Selu", kMinOpset, kMaxOpset, &G::importUnaryMath},
      {"Softplus", kMinOpset, kMaxOpset, &G::importUnaryMath},
      {"Softsign", kMinOpset, kMaxOpset, &G::importUnaryMath},
      {"ThresholdedRelu", kMinOpset, kMaxOpset, &G::importUnaryMath},
      {"Mish", 18, kMaxOpset, &G::importUnaryMath},
      {"Sign", kMinOpset, kMaxOpset, &G::importUnaryMath},
      {"Tan", kMinOpset, kMaxOpset, &G::importUnaryMath},
      {"Sinh", kMinOpset, kMaxOpset, &G::importUnaryMath},
      {"Cosh", kMinOpset, kMaxOpset, &G::importUnaryMath},
      {"Asinh", kMinOpset, kMaxOpset, &G::importUnaryMath},
      {"Acosh", kMinOpset, kMaxOpset, &G::importUnaryMath},
      {"Atanh", kMinOpset, kMaxOpset, &G::importUnaryMath},
      {"Asin", kMinOpset, kMaxOpset, &G::importUnaryMath},
      {"Acos", kMinOpset, kMaxOpset, &G::importUnaryMath},
      {"Atan", kMinOpset, kMaxOpset, &G::importUnaryMath},
      {"Floor", kMinOpset, kMaxOpset, &G::importUnaryMath},
      {"Ceil", kMinOpset, kMaxOpset, &G::importUnaryMath},
      {"Round", kMinOpset, kMaxOpset, &G::importUnaryMath},
      {"IsInf", kMinOpset, kMaxOpset, &G::importUnaryMath},
      {"PRelu", kMinOpset, kMaxOpset, &G::importPRelu},
      {"Mean", kMinOpset, kMaxOpset, &G::importMean},
      // OnnxComposedReductions.cpp.
      {"ArgMax", kMinOpset, kMaxOpset, &G::importArgExtreme},
      {"ArgMin", kMinOpset, kMaxOpset, &G::importArgExtreme},
      {"Hardmax", kMinOpset, kMaxOpset, &G::importHardmax},
      {"ReduceProd", kMinOpset, kMaxOpset, &G::importReduceProd},
      {"GlobalMaxPool", kMinOpset, kMaxOpset, &G::importGlobalMaxPool},
      {"LpNormalization", kMinOpset, kMaxOpset, &G::importLpNormalization},
      {"MeanVarianceNormalization", kMinOpset, kMaxOpset,
       &G::importMeanVarianceNormalization},
      {"LpPool", kMinOpset, kMaxOpset, &G::importLpPool},
      {"LayerNormalization", kMinOpset, kMaxOpset,
       &G::importLayerNormalization},
      {"LRN", kMinOpset, kMaxOpset, &G::importLRN},
      {"TopK", kMinOpset, kMaxOpset, &G::importTopK},
      {"Det", kMinOpset, kMaxOpset, &G::importDet},
      // OnnxComposedRecurrent.cpp.
      {"RNN", kMinOpset, kMaxOpset, &G::importRecurrent},
      {"GRU", kMinOpset, kMaxOpset, &G::importRecurrent},
      {"LSTM", kMinOpset, kMaxOpset, &G::importRecurrent},
      // OnnxComposedSignal.cpp.
      {"DFT", 17, kMaxOpset, &G::importDFT},
      {"STFT", 17, kMaxOpset, &G::importSTFT},
      // OnnxComposedSampling.cpp.
      {"GridSample", 16, kMaxOpset, &G::importGridSample},
      // OnnxIndexOps.cpp.
      {"Trilu", kMinOpset, kMaxOpset, &G::importTrilu},
      {"ScatterElements", kMinOpset, kMaxOpset, &G::importScatterElements},
      {"CenterCropPad", 18, kMaxOpset, &G::importCenterCropPad},
      {"RotaryEmbedding", 23, kMaxOpset, &G::importRotaryEmbedding},
      {"AffineGrid", 20, kMaxOpset, &G::importAffineGrid},
      {"MaxUnpool", kMinOpset, kMaxOpset, &G::importMaxUnpool},
      {"Col2Im", 18, kMaxOpset, &G::importCol2Im},
      {"NonZero", kMinOpset, kMaxOpset, &G::importNonZero},
      // OnnxComposedEinsum.cpp.
      {"Einsum", kMinOpset, kMaxOpset, &G::importEinsum},
  };
  return rules;
}

const ImportRule *GraphImporter::findRule(StringRef opType) const {
  for (const ImportRule &rule : importRules())
    if (rule.opType == opType && opset >= rule.minOpset &&
        opset <= rule.maxOpset)
      return &rule;
  return nullptr;
}

FailureOr<SmallVector<Value>> GraphImporter::importSize(const Node &node) {
  auto input = lookup(node, 0);
  if (failed(input))
    return failure();
  auto scalar = RankedTensorType::get({}, builder.getI64Type());
  return SmallVector<Value>{createConstant(
      node.loc,
      DenseElementsAttr::get(scalar, typeOf(*input).getNumElements()))};
}

LogicalResult GraphImporter::importNode(const onnx::NodeProto &proto,
                                        size_t index) {
  std::string name = proto.name().empty()
                         ? proto.op_type() + "_" + std::to_string(index)
                         : proto.name();
  Node node{proto, name, nameLoc(name)};
  StringRef type = proto.op_type();

  // Every operator memopt imports but Constant and the generators with a
  // `shape` attribute reads its first input; the schema check skips
  // operators newer than libonnx (OnnxChecker.cpp), so this is not left to
  // it.
  if (type != "Constant" && type != "RandomUniform" && type != "RandomNormal" &&
      !node.hasInput(0))
    return emitError(node.loc) << node.describe() << ": input 0 is missing; "
                               << type << " requires it";

  const ImportRule *rule = findRule(type);
  FailureOr<SmallVector<Value>> results =
      rule ? (this->*rule->handler)(node) : importGeneric(node);
  if (failed(results))
    return failure();

  for (auto [i, output] : llvm::enumerate(proto.output())) {
    if (output.empty() || sequences.count(output))
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

FailureOr<SmallVector<Value>>
GraphImporter::importGeneric(const Node &node, unsigned numResults) {
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
  if (numResults == 0)
    numResults = unsigned(std::max(node.proto.output_size(), 1));
  return createOp(node, memoptOpName(node.type()), operands, *attrs,
                  numResults);
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
  stateKinds = classifyInitializers(graph);
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
  size_t size = model.ByteSizeLong();
  if (size > static_cast<size_t>(INT32_MAX))
    return emitError(loc)
           << "the training template of '" << path
           << "' (the model without its trained initializers, which --save "
              "completes) would be "
           << size
           << " bytes, past protobuf's 2 GiB: its frozen initializers are "
              "too large to inline";
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return emitError(loc) << "cannot serialize the training template of '"
                          << path << "'";
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
