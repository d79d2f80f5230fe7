//===- OnnxChecker.cpp - ONNX model validation before import --------------===//
//
// Runs the checks of onnx::checker (check_model in ONNX's checker.cc) over a
// ModelProto, piece by piece, because the whole-model entry point does not
// fit memopt's inputs:
//  - check_model refuses any ir_version above the library's (Debian's libonnx
//    1.12 knows IR 8; the PyTorch dynamo exporter writes IR 10);
//  - check_graph requires every graph input to carry a shape, while memopt
//    fixes missing shapes with --input-shape;
//  - libonnx 1.12 knows opsets up to 17: at a newer opset it would verify a
//    node against an older schema whose signature differs (ReduceMean's axes
//    became an input in opset 18). kSignatureChanges lists, per operator, the
//    first opset whose signature libonnx may not know; such nodes skip the
//    schema check, and the dialect's own checks (operand counts, types)
//    refuse what is wrong with them.
// Everything else is libonnx's: check_tensor on initializers,
// check_attribute on attributes, OpSchema::Verify on nodes (arity, empty
// required inputs, unknown, missing or mistyped attributes), plus the
// topological order and single assignment of names that check_graph checks.
//
//===----------------------------------------------------------------------===//

#include "OnnxChecker.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Path.h"

#include "onnx/checker.h"
#include "onnx/defs/schema.h"

#include <algorithm>

using namespace mlir;

namespace {

/// Operator -> the first opset (after 17) in which its inputs, outputs or
/// attributes differ from the previous version, or in which it appeared.
/// Generated with onnx 1.23's Python schemas (onnx.defs), comparing each
/// schema of opsets 18..28 with the one before it
/// (python/tests/test_opsets.py recomputes it).
const llvm::StringMap<int> kSignatureChanges = {
    {"AffineGrid", 20},
    {"AveragePool", 19},
    {"BitwiseAnd", 18},
    {"BitwiseNot", 18},
    {"BitwiseOr", 18},
    {"BitwiseXor", 18},
    {"Cast", 19},
    {"CastLike", 19},
    {"CenterCropPad", 18},
    {"Col2Im", 18},
    {"DFT", 20},
    {"DeformConv", 19},
    {"DequantizeLinear", 21},
    {"Gelu", 20},
    {"GroupNormalization", 18},
    {"ImageDecoder", 20},
    {"LpPool", 18},
    {"Mish", 18},
    {"OptionalHasElement", 18},
    {"Pad", 18},
    {"QuantizeLinear", 19},
    {"ReduceL1", 18},
    {"ReduceL2", 18},
    {"ReduceLogSum", 18},
    {"ReduceLogSumExp", 18},
    {"ReduceMax", 18},
    {"ReduceMean", 18},
    {"ReduceMin", 18},
    {"ReduceProd", 18},
    {"ReduceSumSquare", 18},
    {"RegexFullMatch", 20},
    {"Resize", 18},
    {"Split", 18},
    {"StringConcat", 20},
    {"StringSplit", 20},
    // Opsets 22..28.
    {"Attention", 23},
    {"BitCast", 26},
    {"CausalConvWithState", 27},
    {"CumProd", 26},
    {"LinearAttention", 27},
    {"RMSNormalization", 23},
    {"Range", 27},
    {"RotaryEmbedding", 23},
    {"SpaceToDepth", 28},
    {"SwiGLU", 28},
    {"Swish", 24},
    {"TensorScatter", 24},
};

bool isDefaultDomain(StringRef domain) {
  return domain.empty() || domain == "ai.onnx";
}

/// The newest opset of the default domain that the linked libonnx knows.
int libraryOpset() {
  const auto &ranges =
      onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto it = ranges.find("");
  return it == ranges.end() ? 0 : it->second.second;
}

/// libonnx's messages start with "Node (<name>) has ..." or
/// "Node (<name>)'s input ..."; the prefix is replaced by memopt's "node
/// '<name>' (<type>): ".
std::string stripNodePrefix(std::string message, const std::string &name) {
  for (StringRef prefix : {") has ", ")'s ", ") "}) {
    std::string full = "Node (" + name + prefix.str();
    if (StringRef(message).starts_with(full))
      return message.substr(full.size());
  }
  // "Mismatched attribute type in '<node> : <attribute>'".
  std::string mismatch = "Mismatched attribute type in '" + name + " : ";
  if (StringRef(message).starts_with(mismatch))
    return "attribute '" + message.substr(mismatch.size()) +
           " has the wrong type for the operator";
  // ValidationError::AppendContext adds "\n\n==> Context: ..."; one line is
  // enough.
  size_t newline = message.find('\n');
  if (newline != std::string::npos)
    message.resize(newline);
  return message;
}

class ModelChecker {
public:
  ModelChecker(const onnx::ModelProto &model, StringRef path,
               MLIRContext &context)
      : model(model), graph(model.graph()), path(path), context(context) {}

  LogicalResult run();

private:
  Location nameLoc(StringRef name) {
    return NameLoc::get(StringAttr::get(&context, name),
                        FileLineColLoc::get(&context, path, 0, 0));
  }
  LogicalResult checkNode(const onnx::NodeProto &node, const std::string &name,
                          const onnx::checker::CheckerContext &checker,
                          const onnx::checker::LexicalScopeContext &scope);

  const onnx::ModelProto &model;
  const onnx::GraphProto &graph;
  StringRef path;
  MLIRContext &context;
  int defaultOpset = 0;
};

} // namespace

LogicalResult ModelChecker::run() {
  onnx::checker::CheckerContext checker;
  int irVersion = static_cast<int>(model.ir_version());
  checker.set_ir_version(irVersion <= 0
                             ? onnx::Version::IR_VERSION
                             : std::min<int>(irVersion, onnx::IR_VERSION));
  std::unordered_map<std::string, int> opsets;
  for (const onnx::OperatorSetIdProto &entry : model.opset_import()) {
    int version = static_cast<int>(entry.version());
    opsets[entry.domain()] = version;
    if (isDefaultDomain(entry.domain())) {
      opsets[""] = opsets["ai.onnx"] = version;
      defaultOpset = version;
    }
  }
  checker.set_opset_imports(opsets);
  SmallString<256> folder = llvm::sys::path::parent_path(path);
  if (!folder.empty())
    folder += "/";
  checker.set_model_dir(folder.str().str());

  // Names defined so far: graph inputs, initializers, node outputs.
  onnx::checker::LexicalScopeContext scope;
  llvm::StringSet<> inputs;
  for (const onnx::ValueInfoProto &input : graph.input()) {
    if (input.name().empty())
      return emitError(FileLineColLoc::get(&context, path, 0, 0))
             << "a graph input has an empty name";
    if (!inputs.insert(input.name()).second)
      return emitError(nameLoc(input.name())) << "graph input '" << input.name()
                                              << "' is declared more than once";
    scope.output_names.insert(input.name());
  }
  llvm::StringSet<> initializers;
  for (const onnx::TensorProto &tensor : graph.initializer()) {
    Location loc = nameLoc(tensor.name());
    if (tensor.name().empty())
      return emitError(FileLineColLoc::get(&context, path, 0, 0))
             << "an initializer has an empty name";
    if (!initializers.insert(tensor.name()).second)
      return emitError(loc) << "initializer '" << tensor.name()
                            << "' is declared more than once";
    scope.output_names.insert(tensor.name());
    // The importer checks external data itself (and names the file).
    if (tensor.data_location() == onnx::TensorProto::EXTERNAL)
      continue;
    try {
      onnx::checker::check_tensor(tensor, checker);
    } catch (const std::exception &error) {
      return emitError(loc) << "initializer '" << tensor.name()
                            << "': " << stripNodePrefix(error.what(), "");
    }
  }

  for (auto [index, node] : llvm::enumerate(graph.node())) {
    std::string name = node.name().empty()
                           ? node.op_type() + "_" + std::to_string(index)
                           : node.name();
    Location loc = nameLoc(name);
    std::string describe = "node '" + name + "' (" + node.op_type() + ")";
    for (auto [i, input] : llvm::enumerate(node.input())) {
      if (input.empty() || scope.output_names.count(input))
        continue;
      return emitError(loc) << describe << ": input " << i << " ('" << input
                            << "') is not produced by any earlier node, "
                               "initializer or graph input";
    }
    if (failed(checkNode(node, name, checker, scope)))
      return failure();
    for (auto [i, output] : llvm::enumerate(node.output())) {
      if (output.empty())
        continue;
      if (!scope.output_names.insert(output).second)
        return emitError(loc)
               << describe << ": output " << i << " ('" << output
               << "') is already defined by an earlier node, an initializer "
                  "or a graph input (ONNX graphs assign each name once)";
    }
  }
  return success();
}

LogicalResult
ModelChecker::checkNode(const onnx::NodeProto &node, const std::string &name,
                        const onnx::checker::CheckerContext &checker,
                        const onnx::checker::LexicalScopeContext &scope) {
  Location loc = nameLoc(name);
  std::string describe = "node '" + name + "' (" + node.op_type() + ")";
  if (node.input().empty() && node.output().empty())
    return emitError(loc) << describe << " has no inputs and no outputs";
  llvm::StringSet<> attributeNames;
  for (const onnx::AttributeProto &attr : node.attribute())
    if (!attributeNames.insert(attr.name()).second)
      return emitError(loc) << describe << ": attribute '" << attr.name()
                            << "' is given more than once";
  try {
    for (const onnx::AttributeProto &attr : node.attribute())
      onnx::checker::check_attribute(attr, checker, scope);
    if (!isDefaultDomain(node.domain()))
      return success();
    auto change = kSignatureChanges.find(node.op_type());
    if (change != kSignatureChanges.end() && defaultOpset >= change->second &&
        change->second > libraryOpset())
      return success();
    const onnx::OpSchema *schema =
        onnx::OpSchemaRegistry::Schema(node.op_type(), defaultOpset, "");
    // Operators libonnx does not know are the importer's to report.
    if (!schema)
      return success();
    if (schema->Deprecated())
      return emitError(loc) << describe << ": " << node.op_type()
                            << " is deprecated at opset " << defaultOpset;
    schema->Verify(node);
  } catch (const std::exception &error) {
    return emitError(loc) << describe << ": "
                          << stripNodePrefix(error.what(), node.name());
  }
  return success();
}

LogicalResult mlir::memopt::onnx_import::checkOnnxModel(
    const onnx::ModelProto &model, StringRef path, MLIRContext &context) {
  return ModelChecker(model, path, context).run();
}
