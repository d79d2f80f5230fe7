//===- MemOptOps.h - memopt operations --------------------------*- C++ -*-===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_H
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_H

#include "memopt/Dialect/MemOpt/IR/MemOptDialect.h"
#include "memopt/Dialect/MemOpt/IR/MemOptInterfaces.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::memopt {
/// The side-effect resource of the data-parallel collectives: the channel to
/// the other ranks (MemOptOps.td, MemOpt_CollectiveOp).
struct CommunicatorResource
    : public SideEffects::Resource::Base<CommunicatorResource> {
  StringRef getName() override { return "Communicator"; }
};

/// Elements of one rank's shard of a tensor of `elements` elements sharded
/// over `ranks` (MemOptOps.td, MemOpt_ShardedUpdate): its chunk of
/// elements / ranks, then the elements % ranks of the tail every rank owns.
inline int64_t getShardElements(int64_t elements, int64_t ranks) {
  return elements / ranks + elements % ranks;
}
} // namespace mlir::memopt

#define GET_OP_CLASSES
#include "memopt/Dialect/MemOpt/IR/MemOptOps.h.inc"

namespace mlir {
class OpBuilder;
namespace memopt {
/// `a [..., K] x b` as one 2-D `gemm` between aliasing reshapes: the leading
/// dims of `a` fold into M (a view), `b` is [K, N] ([N, K] with `transB`), and
/// the product is reshaped to `resultType` when that is not 2-D. `a` must have
/// rank >= 2 and K > 0. Used by the matmul-of-transpose canonicalization and
/// by --memopt-fuse-epilogues.
Value createFlattenedGemm(OpBuilder &builder, Location loc, Value a, Value b,
                          bool transB, Type resultType);

/// On a `memopt.constant` imported from an ONNX initializer: its name.
inline constexpr llvm::StringLiteral kInitializerAttrName =
    "memopt.initializer";

/// On a `memopt.constant` imported from an ONNX initializer: what the
/// exporter says it is, "parameter" (trained by default), "buffer" (module
/// state that is not trained: running statistics, rotary frequencies) or
/// "constant" (a tensor the exporter lifted or folded). Absent when the
/// model says nothing and no naming convention decides; memopt-make-trainable
/// then trains it.
inline constexpr llvm::StringLiteral kStateKindAttrName = "memopt.state_kind";

/// True for the ops whose result lives in the weight region rather than the
/// arena: `memopt.constant` (weights, folded shapes) and `memopt.variable`
/// (a training step's state). Neither executes: the emitter gives their
/// bytes a weight offset.
inline bool isWeightRegionOp(Operation *op) {
  return isa<ConstantOp, VariableOp>(op);
}

/// On a `memopt.variable`: "host" puts it in the program's host state region
/// (pinned host memory, planned like the weight region with its own offsets,
/// `memopt.host_offset`) instead of the device weight region: the f32 masters
/// and optimizer state of --offload optimizer (memopt-offload-optimizer).
inline constexpr llvm::StringLiteral kPlacementAttrName = "memopt.placement";

/// The head of each offloaded update's staging slot in the host state region
/// (memopt.staging_offset): the step's scalars (learning rate, step, micro
/// step, loss scale, found_inf, skipped steps) copied with the gradient, so
/// the CPU update reads what the device had at its point of the step.
inline constexpr int64_t kHostStagingScalarBytes = 64;

/// True for a `memopt.variable` placed on the host (kPlacementAttrName).
inline bool isHostPlaced(Value value) {
  auto variable = value.getDefiningOp<VariableOp>();
  if (!variable)
    return false;
  auto placement = variable->getAttrOfType<StringAttr>(kPlacementAttrName);
  return placement && placement.getValue() == "host";
}

/// "node 'NAME' (memopt.op)" for an op imported from an ONNX node, else the
/// op's name: how training errors name what they are about.
std::string describeNode(Operation *op);

/// Attaches the vector-Jacobian products (GradientOpInterface) to the ops
/// that have one; called when the dialect is loaded.
void attachGradientModels(MLIRContext &context);
} // namespace memopt
} // namespace mlir

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_H
