//===- WeightBlobs.cpp - weights mapped from their files ------------------===//
//
// One read-only mapping per weight file, shared by the blobs that point into
// it (include/memopt/Dialect/MemOpt/IR/WeightBlobs.h). A registry of the
// mapped address ranges lets `releaseWeightPages` tell mapped bytes, whose
// pages may be dropped, from heap bytes, which must not be.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/MemOpt/IR/WeightBlobs.h"

#include "memopt/Dialect/MemOpt/IR/MemOptAttributes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Process.h"

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <sys/mman.h>

using namespace mlir;
using namespace mlir::memopt;

namespace {

/// A whole file mapped read-only.
struct MappedFile {
  std::string key;
  llvm::sys::fs::mapped_file_region region;
  ~MappedFile();
  const char *begin() const { return region.const_data(); }
  const char *end() const { return region.const_data() + region.size(); }
};

/// The mapped files by canonical path and by address. Recursive: a mapping
/// may close (its last blob freed) while the registry is being searched.
struct Registry {
  std::recursive_mutex mutex;
  llvm::StringMap<std::weak_ptr<MappedFile>> byPath;
  std::map<const char *, const MappedFile *> byAddress;
};

Registry &registry() {
  static Registry *instance = new Registry(); // never destroyed: blobs may
  return *instance;                           // outlive static destruction
}

MappedFile::~MappedFile() {
  Registry &files = registry();
  std::lock_guard<std::recursive_mutex> lock(files.mutex);
  auto it = files.byAddress.find(begin());
  if (it != files.byAddress.end() && it->second == this)
    files.byAddress.erase(it);
  auto path = files.byPath.find(key);
  if (path != files.byPath.end() && path->second.expired())
    files.byPath.erase(path);
}

/// The shared mapping of `path`; null with `error` set when it cannot be
/// made. A file of zero bytes cannot be mapped and gets an error too.
std::shared_ptr<MappedFile> mapFile(StringRef path, std::string &error) {
  SmallString<256> canonical;
  if (std::error_code ec = llvm::sys::fs::real_path(path, canonical)) {
    error = "'" + path.str() + "': " + ec.message();
    return nullptr;
  }
  Registry &files = registry();
  std::lock_guard<std::recursive_mutex> lock(files.mutex);
  auto it = files.byPath.find(canonical);
  if (it != files.byPath.end())
    if (std::shared_ptr<MappedFile> existing = it->second.lock())
      return existing;
  uint64_t size = 0;
  if (std::error_code ec = llvm::sys::fs::file_size(canonical, size)) {
    error = "cannot read the size of '" + path.str() + "': " + ec.message();
    return nullptr;
  }
  if (size == 0) {
    error = "'" + path.str() + "' is empty";
    return nullptr;
  }
  llvm::Expected<llvm::sys::fs::file_t> fd =
      llvm::sys::fs::openNativeFileForRead(canonical);
  if (!fd) {
    error =
        "cannot open '" + path.str() + "': " + llvm::toString(fd.takeError());
    return nullptr;
  }
  auto file = std::make_shared<MappedFile>();
  file->key = canonical.str().str();
  std::error_code ec;
  file->region = llvm::sys::fs::mapped_file_region(
      *fd, llvm::sys::fs::mapped_file_region::readonly, size, 0, ec);
  llvm::sys::fs::closeFile(*fd);
  if (ec) {
    error = "cannot map '" + path.str() + "': " + ec.message();
    file->key.clear();
    return nullptr;
  }
  files.byPath[file->key] = file;
  files.byAddress[file->begin()] = file.get();
  return file;
}

/// The mapped file holding [data, data + size), or null.
const MappedFile *findMapping(const char *data, size_t size) {
  Registry &files = registry();
  std::lock_guard<std::recursive_mutex> lock(files.mutex);
  auto it = files.byAddress.upper_bound(data);
  if (it == files.byAddress.begin())
    return nullptr;
  const MappedFile *file = std::prev(it)->second;
  if (data >= file->begin() && data + size <= file->end())
    return file;
  return nullptr;
}

} // namespace

FailureOr<uint64_t> mlir::memopt::getMappedFileSize(StringRef path,
                                                    std::string &error) {
  std::shared_ptr<MappedFile> file = mapFile(path, error);
  if (!file)
    return failure();
  return uint64_t(file->region.size());
}

FailureOr<AsmResourceBlob>
mlir::memopt::mapFileBlob(StringRef path, uint64_t offset, uint64_t size,
                          size_t alignment, std::string &error) {
  std::shared_ptr<MappedFile> file = mapFile(path, error);
  if (!file)
    return failure();
  uint64_t fileSize = file->region.size();
  if (offset > fileSize || size > fileSize - offset) {
    error = "bytes [" + std::to_string(offset) + ", " +
            std::to_string(offset + size) + ") lie outside '" + path.str() +
            "', which has " + std::to_string(fileSize) + " bytes";
    return failure();
  }
  ArrayRef<char> bytes(file->begin() + offset, size);
  auto address = reinterpret_cast<uintptr_t>(bytes.data());
  if (address % alignment != 0)
    return HeapAsmResourceBlob::allocateAndCopyWithAlign(bytes, alignment);
  // The blob states the largest alignment (up to 8, as the importer's heap
  // blobs) that its address has.
  size_t stated = alignof(uint64_t);
  while (stated > alignment && address % stated != 0)
    stated /= 2;
  return AsmResourceBlob(
      bytes, stated,
      [file = std::move(file)](void *, size_t, size_t) mutable {
        file.reset();
      },
      /*dataIsMutable=*/false);
}

bool mlir::memopt::isMappedWeight(ArrayRef<char> bytes) {
  return !bytes.empty() && findMapping(bytes.data(), bytes.size());
}

void mlir::memopt::releaseWeightPages(ArrayRef<char> bytes) {
  if (!isMappedWeight(bytes))
    return;
  uintptr_t page = llvm::sys::Process::getPageSizeEstimate();
  uintptr_t begin = reinterpret_cast<uintptr_t>(bytes.data());
  uintptr_t end = begin + bytes.size();
  begin = (begin + page - 1) / page * page;
  end = end / page * page;
  if (end > begin)
    (void)::madvise(reinterpret_cast<void *>(begin), end - begin,
                    MADV_DONTNEED);
}

ArrayRef<char> mlir::memopt::getWeightData(ElementsAttr value) {
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    if (AsmResourceBlob *blob = resource.getRawHandle().getBlob())
      return blob->getData();
    return {};
  }
  if (auto dense = dyn_cast<DenseElementsAttr>(value))
    return dense.getRawData();
  return {};
}

ArrayRef<char> mlir::memopt::getWeightSourceData(ElementsAttr value) {
  if (auto converted = dyn_cast<ConvertedWeightAttr>(value))
    return converted.getSourceData();
  return getWeightData(value);
}

LogicalResult mlir::memopt::readWeightElements(ElementsAttr value,
                                               int64_t first, int64_t count,
                                               MutableArrayRef<char> out,
                                               ConversionCounts &counts) {
  if (auto converted = dyn_cast<ConvertedWeightAttr>(value))
    return converted.readElements(first, count, out, counts);
  Type elementType = value.getElementType();
  int64_t elements = value.getNumElements();
  if (!elementType.isIntOrFloat() || elementType.isInteger(1) ||
      elementType.getIntOrFloatBitWidth() % 8 != 0 || first < 0 || count < 0 ||
      first + count > elements)
    return failure();
  size_t elementBytes = elementType.getIntOrFloatBitWidth() / 8;
  if (out.size() < size_t(count) * elementBytes)
    return failure();
  ArrayRef<char> raw = getWeightData(value);
  auto dense = dyn_cast<DenseElementsAttr>(value);
  if (dense && dense.isSplat()) {
    if (raw.size() < elementBytes)
      return failure();
    for (int64_t i = 0; i < count; ++i)
      std::memcpy(out.data() + i * elementBytes, raw.data(), elementBytes);
    return success();
  }
  if (int64_t(raw.size()) != elements * int64_t(elementBytes))
    return failure();
  std::memcpy(out.data(), raw.data() + first * elementBytes,
              size_t(count) * elementBytes);
  return success();
}
