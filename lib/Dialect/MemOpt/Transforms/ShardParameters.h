//===- ShardParameters.h - ZeRO-3 parameters for memopt-data-parallel -*- C++
//-*-===//
//
// memopt-data-parallel shard=parameters (DataParallel.cpp) shards every
// trained parameter over the ranks and gathers it whole where it is used
// (ShardParameters.cpp says how).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_TRANSFORMS_SHARDPARAMETERS_H
#define MEMOPT_DIALECT_MEMOPT_TRANSFORMS_SHARDPARAMETERS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseSet.h"

#include <cstdint>

namespace mlir::memopt {

/// What shardParameter did, summed over the parameters.
struct ParameterSharding {
  int64_t parameters = 0;
  int64_t gathers = 0;
  /// Gathers of the f16 / bf16 copy instead of the f32 master.
  int64_t lowGathers = 0;
  int64_t shardBytes = 0, wholeBytes = 0;
};

/// The ops the returned values depend on: the forward (as memopt-weight-casts
/// and the memory report define it).
llvm::DenseSet<Operation *> getForwardOps(func::FuncOp function);

/// Replaces the parameter variable `param` of `update` (an sgd_update or
/// adamw_update whose gradient and state are this rank's shards already) by
/// a variable holding this rank's shard (`memopt.shards = ranks`, the whole
/// initial value), makes the update a plain update of the shard, and gathers
/// the whole parameter right before its first forward use and again before
/// its first backward use (for a low-precision copy of it, a cast of the
/// second gather); a gather whose readers all cast it to one low type
/// gathers that type instead. Fails with a message naming the parameter.
LogicalResult shardParameter(Operation *update, Value param, int64_t ranks,
                             const llvm::DenseSet<Operation *> &forward,
                             ParameterSharding &stats);

} // namespace mlir::memopt

#endif // MEMOPT_DIALECT_MEMOPT_TRANSFORMS_SHARDPARAMETERS_H
