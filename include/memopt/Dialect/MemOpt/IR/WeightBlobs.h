//===- WeightBlobs.h - weights mapped from their files ----------*- C++ -*-===//
//
// A model's weights enter the IR as `dense_resource` attributes whose blobs
// point into the ONNX external-data file, mapped read-only, instead of a copy
// on the heap: every blob of a file shares one mapping, which closes with the
// last blob. Reading a weight (a folder, a check, the weight-file writer)
// touches its pages; `releaseWeightPages` gives them back to the kernel once
// read, so the compiler's resident memory stays bounded by the weights it is
// looking at, not by the model (the pages are clean: a later read faults them
// in from the file again).
//
// IREE keeps parameters out of the IR in the same spirit (parameter archives
// named by `#stream.parameter.named`); memopt keeps MLIR's builtin resource
// handles, so every pass that reads values through the blob works unchanged.
// A weight a pass converts (a cast, a transpose) stays a handle too: a
// `#memopt.converted` attribute over the blob, whose bytes
// `readWeightElements` produces window by window.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_WEIGHTBLOBS_H
#define MEMOPT_DIALECT_MEMOPT_IR_WEIGHTBLOBS_H

#include "memopt/Dialect/MemOpt/IR/WeightConversion.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <string>

namespace mlir::memopt {

/// A blob over bytes [offset, offset + size) of the file at `path`, mapped
/// read-only (one mapping per file, shared by its blobs). Fails with a
/// message in `error` when the file cannot be mapped or is too short. When
/// the bytes are not aligned to `alignment` in the file the blob is a heap
/// copy instead (the attribute's storage needs its element alignment).
FailureOr<AsmResourceBlob> mapFileBlob(StringRef path, uint64_t offset,
                                       uint64_t size, size_t alignment,
                                       std::string &error);

/// The size of the file at `path` through the shared mapping (so a later
/// mapFileBlob of the same file maps nothing again), or failure with a
/// message in `error`.
FailureOr<uint64_t> getMappedFileSize(StringRef path, std::string &error);

/// Whether `bytes` lie inside a file mapped by mapFileBlob.
bool isMappedWeight(ArrayRef<char> bytes);

/// Drops the resident pages that lie wholly inside `bytes` when `bytes` are
/// part of a mapped weight file; does nothing for any other memory.
void releaseWeightPages(ArrayRef<char> bytes);

/// The stored bytes of a weight: a dense attribute's raw data (a splat holds
/// one element; i1 is bit-packed) or a resource blob's data; empty when the
/// attribute has neither (an elided resource, a converted weight: its bytes
/// are never stored, see readWeightElements).
ArrayRef<char> getWeightData(ElementsAttr value);

/// The stored bytes a weight's elements are read from: getWeightData's, or
/// a converted weight's source's (`#memopt.converted`, MemOptAttributes.h).
/// A reader gives their pages back (releaseWeightPages) once done.
ArrayRef<char> getWeightSourceData(ElementsAttr value);

/// The one accessor for a weight's values in a bounded window: writes
/// elements [first, first + count) as the runtime stores them (row-major,
/// little-endian) into `out` (count x the element size): a dense
/// attribute's (a splat repeated), a resource blob's, or a converted
/// weight's, converted on the way (what a cast clamped or raised is added to
/// `counts`). Fails when the value has no readable bytes (an elided
/// resource, i1 elements, another attribute kind) or the window is outside.
LogicalResult readWeightElements(ElementsAttr value, int64_t first,
                                 int64_t count, MutableArrayRef<char> out,
                                 ConversionCounts &counts);

} // namespace mlir::memopt

#endif // MEMOPT_DIALECT_MEMOPT_IR_WEIGHTBLOBS_H
