//===- WeightImage.cpp - the weight region, written tensor by tensor ------===//
//
// include/memopt/Conversion/WeightImage.h says what and why. The writer
// keeps at most one bounded buffer (for splats, bools and converted
// weights); every other value is written straight from its attribute's
// storage.
//
//===----------------------------------------------------------------------===//

#include "memopt/Conversion/WeightImage.h"

#include "memopt/Dialect/MemOpt/IR/MemOptAttributes.h"
#include "memopt/Dialect/MemOpt/IR/WeightBlobs.h"
#include "memopt/Runtime/WeightsFile.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstring>

using namespace mlir;
using namespace mlir::memopt;

/// The writer's unit: what one write() call carries, and the bound on the
/// buffer it fills for splats and bools.
static constexpr size_t kWriteChunkBytes = size_t(16) << 20;

int64_t mlir::memopt::getRuntimeElementBytes(Type type) {
  if (type.isInteger(1))
    return 1;
  return (type.getIntOrFloatBitWidth() + 7) / 8;
}

static int64_t getRuntimeBytes(RankedTensorType type) {
  return type.getNumElements() * getRuntimeElementBytes(type.getElementType());
}

FailureOr<std::vector<char>>
mlir::memopt::getConstantBytes(Attribute value, RankedTensorType type) {
  int64_t bytes = getRuntimeBytes(type);
  std::vector<char> data(bytes);
  if (!value) // a variable without an initial value starts at zero
    return data;
  if (auto converted = dyn_cast<ConvertedWeightAttr>(value)) {
    ConversionCounts counts;
    if (failed(converted.readElements(0, type.getNumElements(), data, counts)))
      return failure();
    return data;
  }
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    ArrayRef<char> raw = getWeightData(resource);
    if (int64_t(raw.size()) != bytes)
      return failure();
    std::memcpy(data.data(), raw.data(), bytes);
    return data;
  }
  auto dense = dyn_cast<DenseElementsAttr>(value);
  if (!dense)
    return failure();
  if (type.getElementType().isInteger(1)) {
    int64_t i = 0;
    for (bool element : dense.getValues<bool>())
      data[i++] = element ? 1 : 0;
    return data;
  }
  ArrayRef<char> raw = dense.getRawData();
  if (dense.isSplat()) {
    int64_t elementBytes = getRuntimeElementBytes(type.getElementType());
    if (int64_t(raw.size()) < elementBytes)
      return failure();
    for (int64_t offset = 0; offset < bytes; offset += elementBytes)
      std::memcpy(data.data() + offset, raw.data(), elementBytes);
    return data;
  }
  if (int64_t(raw.size()) != bytes)
    return failure();
  std::memcpy(data.data(), raw.data(), bytes);
  return data;
}

namespace {

/// Streams entries into a file, seeking over zeros.
class ImageWriter {
public:
  explicit ImageWriter(llvm::raw_fd_ostream &out) : out(out) {}

  /// Writes `entry`; fails (with a diagnostic) when its value is unreadable.
  LogicalResult write(const WeightImageEntry &entry);

private:
  void seekTo(int64_t offset) {
    if (offset != position)
      out.seek(offset);
    position = offset;
  }
  void writeBytes(ArrayRef<char> bytes) {
    for (size_t begin = 0; begin < bytes.size(); begin += kWriteChunkBytes) {
      ArrayRef<char> chunk =
          bytes.slice(begin, std::min(kWriteChunkBytes, bytes.size() - begin));
      out.write(chunk.data(), chunk.size());
      position += int64_t(chunk.size());
      // A weight mapped from the ONNX file need not stay resident.
      releaseWeightPages(chunk);
    }
  }
  /// A sharded parameter's shard: rank r's chunk of the whole value, then
  /// the tail.
  LogicalResult writeShard(const WeightImageEntry &entry);
  /// Writes `count` copies of the `element` bytes (a splat).
  void writeRepeated(ArrayRef<char> element, int64_t count);
  /// Writes elements [first, first + count) of a converted weight, converted
  /// window by window in the bounded buffer; gives back the source's pages
  /// as they are read. Fails when its source cannot be read.
  LogicalResult writeConverted(ConvertedWeightAttr value, int64_t first,
                               int64_t count);
  LogicalResult unreadable(const WeightImageEntry &entry, int64_t bytes) {
    return emitError(entry.op->getLoc())
           << "'" << entry.op->getName() << "' of type " << entry.type
           << " has a value whose " << bytes
           << " bytes cannot be read (expected a dense or dense_resource "
              "attribute; a module printed with its weights elided cannot be "
              "lowered: compile from the ONNX model)";
  }

  llvm::raw_fd_ostream &out;
  int64_t position = 0;
  std::vector<char> buffer;
};

void ImageWriter::writeRepeated(ArrayRef<char> element, int64_t count) {
  if (llvm::all_of(element, [](char c) { return c == 0; }))
    return; // a hole: the file reads back zeros
  size_t perChunk = std::max<size_t>(1, kWriteChunkBytes / element.size());
  buffer.resize(std::min<size_t>(perChunk, size_t(count)) * element.size());
  for (size_t i = 0; i * element.size() < buffer.size(); ++i)
    std::memcpy(buffer.data() + i * element.size(), element.data(),
                element.size());
  for (int64_t done = 0; done < count;) {
    int64_t now = std::min<int64_t>(int64_t(perChunk), count - done);
    out.write(buffer.data(), size_t(now) * element.size());
    position += now * int64_t(element.size());
    done += now;
  }
}

LogicalResult ImageWriter::writeConverted(ConvertedWeightAttr value,
                                          int64_t first, int64_t count) {
  WeightConversion conversion = value.getConversion();
  ArrayRef<char> source = value.getSourceData();
  size_t elementBytes = conversion.getResultElementBytes();
  int64_t perWindow = int64_t(kWriteChunkBytes / elementBytes);
  buffer.resize(size_t(std::min(perWindow, count)) * elementBytes);
  ConversionCounts counts;
  for (int64_t done = 0; done < count;) {
    int64_t now = std::min(perWindow, count - done);
    if (failed(value.readElements(first + done, now, buffer, counts)))
      return failure();
    out.write(buffer.data(), size_t(now) * elementBytes);
    position += now * int64_t(elementBytes);
    if (!conversion.isPermuted())
      releaseWeightPages(
          conversion.getSourceBytesRead(source, first + done, now));
    done += now;
  }
  // A permuted window reads across the whole source: give it back at the end.
  if (conversion.isPermuted())
    releaseWeightPages(source);
  return success();
}

LogicalResult ImageWriter::write(const WeightImageEntry &entry) {
  int64_t bytes = getRuntimeBytes(entry.type);
  if (!entry.value || bytes == 0)
    return success(); // starts at zero: a hole
  seekTo(entry.offset);
  Type elementType = entry.type.getElementType();
  if (entry.shardRanks > 0)
    return writeShard(entry);
  if (auto converted = dyn_cast<ConvertedWeightAttr>(entry.value)) {
    if (converted.getType() != entry.type ||
        failed(writeConverted(converted, 0, entry.type.getNumElements())))
      return unreadable(entry, bytes);
    return success();
  }
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(entry.value)) {
    ArrayRef<char> raw = getWeightData(resource);
    if (int64_t(raw.size()) != bytes || elementType.isInteger(1))
      return unreadable(entry, bytes);
    writeBytes(raw);
    return success();
  }
  auto dense = dyn_cast<DenseElementsAttr>(entry.value);
  if (!dense)
    return unreadable(entry, bytes);
  if (elementType.isInteger(1)) {
    // i1 is bit-packed in the attribute; the runtime stores a byte each.
    if (dense.isSplat()) {
      char element = dense.getSplatValue<bool>() ? 1 : 0;
      writeRepeated(ArrayRef<char>(&element, 1), bytes);
      return success();
    }
    buffer.clear();
    for (bool element : dense.getValues<bool>()) {
      buffer.push_back(element ? 1 : 0);
      if (buffer.size() == kWriteChunkBytes) {
        writeBytes(buffer);
        buffer.clear();
      }
    }
    writeBytes(buffer);
    return success();
  }
  ArrayRef<char> raw = dense.getRawData();
  int64_t elementBytes = getRuntimeElementBytes(elementType);
  if (dense.isSplat()) {
    if (int64_t(raw.size()) < elementBytes)
      return unreadable(entry, bytes);
    writeRepeated(raw.take_front(elementBytes), bytes / elementBytes);
    return success();
  }
  if (int64_t(raw.size()) != bytes)
    return unreadable(entry, bytes);
  writeBytes(raw);
  return success();
}

LogicalResult ImageWriter::writeShard(const WeightImageEntry &entry) {
  int64_t bytes = getRuntimeBytes(entry.type);
  auto whole = dyn_cast<ShapedType>(cast<TypedAttr>(entry.value).getType());
  Type elementType = entry.type.getElementType();
  int64_t elementBytes = getRuntimeElementBytes(elementType);
  if (!whole || elementType.isInteger(1) ||
      whole.getElementType() != elementType)
    return unreadable(entry, bytes);
  int64_t elements = whole.getNumElements(), ranks = entry.shardRanks;
  int64_t chunk = elements / ranks, tail = elements % ranks;
  if ((chunk + tail) * elementBytes != bytes)
    return unreadable(entry, bytes);
  if (auto converted = dyn_cast<ConvertedWeightAttr>(entry.value)) {
    if (failed(writeConverted(converted, entry.shardRank * chunk, chunk)) ||
        failed(writeConverted(converted, ranks * chunk, tail)))
      return unreadable(entry, bytes);
    return success();
  }
  ArrayRef<char> raw;
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(entry.value)) {
    raw = getWeightData(resource);
  } else if (auto dense = dyn_cast<DenseElementsAttr>(entry.value)) {
    raw = dense.getRawData();
    if (dense.isSplat()) {
      if (int64_t(raw.size()) < elementBytes)
        return unreadable(entry, bytes);
      writeRepeated(raw.take_front(elementBytes), chunk + tail);
      return success();
    }
  } else {
    return unreadable(entry, bytes);
  }
  if (int64_t(raw.size()) != elements * elementBytes)
    return unreadable(entry, bytes);
  writeBytes(raw.slice(size_t(entry.shardRank * chunk * elementBytes),
                       size_t(chunk * elementBytes)));
  writeBytes(raw.slice(size_t(ranks * chunk * elementBytes),
                       size_t(tail * elementBytes)));
  return success();
}

} // namespace

LogicalResult mlir::memopt::writeWeightImage(const WeightImage &image,
                                             StringRef path) {
  MLIRContext *context = nullptr;
  std::vector<const WeightImageEntry *> order;
  for (const WeightImageEntry &entry : image.entries) {
    order.push_back(&entry);
    context = entry.op->getContext();
  }
  llvm::stable_sort(order, [](const auto *a, const auto *b) {
    return a->offset < b->offset;
  });
  int64_t end = 0;
  for (const WeightImageEntry *entry : order) {
    int64_t bytes = getRuntimeBytes(entry->type);
    if (entry->offset < 0 || entry->offset + bytes > image.size)
      return emitError(entry->op->getLoc())
             << "has memopt.weight_offset " << entry->offset << " and " << bytes
             << " bytes, outside the weight region of " << image.size
             << " bytes";
    if (entry->offset < end && bytes > 0)
      return emitError(entry->op->getLoc())
             << "has memopt.weight_offset " << entry->offset
             << ", inside the previous weight (which ends at " << end << ")";
    end = std::max(end, entry->offset + bytes);
  }

  auto fail = [&](const Twine &message) {
    if (context)
      return emitError(UnknownLoc::get(context)) << message;
    llvm::errs() << "error: " << message << "\n";
    return InFlightDiagnostic();
  };
  StringRef folder = llvm::sys::path::parent_path(path);
  if (!folder.empty())
    if (std::error_code error = llvm::sys::fs::create_directories(folder))
      return fail("cannot create folder '" + folder + "': " + error.message());
  // A path that is a device or a pipe (a link to /dev/null where the
  // weights are not wanted: a program run with --random-weights) is written
  // as it is; a file is written beside it and renamed over it at the end,
  // so nothing half-written is ever left under the name.
  llvm::sys::fs::file_status status;
  bool direct = !llvm::sys::fs::status(path, status) &&
                llvm::sys::fs::exists(status) &&
                status.type() != llvm::sys::fs::file_type::regular_file &&
                status.type() != llvm::sys::fs::file_type::directory_file;
  SmallString<256> model(path);
  model += "-%%%%%%.partial";
  int fd = -1;
  SmallString<256> temporary;
  if (std::error_code error =
          direct ? llvm::sys::fs::openFileForWrite(
                       path, fd, llvm::sys::fs::CD_OpenExisting)
                 : llvm::sys::fs::createUniqueFile(model, fd, temporary))
    return fail("cannot write '" + path + "': " + error.message());
  bool written = false;
  {
    llvm::raw_fd_ostream out(fd, /*shouldClose=*/true);
    ImageWriter writer(out);
    bool ok = true;
    for (const WeightImageEntry *entry : order)
      if (failed(writer.write(*entry))) {
        ok = false;
        break;
      }
    if (ok) {
      out.seek(image.size);
      out << ::memopt::rt::weightsTrailer(image.fingerprint, image.size);
      out.close();
      written = !out.has_error();
      if (!written)
        (void)fail("cannot write '" + path + "': " + out.error().message());
      out.clear_error();
    }
  }
  if (direct)
    return success(written);
  if (written) {
    if (std::error_code error = llvm::sys::fs::rename(temporary, path)) {
      llvm::sys::fs::remove(temporary);
      return fail("cannot write '" + path + "': " + error.message());
    }
    return success();
  }
  llvm::sys::fs::remove(temporary);
  return failure();
}
