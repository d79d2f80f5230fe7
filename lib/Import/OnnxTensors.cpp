//===- OnnxTensors.cpp - ONNX tensors and types -> MLIR -------------------===//
//
// Reading a TensorProto follows the ONNX IR spec (onnx/onnx.proto): the
// payload is `raw_data` when present (little-endian, the element's natural
// width), else the typed repeated field for the data type (FLOAT16/BFLOAT16,
// INT8/UINT8/INT16/BOOL in `int32_data`, one element each), or an external
// file named by the `location`/`offset`/`length` keys. onnx-mlir's importer
// does the same walk; here large tensors go to a `dense_resource` blob
// instead of an inline attribute, so the printed IR stays small, and a large
// tensor in an external file is not copied at all: its blob points into the
// file, mapped read-only (WeightBlobs.h), so a model's weights never live in
// the compiler's heap.
//
// The host is assumed little-endian, as ONNX's raw_data is.
//
//===----------------------------------------------------------------------===//

#include "OnnxTensors.h"

#include "memopt/Dialect/MemOpt/IR/WeightBlobs.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstring>

using namespace mlir;
using namespace mlir::memopt;
using namespace mlir::memopt::onnx_import;

using onnx::TensorProto;

Type onnx_import::convertElementType(int32_t onnxType, MLIRContext *context) {
  Builder b(context);
  switch (onnxType) {
  case TensorProto::FLOAT:
    return b.getF32Type();
  case TensorProto::FLOAT16:
    return b.getF16Type();
  case TensorProto::BFLOAT16:
    return b.getBF16Type();
  case TensorProto::DOUBLE:
    return b.getF64Type();
  case TensorProto::INT64:
    return b.getI64Type();
  case TensorProto::INT32:
    return b.getI32Type();
  case TensorProto::INT8:
    return b.getI8Type();
  case TensorProto::UINT8:
    return b.getIntegerType(8, /*isSigned=*/false);
  case TensorProto::BOOL:
    return b.getI1Type();
  default:
    return {};
  }
}

StringRef onnx_import::onnxTypeName(int32_t onnxType) {
  if (TensorProto::DataType_IsValid(onnxType))
    return TensorProto::DataType_Name(
        static_cast<TensorProto::DataType>(onnxType));
  return "unknown";
}

int32_t onnx_import::onnxTypeOf(Type type) {
  if (type.isF32())
    return TensorProto::FLOAT;
  if (type.isF16())
    return TensorProto::FLOAT16;
  if (type.isBF16())
    return TensorProto::BFLOAT16;
  if (type.isF64())
    return TensorProto::DOUBLE;
  if (type.isInteger(1))
    return TensorProto::BOOL;
  if (type.isUnsignedInteger(8))
    return TensorProto::UINT8;
  if (type.isInteger(8))
    return TensorProto::INT8;
  if (type.isInteger(32))
    return TensorProto::INT32;
  if (type.isInteger(64))
    return TensorProto::INT64;
  return TensorProto::UNDEFINED;
}

/// Bytes per element in the raw layout (bool is one byte in ONNX).
static size_t storageBytes(Type type) {
  if (type.isInteger(1))
    return 1;
  return type.getIntOrFloatBitWidth() / 8;
}

/// Copies the typed repeated field of `tensor` into `bytes` (the raw layout).
static LogicalResult readTypedFields(const TensorProto &tensor,
                                     int64_t numElements, size_t width,
                                     std::string &bytes, Location loc) {
  bytes.assign(numElements * width, '\0');
  auto copyAll = [&](const auto &field, auto convert) -> LogicalResult {
    if (field.size() != numElements)
      return emitError(loc)
             << "tensor '" << tensor.name() << "' holds " << field.size()
             << " values for " << numElements << " elements";
    for (int64_t i = 0; i < numElements; ++i) {
      auto value = convert(field.Get(i));
      std::memcpy(&bytes[i * width], &value, width);
    }
    return success();
  };
  switch (tensor.data_type()) {
  case TensorProto::FLOAT:
    return copyAll(tensor.float_data(), [](float v) { return v; });
  case TensorProto::DOUBLE:
    return copyAll(tensor.double_data(), [](double v) { return v; });
  case TensorProto::INT64:
    return copyAll(tensor.int64_data(), [](int64_t v) { return v; });
  case TensorProto::INT32:
    return copyAll(tensor.int32_data(), [](int32_t v) { return v; });
  case TensorProto::FLOAT16:
  case TensorProto::BFLOAT16:
    return copyAll(tensor.int32_data(),
                   [](int32_t v) { return static_cast<uint16_t>(v); });
  case TensorProto::INT8:
  case TensorProto::UINT8:
    return copyAll(tensor.int32_data(),
                   [](int32_t v) { return static_cast<uint8_t>(v); });
  case TensorProto::BOOL:
    return copyAll(tensor.int32_data(),
                   [](int32_t v) { return static_cast<uint8_t>(v != 0); });
  default:
    return emitError(loc) << "tensor '" << tensor.name()
                          << "' has no data for its type";
  }
}

/// Maps the external data of `tensor` (keys location/offset/length) as a
/// blob that points into the file (include/memopt/Dialect/MemOpt/IR/
/// WeightBlobs.h): the bytes are not copied.
static FailureOr<AsmResourceBlob>
mapExternalData(const TensorProto &tensor, StringRef modelFolder,
                size_t expectedBytes, size_t alignment, Location loc) {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const auto &entry : tensor.external_data()) {
    auto parse = [&](uint64_t &out) -> LogicalResult {
      if (StringRef(entry.value()).getAsInteger(10, out))
        return emitError(loc)
               << "tensor '" << tensor.name() << "' has external data key '"
               << entry.key() << "' with a non-integer value '" << entry.value()
               << "'";
      return success();
    };
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset") {
      if (failed(parse(offset)))
        return failure();
    } else if (entry.key() == "length") {
      uint64_t value = 0;
      if (failed(parse(value)))
        return failure();
      length = value;
    }
  }
  if (location.empty())
    return emitError(loc) << "tensor '" << tensor.name()
                          << "' has external data without a 'location'";
  SmallString<256> path(modelFolder);
  llvm::sys::path::append(path, location);
  std::string error;
  FailureOr<uint64_t> fileSize = getMappedFileSize(path, error);
  if (failed(fileSize))
    return emitError(loc) << "tensor '" << tensor.name()
                          << "' stores its data in external file '" << location
                          << "', which cannot be read (" << error << ")";
  uint64_t size = length.value_or(*fileSize > offset ? *fileSize - offset : 0);
  if (offset > *fileSize || size > *fileSize - offset)
    return emitError(loc) << "tensor '" << tensor.name() << "' reads bytes ["
                          << offset << ", " << offset + size
                          << ") of external file '" << location
                          << "', which has only " << *fileSize << " bytes";
  if (size != expectedBytes)
    return emitError(loc) << "tensor '" << tensor.name() << "' needs "
                          << expectedBytes << " bytes but external file '"
                          << location << "' provides " << size;
  FailureOr<AsmResourceBlob> blob =
      mapFileBlob(path, offset, size, alignment, error);
  if (failed(blob))
    return emitError(loc) << "tensor '" << tensor.name()
                          << "' cannot map external file '" << location << "' ("
                          << error << ")";
  return blob;
}

/// Copies the external data of `tensor` into `bytes` (small tensors, and
/// the training template).
static LogicalResult readExternalData(const TensorProto &tensor,
                                      StringRef modelFolder,
                                      size_t expectedBytes, std::string &bytes,
                                      Location loc) {
  FailureOr<AsmResourceBlob> blob =
      mapExternalData(tensor, modelFolder, expectedBytes, 1, loc);
  if (failed(blob))
    return failure();
  bytes.assign(blob->getData().data(), blob->getData().size());
  return success();
}

LogicalResult mlir::memopt::onnx_import::inlineExternalData(
    TensorProto &tensor, StringRef modelFolder, Location loc) {
  if (tensor.data_location() != TensorProto::EXTERNAL)
    return success();
  Type elementType = convertElementType(tensor.data_type(), loc.getContext());
  if (!elementType)
    return emitError(loc) << "tensor '" << tensor.name()
                          << "' has an unsupported element type";
  size_t expectedBytes = storageBytes(elementType);
  for (int64_t dim : tensor.dims())
    expectedBytes *= size_t(dim);
  std::string bytes;
  if (failed(readExternalData(tensor, modelFolder, expectedBytes, bytes, loc)))
    return failure();
  tensor.clear_external_data();
  tensor.set_data_location(TensorProto::DEFAULT);
  tensor.set_raw_data(std::move(bytes));
  return success();
}

/// A resource key made of identifier characters, so it prints bare.
static std::string blobKey(StringRef tensorName) {
  std::string key;
  for (char c : tensorName)
    key.push_back(llvm::isAlnum(c) ? c : '_');
  if (key.empty() || llvm::isDigit(key.front()))
    key.insert(0, "w_");
  return key;
}

ElementsAttr onnx_import::convertTensor(const TensorProto &tensor,
                                        StringRef modelFolder, Location loc) {
  MLIRContext *context = loc.getContext();
  Type elementType = convertElementType(tensor.data_type(), context);
  if (!elementType) {
    emitError(loc) << "tensor '" << tensor.name() << "' has element type "
                   << onnxTypeName(tensor.data_type())
                   << ", which memopt does not support";
    return {};
  }
  SmallVector<int64_t> shape;
  int64_t numElements = 1;
  for (int64_t dim : tensor.dims()) {
    if (dim < 0) {
      emitError(loc) << "tensor '" << tensor.name()
                     << "' has a negative dimension " << dim;
      return {};
    }
    shape.push_back(dim);
    if (llvm::MulOverflow(numElements, dim, numElements) ||
        numElements > (int64_t(1) << 50)) {
      emitError(loc) << "tensor '" << tensor.name()
                     << "' has more than 2^50 elements";
      return {};
    }
  }
  auto type = RankedTensorType::get(shape, elementType);
  size_t width = storageBytes(elementType);
  size_t expectedBytes = static_cast<size_t>(numElements) * width;

  // Large external tensors stay in their file: the attribute's blob points
  // into the mapping.
  bool large = numElements > kMaxInlineElements && !elementType.isInteger(1);
  if (tensor.data_location() == TensorProto::EXTERNAL && large) {
    FailureOr<AsmResourceBlob> blob = mapExternalData(
        tensor, modelFolder, expectedBytes, std::max<size_t>(width, 1), loc);
    if (failed(blob))
      return {};
    return DenseResourceElementsAttr::get(type, blobKey(tensor.name()),
                                          std::move(*blob));
  }
  std::string bytes;
  if (tensor.data_location() == TensorProto::EXTERNAL) {
    if (failed(
            readExternalData(tensor, modelFolder, expectedBytes, bytes, loc)))
      return {};
  } else if (tensor.has_raw_data()) {
    if (tensor.raw_data().size() != expectedBytes) {
      emitError(loc) << "tensor '" << tensor.name() << "' has "
                     << tensor.raw_data().size() << " bytes of raw_data, "
                     << "expected " << expectedBytes << " for " << type;
      return {};
    }
    bytes = tensor.raw_data();
  } else if (failed(readTypedFields(tensor, numElements, width, bytes, loc))) {
    return {};
  }

  // i1 has its own packed storage in DenseElementsAttr; ONNX bool is a byte.
  if (elementType.isInteger(1)) {
    SmallVector<bool> values;
    for (char c : bytes)
      values.push_back(c != 0);
    return DenseElementsAttr::get(type, ArrayRef<bool>(values));
  }
  ArrayRef<char> raw(bytes.data(), bytes.size());
  if (numElements <= kMaxInlineElements)
    return DenseElementsAttr::getFromRawBuffer(type, raw);
  return DenseResourceElementsAttr::get(
      type, blobKey(tensor.name()),
      HeapAsmResourceBlob::allocateAndCopyWithAlign(raw, alignof(uint64_t)));
}
