//===- OnnxStateKinds.cpp - which initializers are a model's parameters ---===//
//
// A training step trains a model's parameters, not every float initializer
// of its ONNX graph: the exporters also store module buffers (BatchNorm's
// running statistics, rotary `inv_freq`) and lifted or folded constants
// (mask fill values, GELU's coefficients, the attention scale) as
// initializers, and training those diverges (a -3.4e38 mask fill stepped by
// SGD is NaN by step two).
//
// torch.onnx's dynamo exporter says which is which: each initializer's
// ValueInfo carries `pkg.torch.export.graph_signature.InputSpec.kind`
// (PARAMETER, BUFFER, CONSTANT_TENSOR, from torch.export's graph
// signature), and its optimizer records on a folded tensor the names it was
// folded from (`pkg.onnxscript.optimizer.folded_from`): a weight's
// Transpose folded into `val_31` is still that parameter, in another
// layout, also when the parameter itself (and its ValueInfo) is gone from
// the graph, as every nn.Linear weight of a Llama export is. The metadata is a
// field (ValueInfoProto.metadata_props, onnx 1.16) that Debian's libonnx 1.12
// does not know; protobuf keeps it as an unknown field, read here through
// reflection whichever libonnx is linked.
//
// Models without that metadata (the TorchScript exporter, other tools)
// fall back to the naming conventions of the exporters: scalars, `val_*`,
// `_tensor_constant*`, `onnx::*` and `const*` are constants; names ending
// in a known buffer's name (running_mean, running_var, num_batches_tracked,
// inv_freq, position_ids) are buffers; everything else is trained, as
// before. `--train-params` / `--freeze` override both.
//
//===----------------------------------------------------------------------===//

#include "OnnxStateKinds.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MathExtras.h"

#include <functional>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/unknown_field_set.h>

using namespace mlir;
using namespace mlir::memopt::onnx_import;

namespace {

constexpr llvm::StringLiteral kKindKey =
    "pkg.torch.export.graph_signature.InputSpec.kind";
constexpr llvm::StringLiteral kFoldedFromKey =
    "pkg.onnxscript.optimizer.folded_from";
/// ValueInfoProto.metadata_props (onnx.proto, field 4).
constexpr int kMetadataPropsField = 4;

/// The metadata_props entries of `info`, known field or unknown.
SmallVector<std::pair<std::string, std::string>>
metadataOf(const onnx::ValueInfoProto &info) {
  SmallVector<std::pair<std::string, std::string>> entries;
  const google::protobuf::Reflection *reflection = info.GetReflection();
  const google::protobuf::FieldDescriptor *field =
      info.GetDescriptor()->FindFieldByName("metadata_props");
  if (field) {
    for (int i = 0, e = reflection->FieldSize(info, field); i < e; ++i) {
      const auto &entry = static_cast<const onnx::StringStringEntryProto &>(
          reflection->GetRepeatedMessage(info, field, i));
      entries.emplace_back(entry.key(), entry.value());
    }
    return entries;
  }
  const google::protobuf::UnknownFieldSet &unknown =
      reflection->GetUnknownFields(info);
  for (int i = 0, e = unknown.field_count(); i < e; ++i) {
    const google::protobuf::UnknownField &item = unknown.field(i);
    if (item.number() != kMetadataPropsField ||
        item.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::StringStringEntryProto entry;
    if (entry.ParseFromString(item.length_delimited()))
      entries.emplace_back(entry.key(), entry.value());
  }
  return entries;
}

/// "['a', 'b']" -> {"a", "b"}.
SmallVector<std::string> parseNameList(StringRef text) {
  SmallVector<std::string> names;
  SmallVector<StringRef> parts;
  text.trim().trim("[]").split(parts, ',', -1, /*KeepEmpty=*/false);
  for (StringRef part : parts) {
    StringRef name = part.trim().trim("'\"");
    if (!name.empty())
      names.push_back(name.str());
  }
  return names;
}

/// The tensor's element count; -1 for dims that are negative or whose product
/// overflows (a malformed file: the importer refuses the tensor itself).
int64_t elementCount(const onnx::TensorProto &tensor) {
  int64_t count = 1;
  for (int64_t dim : tensor.dims())
    if (dim < 0 || llvm::MulOverflow(count, dim, count))
      return -1;
  return count;
}

/// What the exporters' naming conventions say of `name` alone.
StateKind conventionKindOfName(StringRef name) {
  for (StringRef prefix : {"val_", "_tensor_constant", "onnx::", "const"})
    if (name.starts_with(prefix))
      return StateKind::Constant;
  for (StringRef suffix : {"running_mean", "running_var", "num_batches_tracked",
                           "inv_freq", "position_ids"})
    if (name.ends_with(suffix))
      return StateKind::Buffer;
  return StateKind::Unknown;
}

StateKind conventionKind(const onnx::TensorProto &tensor) {
  int64_t count = elementCount(tensor);
  if (count >= 0 && count <= 1)
    return StateKind::Constant;
  return conventionKindOfName(tensor.name());
}

} // namespace

StringRef mlir::memopt::onnx_import::stateKindName(StateKind kind) {
  switch (kind) {
  case StateKind::Parameter:
    return "parameter";
  case StateKind::Buffer:
    return "buffer";
  case StateKind::Constant:
    return "constant";
  case StateKind::Unknown:
    break;
  }
  return "";
}

llvm::StringMap<StateKind>
mlir::memopt::onnx_import::classifyInitializers(const onnx::GraphProto &graph) {
  llvm::StringMap<StateKind> declared;
  llvm::StringMap<SmallVector<std::string>> foldedFrom;
  for (const onnx::ValueInfoProto &info : graph.value_info()) {
    for (auto &[key, value] : metadataOf(info)) {
      if (key == kKindKey)
        declared[info.name()] = value == "PARAMETER" ? StateKind::Parameter
                                : value == "BUFFER"  ? StateKind::Buffer
                                                     : StateKind::Constant;
      else if (key == kFoldedFromKey)
        foldedFrom[info.name()] = parseNameList(value);
    }
  }

  llvm::StringMap<int64_t> counts;
  for (const onnx::TensorProto &tensor : graph.initializer())
    counts[tensor.name()] = elementCount(tensor);

  // The parameters a folded tensor came from, through folded intermediates.
  std::function<void(StringRef, llvm::StringSet<> &, SmallVector<StringRef> &)>
      parameterSources = [&](StringRef name, llvm::StringSet<> &seen,
                             SmallVector<StringRef> &sources) {
        if (!seen.insert(name).second)
          return;
        auto kind = declared.find(name);
        if (kind != declared.end()) {
          if (kind->second == StateKind::Parameter)
            sources.push_back(kind->first());
          return;
        }
        auto folded = foldedFrom.find(name);
        if (folded == foldedFrom.end()) {
          // A source that is gone from the graph (the optimizer replaced
          // the parameter by its folded form, and its ValueInfo with it):
          // the exporter names parameters by their module path, so a name
          // the conventions do not call a constant or a buffer is one.
          if (!counts.count(name) &&
              conventionKindOfName(name) == StateKind::Unknown)
            sources.push_back(name);
          return;
        }
        for (const std::string &source : folded->second)
          parameterSources(source, seen, sources);
      };

  llvm::StringMap<StateKind> kinds;
  bool exporterSays = !declared.empty();
  for (const onnx::TensorProto &tensor : graph.initializer()) {
    StringRef name = tensor.name();
    auto kind = declared.find(name);
    if (kind != declared.end()) {
      kinds[name] = kind->second;
      continue;
    }
    if (foldedFrom.count(name)) {
      // One parameter in another layout (a Transpose or Reshape folded by
      // the exporter) is that parameter; anything mixed from several
      // sources, or smaller or larger than its source, is a constant.
      llvm::StringSet<> seen;
      SmallVector<StringRef> sources;
      parameterSources(name, seen, sources);
      bool sameParameter =
          sources.size() == 1 &&
          (!counts.count(sources.front()) ||
           counts.lookup(sources.front()) == elementCount(tensor));
      kinds[name] = sameParameter ? StateKind::Parameter : StateKind::Constant;
      continue;
    }
    StateKind fallback =
        exporterSays ? StateKind::Constant : conventionKind(tensor);
    if (fallback != StateKind::Unknown)
      kinds[name] = fallback;
  }
  return kinds;
}
