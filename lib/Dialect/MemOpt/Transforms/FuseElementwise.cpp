//===- FuseElementwise.cpp - elementwise chains into one op ---------------===//
//
// Groups trees of float unary / binary ops into one memopt.fused_elementwise,
// so that the runtime reads every input once, keeps the intermediates in
// registers and writes the result once (one kernel instead of one per op),
// and the intermediates never need arena space:
//
//   * a residual add followed by relu (ResNet), x * hard_sigmoid-like chains
//     (MobileNetV3), sigmoid-gated products (EfficientNet's swish when it is
//     spelled out), scale-and-shift tails;
//   * every use of a member's result must be inside the group (a value read
//     by two steps, as in x * hard_sigmoid(x), is one register read twice),
//     and it must have the group's result shape (intermediates are never
//     broadcast further); the group's external inputs broadcast (numpy
//     rules) and are read once each;
//   * a cast between float types that ends a chain is the group's root: the
//     chain runs on f32 registers in the inputs' type and the last value is
//     converted on store (mixed precision's `cast(w * x * rsqrt(...))` into a
//     bf16 GEMM, an f32 gradient cast back to bf16 before its residual add),
//     so the wide intermediate is never written and read back. The values
//     are those of the unfused chain and cast;
//   * an expand that feeds the group is read through its source, which
//     broadcasts to the group's shape by itself (RMSNorm's backward expands
//     a [B, S, 1] row term to [B, S, D] before its elementwise tail): the
//     expanded tensor is never written; the expand goes when no user is left.
//
// Taken from: XLA's loop fusion and TVM's injective fusion (fuse producers
// into their single consumer when the iteration space is the same; a
// broadcast operand is an input, not a fused intermediate), TensorRT's
// pointwise fusion (one kernel per pointwise subgraph). Different: the fused
// op carries an explicit step program (`ops`, `registers`) that the runtime
// interprets per element, so no code is generated at run time (no NVRTC) and
// the same program runs on the host backend in CI. Runs after
// --memopt-fuse-epilogues (bias and activations go into library epilogues
// first) and after --memopt-mixed-precision (the fused program then sees the
// final element types; a cast joins only as the root, like XLA's convert at
// the end of a loop fusion).
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/MemOpt/IR/MemOptOps.h"
#include "memopt/Dialect/MemOpt/IR/ShapeUtils.h"
#include "memopt/Dialect/MemOpt/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>
#include <optional>

namespace mlir::memopt {
#define GEN_PASS_DEF_MEMOPTFUSEELEMENTWISE
#include "memopt/Dialect/MemOpt/Transforms/Passes.h.inc"
} // namespace mlir::memopt

using namespace mlir;
using namespace mlir::memopt;

namespace {

/// What one op becomes as a step: its name and parameters.
struct Step {
  StringRef name;
  float alpha = 0.0f, beta = 0.0f;
};

std::optional<Step> stepOf(Operation *op) {
  if (op->getNumResults() != 1)
    return std::nullopt;
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!type || !isa<FloatType>(type.getElementType()) || !type.hasStaticShape())
    return std::nullopt;
  // One element type throughout (pow may have an integer exponent).
  for (Value operand : op->getOperands()) {
    auto operandType = dyn_cast<RankedTensorType>(operand.getType());
    if (!operandType || operandType.getElementType() != type.getElementType())
      return std::nullopt;
  }
  constexpr float kInf = std::numeric_limits<float>::infinity();
  return llvm::TypeSwitch<Operation *, std::optional<Step>>(op)
      .Case([](AddOp) { return Step{"add"}; })
      .Case([](SubOp) { return Step{"sub"}; })
      .Case([](MulOp) { return Step{"mul"}; })
      .Case([](DivOp) { return Step{"div"}; })
      .Case([](PowOp) { return Step{"pow"}; })
      .Case([](MinOp) { return Step{"min"}; })
      .Case([](MaxOp) { return Step{"max"}; })
      .Case([](ReluGradOp) { return Step{"relu_grad"}; })
      .Case([](ReluOp) { return Step{"relu"}; })
      .Case([](ExpOp) { return Step{"exp"}; })
      .Case([](LogOp) { return Step{"log"}; })
      .Case([](SqrtOp) { return Step{"sqrt"}; })
      .Case([](ReciprocalOp) { return Step{"reciprocal"}; })
      .Case([](NegOp) { return Step{"neg"}; })
      .Case([](AbsOp) { return Step{"abs"}; })
      .Case([](SigmoidOp) { return Step{"sigmoid"}; })
      .Case([](TanhOp) { return Step{"tanh"}; })
      .Case([](ErfOp) { return Step{"erf"}; })
      .Case([](SinOp) { return Step{"sin"}; })
      .Case([](CosOp) { return Step{"cos"}; })
      .Case([](HardSwishOp) { return Step{"hard_swish"}; })
      .Case([](LeakyReluOp op) {
        return Step{"leaky_relu", op.getAlpha().convertToFloat()};
      })
      .Case([](HardSigmoidOp op) {
        return Step{"hard_sigmoid", op.getAlpha().convertToFloat(),
                    op.getBeta().convertToFloat()};
      })
      .Case([](GeluOp op) {
        return Step{op.getApproximate() == "tanh" ? "gelu_tanh" : "gelu"};
      })
      .Case([&](ClipOp op) {
        std::optional<APFloat> low = op.getMin(), high = op.getMax();
        return Step{"clip", low ? float(low->convertToDouble()) : -kInf,
                    high ? float(high->convertToDouble()) : kInf};
      })
      .Default([](Operation *) { return std::nullopt; });
}

/// A cast between float tensor types of one shape: it can end a group.
bool isFloatCast(Operation *op) {
  auto cast = dyn_cast<CastOp>(op);
  if (!cast)
    return false;
  auto from = dyn_cast<RankedTensorType>(cast.getInput().getType());
  auto to = dyn_cast<RankedTensorType>(cast.getType());
  return from && to && from.hasStaticShape() &&
         from.getShape() == to.getShape() &&
         isa<FloatType>(from.getElementType()) &&
         isa<FloatType>(to.getElementType());
}

/// One fusion group: `root` and the producers folded into it.
struct Group {
  Operation *root = nullptr;
  llvm::SetVector<Operation *> members; // root included
  llvm::SetVector<Value> inputs;        // external values, first use order
  Type computeType; // every member's result type (a cast root's input type)
  /// Expand results the group reads through their sources instead.
  llvm::DenseMap<Value, Value> expandSource;
};

/// The source of `value` when it is an expand in `block` whose source
/// broadcasts to `type`'s shape by itself (numpy rules) and has its element
/// type; else null.
Value broadcastSource(Value value, RankedTensorType type, Block *block) {
  auto expand = value.getDefiningOp<ExpandOp>();
  if (!expand || expand->getBlock() != block)
    return {};
  auto source = dyn_cast<RankedTensorType>(expand.getInput().getType());
  if (!source || !source.hasStaticShape() ||
      source.getElementType() != type.getElementType())
    return {};
  std::optional<SmallVector<int64_t>> shape =
      broadcastShapes(source.getShape(), type.getShape());
  if (!shape || ArrayRef<int64_t>(*shape) != type.getShape())
    return {};
  return expand.getInput();
}

/// Grows `group` from its root to a fixpoint: the producer of an input joins
/// when it is a step in the same block, every use of its result is inside
/// the group (so a value read by two steps, like `x` in `x * sigmoid(x)`,
/// joins once both readers have), its result has the root's type (no
/// broadcast intermediates), and the group stays within the runtime's limits.
void grow(Group &group, llvm::DenseSet<Operation *> &taken) {
  Type rootType = group.computeType;
  auto rootTensor = cast<RankedTensorType>(rootType);
  bool changed = true;
  while (changed && group.members.size() < FusedElementwiseOp::kMaxSteps) {
    changed = false;
    for (Value input : group.inputs) {
      if (Value source =
              broadcastSource(input, rootTensor, group.root->getBlock())) {
        llvm::SetVector<Value> inputs = group.inputs;
        inputs.remove(input);
        inputs.insert(source);
        // The inputs together must still span the group's shape.
        SmallVector<int64_t> shape;
        for (Value each : inputs)
          if (std::optional<SmallVector<int64_t>> joined = broadcastShapes(
                  shape, cast<RankedTensorType>(each.getType()).getShape()))
            shape = *joined;
        if (ArrayRef<int64_t>(shape) == rootTensor.getShape()) {
          group.expandSource[input] = source;
          group.inputs = std::move(inputs);
          changed = true;
          break; // `inputs` changed under the loop: scan again
        }
      }
      Operation *producer = input.getDefiningOp();
      if (!producer || taken.contains(producer) ||
          producer->getBlock() != group.root->getBlock() ||
          input.getType() != rootType || !stepOf(producer) ||
          !llvm::all_of(input.getUsers(), [&](Operation *user) {
            return group.members.contains(user);
          }))
        continue;
      // Inputs after the join: the producer's operands replace `input`.
      llvm::SetVector<Value> inputs = group.inputs;
      inputs.remove(input);
      for (Value operand : producer->getOperands())
        inputs.insert(operand);
      if (inputs.size() > FusedElementwiseOp::kMaxInputs)
        continue;
      group.inputs = std::move(inputs);
      group.members.insert(producer);
      taken.insert(producer);
      changed = true;
      break; // `inputs` changed under the loop: scan again
    }
  }
}

struct MemOptFuseElementwisePass
    : public mlir::memopt::impl::MemOptFuseElementwiseBase<
          MemOptFuseElementwisePass> {
  using MemOptFuseElementwiseBase::MemOptFuseElementwiseBase;

  void runOnOperation() override {
    func::FuncOp function = getOperation();
    int64_t fusedGroups = 0, fusedOps = 0;
    for (Block &block : function.getBody()) {
      // Roots from the end of the block: each op whose result is not itself
      // folded into a later op starts a group.
      llvm::DenseSet<Operation *> taken;
      SmallVector<Group> groups;
      for (Operation &op : llvm::reverse(block)) {
        if (taken.contains(&op) || (!isFloatCast(&op) && !stepOf(&op)))
          continue;
        Group group;
        group.root = &op;
        group.computeType = op.getResult(0).getType();
        group.members.insert(&op);
        if (isFloatCast(&op)) {
          // A cast roots a group only with its operand's producer inside,
          // and only over an f32 chain: the f32 registers then hold the
          // unfused chain's values, where a bf16 chain's last value would
          // skip its rounding to bf16 before the cast.
          Value input = op.getOperand(0);
          Operation *producer = input.getDefiningOp();
          if (!producer || taken.contains(producer) ||
              producer->getBlock() != &block || !stepOf(producer) ||
              !input.hasOneUse() || !getElementTypeOrSelf(input).isF32())
            continue;
          group.computeType = input.getType();
          group.members.insert(producer);
          taken.insert(producer);
          group.inputs.insert(producer->getOperands().begin(),
                              producer->getOperands().end());
        } else {
          group.inputs.insert(op.getOperands().begin(), op.getOperands().end());
        }
        taken.insert(&op);
        grow(group, taken);
        // One step is worth its own op when it removes an expand.
        if (group.members.size() >= 2 || !group.expandSource.empty())
          groups.push_back(std::move(group));
      }
      for (Group &group : groups) {
        rewrite(group);
        ++fusedGroups;
        fusedOps += group.members.size();
      }
    }
    if (report)
      llvm::outs() << "memopt-fuse-elementwise @" << function.getSymName()
                   << ": " << fusedOps << " ops in " << fusedGroups
                   << " fused_elementwise ops\n";
  }

  /// Replaces the group with one fused_elementwise at the root (a cast root
  /// is no step: it gives the result its type).
  void rewrite(Group &group) {
    SmallVector<Operation *> order;
    for (Operation *member : group.members)
      if (member != group.root || !isFloatCast(member))
        order.push_back(member);
    llvm::sort(order, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    // Registers: the inputs in the order the steps first read them, then
    // one per step.
    llvm::SetVector<Value> inputs;
    llvm::DenseMap<Value, int64_t> registerOf;
    llvm::DenseSet<Value> internal;
    for (Operation *op : order)
      internal.insert(op->getResult(0));
    auto read = [&](Value operand) {
      Value source = group.expandSource.lookup(operand);
      return source ? source : operand;
    };
    for (Operation *op : order)
      for (Value operand : op->getOperands())
        if (!internal.contains(operand))
          inputs.insert(read(operand));
    for (auto [index, input] : llvm::enumerate(inputs))
      registerOf[input] = int64_t(index);
    SmallVector<Attribute> names;
    SmallVector<int64_t> registers;
    SmallVector<float> alphas, betas;
    Builder builder(&getContext());
    for (auto [index, op] : llvm::enumerate(order)) {
      Step step = *stepOf(op);
      names.push_back(builder.getStringAttr(step.name));
      registers.push_back(registerOf.lookup(read(op->getOperand(0))));
      registers.push_back(op->getNumOperands() == 2
                              ? registerOf.lookup(read(op->getOperand(1)))
                              : -1);
      alphas.push_back(step.alpha);
      betas.push_back(step.beta);
      registerOf[op->getResult(0)] = int64_t(inputs.size() + index);
    }
    Operation *root = group.root;
    OpBuilder rewriter(root);
    auto fused = FusedElementwiseOp::create(
        rewriter, root->getLoc(), root->getResult(0).getType(),
        inputs.getArrayRef(), rewriter.getArrayAttr(names),
        rewriter.getDenseI64ArrayAttr(registers),
        rewriter.getDenseF32ArrayAttr(alphas),
        rewriter.getDenseF32ArrayAttr(betas));
    root->getResult(0).replaceAllUsesWith(fused.getResult());
    if (isFloatCast(root))
      root->erase();
    for (Operation *op : llvm::reverse(order))
      op->erase();
    for (auto [expanded, source] : group.expandSource)
      if (Operation *expand = expanded.getDefiningOp();
          expand && expand->use_empty())
        expand->erase();
  }
};

} // namespace
