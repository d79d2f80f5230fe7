//===- ShardParameters.cpp - ZeRO-3: parameters sharded, gathered when used
//===//
//
// memopt-data-parallel shard=parameters: each rank's weight region holds only
// its shard of every trained parameter (its chunk of E / N elements plus the
// tail of E % N that every rank holds, docs/data-parallel.md "Shards without
// padding"), next to its shards of the optimizer state and the accumulators
// (ZeRO-2's). The whole parameter is a `memopt.gather_parameter` result: an
// arena buffer gathered right before the parameter's first forward use and
// again right before its first backward use, dead after its last use in
// each. The gradient is reduce-scattered into the shard and the update is a
// plain update of the shard (shard, gradient shard and state shards have one
// layout, so no offsets).
//
// Taken from:
//  - DeepSpeed ZeRO stage 3 (Rajbhandari et al., SC'20;
//    deepspeed/runtime/zero/stage3.py, partition_parameters.py): parameters
//    partitioned over the ranks, fetched (all-gathered) before a module's
//    forward and again before its backward, released after; gradients
//    reduce-scattered into the partition that the rank updates.
//  - PyTorch FSDP / FSDP2 (`fully_shard`, FULL_SHARD with
//    reshard_after_forward=True): the unsharded parameter is freed after the
//    forward and all-gathered again for the backward. FSDP pads its flat
//    parameter to a multiple of N; here every parameter keeps its own
//    variable and shape, split into equal chunks plus a replicated tail.
// Further than both: the gathered parameter is an SSA value in the arena, so
// the scheduler, the memory planner and the memory report see it like any
// activation (FSDP's and DeepSpeed's gathered parameters live in the caching
// allocator, outside any plan), and with --memory-budget the remat solver
// trades it against every other buffer. A mixed-precision low copy (the
// cast memopt-mixed-precision puts on a parameter) is cast again from the
// backward gather rather than held across the step; where every reader of a
// gathered parameter casts it to one low type, the low copy itself is
// gathered (FSDP's MixedPrecisionPolicy.param_dtype: half the bytes sent
// and held), its f32 shard cast into place by the runtime.
// Each gather is a separate op placed where its parameter is first needed;
// memopt-bucket-collectives (GatherGroups.cpp) then groups them per layer
// and issues each group one layer ahead on the communication stream.
//
//===----------------------------------------------------------------------===//

#include "ShardParameters.h"

#include "memopt/Analysis/MemoryReport.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace mlir::memopt;

llvm::DenseSet<Operation *> mlir::memopt::getForwardOps(func::FuncOp function) {
  llvm::DenseSet<Operation *> forward;
  Block &body = function.getBody().front();
  SmallVector<Value> worklist(body.getTerminator()->getOperands());
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (!def || !forward.insert(def).second)
      continue;
    worklist.append(def->operand_begin(), def->operand_end());
  }
  return forward;
}

static bool isLowFloat(Type type) {
  Type element = getElementTypeOrSelf(type);
  return element.isF16() || element.isBF16();
}

/// The first of `users` in block order, or null.
static Operation *firstInBlock(ArrayRef<Operation *> users) {
  Operation *first = nullptr;
  for (Operation *user : users)
    if (!first || user->isBeforeInBlock(first))
      first = user;
  return first;
}

/// Replaces `gather` and the casts that read it by one gather of the low
/// type when every reader of the gathered parameter is a cast to one
/// f16 / bf16 type; says whether it did.
static bool gatherLowCopy(GatherParameterOp gather) {
  Type low;
  for (Operation *user : gather->getUsers()) {
    auto cast = dyn_cast<CastOp>(user);
    if (!cast || !isLowFloat(cast.getType()) ||
        (low && getElementTypeOrSelf(cast.getType()) != low))
      return false;
    low = getElementTypeOrSelf(cast.getType());
  }
  if (!low)
    return false;
  OpBuilder builder(gather);
  auto whole = cast<RankedTensorType>(gather.getType()).clone(low);
  auto lowGather =
      GatherParameterOp::create(builder, gather.getLoc(), whole,
                                gather.getShard(), gather.getRanksAttr());
  for (Operation *user : llvm::make_early_inc_range(gather->getUsers())) {
    user->getResult(0).replaceAllUsesWith(lowGather.getResult());
    user->erase();
  }
  gather.erase();
  return true;
}

LogicalResult
mlir::memopt::shardParameter(Operation *update, Value param, int64_t ranks,
                             const llvm::DenseSet<Operation *> &forward,
                             ParameterSharding &stats) {
  auto variable = param.getDefiningOp<VariableOp>();
  if (!variable || variable.getRole() != "parameter")
    return update->emitError()
           << describeNode(update)
           << ": shard parameters needs the updated parameter to be a "
              "memopt.variable with role parameter";
  auto whole = cast<RankedTensorType>(param.getType());
  if (!variable.getInitialValueAttr() || !whole.getElementType().isF32())
    return variable.emitError()
           << "parameter '" << variable.getName()
           << "' cannot be sharded: shard parameters needs an f32 parameter "
              "with an initial value";
  Block *block = update->getBlock();
  SmallVector<Operation *> forwardUsers, backwardUsers;
  for (Operation *user : variable->getUsers()) {
    if (user == update)
      continue;
    if (user->getBlock() != block || !user->isBeforeInBlock(update))
      return user->emitError()
             << describeNode(user) << " reads parameter '" << variable.getName()
             << "' after its update: shard parameters gathers a parameter "
                "before its update only";
    (forward.contains(user) ? forwardUsers : backwardUsers).push_back(user);
  }
  // A forward low-precision copy read by the backward too (mixed precision)
  // is cast again there from the backward gather, not held across.
  SmallVector<std::pair<CastOp, SmallVector<Operation *>>> copies;
  for (Operation *user : forwardUsers) {
    auto cast = dyn_cast<CastOp>(user);
    if (!cast || !isLowFloat(cast.getType()))
      continue;
    SmallVector<Operation *> later;
    for (Operation *castUser : cast->getUsers())
      if (!forward.contains(castUser))
        later.push_back(castUser);
    if (!later.empty())
      copies.push_back({cast, later});
  }

  OpBuilder builder(variable);
  auto shardType =
      RankedTensorType::get({getShardElements(whole.getNumElements(), ranks)},
                            whole.getElementType());
  auto sharded = VariableOp::create(
      builder, variable.getLoc(), shardType, variable.getNameAttr(),
      variable.getRoleAttr(), variable.getInitialValueAttr());
  sharded->setAttr("memopt.shards", builder.getI64IntegerAttr(ranks));
  update->replaceUsesOfWith(param, sharded.getValue());
  IntegerAttr ranksAttr = builder.getI64IntegerAttr(ranks);
  std::string name = variable.getName().str();
  auto gatherBefore = [&](Operation *point, StringRef suffix) {
    builder.setInsertionPoint(point);
    Location loc =
        NameLoc::get(builder.getStringAttr(name + suffix), variable.getLoc());
    ++stats.gathers;
    return GatherParameterOp::create(builder, loc, whole, sharded.getValue(),
                                     ranksAttr)
        .getResult();
  };
  if (Operation *first = firstInBlock(forwardUsers)) {
    Value gathered = gatherBefore(first, ".gathered");
    for (Operation *user : forwardUsers)
      user->replaceUsesOfWith(param, gathered);
  }
  SmallVector<Operation *> backwardPoints(backwardUsers);
  for (auto &copy : copies)
    backwardPoints.append(copy.second);
  if (Operation *first = firstInBlock(backwardPoints)) {
    Value gathered = gatherBefore(first, ".gathered.backward");
    for (Operation *user : backwardUsers)
      user->replaceUsesOfWith(param, gathered);
    for (auto &[cast, users] : copies) {
      builder.setInsertionPoint(firstInBlock(users));
      Location loc = NameLoc::get(
          builder.getStringAttr(getValueName(cast.getResult()) + ".recast"),
          cast.getLoc());
      auto again = CastOp::create(builder, loc, cast.getType(), gathered);
      for (Operation *user : users)
        user->replaceUsesOfWith(cast.getResult(), again.getResult());
    }
  }
  // Gather the low copy itself where every reader casts the gathered master
  // to one low type (FSDP's param_dtype): half the bytes sent and no whole
  // f32 buffer in the arena; the same values, as a cast is elementwise.
  for (Operation *user : llvm::make_early_inc_range(sharded->getUsers()))
    if (auto gather = dyn_cast<GatherParameterOp>(user))
      if (gatherLowCopy(gather))
        ++stats.lowGathers;
  variable.erase();
  ++stats.parameters;
  stats.shardBytes += getTensorBytes(shardType);
  stats.wholeBytes += getTensorBytes(whole);
  return success();
}
