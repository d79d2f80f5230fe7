//===- Schedule.cpp - memory-aware op ordering ----------------------------===//
//
// Chooses, among valid topological orders, one with a lower max-live. As in
// XLA's scheduler (hlo_memory_scheduler.cc: list, DFS and post-order
// schedulers, keep the best), several orders are built and each is scored by
// the same liveness analysis the planner uses, with the in-place decisions
// that bufferization will take for that order. We go further than XLA's list
// scheduler by scoring in-place reuse and aliasing views exactly instead of
// estimating them.
//
//===----------------------------------------------------------------------===//

#include "memopt/Analysis/BufferLiveness.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/IR/OffloadOps.h"
#include "memopt/Dialect/MemOpt/Transforms/MemoryPhase.h"
#include "memopt/Dialect/MemOpt/Transforms/Passes.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>

namespace mlir::memopt {
#define GEN_PASS_DEF_MEMOPTSCHEDULE
#include "memopt/Dialect/MemOpt/Transforms/Passes.h.inc"
} // namespace mlir::memopt

using namespace mlir;
using namespace mlir::memopt;

namespace {

bool isView(Operation *op) {
  auto behavior = dyn_cast<BufferBehaviorOpInterface>(op);
  return behavior && behavior.isAliasingView();
}

/// Dependence structure of the executed ops, shared by the schedulers.
struct DependenceGraph {
  SmallVector<Operation *> ops;
  DenseMap<Operation *, unsigned> position;
  /// Producers among the executed ops, without duplicates.
  SmallVector<SmallVector<unsigned>> producers;
  SmallVector<SmallVector<unsigned>> consumers;

  explicit DependenceGraph(ArrayRef<Operation *> order) : ops(order) {
    for (auto [index, op] : llvm::enumerate(ops))
      position[op] = index;
    producers.resize(ops.size());
    consumers.resize(ops.size());
    for (auto [index, op] : llvm::enumerate(ops)) {
      llvm::SetVector<unsigned> unique;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (auto it = position.find(def); it != position.end())
            unique.insert(it->second);
      producers[index] = unique.takeVector();
    }
    addStateWriteOrder();
    for (auto [index, producerList] : llvm::enumerate(producers))
      for (unsigned producer : producerList)
        consumers[producer].push_back(index);
  }

  /// An op that writes a variable in place (an optimizer update) runs after
  /// every op before it in program order that uses that variable, directly
  /// or through a view (a write-after-read order SSA does not show), and
  /// before every op after it that uses the variable (read- and
  /// write-after-write: a data-parallel all-gather completes the parameter
  /// its sharded update wrote).
  void addStateWriteOrder() {
    SmallVector<llvm::SetVector<unsigned>> extra(ops.size());
    for (auto [index, op] : llvm::enumerate(ops)) {
      auto effects = dyn_cast<MemoryEffectOpInterface>(op);
      if (!effects)
        continue;
      SmallVector<MemoryEffects::EffectInstance> instances;
      effects.getEffects(instances);
      for (const MemoryEffects::EffectInstance &effect : instances) {
        Value written = effect.getValue();
        if (!isa<MemoryEffects::Write>(effect.getEffect()) || !written)
          continue;
        SmallVector<Value> worklist = {written};
        while (!worklist.empty()) {
          Value value = worklist.pop_back_val();
          for (Operation *user : value.getUsers()) {
            auto it = position.find(user);
            if (user == op || it == position.end())
              continue;
            if (it->second < index)
              extra[index].insert(it->second);
            else
              extra[it->second].insert(index);
            if (isView(user))
              worklist.push_back(user->getResult(0));
          }
        }
      }
    }
    for (auto [index, more] : llvm::enumerate(extra)) {
      if (more.empty())
        continue;
      llvm::SetVector<unsigned> all(producers[index].begin(),
                                    producers[index].end());
      all.insert(more.begin(), more.end());
      producers[index] = all.takeVector();
    }
  }
};

/// The root storage value of `value` through view ops.
Value viewRoot(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    if (!isView(def))
      break;
    value = def->getOperand(0);
  }
  return value;
}

/// Greedy list scheduling: run views as soon as they are ready (they cost
/// nothing), otherwise the ready op with the smallest net allocation; ties go
/// to the op that frees more, then to the original order.
SmallVector<Operation *> scheduleGreedy(func::FuncOp function,
                                        const DependenceGraph &graph) {
  size_t n = graph.ops.size();
  // Readers still to run for every root storage value (views forward their
  // reads to the root). Returned values are never freed.
  DenseMap<Value, int64_t> pendingReaders;
  DenseSet<Value> returned;
  for (Value value : function.getBody().front().getTerminator()->getOperands())
    returned.insert(viewRoot(value));
  for (Operation *op : graph.ops) {
    if (isView(op))
      continue;
    DenseSet<Value> roots;
    for (Value operand : op->getOperands())
      roots.insert(viewRoot(operand));
    for (Value root : roots)
      ++pendingReaders[root];
  }

  SmallVector<unsigned> waiting(n);
  SmallVector<unsigned> ready;
  for (unsigned i = 0; i < n; ++i) {
    waiting[i] = graph.producers[i].size();
    if (waiting[i] == 0)
      ready.push_back(i);
  }

  auto freedBytes = [&](Operation *op) {
    DenseSet<Value> roots;
    int64_t freed = 0;
    for (Value operand : op->getOperands()) {
      Value root = viewRoot(operand);
      if (!roots.insert(root).second || returned.contains(root) ||
          !root.getDefiningOp() || isWeightRegionOp(root.getDefiningOp()))
        continue;
      if (pendingReaders.lookup(root) == 1)
        freed += getTensorBytes(root.getType());
    }
    return freed;
  };
  auto allocatedBytes = [&](Operation *op) {
    int64_t bytes = 0;
    for (Value result : op->getResults())
      bytes += getTensorBytes(result.getType());
    return bytes;
  };

  SmallVector<Operation *> order;
  order.reserve(n);
  while (!ready.empty()) {
    auto best = ready.begin();
    int64_t bestNet = 0, bestFreed = 0;
    bool bestIsView = false;
    for (auto it = ready.begin(); it != ready.end(); ++it) {
      Operation *op = graph.ops[*it];
      bool view = isView(op);
      int64_t freed = view ? 0 : freedBytes(op);
      int64_t net = view ? 0 : allocatedBytes(op) - freed;
      bool better;
      if (it == ready.begin())
        better = true;
      else if (view != bestIsView)
        better = view;
      else if (net != bestNet)
        better = net < bestNet;
      else if (freed != bestFreed)
        better = freed > bestFreed;
      else
        better = *it < *best;
      if (better) {
        best = it;
        bestNet = net;
        bestFreed = freed;
        bestIsView = view;
      }
    }
    unsigned chosen = *best;
    ready.erase(best);
    Operation *op = graph.ops[chosen];
    order.push_back(op);
    if (!isView(op)) {
      DenseSet<Value> roots;
      for (Value operand : op->getOperands())
        if (roots.insert(viewRoot(operand)).second)
          --pendingReaders[viewRoot(operand)];
    }
    for (unsigned consumer : graph.consumers[chosen])
      if (--waiting[consumer] == 0)
        ready.push_back(consumer);
  }
  return order;
}

/// Depth-first post-order from the outputs: each op's operands are produced
/// just before it, the operand with the heaviest producer tree first, so one
/// branch finishes (and frees its temporaries) before the next starts.
SmallVector<Operation *> scheduleDepthFirst(func::FuncOp function,
                                            const DependenceGraph &graph) {
  size_t n = graph.ops.size();
  // Bytes produced by an op and everything it (transitively) needs,
  // approximated by summing over producers as XLA does.
  SmallVector<int64_t> treeBytes(n, 0);
  for (unsigned i = 0; i < n; ++i) {
    for (Value result : graph.ops[i]->getResults())
      treeBytes[i] += getTensorBytes(result.getType());
    for (unsigned producer : graph.producers[i])
      treeBytes[i] += treeBytes[producer];
  }

  SmallVector<Operation *> order;
  SmallVector<bool> visited(n, false);
  std::function<void(unsigned)> visit = [&](unsigned index) {
    if (visited[index])
      return;
    visited[index] = true;
    SmallVector<unsigned> producers(graph.producers[index]);
    llvm::stable_sort(producers, [&](unsigned a, unsigned b) {
      return treeBytes[a] > treeBytes[b];
    });
    for (unsigned producer : producers)
      visit(producer);
    order.push_back(graph.ops[index]);
  };
  for (Value value : function.getBody().front().getTerminator()->getOperands())
    if (Operation *def = value.getDefiningOp())
      if (auto it = graph.position.find(def); it != graph.position.end())
        visit(it->second);
  // Ops no output depends on still run, in their original place relative to
  // each other.
  for (unsigned i = 0; i < n; ++i)
    visit(i);
  return order;
}

int64_t scoreOrder(func::FuncOp function, ArrayRef<Operation *> order) {
  BufferLiveness liveness(function, order,
                          BufferLiveness::decideInPlace(function, order));
  return liveness.getStats().maxLiveBytes;
}

} // namespace

FailureOr<ScheduleResult>
mlir::memopt::scheduleFunction(func::FuncOp function) {
  if (!function.getBody().hasOneBlock())
    return function.emitError(
        "memopt-schedule expects a single-block function");
  ScheduleResult result;
  SmallVector<Operation *> original = getExecutionOrder(function);
  // Activation offload placed its copies and waits against this order's
  // timeline (docs/offload.md): reordering would break that promise.
  if (llvm::any_of(original, [](Operation *op) {
        return isa<OffloadOp, OffloadWaitOp, ReloadOp, ReloadWaitOp>(op);
      })) {
    result.orderKept = true;
    return result;
  }
  DependenceGraph graph(original);

  struct Candidate {
    StringRef name;
    SmallVector<Operation *> order;
    int64_t maxLive;
  };
  SmallVector<Candidate> candidates;
  candidates.push_back({"original", original, scoreOrder(function, original)});
  for (auto [name, order] :
       {std::pair<StringRef, SmallVector<Operation *>>{
            "greedy", scheduleGreedy(function, graph)},
        {"depth-first", scheduleDepthFirst(function, graph)}}) {
    assert(order.size() == original.size() && "scheduler lost ops");
    int64_t maxLive = scoreOrder(function, order);
    candidates.push_back({name, std::move(order), maxLive});
  }
  const Candidate *best = &candidates.front();
  for (const Candidate &candidate : candidates)
    if (candidate.maxLive < best->maxLive)
      best = &candidate;

  if (best != &candidates.front()) {
    Block &body = function.getBody().front();
    Operation *terminator = body.getTerminator();
    // Constants first (they execute nothing), then the chosen order.
    SmallVector<Operation *> constants;
    for (Operation &op : body)
      if (isWeightRegionOp(&op))
        constants.push_back(&op);
    for (Operation *constant : llvm::reverse(constants))
      constant->moveBefore(&body, body.begin());
    for (Operation *op : best->order)
      op->moveBefore(terminator);
  }
  result.chosen = best->name.str();
  result.maxLiveBefore = candidates.front().maxLive;
  result.maxLiveAfter = best->maxLive;
  return result;
}

namespace {
struct MemOptSchedulePass
    : public mlir::memopt::impl::MemOptScheduleBase<MemOptSchedulePass> {
  using MemOptScheduleBase::MemOptScheduleBase;

  void runOnOperation() override {
    func::FuncOp function = getOperation();
    FailureOr<ScheduleResult> result = scheduleFunction(function);
    if (failed(result))
      return signalPassFailure();
    if (!report)
      return;
    if (result->orderKept)
      llvm::outs() << "memopt-schedule @" << function.getSymName()
                   << ": order kept (activation offload placed in it)\n";
    else
      llvm::outs() << "memopt-schedule @" << function.getSymName()
                   << ": max-live before " << result->maxLiveBefore
                   << ", after " << result->maxLiveAfter << " ("
                   << result->chosen << ")\n";
  }
};
} // namespace
