//===- FuzzOnnxImport.cpp - fuzz target: ONNX import + graph pipeline -----===//
//
// Input: a binary ModelProto. Imported as memopt-compile imports it (libonnx
// checker, then the importer), and a module that imports runs the graph
// pipeline up to memory planning (FuzzPipeline.cpp).
//
// Structure-aware: LLVMFuzzerCustomMutator parses the input as a ModelProto,
// changes fields the way a user's tooling gets them wrong (node types,
// inputs renamed, emptied, dropped or added, attributes altered or removed,
// initializer dims and types, nodes deleted, duplicated or swapped, opsets,
// graph input shapes) and serializes it again; libprotobuf-mutator does the
// same in general, but Debian does not package it. Bytes that do not parse
// are mutated as bytes (and exercise the protobuf parser). A quarter of the
// time the byte mutator runs anyway, so field values get byte-level changes
// too.
//
//===----------------------------------------------------------------------===//

#include "FuzzPipeline.h"

#include "memopt/Import/OnnxImporter.h"

#include "onnx/onnx_pb.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace {

using Random = std::mt19937_64;

const char *const kOpTypes[] = {"Add",
                                "Sub",
                                "Mul",
                                "Div",
                                "Relu",
                                "Gemm",
                                "MatMul",
                                "Conv",
                                "MaxPool",
                                "AveragePool",
                                "Reshape",
                                "Transpose",
                                "Concat",
                                "Split",
                                "Slice",
                                "Gather",
                                "Softmax",
                                "ReduceMean",
                                "ReduceSum",
                                "Where",
                                "Expand",
                                "Unsqueeze",
                                "Squeeze",
                                "Flatten",
                                "Cast",
                                "Pad",
                                "Resize",
                                "Clip",
                                "Erf",
                                "Sqrt",
                                "Pow",
                                "LayerNormalization",
                                "BatchNormalization",
                                "Shape",
                                "ConstantOfShape",
                                "Range",
                                "Constant",
                                "Identity",
                                "Dropout",
                                "Sum",
                                "Max",
                                "Equal",
                                "GlobalAveragePool",
                                "ConvTranspose",
                                "Tanh",
                                "Sigmoid",
                                "HardSwish",
                                "Gelu",
                                "ScatterND",
                                "GatherElements",
                                "Tile",
                                "TopK"};
const char *const kAttributeNames[] = {
    "axis",   "axes",   "perm",    "to",       "alpha",        "beta",
    "mode",   "pads",   "group",   "keepdims", "kernel_shape", "strides",
    "transA", "transB", "epsilon", "value",    "dilations",    "ceil_mode"};
const int64_t kInterestingInts[] = {
    -(int64_t(1) << 62), -65536, -2, -1, 0, 1, 2, 3, 7, 64, 1 << 20,
    int64_t(1) << 40};

template <typename T, size_t N> const T &pick(const T (&array)[N], Random &r) {
  return array[r() % N];
}

int64_t interestingInt(Random &random) {
  return pick(kInterestingInts, random);
}

std::vector<std::string> valueNames(const onnx::GraphProto &graph) {
  std::vector<std::string> names;
  for (const auto &input : graph.input())
    names.push_back(input.name());
  for (const auto &tensor : graph.initializer())
    names.push_back(tensor.name());
  for (const auto &node : graph.node())
    for (const auto &output : node.output())
      names.push_back(output);
  names.push_back("");
  names.push_back("no_such_value");
  return names;
}

void mutateAttribute(onnx::AttributeProto &attr, Random &random) {
  switch (random() % 7) {
  case 0:
    attr.set_i(interestingInt(random));
    break;
  case 1:
    if (attr.ints_size() > 0)
      attr.set_ints(random() % attr.ints_size(), interestingInt(random));
    else
      attr.add_ints(interestingInt(random));
    break;
  case 2:
    if (attr.ints_size() > 0 && random() % 2)
      attr.mutable_ints()->RemoveLast();
    else
      attr.add_ints(interestingInt(random));
    break;
  case 3:
    attr.set_f(random() % 2 ? -1e30f : 0.0f);
    break;
  case 4:
    attr.set_type(
        static_cast<onnx::AttributeProto::AttributeType>(random() % 15));
    break;
  case 5:
    attr.set_name(pick(kAttributeNames, random));
    break;
  default:
    attr.set_s(random() % 2 ? "nearest" : "bogus");
    break;
  }
}

/// One field-level change of `model`.
void mutateModel(onnx::ModelProto &model, Random &random) {
  onnx::GraphProto &graph = *model.mutable_graph();
  int nodes = graph.node_size();
  unsigned choice = random() % 16;
  if (nodes == 0 && choice < 10)
    choice = 10 + random() % 6;
  onnx::NodeProto *node =
      nodes ? graph.mutable_node(random() % nodes) : nullptr;
  switch (choice) {
  case 0:
    node->set_op_type(pick(kOpTypes, random));
    return;
  case 1: { // rename (or empty) an input
    std::vector<std::string> names = valueNames(graph);
    if (node->input_size() == 0)
      node->add_input(names[random() % names.size()]);
    else
      node->set_input(random() % node->input_size(),
                      names[random() % names.size()]);
    return;
  }
  case 2: // drop the last input, or add one
    if (node->input_size() > 0 && random() % 2)
      node->mutable_input()->RemoveLast();
    else
      node->add_input(valueNames(graph)[0]);
    return;
  case 3:
    if (node->attribute_size() > 0)
      mutateAttribute(
          *node->mutable_attribute(random() % node->attribute_size()), random);
    return;
  case 4: { // add an attribute
    onnx::AttributeProto *attr = node->add_attribute();
    attr->set_name(pick(kAttributeNames, random));
    attr->set_type(random() % 2 ? onnx::AttributeProto::INT
                                : onnx::AttributeProto::INTS);
    if (attr->type() == onnx::AttributeProto::INT)
      attr->set_i(interestingInt(random));
    else
      attr->add_ints(interestingInt(random));
    return;
  }
  case 5:
    if (node->attribute_size() > 0)
      node->mutable_attribute()->DeleteSubrange(
          random() % node->attribute_size(), 1);
    return;
  case 6: // delete a node
    graph.mutable_node()->DeleteSubrange(random() % nodes, 1);
    return;
  case 7: // duplicate a node (its outputs are then assigned twice)
    *graph.add_node() = *node;
    return;
  case 8: // swap two nodes (breaks the topological order)
    graph.mutable_node()->SwapElements(random() % nodes, random() % nodes);
    return;
  case 9: { // rename an output
    std::vector<std::string> names = valueNames(graph);
    if (node->output_size() > 0)
      node->set_output(random() % node->output_size(),
                       names[random() % names.size()]);
    return;
  }
  case 10: // opset
    if (model.opset_import_size() > 0)
      model.mutable_opset_import(0)->set_version(random() % 24);
    return;
  case 11: { // initializer dims or type
    if (graph.initializer_size() == 0)
      return;
    onnx::TensorProto &tensor =
        *graph.mutable_initializer(random() % graph.initializer_size());
    if (random() % 4 == 0) {
      tensor.set_data_type(static_cast<int32_t>(random() % 24));
    } else if (tensor.dims_size() > 0 && random() % 2) {
      tensor.set_dims(random() % tensor.dims_size(), interestingInt(random));
    } else {
      tensor.add_dims(random() % 3);
    }
    return;
  }
  case 12: { // graph input shape or element type
    if (graph.input_size() == 0)
      return;
    onnx::TypeProto::Tensor &type =
        *graph.mutable_input(random() % graph.input_size())
             ->mutable_type()
             ->mutable_tensor_type();
    if (random() % 3 == 0) {
      type.set_elem_type(static_cast<int32_t>(random() % 24));
    } else {
      onnx::TensorShapeProto &shape = *type.mutable_shape();
      if (shape.dim_size() > 0 && random() % 2)
        shape.mutable_dim(random() % shape.dim_size())
            ->set_dim_value(random() % 2 ? interestingInt(random)
                                         : int64_t(random() % 9));
      else
        shape.add_dim()->set_dim_value(random() % 4);
    }
    return;
  }
  case 13: // graph output
    if (graph.output_size() > 0)
      graph.mutable_output(random() % graph.output_size())
          ->set_name(valueNames(graph)[random() % valueNames(graph).size()]);
    return;
  case 14: // a raw_data payload cut short
    if (graph.initializer_size() > 0) {
      onnx::TensorProto &tensor =
          *graph.mutable_initializer(random() % graph.initializer_size());
      if (!tensor.raw_data().empty())
        tensor.mutable_raw_data()->resize(random() % tensor.raw_data().size());
    }
    return;
  default:
    model.set_ir_version(random() % 12);
    return;
  }
}

} // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned seed) {
  Random random(seed);
  onnx::ModelProto model;
  if (random() % 4 == 0 || !model.ParseFromArray(data, static_cast<int>(size)))
    return LLVMFuzzerMutate(data, size, maxSize);
  unsigned count = 1 + random() % 3;
  for (unsigned i = 0; i < count; ++i)
    mutateModel(model, random);
  std::string bytes;
  if (!model.SerializeToString(&bytes) || bytes.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, bytes.data(), bytes.size());
  return bytes.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static std::unique_ptr<mlir::MLIRContext> context =
      memopt::fuzz::makeQuietContext();
  mlir::memopt::ImportOptions options;
  // A folder that does not exist: relative external-data paths fail cleanly
  // instead of reading whatever the working directory holds.
  auto module = mlir::memopt::importOnnxModelFromBuffer(
      llvm::StringRef(reinterpret_cast<const char *>(data), size),
      "/nonexistent-memopt-fuzz/model.onnx", *context, options);
  if (succeeded(module))
    memopt::fuzz::runGraphPipeline(module->get());
  return 0;
}
