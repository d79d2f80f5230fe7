//===- MemOptBase.td - types and op base classes -----------*- tablegen -*-===//
//
// The tensor constraints and the base classes every memopt op derives from;
// the op families (MemOpt*Ops.td) include this file.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTBASE_TD
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTBASE_TD

include "memopt/Dialect/MemOpt/IR/MemOptDialect.td"
include "memopt/Dialect/MemOpt/IR/MemOptInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Types and base classes
//===----------------------------------------------------------------------===//

// Statically shaped, and small enough that sizes in bytes and their sums stay
// far from int64's range (isBoundedTensorType: at most 2^50 bytes), so no
// pass needs overflow checks (issue 13: mutated shapes overflowed).
class MemOpt_TensorOf<list<Type> allowed>
    : Type<And<[StaticShapeTensorOf<allowed>.predicate,
                CPred<"::mlir::memopt::isBoundedTensorType($_self)">]>,
           StaticShapeTensorOf<allowed>.summary # " of at most 2^50 bytes",
           StaticShapeTensorOf<allowed>.cppType>;

def MemOpt_Tensor : MemOpt_TensorOf<[AnyType]>;
def MemOpt_FloatTensor : MemOpt_TensorOf<[AnyFloat]>;
def MemOpt_BoolTensor : MemOpt_TensorOf<[I1]>;
def MemOpt_IndexTensor : MemOpt_TensorOf<[I32, I64]>;

// Every op is pure and has a cost; `costOverrides` names the cost methods an
// op implements itself instead of taking the per-element default.
class MemOpt_Op<string mnemonic, list<Trait> traits = [],
                list<string> costOverrides = []>
    : Op<MemOpt_Dialect, mnemonic, !listconcat(traits, [Pure,
         DeclareOpInterfaceMethods<MemOpt_CostOpInterface, costOverrides>])>;

// Aliasing views (and `shape`, which reads no data) compute nothing and move
// no bytes: both cost methods return 0.
defvar MemOpt_ViewCosts = ["getFlops", "getBytesMoved"];

// Ops whose mixed-precision policy is not `Promote` declare this; the policy
// of every op is in lib/Dialect/MemOpt/IR/PrecisionPolicies.cpp.
defvar MemOpt_Precision =
    DeclareOpInterfaceMethods<MemOpt_PrecisionOpInterface>;

// Ops whose result types follow from operands and attributes; the C++ side
// implements `inferReturnTypes` with the ONNX shape rule.
class MemOpt_InferredOp<string mnemonic, list<Trait> traits = [],
                        list<string> costOverrides = []>
    : MemOpt_Op<mnemonic, !listconcat(traits, [InferTypeOpAdaptor]),
                costOverrides>;

// y = f(x), same shape and element type: elementwise and in-place capable.
class MemOpt_UnaryElementwiseOp<string mnemonic, Type operandType = MemOpt_Tensor,
                                list<Trait> traits = []>
    : MemOpt_Op<mnemonic, !listconcat(traits, [
        SameOperandsAndResultType,
        DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                                  ["isElementwise", "canWriteInPlace"]>])> {
  let arguments = (ins operandType:$X);
  let results = (outs operandType:$Y);
  let assemblyFormat = "$X attr-dict `:` type($Y)";
}

// c = a op b with ONNX multidirectional (numpy) broadcasting.
class MemOpt_BinaryElementwiseOp<string mnemonic, list<Trait> traits = []>
    : MemOpt_InferredOp<mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                                  ["isElementwise", "canWriteInPlace"]>])> {
  let arguments = (ins MemOpt_Tensor:$A, MemOpt_Tensor:$B);
  let results = (outs MemOpt_Tensor:$C);
  let assemblyFormat =
      "$A `,` $B attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

// Comparisons and logic: broadcast like the arithmetic ops, result is i1.
class MemOpt_CompareOp<string mnemonic, list<Trait> traits = []>
    : MemOpt_BinaryElementwiseOp<mnemonic, traits> {
  let results = (outs MemOpt_BoolTensor:$C);
}

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTBASE_TD
