//===- BufferLiveness.h - storages, live ranges, max-live -------*- C++ -*-===//
//
// The one place memopt's memory numbers come from. Given a function in its
// current op order, it groups tensors into *storages* (a tensor and every view
// of it, plus the results written in place over it), gives each storage a live
// range over op indices, and derives the numbers the passes and the report
// use: max-live (the lower bound on the activation arena), the naive total (no
// reuse), weights and I/O bytes.
//
// Taken from XLA's HloLiveRange / buffer assignment (live ranges over a
// sequential order, aliases sharing one buffer) and TFLite's arena planner
// (first/last use per tensor). Unlike both, in-place decisions are explicit
// attributes in the IR (`memopt.in_place`), so the analysis and the lowering
// read the same decision.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_ANALYSIS_BUFFERLIVENESS_H
#define MEMOPT_ANALYSIS_BUFFERLIVENESS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace mlir::memopt {

/// Attribute on an op whose result 0 is written into the storage of operand N.
inline constexpr llvm::StringLiteral kInPlaceAttrName = "memopt.in_place";

/// Unit attribute on an op that recomputes a value computed earlier
/// (memopt-rematerialize's clones).
inline constexpr llvm::StringLiteral kRecomputedAttrName = "memopt.recomputed";
/// Dictionary attribute on a function memopt-rematerialize ran on: `budget`,
/// `initial_peak` and `peak` (bytes in the solver's model), `recomputations`;
/// memopt-compile adds `memory_budget` and `unconstrained_arena` (bytes).
inline constexpr llvm::StringLiteral kRematAttrName = "memopt.remat";
/// Set by memopt-rematerialize when a memory budget is met only without
/// gradient buckets: memopt-bucket-collectives leaves the function's
/// collectives synchronous.
inline constexpr llvm::StringLiteral kSynchronousCollectivesAttrName =
    "memopt.synchronous_collectives";

/// Where a storage's bytes live.
enum class StorageKind {
  /// An intermediate tensor: lives in the activation arena.
  Arena,
  /// A constant (weight): lives in the weight region.
  Weight,
  /// A function argument: the caller's buffer.
  Input,
  /// A function result: the caller's buffer.
  Output,
};

llvm::StringRef stringifyStorageKind(StorageKind kind);

/// Bytes shared by a tensor, its views and what is written in place over it.
struct Storage {
  unsigned id = 0;
  StorageKind kind = StorageKind::Arena;
  /// Bytes of the storage (the size of its root tensor).
  int64_t size = 0;
  /// Op index of the first write (for inputs and weights: -1, before step 0).
  int64_t first = 0;
  /// Op index of the last read, inclusive (outputs: one past the last op).
  int64_t last = 0;
  /// The tensors held, root first, in program order.
  llvm::SmallVector<Value> values;
  /// Argument number (Input) or result number (Output).
  int64_t ioIndex = -1;
  /// For a kernel workspace (scratch live during one op): that op. Such a
  /// storage holds no tensor.
  Operation *workspaceOf = nullptr;
  /// For a workspace: the bytes its kernel could use (CostOpInterface::
  /// getWorkspaceBytes). `size` starts at the floor, min(maxSize,
  /// kWorkspaceFloorBytes), or 0 for an optional workspace
  /// (CostOpInterface::isWorkspaceOptional); the planner grows it into free
  /// arena bytes
  /// (planner::growIntoFreeSpace) and records the result with
  /// BufferLiveness::setWorkspaceSize.
  int64_t maxSize = 0;
};

/// Function attribute set by --memopt-plan-memory=outputs-in-arena: the
/// Output storages live in the arena (from their producer to the end), so
/// max-live counts them.
constexpr llvm::StringLiteral kOutputsInArenaAttrName =
    "memopt.outputs_in_arena";

/// The workspace every kernel is promised (at most what it asks for): room for
/// cuDNN's precomputed-index implicit GEMM without raising the arena; more
/// comes from free space only.
constexpr int64_t kWorkspaceFloorBytes = int64_t(1) << 20;

/// The workspace bytes promised to an op that asks for `wish` bytes:
/// its own getWorkspaceFloor where it names one, else none for an optional
/// workspace and up to kWorkspaceFloorBytes otherwise.
int64_t promisedWorkspace(mlir::Operation *op, int64_t wish);

/// The memory numbers of one function in one op order.
struct MemoryStats {
  int64_t weightsBytes = 0;
  int64_t ioBytes = 0;
  /// The outputs' part of ioBytes (storages of kind Output).
  int64_t outputBytes = 0;
  /// Sum of every intermediate tensor that is not a view, and of every
  /// kernel workspace: no reuse at all.
  int64_t naiveBytes = 0;
  /// Largest total size of arena storages alive at one op index.
  int64_t maxLiveBytes = 0;
  /// An op index where max-live is reached.
  int64_t peakIndex = 0;
  /// Bytes not allocated because results were written in place.
  int64_t inPlaceSavedBytes = 0;
  /// Bytes not allocated because view ops alias their operand.
  int64_t viewSavedBytes = 0;
};

/// Storages and live ranges of a function's body. The function must hold a
/// single block of memopt ops ending in func.return.
class BufferLiveness {
public:
  /// Analyzes `function` in its current op order, honouring the
  /// `memopt.in_place` attributes present.
  explicit BufferLiveness(func::FuncOp function);

  /// Analyzes the ops of `function` as if executed in `order` (every
  /// non-terminator op of the body exactly once, operands before users), with
  /// `inPlace` giving, for ops that write in place, the operand index. Used by
  /// the scheduler to evaluate candidate orders without rewriting the IR.
  BufferLiveness(func::FuncOp function, llvm::ArrayRef<Operation *> order,
                 const llvm::DenseMap<Operation *, unsigned> &inPlace);

  llvm::ArrayRef<Storage> getStorages() const { return storages; }
  const Storage &getStorage(Value value) const;
  /// The workspace storage of `op`, if its kernel needs scratch bytes.
  const Storage *getWorkspace(Operation *op) const;
  /// Records the planned size of a workspace storage (between its floor and
  /// its maxSize). Statistics keep the floor: they are the lower bound the
  /// plan was made against.
  void setWorkspaceSize(unsigned storageId, int64_t bytes);
  /// The op index of `op` (constants and the terminator have none).
  std::optional<int64_t> getOpIndex(Operation *op) const;
  int64_t getNumSteps() const { return numSteps; }
  const MemoryStats &getStats() const { return stats; }
  /// Bytes of arena storages alive at each op index.
  llvm::ArrayRef<int64_t> getLiveProfile() const { return liveProfile; }

  /// Decides, for `order`, which ops write in place: an op that may write
  /// into operand i (BufferBehaviorOpInterface) does so when that operand's
  /// storage is in the arena, is last read by this op, and has the result's
  /// byte size; and the result is not a function output. Greedy in program
  /// order, as TFLite and XLA do.
  static llvm::DenseMap<Operation *, unsigned>
  decideInPlace(func::FuncOp function, llvm::ArrayRef<Operation *> order);

private:
  void analyze(func::FuncOp function, llvm::ArrayRef<Operation *> order,
               const llvm::DenseMap<Operation *, unsigned> &inPlace);

  llvm::SmallVector<Storage> storages;
  llvm::DenseMap<Value, unsigned> storageOf;
  llvm::DenseMap<Operation *, unsigned> workspaceOf;
  llvm::DenseMap<Operation *, int64_t> opIndex;
  llvm::SmallVector<int64_t> liveProfile;
  int64_t numSteps = 0;
  MemoryStats stats;
};

/// The ops of `function`'s body that execute (everything but constants and
/// the terminator), in block order.
llvm::SmallVector<Operation *> getExecutionOrder(func::FuncOp function);

} // namespace mlir::memopt

#endif // MEMOPT_ANALYSIS_BUFFERLIVENESS_H
