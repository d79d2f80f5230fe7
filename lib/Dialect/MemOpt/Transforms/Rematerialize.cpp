//===- Rematerialize.cpp - recompute to fit a byte budget -----------------===//
//
// Maps a function onto the rematerialization solver's graph (lib/Remat),
// solves under a byte budget and applies the schedule by cloning ops.
//
// What we took, and from where:
//  - The solver and its schedule space (Checkmate, Jain et al. MLSys 2020;
//    Moccasin, Bartan et al. ICML 2023): lib/Remat, docs/remat.md.
//  - Placement (XLA's HloRematerialization): a recomputation is a clone of
//    the instruction inserted right before its first user after the point
//    where it was dropped, and the users after that point read the clone.
//    XLA decides greedily, one value at a time, at the point of highest
//    memory; here the whole schedule comes from the solver and is applied in
//    one go.
//  - Which ops may be recomputed (PyTorch AOTAutograd's min-cut
//    partitioner): never an op with side effects, and random ops only when
//    their generator is functional (seed and offset as inputs, PyTorch's
//    `functionalize_rng_ops`; memopt's dropout is keyed by (seed, step, op)
//    attributes that a clone keeps). AOTAutograd also bans compute-intensive
//    ops (matmul, conv) from recomputation by default; here the solver
//    weighs each op's estimated time instead, and `allow` restricts the
//    kinds when a user wants that policy.
//  - IREE's dispatch-region formation clones cheap producers (fills,
//    splats) into each consumer instead of keeping their results
//    (Flow/Transforms/RegionOpUtils.cpp); the same trade, made locally.
//    TVM Relax's gradient pass and torch.utils.checkpoint need the user to
//    mark checkpoints; here nothing is marked.
// Where we go further: the budget is in bytes and, in memopt-compile, on
// the packed arena itself (the planner has the last word and the driver
// solves again until it fits); state readers are checked against the
// update that writes the state, so a recomputation never reads an updated
// parameter.
//
// The third choice, copying a saved value to host memory and back, is
// Offload.cpp's; with `offload` it runs first, on the same budget, and takes
// only the copies that cost less than recomputing their value.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/MemOpt/Transforms/Rematerialize.h"
#include "memopt/Analysis/BufferLiveness.h"
#include "memopt/Analysis/MemoryReport.h"
#include "memopt/Analysis/RematSummary.h"
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/Transforms/Passes.h"
#include "memopt/Remat/Remat.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <functional>
#include <limits>

namespace mlir::memopt {
#define GEN_PASS_DEF_MEMOPTREMATERIALIZE
#include "memopt/Dialect/MemOpt/Transforms/Passes.h.inc"
} // namespace mlir::memopt

using namespace mlir;
using namespace mlir::memopt;
namespace remat = ::memopt::remat;

namespace {

bool isView(Operation *op) {
  auto behavior = dyn_cast<BufferBehaviorOpInterface>(op);
  return behavior && behavior.isAliasingView();
}

/// The kind an `allow` entry names: "relu" and "memopt.relu" alike.
std::string kindOf(StringRef name) {
  name.consume_front("memopt.");
  return name.str();
}

/// The function as the solver sees it.
struct RematGraph {
  remat::Graph graph;
  /// Node index -> op; the sink (the function's return) has none.
  SmallVector<Operation *> ops;
  DenseMap<Operation *, int> nodeOf;
  /// For each op that writes state in place: the nodes that read that state
  /// (directly or through views).
  SmallVector<std::pair<int, SmallVector<int>>> stateWriters;
};

/// The node whose buffer `value` lives in (through views), if any.
std::optional<int> rootNode(const RematGraph &rematGraph, Value value) {
  while (Operation *def = value.getDefiningOp()) {
    if (!isView(def))
      break;
    value = def->getOperand(0);
  }
  Operation *def = value.getDefiningOp();
  if (!def)
    return std::nullopt;
  auto it = rematGraph.nodeOf.find(def);
  if (it == rematGraph.nodeOf.end())
    return std::nullopt;
  return it->second;
}

/// Picoseconds: the solver's costs are integers.
int64_t toCost(double seconds) { return int64_t(std::llround(seconds * 1e12)); }

/// Ops the solver may compute more than once.
bool isRecomputable(Operation *op, const llvm::StringSet<> &allowed) {
  // A gathered ZeRO-3 parameter may be gathered again instead of kept: the
  // gather reads only the rank's shard, which no op writes before the
  // parameter's update, after every use (memopt-data-parallel checks), and
  // every rank clones the same gathers in the same order.
  return op->getNumResults() > 0 &&
         (isMemoryEffectFree(op) || isa<GatherParameterOp>(op)) &&
         isa<CostOpInterface>(op) &&
         (allowed.empty() ||
          allowed.contains(kindOf(op->getName().getStringRef())));
}

llvm::StringSet<> allowedKinds(const RematerializeOptions &options) {
  llvm::StringSet<> allowed;
  for (const std::string &kind : options.allow)
    allowed.insert(kindOf(kind));
  return allowed;
}

RematGraph buildGraph(func::FuncOp function,
                      const RematerializeOptions &options) {
  RematGraph result;
  remat::Graph &graph = result.graph;
  llvm::StringSet<> allowed = allowedKinds(options);

  for (Operation *op : getExecutionOrder(function)) {
    if (isView(op))
      continue;
    int index = graph.nodes.size();
    result.nodeOf[op] = index;
    result.ops.push_back(op);
    remat::Node node;
    node.id = index;
    node.name = getOpName(op);
    node.cost =
        toCost(estimateOpSeconds(op, options.roofline, options.kernelTimes));
    for (Type type : op->getResultTypes())
      node.bytes += getTensorBytes(type);
    // A kernel's workspace, at the floor the planner promises
    // (BufferLiveness): needed while the op runs only.
    if (auto cost = dyn_cast<CostOpInterface>(op))
      if (int64_t workspace = cost.getWorkspaceBytes(); workspace > 0)
        node.scratchBytes = promisedWorkspace(op, workspace);
    node.maxComputations = isRecomputable(op, allowed) ? 0 : 1;
    graph.nodes.push_back(std::move(node));
  }
  // The function's results stay live to the end (memopt-compile plans them
  // in the arena): a last node reads them.
  llvm::SetVector<int> returned;
  for (Value value : function.getBody().front().getTerminator()->getOperands())
    if (std::optional<int> producer = rootNode(result, value))
      returned.insert(*producer);
  graph.inputs.resize(graph.nodes.size());
  for (auto [index, op] : llvm::enumerate(result.ops)) {
    llvm::SetVector<int> inputs;
    for (Value operand : op->getOperands())
      if (std::optional<int> producer = rootNode(result, operand))
        inputs.insert(*producer);
    graph.inputs[index].assign(inputs.begin(), inputs.end());
    // In-place reuse as bufferization decides it (BufferLiveness::
    // decideInPlace): one result, not a function output, over an operand of
    // the same bytes that dies here (the solver checks the dying).
    auto behavior = dyn_cast<BufferBehaviorOpInterface>(op);
    if (!behavior || op->getNumResults() != 1 || returned.contains(index))
      continue;
    int64_t resultBytes = getTensorBytes(op->getResult(0).getType());
    for (OpOperand &operand : op->getOpOperands()) {
      std::optional<int> producer = rootNode(result, operand.get());
      if (producer && !returned.contains(*producer) &&
          behavior.canWriteInPlace(operand.getOperandNumber()) &&
          graph.nodes[*producer].bytes == resultBytes) {
        graph.nodes[index].inPlaceInput = *producer;
        break;
      }
    }
  }
  if (!returned.empty()) {
    remat::Node sink;
    sink.id = graph.nodes.size();
    sink.name = "return";
    sink.maxComputations = 1;
    graph.nodes.push_back(sink);
    graph.inputs.emplace_back(returned.begin(), returned.end());
    result.ops.push_back(nullptr);
  }
  for (int index = 0, e = graph.nodes.size(); index < e; ++index)
    graph.order.push_back(index);

  // Writers of state and the nodes that read what they write.
  for (auto [index, op] : llvm::enumerate(result.ops)) {
    auto effects = dyn_cast_or_null<MemoryEffectOpInterface>(op);
    if (!effects)
      continue;
    SmallVector<MemoryEffects::EffectInstance> instances;
    effects.getEffects(instances);
    llvm::SetVector<int> readers;
    for (const MemoryEffects::EffectInstance &effect : instances) {
      Value written = effect.getValue();
      if (!written || !isa<MemoryEffects::Write>(effect.getEffect()))
        continue;
      SmallVector<Value> worklist = {written};
      while (!worklist.empty()) {
        Value value = worklist.pop_back_val();
        for (Operation *user : value.getUsers()) {
          if (user == op)
            continue;
          if (isView(user)) {
            worklist.push_back(user->getResult(0));
            continue;
          }
          if (auto it = result.nodeOf.find(user); it != result.nodeOf.end())
            readers.insert(it->second);
        }
      }
    }
    if (!readers.empty())
      result.stateWriters.push_back({int(index), readers.takeVector()});
  }
  return result;
}

/// Recomputations in `schedule` that run after an update of state their
/// first computation read before it: those nodes may be computed once only.
SmallVector<int> findLateStateReads(const RematGraph &rematGraph,
                                    ArrayRef<int> schedule) {
  SmallVector<int> position(rematGraph.graph.nodes.size(), -1);
  for (auto [step, node] : llvm::enumerate(schedule))
    if (position[node] < 0)
      position[node] = step;
  SmallVector<int> lastComputation(rematGraph.graph.nodes.size(), -1);
  for (auto [step, node] : llvm::enumerate(schedule))
    lastComputation[node] = step;
  // A reader computed first before the write read the old value; computed
  // again after it, it would read the new one. (A reader first computed
  // after the write reads the new value every time.)
  llvm::SetVector<int> late;
  for (const auto &[writer, readers] : rematGraph.stateWriters)
    for (int reader : readers)
      if (position[reader] < position[writer] &&
          lastComputation[reader] > position[writer])
        late.insert(reader);
  return late.takeVector();
}

/// Rewrites the function body into `schedule`: each node's first computation
/// is its op, later ones are clones; every user reads the newest copy.
/// Returns the clones.
SmallVector<Operation *> applySchedule(func::FuncOp function,
                                       const RematGraph &rematGraph,
                                       ArrayRef<int> schedule) {
  Block &body = function.getBody().front();
  Operation *terminator = body.getTerminator();
  OpBuilder builder(function.getContext());
  UnitAttr recomputed = builder.getUnitAttr();

  // Original result -> its newest copy.
  DenseMap<Value, Value> newest;
  // (view op, newest copy of its operand) -> the view of that copy.
  DenseMap<std::pair<Operation *, Value>, Value> viewCopies;
  DenseSet<Operation *> placed;
  SmallVector<Operation *> order;
  SmallVector<Operation *> clones;

  // The value a user placed now reads for the original `value`, placing the
  // views it goes through (cloned when their root was recomputed).
  std::function<Value(Value)> materialize = [&](Value value) -> Value {
    Operation *def = value.getDefiningOp();
    if (!def || isWeightRegionOp(def))
      return value;
    if (!isView(def)) {
      auto it = newest.find(value);
      assert(it != newest.end() && "a node is read before it is computed");
      return it->second;
    }
    Value source = materialize(def->getOperand(0));
    if (source == def->getOperand(0)) {
      if (placed.insert(def).second)
        order.push_back(def);
      return value;
    }
    auto key = std::make_pair(def, source);
    if (auto it = viewCopies.find(key); it != viewCopies.end())
      return it->second;
    Operation *view = def->clone();
    view->setOperand(0, source);
    for (unsigned i = 1, e = def->getNumOperands(); i < e; ++i)
      view->setOperand(i, materialize(def->getOperand(i)));
    body.getOperations().insert(Block::iterator(terminator), view);
    order.push_back(view);
    Value copy = view->getResult(cast<OpResult>(value).getResultNumber());
    viewCopies[key] = copy;
    return copy;
  };

  // Operands as the original IR has them: the first computation of a node
  // may itself be rewired to read recomputed copies.
  SmallVector<SmallVector<Value>> operands;
  for (Operation *op : rematGraph.ops)
    operands.push_back(op ? SmallVector<Value>(op->getOperands())
                          : SmallVector<Value>());
  SmallVector<bool> computed(rematGraph.graph.nodes.size(), false);
  for (int node : schedule) {
    Operation *op = rematGraph.ops[node];
    if (!op)
      continue;
    Operation *computation = op;
    if (computed[node]) {
      computation = op->clone();
      computation->setAttr(kRecomputedAttrName, recomputed);
      body.getOperations().insert(Block::iterator(terminator), computation);
      clones.push_back(computation);
    }
    for (auto [number, operand] : llvm::enumerate(operands[node]))
      computation->setOperand(number, materialize(operand));
    order.push_back(computation);
    placed.insert(computation);
    computed[node] = true;
    for (auto [original, copy] :
         llvm::zip_equal(op->getResults(), computation->getResults()))
      newest[original] = copy;
  }
  for (OpOperand &operand : terminator->getOpOperands())
    operand.set(materialize(operand.get()));

  // Views nothing reads stay right after what they view.
  for (Operation *op : getExecutionOrder(function))
    if (isView(op) && !placed.contains(op)) {
      Operation *def = op->getOperand(0).getDefiningOp();
      auto at = llvm::find(order, def);
      order.insert(at == order.end() ? order.begin() : std::next(at), op);
      placed.insert(op);
    }
  for (Operation *op : order)
    op->moveBefore(terminator);
  return clones;
}

} // namespace

std::string
mlir::memopt::checkRematerializeOptions(MLIRContext *context,
                                        const RematerializeOptions &options) {
  if (options.budget <= 0)
    return "the rematerialization budget must be a positive number of bytes";
  if (options.maxComputations < 1)
    return "max-computations must be at least 1";
  if (!(options.timeLimitSeconds > 0))
    return "the rematerialization time limit must be positive";
  if (options.offload && !(options.offloadBytesPerSecond > 0))
    return "the offload bandwidth must be positive";
  if (!remat::parseMethod(options.method))
    return "unknown rematerialization method '" + options.method +
           "' (expected auto, fast or exact)";
  for (const std::string &kind : options.allow)
    if (!RegisteredOperationName::lookup("memopt." + kindOf(kind), context))
      return "'" + kind + "' in the rematerialization allow list is not a " +
             "memopt op kind (e.g. relu, conv, fused_elementwise)";
  return "";
}

/// The recomputation solver on `function` as it stands (copies included),
/// adding to `result`.
static FailureOr<RematerializeResult>
solveRecomputation(func::FuncOp function, const RematerializeOptions &options,
                   RematerializeResult result) {
  RematGraph rematGraph = buildGraph(function, options);
  result.nodes = rematGraph.graph.nodes.size();
  for (Operation *op : rematGraph.ops)
    if (op)
      result.baseSeconds +=
          estimateOpSeconds(op, options.roofline, options.kernelTimes);

  remat::RematOptions solverOptions;
  solverOptions.budget = options.budget;
  solverOptions.maxComputations = options.maxComputations;
  solverOptions.method = *remat::parseMethod(options.method);
  solverOptions.timeLimitSeconds = options.timeLimitSeconds;
  remat::RematResult solved;
  // A recomputation after the update of the state it reads would read the
  // new state: forbid it and solve again (each round forbids at least one
  // more node, so this ends).
  while (true) {
    solved = remat::solveRemat(rematGraph.graph, solverOptions);
    if (solved.status == remat::RematStatus::InvalidInput ||
        solved.status == remat::RematStatus::InvalidSchedule)
      return function.emitError("memopt-rematerialize: the solver failed: ")
             << solved.message;
    if (!solved.ok())
      break;
    SmallVector<int> late = findLateStateReads(rematGraph, solved.schedule);
    if (late.empty())
      break;
    for (int node : late) {
      rematGraph.graph.nodes[node].maxComputations = 1;
      result.refusedStateReaders.push_back(rematGraph.graph.nodes[node].name);
    }
  }
  result.initialPeak = solved.initialPeak;
  if (!solved.ok()) {
    result.smallestPeak = solved.smallestPeak;
    result.message = solved.message;
    return result;
  }
  result.fits = true;
  result.peak = solved.peakBytes;
  result.provedOptimal = solved.provedOptimal;
  if (solved.recomputations > 0) {
    SmallVector<Operation *> clones =
        applySchedule(function, rematGraph, solved.schedule);
    result.recomputations = clones.size();
    for (Operation *clone : clones) {
      result.addedFlops += getOpFlops(clone);
      result.addedSeconds +=
          estimateOpSeconds(clone, options.roofline, options.kernelTimes);
    }
  }
  RematSummary summary;
  summary.solved = true;
  summary.budget = options.budget;
  summary.initialPeak = result.initialPeak;
  summary.peak = result.peak;
  summary.recomputations = result.recomputations;
  if (options.kernelTimes)
    summary.kernelSeconds = selectKernelTimes(function, *options.kernelTimes);
  writeRematSummary(function, summary);
  return result;
}

FailureOr<RematerializeResult>
mlir::memopt::rematerializeFunction(func::FuncOp function,
                                    const RematerializeOptions &options) {
  if (!function.getBody().hasOneBlock())
    return function.emitError(
        "memopt-rematerialize expects a single-block function");
  RematerializeResult result;
  if (options.offload) {
    OwningOpRef<func::FuncOp> plain(function.clone());
    // Copies first, where they cost less than recomputing their value; the
    // recomputation solver then works on what is left over the budget.
    OffloadOptions offload;
    offload.budget = options.budget;
    offload.bytesPerSecond = options.offloadBytesPerSecond;
    if (options.kernelTimes)
      if (auto it = options.kernelTimes->find(kCopyGiBTimeKey);
          it != options.kernelTimes->end() && it->second > 0)
        offload.bytesPerSecond = double(int64_t(1) << 30) / it->second;
    offload.roofline = options.roofline;
    offload.kernelTimes = options.kernelTimes;
    llvm::StringSet<> allowed = allowedKinds(options);
    FailureOr<OffloadResult> offloaded =
        offloadFunction(function, offload, [&](Operation *op) {
          return isRecomputable(op, allowed)
                     ? estimateOpSeconds(op, options.roofline,
                                         options.kernelTimes)
                     : std::numeric_limits<double>::infinity();
        });
    if (failed(offloaded))
      return failure();
    result.offload = *offloaded;
    if (result.offload.offloaded > 0) {
      FailureOr<RematerializeResult> solved =
          solveRecomputation(function, options, result);
      if (failed(solved) || solved->fits)
        return solved;
      // A reload keeps its value from the reload on, where recomputing it
      // late might have fitted: without the copies, the solver may still
      // find a schedule. Copies never cost a fit.
      function.getBody().takeBody(plain->getBody());
      function->removeAttr(kOffloadAttrName);
      function->removeAttr(kHostPoolSizeAttrName);
      result = RematerializeResult();
    }
  }
  return solveRecomputation(function, options, result);
}

int64_t mlir::memopt::getRematModelPeak(func::FuncOp function,
                                        const RematerializeOptions &options) {
  return remat::initialPeak(buildGraph(function, options).graph);
}

namespace {
struct MemOptRematerializePass
    : public mlir::memopt::impl::MemOptRematerializeBase<
          MemOptRematerializePass> {
  using MemOptRematerializeBase::MemOptRematerializeBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if ((budget > 0) == (memoryBudget > 0)) {
      module.emitError("memopt-rematerialize: give one of budget=BYTES (the "
                       "solver's model) and memory-budget=BYTES (the planned "
                       "arena)");
      return signalPassFailure();
    }
    RematerializeOptions options;
    options.budget = budget > 0 ? int64_t(budget) : int64_t(memoryBudget);
    options.allow.assign(allow.begin(), allow.end());
    options.maxComputations = maxComputations;
    options.timeLimitSeconds = timeLimit;
    options.method = method;
    options.offload = offload;
    options.offloadBytesPerSecond = offloadBandwidth * 1e9;
    std::string error = checkRematerializeOptions(&getContext(), options);
    if (!error.empty()) {
      module.emitError("memopt-rematerialize: ") << error;
      return signalPassFailure();
    }
    KernelTimes times;
    if (!kernelTimes.empty()) {
      FailureOr<KernelTimes> read = readKernelTimes(kernelTimes, error);
      if (failed(read)) {
        module.emitError("memopt-rematerialize: ") << error;
        return signalPassFailure();
      }
      times = std::move(*read);
      options.kernelTimes = &times;
    }
    if (memoryBudget > 0) {
      if (failed(fitMemoryBudget(module, options)))
        return signalPassFailure();
      return;
    }
    for (auto function : module.getOps<func::FuncOp>())
      if (!function.isExternal() && failed(rematerializeOne(function, options)))
        return signalPassFailure();
  }

  LogicalResult rematerializeOne(func::FuncOp function,
                                 const RematerializeOptions &options) {
    FailureOr<RematerializeResult> result =
        rematerializeFunction(function, options);
    if (failed(result))
      return failure();
    std::string refused;
    if (!result->refusedStateReaders.empty())
      refused = llvm::formatv("; {0} recomputations refused (they would read "
                              "state after its update: '{1}')",
                              result->refusedStateReaders.size(),
                              llvm::join(result->refusedStateReaders, "', '"))
                    .str();
    if (!result->fits)
      return function.emitError("memopt-rematerialize: @")
             << function.getSymName() << " does not fit in " << options.budget
             << " bytes: " << result->message << refused;
    if (report && options.offload)
      llvm::outs() << llvm::formatv(
          "memopt-rematerialize @{0}: offloaded {1} values ({2} bytes, host "
          "pool {3} bytes), copies {4:F2} us, {5:F2} us hidden, {6} refused "
          "(recomputing them is cheaper), model peak {7} -> {8} bytes\n",
          function.getSymName(), result->offload.offloaded,
          result->offload.offloadedBytes, result->offload.hostPoolBytes,
          result->offload.copySeconds * 1e6,
          (result->offload.copySeconds - result->offload.exposedSeconds) * 1e6,
          result->offload.refusedForRecompute, result->offload.peakBefore,
          result->offload.peakAfter);
    if (report)
      llvm::outs() << llvm::formatv(
          "memopt-rematerialize @{0}: budget {1}, peak {2} -> {3} bytes, "
          "{4} recomputations, +{5} FLOPs, +{6:F1} us ({7:F2}% of {8:F1} "
          "us){9}\n",
          function.getSymName(), options.budget, result->initialPeak,
          result->peak, result->recomputations, result->addedFlops,
          result->addedSeconds * 1e6,
          result->baseSeconds > 0
              ? 100.0 * result->addedSeconds / result->baseSeconds
              : 0.0,
          result->baseSeconds * 1e6, refused);
    return success();
  }

  /// memory-budget: replan until the packed arena fits.
  LogicalResult fitMemoryBudget(ModuleOp module,
                                const RematerializeOptions &options) {
    MemoryBudgetOptions search;
    search.memoryBudget = memoryBudget;
    search.remat = options;
    search.maxProbes = maxProbes;
    search.bucketMib = bucketMib;
    search.gatherMib = gatherMib;
    search.outputsInArena = outputsInArena;
    search.probePlanSeconds = planTimeLimit;
    FailureOr<MemoryBudgetResult> result =
        rematerializeToMemoryBudget(module, search);
    if (failed(result))
      return failure();
    if (report)
      for (const std::string &line : result->log)
        llvm::outs() << "memopt-rematerialize: " << line << "\n";
    if (!result->fits)
      return module.emitError(result->message);
    // The chosen function replaces the module's.
    Block &body = module.getBodyRegion().front();
    body.clear();
    body.getOperations().splice(
        body.end(), result->module->getBodyRegion().front().getOperations());
    for (auto function : module.getOps<func::FuncOp>()) {
      if (function.isExternal())
        continue;
      if (result->synchronousCollectives)
        function->setAttr(kSynchronousCollectivesAttrName,
                          UnitAttr::get(&getContext()));
      RematSummary summary =
          readRematSummary(function).value_or(RematSummary());
      summary.searched = true;
      summary.memoryBudget = memoryBudget;
      summary.unconstrainedArena = result->unconstrainedArena;
      summary.plannedArena = result->arena;
      summary.solverRuns = result->probes;
      summary.recomputations = result->remat.recomputations;
      summary.addedTimeFraction =
          result->remat.baseSeconds > 0
              ? result->remat.addedSeconds / result->remat.baseSeconds
              : 0.0;
      if (options.kernelTimes)
        summary.kernelSeconds =
            selectKernelTimes(function, *options.kernelTimes);
      writeRematSummary(function, summary);
    }
    return success();
  }
};
} // namespace
