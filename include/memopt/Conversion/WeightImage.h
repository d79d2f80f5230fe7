//===- WeightImage.h - the weight region, tensor by tensor ----*- C++ -*-===//
//
// The weight file (include/memopt/Runtime/WeightsFile.h) is the planned
// weight region followed by a trailer. The lowering does not build the region
// in memory: it lists where each constant and variable goes, and
// `writeWeightImage` streams them into the file from where their values live
// (a blob mapped from the ONNX external-data file, an inline dense
// attribute), in a bounded buffer, dropping each mapped weight's pages once
// written. A weight a pass converted (`#memopt.converted`: an f16 / bf16
// cast, an NHWC transpose, MemOptAttributes.h) is converted here, 16 MiB of
// output at a time, from its mapped source: the compiler never holds a
// converted copy. Variables that start at zero (optimizer
// state, gradient accumulators) and the gaps between tensors are left as
// holes: the file is sparse and reads back as zeros.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_CONVERSION_WEIGHTIMAGE_H
#define MEMOPT_CONVERSION_WEIGHTIMAGE_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::memopt {

/// One tensor of the weight region.
struct WeightImageEntry {
  int64_t offset = 0;
  RankedTensorType type;
  /// The initial value (a dense, dense_resource or #memopt.converted
  /// attribute); null for a variable that starts at zero.
  Attribute value;
  /// The constant or variable op, for diagnostics.
  Operation *op = nullptr;
  /// ZeRO-3 (a variable with `memopt.shards`): `value` is the whole
  /// parameter and the entry holds rank `shardRank`'s shard of it over
  /// `shardRanks` ranks (its chunk, then the tail); 0: the value itself.
  int64_t shardRanks = 0;
  int64_t shardRank = 0;
};

/// The weight region: its size, its tensors, the table's fingerprint.
struct WeightImage {
  int64_t size = 0;
  std::vector<WeightImageEntry> entries;
  uint64_t fingerprint = 0;
};

/// Bytes per element as the runtime stores it (bool: one byte).
int64_t getRuntimeElementBytes(Type type);

/// The constant's bytes as the runtime stores them (row-major, bool as one
/// byte per element, splats expanded); for small tensors (the tables the
/// program embeds). Fails when the value's bytes cannot be read.
FailureOr<std::vector<char>> getConstantBytes(Attribute value,
                                              RankedTensorType type);

/// Writes the weight file at `path`: the region (entries in offset order,
/// holes for zeros), then the trailer. Emits an error naming the op whose
/// value cannot be read or that overlaps another. The file is written to a
/// temporary name and renamed into place, so a failure leaves no half file.
LogicalResult writeWeightImage(const WeightImage &image, StringRef path);

} // namespace mlir::memopt

#endif // MEMOPT_CONVERSION_WEIGHTIMAGE_H
