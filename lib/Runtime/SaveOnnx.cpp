//===- SaveOnnx.cpp - a trained model as ONNX, without protobuf -----------===//
//
// memopt-compile --train writes OUT.onnx-template: the source model without
// the initializers it trains (every other initializer inlined). Saving the
// trained model appends one more `graph` field to those bytes, holding the
// trained initializers as raw data. Protobuf merges repeated occurrences of
// an embedded message field, so every ONNX reader (onnx, onnxruntime) sees
// one graph with all its initializers. The runtime thus needs no protobuf
// library: the encoder below writes a few TensorProto fields with varints
// and length prefixes. Every length is known from the weight table before
// any tensor is read, so the file is written front to back with one tensor
// on the host at a time (the template is copied in chunks). A model that
// would reach protobuf's 2 GiB limit (or any, when asked) keeps its
// initializers as external data: OUTPUT.data beside it, each tensor at a
// 4 KiB-aligned offset (ONNX's `location` / `offset` / `length` entries and
// data_location EXTERNAL), as onnx.save_model(save_as_external_data=True)
// writes them.
//
// Where this follows onnxruntime-training: its CheckpointState / "export
// model for inferencing" also writes the trained parameters back under their
// ONNX initializer names into the original graph.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

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

/// A varint field (wire type 0).
void putVarintField(std::string &out, int field, uint64_t value) {
  putVarint(out, uint64_t(field) << 3);
  putVarint(out, value);
}

size_t varintBytes(uint64_t value) {
  size_t n = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++n;
  }
  return n;
}

/// The bytes of a length-delimited field's key and length prefix.
size_t fieldPrefixBytes(int field, uint64_t length) {
  return varintBytes(uint64_t(field) << 3 | 2) + varintBytes(length);
}

/// Where external data is put: offsets aligned for mmap.
constexpr int64_t kExternalAlignment = 4096;

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

bool writeTrainedOnnx(const ProgramInfo &program, const TensorReader &read,
                      const std::string &templatePath,
                      const std::string &outputPath, ExternalData external,
                      std::string &error) {
  std::ifstream in(templatePath, std::ios::binary | std::ios::ate);
  if (!in) {
    error = "cannot read the training template '" + templatePath +
            "' (memopt-compile --train writes OUT.onnx-template next to "
            "the executable; pass --template FILE if it moved)";
    return false;
  }
  int64_t templateBytes = int64_t(in.tellg());
  in.seekg(0);
  // Each saved tensor's fields but its data, and its data's size.
  struct Saved {
    int w;
    std::string fields;
    int64_t bytes;
    int64_t offset; ///< in the external data file
  };
  std::vector<Saved> saved;
  int64_t dataBytes = 0;
  for (int w = 0; w < program.numWeights; ++w) {
    const TensorInfo &info = program.weights[w];
    // Parameters and BatchNormalization's running statistics (updated in
    // training mode): the template left both out.
    if (info.role != WeightRole::Parameter &&
        info.role != WeightRole::Statistic)
      continue;
    if (info.offset < 0 ||
        info.offset + int64_t(tensorBytes(info)) > program.weightBytes) {
      error = std::string("parameter '") + info.name +
              "' lies outside the weight region";
      return false;
    }
    // ZeRO-3: the region holds a shard; `read` gathers the whole.
    const TensorInfo &whole = wholeWeight(program, w);
    std::string fields;
    for (int d = 0; d < whole.rank; ++d) // dims
      putVarintField(fields, 1, uint64_t(whole.shape[d]));
    putVarintField(fields, 2, uint64_t(onnxDataType(whole.dtype)));
    putBytes(fields, 8, whole.name); // name
    saved.push_back({w, fields, int64_t(tensorBytes(whole)), 0});
    dataBytes += int64_t(tensorBytes(whole));
  }
  if (saved.empty()) {
    error = "the program has no trained parameters to save";
    return false;
  }
  bool outside = external == ExternalData::Always ||
                 (external == ExternalData::Auto &&
                  templateBytes + dataBytes + 64 * int64_t(saved.size()) >=
                      kOnnxExternalDataBytes);
  std::string dataName = outputPath.substr(outputPath.rfind('/') + 1) + ".data";
  std::string dataPath = outputPath + ".data";
  int64_t graphBytes = 0, end = 0;
  for (Saved &tensor : saved) {
    if (outside) {
      tensor.offset = (end + kExternalAlignment - 1) / kExternalAlignment *
                      kExternalAlignment;
      end = tensor.offset + tensor.bytes;
      // external_data (StringStringEntryProto: key 1, value 2), then
      // data_location EXTERNAL.
      for (const auto &[key, value] :
           {std::pair<std::string, std::string>{"location", dataName},
            {"offset", std::to_string(tensor.offset)},
            {"length", std::to_string(tensor.bytes)}}) {
        std::string entry;
        putBytes(entry, 1, key);
        putBytes(entry, 2, value);
        putBytes(tensor.fields, 13, entry);
      }
      putVarintField(tensor.fields, 14, 1);
    }
    int64_t tensorBytes =
        int64_t(tensor.fields.size()) +
        (outside ? 0
                 : int64_t(fieldPrefixBytes(9, uint64_t(tensor.bytes))) +
                       tensor.bytes);
    graphBytes +=
        int64_t(fieldPrefixBytes(5, uint64_t(tensorBytes))) + tensorBytes;
  }

  std::string temporary = outputPath + ".tmp",
              dataTemporary = dataPath + ".tmp";
  FILE *out = std::fopen(temporary.c_str(), "wb");
  FILE *data = outside ? std::fopen(dataTemporary.c_str(), "wb") : nullptr;
  bool ok = out && (!outside || data);
  if (!ok)
    error = "cannot write '" + (out ? dataTemporary : temporary) +
            "': " + std::strerror(errno);
  auto put = [&](FILE *file, const void *bytes, size_t size) {
    if (ok && size && std::fwrite(bytes, 1, size, file) != size) {
      error = "cannot write '" + (file == out ? temporary : dataTemporary) +
              "': " + std::strerror(errno);
      ok = false;
    }
  };
  // The template, in chunks.
  std::vector<char> buffer(size_t(1) << 20);
  for (int64_t left = templateBytes; ok && left > 0;) {
    size_t n = size_t(std::min<int64_t>(left, int64_t(buffer.size())));
    if (!in.read(buffer.data(), std::streamsize(n))) {
      error = "cannot read the training template '" + templatePath + "'";
      ok = false;
    }
    put(out, buffer.data(), n);
    left -= int64_t(n);
  }
  // ModelProto.graph, merged into the template's; its initializers.
  std::string prefix;
  putVarint(prefix, (7 << 3) | 2);
  putVarint(prefix, uint64_t(graphBytes));
  put(out, prefix.data(), prefix.size());
  std::vector<uint8_t> bytes;
  int64_t written = 0;
  for (const Saved &tensor : saved) {
    if (!ok)
      break;
    int64_t size =
        int64_t(tensor.fields.size()) +
        (outside ? 0
                 : int64_t(fieldPrefixBytes(9, uint64_t(tensor.bytes))) +
                       tensor.bytes);
    prefix.clear();
    putVarint(prefix, (5 << 3) | 2);
    putVarint(prefix, uint64_t(size));
    prefix += tensor.fields;
    if (!outside) { // raw_data (little-endian, as ONNX)
      putVarint(prefix, (9 << 3) | 2);
      putVarint(prefix, uint64_t(tensor.bytes));
    }
    put(out, prefix.data(), prefix.size());
    if (ok && !read(tensor.w, bytes, error))
      ok = false;
    if (ok && int64_t(bytes.size()) != tensor.bytes) {
      error = std::string("parameter '") + program.weights[tensor.w].name +
              "' read back with the wrong size";
      ok = false;
    }
    if (outside) {
      static const char zeros[kExternalAlignment] = {};
      put(data, zeros, size_t(tensor.offset - written));
      written = tensor.offset + tensor.bytes;
    }
    put(outside ? data : out, bytes.data(), bytes.size());
  }
  for (FILE *file : {out, data})
    if (file && std::fclose(file) != 0 && ok) {
      error =
          "cannot write '" + (file == out ? temporary : dataTemporary) + "'";
      ok = false;
    }
  if (ok && outside && std::rename(dataTemporary.c_str(), dataPath.c_str())) {
    error = "cannot rename '" + dataTemporary + "' to '" + dataPath + "'";
    ok = false;
  }
  if (ok && std::rename(temporary.c_str(), outputPath.c_str()) != 0) {
    error = "cannot rename '" + temporary + "' to '" + outputPath + "'";
    ok = false;
  }
  if (!ok) {
    std::remove(temporary.c_str());
    std::remove(dataTemporary.c_str());
  }
  return ok;
}

} // namespace memopt::rt
