//===- SaveOnnx.cpp - a trained model as ONNX, without protobuf -----------===//
//
// memopt-compile --train writes OUT.onnx-template: the source model without
// the initializers it trains (every other initializer inlined). Saving the
// trained model appends one more `graph` field to those bytes, holding the
// trained initializers as raw float data. Protobuf merges repeated
// occurrences of an embedded message field, so every ONNX reader (onnx,
// onnxruntime) sees one graph with all its initializers. The runtime thus
// needs no protobuf library: the encoder below writes four TensorProto
// fields with varints and length prefixes.
//
// Where this follows onnxruntime-training: its CheckpointState / "export
// model for inferencing" also writes the trained parameters back under their
// ONNX initializer names into the original graph.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include <fstream>
#include <iterator>

namespace memopt::rt {
namespace {

void putVarint(std::string &out, uint64_t value) {
  while (value >= 0x80) {
    out += char((value & 0x7f) | 0x80);
    value >>= 7;
  }
  out += char(value);
}

/// A length-delimited field (wire type 2).
void putBytes(std::string &out, int field, const std::string &bytes) {
  putVarint(out, (uint64_t(field) << 3) | 2);
  putVarint(out, bytes.size());
  out += bytes;
}

/// ONNX TensorProto.DataType of a runtime dtype (0 when ONNX has none).
int onnxDataType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return 1;
  case DType::F16:
    return 10;
  case DType::BF16:
    return 16;
  case DType::F64:
    return 11;
  case DType::I64:
    return 7;
  case DType::I32:
    return 6;
  case DType::I8:
    return 3;
  case DType::U8:
    return 2;
  case DType::Bool:
    return 9;
  }
  return 0;
}

} // namespace

bool writeTrainedOnnx(const ProgramInfo &program,
                      const std::vector<uint8_t> &region,
                      const std::string &templatePath,
                      const std::string &outputPath, std::string &error) {
  std::ifstream in(templatePath, std::ios::binary);
  if (!in) {
    error = "cannot read the training template '" + templatePath +
            "' (memopt-compile --train writes OUT.onnx-template next to "
            "the executable; pass --template FILE if it moved)";
    return false;
  }
  std::string model((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  std::string graph;
  int saved = 0;
  for (int w = 0; w < program.numWeights; ++w) {
    const TensorInfo &info = program.weights[w];
    // Parameters and BatchNormalization's running statistics (updated in
    // training mode): the template left both out.
    if (info.role != WeightRole::Parameter &&
        info.role != WeightRole::Statistic)
      continue;
    size_t bytes = tensorBytes(info);
    if (info.offset < 0 || size_t(info.offset) + bytes > region.size()) {
      error = std::string("parameter '") + info.name +
              "' lies outside the weight region";
      return false;
    }
    std::string tensor;
    for (int d = 0; d < info.rank; ++d) { // dims, field 1 (varint)
      putVarint(tensor, (1 << 3) | 0);
      putVarint(tensor, uint64_t(info.shape[d]));
    }
    putVarint(tensor, (2 << 3) | 0); // data_type, field 2
    putVarint(tensor, uint64_t(onnxDataType(info.dtype)));
    putBytes(tensor, 8, info.name); // name
    putBytes(
        tensor, 9, // raw_data (little-endian, as ONNX)
        std::string(reinterpret_cast<const char *>(region.data()) + info.offset,
                    bytes));
    putBytes(graph, 5, tensor); // GraphProto.initializer
    ++saved;
  }
  if (saved == 0) {
    error = "the program has no trained parameters to save";
    return false;
  }
  putBytes(model, 7, graph); // ModelProto.graph, merged into the first
  return writeFileAtomically(
      outputPath, std::vector<uint8_t>(model.begin(), model.end()), error);
}

} // namespace memopt::rt
