//===- MemOptOps.td - memopt operations ---------------------*- tablegen -*-===//
//
// Operations with ONNX semantics and static shapes. Each op documents where it
// departs from ONNX (shape-deciding inputs become attributes).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_TD
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_TD

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

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def MemOpt_ConstantOp : MemOpt_Op<"constant", [ConstantLike,
    AllTypesMatch<["value", "output"]>]> {
  let summary = "A tensor known at compile time (weights and folded shapes)";
  let description = [{
    Holds an `ElementsAttr`. Weights imported from ONNX are `dense_resource`
    blobs, so the IR text stays small whatever the model's size; small
    tensors (shapes, scalars) are inline `dense` attributes so that folding
    can read them.
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Unary elementwise
//
// Every unary elementwise op names its operand `X` and its result `Y`, also
// where ONNX says `input`/`output` (Exp, Log, Tanh, Erf, Sin, Cos, Clip):
// passes handle them uniformly through `getX()`/`getY()`.
//===----------------------------------------------------------------------===//

def MemOpt_ReluOp : MemOpt_UnaryElementwiseOp<"relu"> {
  let summary = "max(x, 0)";
}
def MemOpt_ExpOp : MemOpt_UnaryElementwiseOp<"exp", MemOpt_FloatTensor,
                                [MemOpt_Precision]> {
  let summary = "e^x";
}
def MemOpt_LogOp : MemOpt_UnaryElementwiseOp<"log", MemOpt_FloatTensor,
                                [MemOpt_Precision]> {
  let summary = "natural logarithm";
}
def MemOpt_SqrtOp : MemOpt_UnaryElementwiseOp<"sqrt", MemOpt_FloatTensor> {
  let summary = "square root";
}
def MemOpt_ReciprocalOp
    : MemOpt_UnaryElementwiseOp<"reciprocal", MemOpt_FloatTensor,
                                [MemOpt_Precision]> {
  let summary = "1 / x";
}
def MemOpt_NegOp : MemOpt_UnaryElementwiseOp<"neg"> {
  let summary = "-x (folds on small constants)";
  let hasFolder = 1;
}
def MemOpt_AbsOp : MemOpt_UnaryElementwiseOp<"abs"> {
  let summary = "|x|";
}
def MemOpt_SigmoidOp
    : MemOpt_UnaryElementwiseOp<"sigmoid", MemOpt_FloatTensor,
                                [MemOpt_Precision]> {
  let summary = "1 / (1 + e^-x)";
}
def MemOpt_TanhOp : MemOpt_UnaryElementwiseOp<"tanh", MemOpt_FloatTensor,
                                [MemOpt_Precision]> {
  let summary = "hyperbolic tangent";
}
def MemOpt_ErfOp : MemOpt_UnaryElementwiseOp<"erf", MemOpt_FloatTensor,
                                [MemOpt_Precision]> {
  let summary = "Gauss error function";
}
def MemOpt_SinOp : MemOpt_UnaryElementwiseOp<"sin", MemOpt_FloatTensor,
                                [MemOpt_Precision]> {
  let summary = "sine";
}
def MemOpt_CosOp : MemOpt_UnaryElementwiseOp<"cos", MemOpt_FloatTensor,
                                [MemOpt_Precision]> {
  let summary = "cosine";
}
def MemOpt_NotOp : MemOpt_UnaryElementwiseOp<"not", MemOpt_BoolTensor> {
  let summary = "logical not of an i1 tensor (folds on small constants)";
  let hasFolder = 1;
}

def MemOpt_LeakyReluOp
    : MemOpt_UnaryElementwiseOp<"leaky_relu", MemOpt_FloatTensor> {
  let summary = "x < 0 ? alpha * x : x";
  let arguments = (ins MemOpt_FloatTensor:$X,
                       DefaultValuedAttr<F32Attr, "0.01">:$alpha);
}
def MemOpt_GeluOp : MemOpt_UnaryElementwiseOp<"gelu", MemOpt_FloatTensor> {
  let summary = "Gaussian error linear unit (ONNX opset 20)";
  let description = [{
    `approximate` is `none` (exact, with erf) or `tanh`. The importer also
    produces this op when it recognises the erf-based pattern PyTorch exports
    for older opsets.
  }];
  let arguments = (ins MemOpt_FloatTensor:$X,
                       DefaultValuedAttr<StrAttr, "\"none\"">:$approximate);
  let hasVerifier = 1;
}
def MemOpt_HardSwishOp
    : MemOpt_UnaryElementwiseOp<"hard_swish", MemOpt_FloatTensor> {
  let summary = "x * max(0, min(1, x / 6 + 1 / 2))";
}
def MemOpt_HardSigmoidOp
    : MemOpt_UnaryElementwiseOp<"hard_sigmoid", MemOpt_FloatTensor,
                                [MemOpt_Precision]> {
  let summary = "max(0, min(1, alpha * x + beta))";
  let arguments = (ins MemOpt_FloatTensor:$X,
                       DefaultValuedAttr<F32Attr, "0.2">:$alpha,
                       DefaultValuedAttr<F32Attr, "0.5">:$beta);
}
def MemOpt_ClipOp : MemOpt_UnaryElementwiseOp<"clip"> {
  let summary = "min(max(x, min), max)";
  let description = [{
    Departs from ONNX: the optional `min` and `max` inputs are compile-time
    `F64Attr`s (the importer folds them); an absent bound does not clip.
  }];
  let arguments = (ins MemOpt_Tensor:$X, OptionalAttr<F64Attr>:$min,
                       OptionalAttr<F64Attr>:$max);
  let hasVerifier = 1;
}

def MemOpt_IsNaNOp : MemOpt_InferredOp<"is_nan", [MemOpt_Precision,
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                              ["isElementwise"]>]> {
  let summary = "x != x, as an i1 tensor of the same shape";
  let arguments = (ins MemOpt_FloatTensor:$X);
  let results = (outs MemOpt_BoolTensor:$Y);
  let assemblyFormat = "$X attr-dict `:` functional-type(operands, results)";
}

def MemOpt_CastOp : MemOpt_Op<"cast", [SameOperandsAndResultShape,
    MemOpt_Precision, DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                              ["isElementwise", "canWriteInPlace"]>]> {
  let summary = "Element type conversion (explicit result type)";
  let description = [{
    Departs from ONNX: there is no `to` attribute; the target type is the
    result's element type. Float to integer truncates toward zero, integer to
    float rounds to nearest, anything to i1 tests for non-zero, i1 to anything
    gives 0 or 1. Folds on small constants (int<->int, int<->float,
    float<->float).
  }];
  let arguments = (ins MemOpt_Tensor:$input);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Binary elementwise
//
// All binary ops name their operands `A`, `B` and their result `C`, also
// where ONNX says `X`, `Y`, `Z` (Pow) or uses variadic inputs (Min, Max: the
// importer chains them pairwise).
//===----------------------------------------------------------------------===//

def MemOpt_AddOp : MemOpt_BinaryElementwiseOp<"add", [Commutative]> {
  let summary = "a + b with broadcasting";
  let hasFolder = 1;
}
def MemOpt_SubOp : MemOpt_BinaryElementwiseOp<"sub"> {
  let summary = "a - b with broadcasting";
  let hasFolder = 1;
}
def MemOpt_MulOp : MemOpt_BinaryElementwiseOp<"mul", [Commutative]> {
  let summary = "a * b with broadcasting";
  let hasFolder = 1;
}
def MemOpt_DivOp : MemOpt_BinaryElementwiseOp<"div"> {
  let summary = "a / b with broadcasting (integers truncate toward zero)";
  let hasFolder = 1;
}
def MemOpt_PowOp : MemOpt_BinaryElementwiseOp<"pow", [MemOpt_Precision]> {
  let summary = "a ^ b with broadcasting";
  let description = [{
    Base and exponent have one element type (the kernels take one): ONNX
    lets the exponent's differ, and the importer converts it to the base's.
  }];
}
def MemOpt_ModOp : MemOpt_BinaryElementwiseOp<"mod", [MemOpt_Precision]> {
  let summary = "a mod b with broadcasting (ONNX Mod)";
  let description = [{
    `fmod = 0` (integers only): the remainder takes the sign of the divisor,
    as Python's `%` (-7 mod 3 = 2). `fmod = 1`: the remainder takes the sign
    of the dividend, as C's `fmod` / `%` (-7 mod 3 = -1). As in ONNX, float
    element types require `fmod = 1`. Folds on small constants (a zero
    divisor is left to run time).
  }];
  let arguments = (ins MemOpt_Tensor:$A, MemOpt_Tensor:$B,
                       DefaultValuedAttr<I64Attr, "0">:$fmod);
  let hasFolder = 1;
}
def MemOpt_MinOp : MemOpt_BinaryElementwiseOp<"min", [Commutative]> {
  let summary = "elementwise minimum of two tensors with broadcasting";
}
def MemOpt_MaxOp : MemOpt_BinaryElementwiseOp<"max", [Commutative]> {
  let summary = "elementwise maximum of two tensors with broadcasting";
}
def MemOpt_ReluGradOp : MemOpt_BinaryElementwiseOp<"relu_grad"> {
  let summary = "a where b > 0, else 0 (ReLU's gradient from its output)";
  let description = [{
    The gradient of `y = relu(x)` is `relu_grad(dy, y)`: `dy` where `y > 0`,
    0 elsewhere (a NaN `y` gives 0). One float op instead of
    `where(greater(y, 0), dy, 0)`, so that the gradient is one kernel with no
    i1 mask in between and joins memopt.fused_elementwise groups (PyTorch's
    `threshold_backward(grad, result, 0)`, which autograd emits for relu).
    Float element types only; `b` broadcasts like any binary operand.
  }];
}

def MemOpt_EqualOp : MemOpt_CompareOp<"equal", [Commutative]> {
  let summary = "a == b with broadcasting, i1 result";
  let hasFolder = 1;
}
def MemOpt_LessOp : MemOpt_CompareOp<"less"> {
  let summary = "a < b with broadcasting, i1 result";
  let hasFolder = 1;
}
def MemOpt_GreaterOp : MemOpt_CompareOp<"greater"> {
  let summary = "a > b with broadcasting, i1 result";
  let hasFolder = 1;
}
def MemOpt_AndOp : MemOpt_CompareOp<"and", [Commutative]> {
  let summary = "logical and of i1 tensors with broadcasting";
  let hasFolder = 1;
}
def MemOpt_OrOp : MemOpt_CompareOp<"or", [Commutative]> {
  let summary = "logical or of i1 tensors with broadcasting";
  let hasFolder = 1;
}

def MemOpt_WhereOp : MemOpt_InferredOp<"where", [
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                              ["isElementwise", "canWriteInPlace"]>]> {
  let summary = "condition ? X : Y with three-way broadcasting";
  let arguments = (ins MemOpt_BoolTensor:$condition, MemOpt_Tensor:$X,
                       MemOpt_Tensor:$Y);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat =
      "$condition `,` $X `,` $Y attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def MemOpt_FusedElementwiseOp : MemOpt_Op<"fused_elementwise", [
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                              ["isElementwise", "canWriteInPlace"]>],
    ["getFlops"]> {
  let summary = "a DAG of float elementwise ops computed in one pass";
  let description = [{
    Produced by `--memopt-fuse-elementwise` from chains (trees or DAGs) of
    unary and binary float ops whose intermediates are used only inside the
    group and have the final result's shape: the intermediates never exist
    as tensors, and the runtime reads each input once and writes the result
    once (one kernel). A register may be read by several steps.

    Registers `0 .. N-1` are the `inputs` (each broadcasts to the result,
    numpy rules); step `i` writes register `N + i`; the last step is the
    result. `ops` names each step (`add`, `sub`, `mul`, `div`, `pow`, `min`,
    `max`; `relu`, `exp`, `log`, `sqrt`, `reciprocal`, `neg`, `abs`,
    `sigmoid`, `tanh`, `erf`, `sin`, `cos`, `hard_swish`, `leaky_relu`,
    `hard_sigmoid`, `gelu`, `gelu_tanh`, `clip`); `registers` holds the two
    operand registers of each step (`-1` second for unary steps); `alphas` / `betas` the
    parameters of `leaky_relu` (alpha), `hard_sigmoid` (alpha, beta) and
    `clip` (min, max). The inputs share one float element type; the result
    has it or another float type (a cast that ended the chain: the last
    step's value is converted on store); at most 8 inputs and 16 steps (the
    runtime's limits). Intermediates are not rounded to the element type
    between steps.
  }];
  let arguments = (ins Variadic<MemOpt_FloatTensor>:$inputs,
                       StrArrayAttr:$ops, DenseI64ArrayAttr:$registers,
                       DenseF32ArrayAttr:$alphas, DenseF32ArrayAttr:$betas);
  let results = (outs MemOpt_FloatTensor:$Y);
  let assemblyFormat =
      "$inputs attr-dict `:` functional-type($inputs, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether `name` is a unary / binary step this op and the runtime know.
    static bool isUnaryStep(::llvm::StringRef name);
    static bool isBinaryStep(::llvm::StringRef name);
    /// The runtime's limits (kMaxFusedInputs / kMaxFusedSteps).
    static constexpr unsigned kMaxInputs = 8, kMaxSteps = 16;
  }];
}

//===----------------------------------------------------------------------===//
// Linear algebra and convolution
//===----------------------------------------------------------------------===//

/// A fused epilogue activation (conv, gemm): none, relu, gelu (erf) or
/// gelu_tanh, the runtime's `Activation`. Set by --memopt-fuse-epilogues.
def MemOpt_ActivationAttr : DefaultValuedAttr<StrAttr, "\"none\"">;

// matmul and gemm: the result may be f32 while the operands are f16 / bf16
// (cuBLASLt and the host loops accumulate in f32 and may store that).
defvar MemOpt_WidenableResult = [InferTypeOpAdaptorWithIsCompatible,
    DeclareOpInterfaceMethods<MemOpt_PrecisionOpInterface,
                              ["acceptsF32Result"]>];

def MemOpt_MatMulOp
    : MemOpt_Op<"matmul", MemOpt_WidenableResult,
                ["getFlops", "getWorkspaceBytes"]> {
  let summary = "numpy matmul: batched, with broadcast batch dimensions";
  let description = [{
    The result has the operands' element type, or f32 when they are f16 or
    bf16 (the f32 accumulator stored as it is; mixed precision uses this for
    results that leave the function).
  }];
  let arguments = (ins MemOpt_Tensor:$A, MemOpt_Tensor:$B);
  let results = (outs MemOpt_Tensor:$Y);
  let assemblyFormat =
      "$A `,` $B attr-dict `:` functional-type(operands, results)";
  let hasCanonicalizer = 1;
}

def MemOpt_GemmOp
    : MemOpt_Op<"gemm", MemOpt_WidenableResult,
                ["getFlops", "getWorkspaceBytes"]> {
  let summary = "Y = alpha * op(A) * op(B) + beta * C";
  let description = [{
    `A` and `B` are 2-D; `transA`/`transB` transpose them first. The optional
    `C` broadcasts unidirectionally to the [M, N] result and has the result's
    element type. As for `matmul`, the result may be f32 when `A` and `B`
    are f16 or bf16.
    Departs from ONNX: `activation` (`none`, `relu`, `gelu`, `gelu_tanh`),
    set by --memopt-fuse-epilogues, is applied to the whole result (after C),
    as cuBLASLt's epilogues do.
  }];
  let hasVerifier = 1;
  let arguments = (ins MemOpt_Tensor:$A, MemOpt_Tensor:$B,
                       Optional<MemOpt_Tensor>:$C,
                       DefaultValuedAttr<F32Attr, "1.0">:$alpha,
                       DefaultValuedAttr<F32Attr, "1.0">:$beta,
                       DefaultValuedAttr<I64Attr, "0">:$transA,
                       DefaultValuedAttr<I64Attr, "0">:$transB,
                       MemOpt_ActivationAttr:$activation);
  let results = (outs MemOpt_Tensor:$Y);
  let assemblyFormat = "$A `,` $B (`,` $C^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasCanonicalizer = 1;
}

def MemOpt_ConvOp
    : MemOpt_InferredOp<"conv", [MemOpt_Precision],
                        ["getFlops", "getWorkspaceBytes",
                         "getWorkspaceFloor"]> {
  let summary = "N-D grouped convolution (NCHW, weights MCkk; or channels-last)";
  let description = [{
    Departs from ONNX: `auto_pad` is resolved by the importer, so
    `kernel_shape`, `strides`, `pads` (all begins, then all ends) and
    `dilations` are always present with one value per spatial axis
    (two for `pads`). Output size per axis:
    `floor((in + pad_begin + pad_end - dilation * (kernel - 1) - 1) / stride) + 1`.

    With `channels_last` (set by `--memopt-layout`), the channel axis of X,
    W and Y is the last one instead of axis 1: X [N, spatial..., C],
    W [M, k..., C/group], Y [N, out..., M] (cuDNN's NHWC tensors and KRSC
    filters). The attributes keep their meaning.
  }];
  let arguments = (ins MemOpt_FloatTensor:$X, MemOpt_FloatTensor:$W,
                       Optional<MemOpt_FloatTensor>:$B,
                       DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$group,
                       MemOpt_ActivationAttr:$activation,
                       UnitAttr:$channels_last);
  let results = (outs MemOpt_FloatTensor:$Y);
  let assemblyFormat = "$X `,` $W (`,` $B^)? attr-dict `:` "
                       "functional-type(operands, results)";
}

def MemOpt_ConvResidualOp
    : MemOpt_InferredOp<"conv_residual", [MemOpt_Precision,
        DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                                  ["canWriteInPlace"]>],
                        ["getFlops", "getWorkspaceBytes"]> {
  let summary = "Convolution + bias + residual add + activation in one op";
  let description = [{
    `Y = activation(conv(X, W) + B + Z)`, with `conv` as `memopt.conv` (the
    same attributes, `channels_last` included) and `Z` of Y's type: ResNet's
    `relu(bn(conv(x)) + shortcut)` once the batch normalization is folded.
    Made by `--memopt-fuse-epilogues` from `add(conv, Z)` (and a following
    relu); the result may be written over `Z` in place. The CUDA runtime runs
    it as one cudnnConvolutionBiasActivationForward where cuDNN offers it
    and that is faster.
  }];
  let arguments = (ins MemOpt_FloatTensor:$X, MemOpt_FloatTensor:$W,
                       MemOpt_FloatTensor:$B, MemOpt_FloatTensor:$Z,
                       DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$group,
                       MemOpt_ActivationAttr:$activation,
                       UnitAttr:$channels_last);
  let results = (outs MemOpt_FloatTensor:$Y);
  let assemblyFormat = "$X `,` $W `,` $B `,` $Z attr-dict `:` "
                       "functional-type(operands, results)";
}

def MemOpt_ConvTransposeOp
    : MemOpt_InferredOp<"conv_transpose", [MemOpt_Precision],
                        ["getFlops", "getWorkspaceBytes",
                         "getWorkspaceFloor"]> {
  let summary = "N-D grouped transposed convolution (weights C x M/group x k)";
  let description = [{
    Departs from ONNX: `auto_pad` and `output_shape` are resolved into `pads`
    by the importer. Output size per axis:
    `stride * (in - 1) + output_padding + dilation * (kernel - 1) + 1
     - pad_begin - pad_end`. An empty `output_padding` means zeros.
  }];
  let arguments = (ins MemOpt_FloatTensor:$X, MemOpt_FloatTensor:$W,
                       Optional<MemOpt_FloatTensor>:$B,
                       DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$output_padding,
                       DefaultValuedAttr<I64Attr, "1">:$group);
  let results = (outs MemOpt_FloatTensor:$Y);
  let assemblyFormat = "$X `,` $W (`,` $B^)? attr-dict `:` "
                       "functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

def MemOpt_MaxPoolOp : MemOpt_InferredOp<"max_pool", [], ["getFlops"]> {
  let summary = "N-D max pooling";
  let description = [{
    Departs from ONNX: only the `Y` output (no `Indices`); `auto_pad` is
    resolved, `kernel_shape`, `strides`, `pads`, `dilations` are always
    present. With `ceil_mode` the output size rounds up, but a window that
    would start in the end padding is dropped (as ONNX and PyTorch do).
    With `channels_last`, X and Y are [N, spatial..., C].
  }];
  let arguments = (ins MemOpt_FloatTensor:$X,
                       DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "0">:$ceil_mode,
                       DefaultValuedAttr<I64Attr, "0">:$storage_order,
                       UnitAttr:$channels_last);
  let results = (outs MemOpt_FloatTensor:$Y);
  let assemblyFormat = "$X attr-dict `:` functional-type(operands, results)";
}

def MemOpt_AveragePoolOp
    : MemOpt_InferredOp<"average_pool", [], ["getFlops"]> {
  let summary = "N-D average pooling";
  let description = [{
    Same window rule as `max_pool`; `count_include_pad` as in ONNX. With
    `channels_last`, X and Y are [N, spatial..., C].
  }];
  let arguments = (ins MemOpt_FloatTensor:$X,
                       DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "0">:$ceil_mode,
                       DefaultValuedAttr<I64Attr, "0">:$count_include_pad,
                       UnitAttr:$channels_last);
  let results = (outs MemOpt_FloatTensor:$Y);
  let assemblyFormat = "$X attr-dict `:` functional-type(operands, results)";
}

def MemOpt_GlobalAveragePoolOp
    : MemOpt_InferredOp<"global_average_pool", [], ["getFlops"]> {
  let summary = "Mean over every spatial axis: [N, C, ...] -> [N, C, 1, ...]";
  let description = [{
    With `channels_last`: [N, ..., C] -> [N, 1, ..., C].
  }];
  let arguments = (ins MemOpt_FloatTensor:$X, UnitAttr:$channels_last);
  let results = (outs MemOpt_FloatTensor:$Y);
  let assemblyFormat = "$X attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Normalization and softmax
//===----------------------------------------------------------------------===//

def MemOpt_BatchNormalizationOp
    : MemOpt_InferredOp<"batch_normalization", [
        DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                                  ["canWriteInPlace"]>], ["getFlops"]> {
  let summary = "Inference-mode batch normalization over axis 1";
  let description = [{
    Departs from ONNX: the op normalizes with `input_mean` / `input_var`
    (inference mode) and has one result (`Y`); the running statistics
    outputs of training mode do not exist. `momentum` is kept so that the
    importer can pass ONNX attributes through unchanged. `training_mode = 1`
    (ONNX's attribute, from a model exported in training mode) only marks
    the op: memopt-make-trainable (--train) rewrites it into batch
    statistics with running-statistic updates, as `--bn-batch-stats` does
    for every BatchNormalization; an inference compile runs it from its
    running statistics, as PyTorch's eval() would.
    With `channels_last` the channel axis is the last one.
  }];
  let arguments = (ins MemOpt_FloatTensor:$X, MemOpt_FloatTensor:$scale,
                       MemOpt_FloatTensor:$B, MemOpt_FloatTensor:$input_mean,
                       MemOpt_FloatTensor:$input_var,
                       DefaultValuedAttr<F32Attr, "1e-05">:$epsilon,
                       DefaultValuedAttr<F32Attr, "0.9">:$momentum,
                       DefaultValuedAttr<I64Attr, "0">:$training_mode,
                       UnitAttr:$channels_last);
  let results = (outs MemOpt_FloatTensor:$Y);
  let assemblyFormat = "$X `,` $scale `,` $B `,` $input_mean `,` $input_var "
                       "attr-dict `:` functional-type(operands, results)";
}

def MemOpt_LayerNormalizationOp
    : MemOpt_InferredOp<"layer_normalization", [
        DeclareOpInterfaceMethods<MemOpt_PrecisionOpInterface,
                                  ["acceptsF32Operand"]>,
        DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                                  ["canWriteInPlace"]>], ["getFlops"]> {
  let summary = "Normalization over the axes [axis, rank)";
  let description = [{
    Departs from ONNX: one result (`Y`); the `Mean` and `InvStdDev` outputs
    do not exist. `Scale` and `B` broadcast to the normalized shape
    `X.shape[axis:]`.
  }];
  let arguments = (ins MemOpt_FloatTensor:$X, MemOpt_FloatTensor:$Scale,
                       Optional<MemOpt_FloatTensor>:$B,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F32Attr, "1e-05">:$epsilon,
                       DefaultValuedAttr<I64Attr, "1">:$stash_type);
  let results = (outs MemOpt_FloatTensor:$Y);
  let assemblyFormat = "$X `,` $Scale (`,` $B^)? attr-dict `:` "
                       "functional-type(operands, results)";
}

def MemOpt_SoftmaxOp : MemOpt_InferredOp<"softmax", [MemOpt_Precision,
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                              ["canWriteInPlace"]>], ["getFlops"]> {
  let summary = "Softmax along one axis (ONNX opset 13 semantics)";
  let arguments = (ins MemOpt_FloatTensor:$input,
                       DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs MemOpt_FloatTensor:$output);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def MemOpt_AttentionOp : MemOpt_InferredOp<"attention", [
    DeclareOpInterfaceMethods<MemOpt_PrecisionOpInterface,
                              ["hasLowPrecisionGradient"]>,
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface>],
    ["getFlops", "getWorkspaceBytes", "isWorkspaceOptional"]> {
  let summary = "softmax(scale * Q K^T + bias, masked) V without the scores";
  let description = [{
    Scaled dot-product attention as one op, so the `[..., S, Sk]` scores and
    probabilities never exist as tensors (produced by
    `--memopt-fuse-attention`; the semantics of ONNX opset 23 `Attention` in
    its 4-D form, minus the KV cache):

    - `Q` is `[..., S, D]`; `K` is `[..., Sk, D]`, or `[..., D, Sk]` with
      `key_transposed` (the operand of the unfused `MatMul(Q, K^T)` as
      exporters produce it); `V` is `[..., Sk, Dv]`. The batch dimensions of
      `Q`, `K` and `V` broadcast (numpy rules).
    - `scores[..., i, j] = scale * sum_d Q[..., i, d] * K[..., j, d]
      + bias[..., i, j]`; the optional float `bias` (an additive mask or a
      relative-position bias) broadcasts to `[..., S, Sk]` without widening
      it.
    - With `causal`, key `j > i` is masked out (PyTorch's `is_causal`:
      top-left aligned, `tril(ones(S, Sk))` is kept).
    - `result[..., i, :] = softmax_j(scores[..., i, :]) V[..., :, :]`, shape
      `[..., S, Dv]` with the broadcast batch dimensions. A row whose scores
      are all `-inf` gives NaN, as the unfused graph does; with
      `safe_softmax` it gives zeros (PyTorch's safe softmax, which the
      exporters spell `Where(IsNaN(P), 0, P)`).

    With `return_lse` (set by memopt-autodiff on an attention it
    differentiates) the op also returns the row log-sum-exp the backward
    (`memopt.attention_grad`) reads instead of the probabilities: `lse` is
    f32 `[..., S, 2]`, per query row the maximum of its scores and the log
    of the sum of exp(score - maximum); their sum is the log-sum-exp.
    Keeping the two apart keeps `exp(score - lse)` exact for a row masked
    by a finite fill (every score near -3.4e38, where adding the log-sum
    would round away). Scores below -2.35e38 count as -2.3587e38 in the
    statistics and the backward (-FLT_MAX / log2(e), the CUDA kernels'
    saturation); a row whose scores are all `-inf` stores `(-inf, -inf)`.

    The results never share storage with an operand.

    Workspace: when `Q`, `K` and `V` hold the whole batch, the op asks for
    room for all f32 scores (plus the probabilities in the element type when
    it is not f32). It is optional: the planner promises none and grows it
    into bytes that are free anyway while the op runs; the CUDA runtime
    computes the attention chunk by chunk through library GEMMs when that
    space holds enough of the batch, and with a fused kernel otherwise.
  }];
  let arguments = (ins MemOpt_FloatTensor:$Q, MemOpt_FloatTensor:$K,
                       MemOpt_FloatTensor:$V,
                       Optional<MemOpt_FloatTensor>:$bias, F32Attr:$scale,
                       DefaultValuedAttr<BoolAttr, "false">:$causal,
                       DefaultValuedAttr<BoolAttr, "false">:$key_transposed,
                       DefaultValuedAttr<BoolAttr, "false">:$safe_softmax,
                       DefaultValuedAttr<BoolAttr, "false">:$return_lse);
  let results = (outs MemOpt_FloatTensor:$Y,
                      Optional<MemOpt_TensorOf<[F32]>>:$lse);
  let assemblyFormat = "$Q `,` $K `,` $V (`,` $bias^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let extraClassDeclaration = [{
    /// Score elements that are not masked by `causal`, per batch entry.
    int64_t getUnmaskedScoreCount();
  }];
}

def MemOpt_AttentionGradOp : MemOpt_InferredOp<"attention_grad", [],
    ["getFlops", "getWorkspaceBytes", "isWorkspaceOptional"]> {
  let summary = "dQ, dK, dV (and dbias) of memopt.attention, no S x Sk tensor";
  let description = [{
    The vector-Jacobian product of `memopt.attention` (FlashAttention-2's
    backward): from the forward's operands, its output `O`, the output's
    gradient `dO` and the row statistics `lse` (`return_lse`), it recomputes
    the probabilities block by block, `P = exp(S - lse)`, with
    `D = rowsum(dO * O)`:

        dV = P^T dO,  dP = dO V^T,  dS = P * (dP - D),
        dQ = scale * dS K,  dK = scale * dS^T Q,  dbias = dS

    The attributes are the forward's. `dQ`, `dK` and `dV` have the shapes of
    `Q`, `K` (in its layout: `[..., D, Sk]` with `key_transposed`) and `V`
    with the broadcast batch dimensions of the output (the gradient rule sums
    broadcast axes back). With `bias_gradient`, `dbias` has the bias's own
    shape: the kernels sum `dS` over the axes the bias broadcasts along, so
    `[..., S, Sk]` never exists. Fully masked rows get zero gradients with
    `safe_softmax` (PyTorch's safe softmax backward), NaN otherwise (as the
    unfused graph). `Q`, `K`, `V`, `O`, `dO` (and the bias and the
    gradients) are f32, f16 or bf16 (mixed-precision training; the kernels
    accumulate in f32), `lse` is f32; a bias gradient is f32 only.

    Workspace: for f32, when `Q`, `K` and `V` hold the whole batch, two f32
    score buffers of the whole batch, optional like the forward's: the CUDA
    runtime then runs the backward chunk by chunk through library GEMMs, and
    a fused kernel (the scores only in shared memory) otherwise; f16 / bf16
    always run the fused kernels.
  }];
  let arguments = (ins MemOpt_TensorOf<[F32, F16, BF16]>:$Q,
                       MemOpt_TensorOf<[F32, F16, BF16]>:$K,
                       MemOpt_TensorOf<[F32, F16, BF16]>:$V,
                       MemOpt_TensorOf<[F32, F16, BF16]>:$O,
                       MemOpt_TensorOf<[F32, F16, BF16]>:$dO,
                       MemOpt_TensorOf<[F32]>:$lse,
                       Optional<MemOpt_TensorOf<[F32, F16, BF16]>>:$bias,
                       F32Attr:$scale,
                       DefaultValuedAttr<BoolAttr, "false">:$causal,
                       DefaultValuedAttr<BoolAttr, "false">:$key_transposed,
                       DefaultValuedAttr<BoolAttr, "false">:$safe_softmax,
                       DefaultValuedAttr<BoolAttr, "false">:$bias_gradient);
  let results = (outs MemOpt_TensorOf<[F32, F16, BF16]>:$dQ,
                      MemOpt_TensorOf<[F32, F16, BF16]>:$dK,
                      MemOpt_TensorOf<[F32, F16, BF16]>:$dV,
                      Optional<MemOpt_TensorOf<[F32]>>:$dbias);
  let assemblyFormat = "$Q `,` $K `,` $V `,` $O `,` $dO `,` $lse "
                       "(`,` $bias^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let extraClassDeclaration = [{
    /// Score elements that are not masked by `causal`, per batch entry.
    int64_t getUnmaskedScoreCount();
  }];
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class MemOpt_ReduceOp<string mnemonic, list<Trait> traits = []>
    : MemOpt_InferredOp<mnemonic, traits, ["getFlops", "getWorkspaceBytes"]> {
  let description = [{
    Departs from ONNX: `axes` is an attribute, normalized (non-negative),
    sorted and non-empty (the importer expands "all axes");
    `noop_with_empty_axes` therefore does not exist. Workspace: when a few
    outputs each reduce many elements, room for partial results, so that the
    CUDA kernel splits each reduction over many blocks.
  }];
  let arguments = (ins MemOpt_Tensor:$data, DenseI64ArrayAttr:$axes,
                       DefaultValuedAttr<I64Attr, "1">:$keepdims);
  let results = (outs MemOpt_Tensor:$reduced);
  let assemblyFormat = "$data attr-dict `:` functional-type(operands, results)";
}

def MemOpt_ReduceMeanOp : MemOpt_ReduceOp<"reduce_mean"> {
  let summary = "Mean over `axes`";
}
def MemOpt_ReduceSumOp : MemOpt_ReduceOp<"reduce_sum", [MemOpt_Precision]> {
  let summary = "Sum over `axes`";
}
def MemOpt_ReduceMaxOp : MemOpt_ReduceOp<"reduce_max"> {
  let summary = "Maximum over `axes`";
}

def MemOpt_CumSumOp : MemOpt_InferredOp<"cum_sum", [MemOpt_Precision,
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                              ["canWriteInPlace"]>]> {
  let summary = "Running sum along one axis (ONNX CumSum, opset 14)";
  let description = [{
    `y[..., i, ...] = sum of x[..., j, ...]` along `axis` for `j <= i`
    (`j < i` with `exclusive`; `j >= i` and `j > i` with `reverse`).

    Departs from ONNX: `axis` is an attribute (the ONNX input is a constant
    the importer reads), normalized to `[0, rank)`; `exclusive` and
    `reverse` are 0 or 1. Integers wrap; float kernels accumulate in f32
    (CUDA) or double (host) and round once per element. Folds on small
    constants (the position ids of a padding mask, `cumsum(mask) * mask`).
  }];
  let arguments = (ins MemOpt_TensorOf<[F32, F16, BF16, I32, I64]>:$x,
                       I64Attr:$axis,
                       DefaultValuedAttr<I64Attr, "0">:$exclusive,
                       DefaultValuedAttr<I64Attr, "0">:$reverse);
  let results = (outs MemOpt_TensorOf<[F32, F16, BF16, I32, I64]>:$y);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

def MemOpt_ShapeOp
    : MemOpt_InferredOp<"shape", [MemOpt_Precision], MemOpt_ViewCosts> {
  let summary = "The shape of a tensor as a 1-D i64 tensor (always folds)";
  let description = [{
    Shapes are static, so this op always folds to a constant; it exists so
    that the importer can build ONNX shape sub-graphs and fold them away.
    `start` and `end` follow ONNX opset 15 (negative counts from the back).
  }];
  let arguments = (ins MemOpt_Tensor:$data,
                       DefaultValuedAttr<I64Attr, "0">:$start,
                       OptionalAttr<I64Attr>:$end);
  let results = (outs StaticShapeTensorOf<[I64]>:$shape);
  let assemblyFormat = "$data attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def MemOpt_ReshapeOp : MemOpt_Op<"reshape", [
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                              ["isAliasingView"]>], MemOpt_ViewCosts> {
  let summary = "Same elements, new static shape (an aliasing view)";
  let description = [{
    ONNX's `shape` input is resolved at import (0 copies a dimension, -1 is
    inferred); here the result type carries the shape.
  }];
  let arguments = (ins MemOpt_Tensor:$data);
  let results = (outs MemOpt_Tensor:$reshaped);
  let assemblyFormat = "$data attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def MemOpt_FlattenOp : MemOpt_InferredOp<"flatten", [
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                              ["isAliasingView"]>], MemOpt_ViewCosts> {
  let summary = "[d0..d(axis-1)] x [d(axis)..] as a 2-D view";
  let arguments = (ins MemOpt_Tensor:$input,
                       DefaultValuedAttr<I64Attr, "1">:$axis);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def MemOpt_TransposeOp : MemOpt_InferredOp<"transpose"> {
  let summary = "Permutes the axes (default: reverses them)";
  let arguments = (ins MemOpt_Tensor:$data,
                       OptionalAttr<DenseI64ArrayAttr>:$perm);
  let results = (outs MemOpt_Tensor:$transposed);
  let assemblyFormat = "$data attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
  let extraClassDeclaration = [{
    /// `perm`, or the reversed axes when it is absent.
    ::llvm::SmallVector<int64_t> getPermutation();
  }];
}

def MemOpt_SqueezeOp : MemOpt_InferredOp<"squeeze", [
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                              ["isAliasingView"]>], MemOpt_ViewCosts> {
  let summary = "Removes size-1 axes (an aliasing view)";
  let description = [{
    Departs from ONNX: `axes` is an attribute. The importer always sets it;
    when absent every size-1 axis is removed, as in ONNX.
  }];
  let arguments = (ins MemOpt_Tensor:$data,
                       OptionalAttr<DenseI64ArrayAttr>:$axes);
  let results = (outs MemOpt_Tensor:$squeezed);
  let assemblyFormat = "$data attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def MemOpt_UnsqueezeOp : MemOpt_InferredOp<"unsqueeze", [
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                              ["isAliasingView"]>], MemOpt_ViewCosts> {
  let summary = "Inserts size-1 axes (an aliasing view)";
  let description = [{
    Departs from ONNX: `axes` is an attribute; values index the result
    (rank + number of axes) and may be negative.
  }];
  let arguments = (ins MemOpt_Tensor:$data, DenseI64ArrayAttr:$axes);
  let results = (outs MemOpt_Tensor:$expanded);
  let assemblyFormat = "$data attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def MemOpt_ConcatOp : MemOpt_InferredOp<"concat"> {
  let summary = "Joins tensors along `axis`";
  let arguments = (ins Variadic<MemOpt_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs MemOpt_Tensor:$concat_result);
  let assemblyFormat =
      "$inputs attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def MemOpt_SplitOp : MemOpt_InferredOp<"split"> {
  let summary = "Splits a tensor along `axis` into pieces of the given sizes";
  let description = [{
    Departs from ONNX: the `split` input is an attribute, always present,
    with one size per result (opset 18 `num_outputs` is resolved by the
    importer).
  }];
  let arguments = (ins MemOpt_Tensor:$input,
                       DefaultValuedAttr<I64Attr, "0">:$axis,
                       DenseI64ArrayAttr:$split);
  let results = (outs Variadic<MemOpt_Tensor>:$outputs);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
}

def MemOpt_SliceOp : MemOpt_InferredOp<"slice"> {
  let summary = "Strided slice with ONNX clamping (negative steps allowed)";
  let description = [{
    Departs from ONNX: `starts`, `ends`, `axes` and `steps` are attributes,
    all four present and of equal length. Starts and ends are clamped as
    ONNX does: to [0, dim] for positive steps and [-1, dim - 1] for
    negative steps, after adding `dim` to negative values.
  }];
  let arguments = (ins MemOpt_Tensor:$data, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$ends, DenseI64ArrayAttr:$axes,
                       DenseI64ArrayAttr:$steps);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat = "$data attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def MemOpt_GatherOp : MemOpt_InferredOp<"gather"> {
  let summary = "Takes slices of `data` along `axis` at `indices`";
  let description = [{
    Result shape: `data.shape[:axis] + indices.shape + data.shape[axis+1:]`.
    Negative indices count from the back, as in ONNX.
  }];
  let arguments = (ins MemOpt_Tensor:$data, MemOpt_IndexTensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat =
      "$data `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def MemOpt_GatherElementsOp : MemOpt_InferredOp<"gather_elements"> {
  let summary = "output[i][j] = data[indices[i][j]][j] (for axis 0)";
  let arguments = (ins MemOpt_Tensor:$data, MemOpt_IndexTensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat =
      "$data `,` $indices attr-dict `:` functional-type(operands, results)";
}

def MemOpt_ScatterNDOp : MemOpt_InferredOp<"scatter_nd", [
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                              ["canWriteInPlace"]>], ["getFlops"]> {
  let summary = "A copy of `data` with slices replaced (or combined) by `updates`";
  let description = [{
    ONNX ScatterND (opsets 13 to 18). `indices` has shape `[..., k]` with
    `k <= rank(data)`: each index tuple addresses a slice
    `data[i0, ..., ik-1, :, ...]`; `updates` has shape
    `indices.shape[:-1] + data.shape[k:]`. Negative indices count from the
    back (as onnxruntime accepts). `reduction` is `none` (replace; with
    duplicate indices ONNX leaves the result undefined, memopt's host backend
    and folder take the last update), `add`, `mul`, `max` or `min` (combine
    with the current value; not for i1). Result type: the type of `data`.
    The result may reuse `data`'s storage when `data` dies here, as
    onnxruntime does. Folds on small constants.
  }];
  let arguments = (ins MemOpt_Tensor:$data, MemOpt_IndexTensor:$indices,
                       MemOpt_Tensor:$updates,
                       DefaultValuedAttr<StrAttr, "\"none\"">:$reduction);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat = "$data `,` $indices `,` $updates attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def MemOpt_ExpandOp : MemOpt_Op<"expand"> {
  let summary = "Broadcasts to the result shape (explicit result type)";
  let description = [{
    Departs from ONNX: the `shape` input is resolved at import; the result
    type is the broadcast of the input shape with that shape.
  }];
  let arguments = (ins MemOpt_Tensor:$input);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def MemOpt_PadOp : MemOpt_InferredOp<"pad"> {
  let summary = "Pads (or, with negative values, crops) each axis";
  let description = [{
    Departs from ONNX: `pads` (all begins, then all ends; 2 * rank values,
    the opset 18 `axes` input resolved) and `constant_value` are attributes.
    `mode` is `constant`, `reflect`, `edge` or `wrap`.
  }];
  let arguments = (ins MemOpt_Tensor:$data, DenseI64ArrayAttr:$pads,
                       DefaultValuedAttr<StrAttr, "\"constant\"">:$mode,
                       DefaultValuedAttr<F64Attr, "0.0">:$constant_value);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat = "$data attr-dict `:` functional-type(operands, results)";
}

def MemOpt_ResizeOp : MemOpt_Op<"resize"> {
  let summary = "Spatial resampling (explicit result type)";
  let description = [{
    Departs from ONNX: `roi`, `scales` and `sizes` are resolved by the
    importer; the result type carries the output shape. `mode` is `nearest`
    or `linear` (`cubic` is not supported).
  }];
  let arguments = (ins MemOpt_FloatTensor:$X,
      DefaultValuedAttr<StrAttr, "\"nearest\"">:$mode,
      DefaultValuedAttr<StrAttr, "\"half_pixel\"">:$coordinate_transformation_mode,
      DefaultValuedAttr<StrAttr, "\"round_prefer_floor\"">:$nearest_mode,
      DefaultValuedAttr<F32Attr, "-0.75">:$cubic_coeff_a,
      DefaultValuedAttr<I64Attr, "0">:$exclude_outside);
  let results = (outs MemOpt_FloatTensor:$Y);
  let assemblyFormat = "$X attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def MemOpt_IdentityOp : MemOpt_Op<"identity", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                              ["isAliasingView"]>], MemOpt_ViewCosts> {
  let summary = "The operand itself (ONNX Identity and inference Dropout)";
  let arguments = (ins MemOpt_Tensor:$input);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($output)";
  let hasFolder = 1;
}

def MemOpt_DropoutOp : MemOpt_Op<"dropout", [
    AllTypesMatch<["X", "Y"]>,
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                              ["isElementwise", "canWriteInPlace"]>]> {
  let summary = "Training-mode Dropout with a counter-based mask";
  let description = [{
    `Y = X * mask / (1 - ratio)` where element i is kept unless its Philox
    4x32-10 word, keyed by `key` = `[seed, micro-batch number]` (the
    program's `random_key` variable) and counted by (i / 4, `stream`, the
    micro-batch number), is below `ratio * 2^32` (lib/Runtime/Philox.h). The
    mask is a function of (seed, micro-batch, stream, element), so a second
    dropout with the same key and stream on a tensor of the same shape
    applies the same mask: the gradient is `dropout(dY)` with the forward's
    stream (no mask is saved for backward), and a recomputed dropout
    (rematerialization) reproduces its mask. Without a key it is the
    identity (inference; canonicalization removes it, as it removes one
    with ratio 0): the importer keeps ONNX Dropout in training mode as a
    keyless dropout and memopt-make-trainable, which runs before the first
    canonicalization, gives every dropout the key and a stream of its own.
    (A canonicalization pattern, not a folder: the importer folds every op
    as it builds it.)
  }];
  let arguments = (ins MemOpt_FloatTensor:$X,
                       Optional<StaticShapeTensorOf<[I64]>>:$key,
                       F32Attr:$ratio,
                       DefaultValuedAttr<I64Attr, "0">:$stream);
  let results = (outs MemOpt_FloatTensor:$Y);
  let assemblyFormat = "$X (`,` `key` $key^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
  let hasCanonicalizeMethod = 1;
}

def MemOpt_RandomUniformOp : MemOpt_Op<"random_uniform"> {
  let summary = "Uniform random numbers from a counter-based generator";
  let description = [{
    Element i is `low + (high - low) * u` with `u = (w >> 8) * 2^-24` in
    [0, 1), `w` the Philox 4x32-10 word of element i keyed by `key` =
    `[seed, micro-batch number]` and counted by (i / 4, `stream`, the
    micro-batch number): dropout's generator (lib/Runtime/Philox.h), so the
    same (key, stream, shape) gives the same numbers on every backend and a
    recomputed op (rematerialization) redraws them exactly. ONNX
    RandomUniform(Like) import as it (Bernoulli as `cast(less(u, p))`) with a
    constant key `[seed, 0]` and a stream of their own (inference: the same
    numbers every run, as onnxruntime with a seed); memopt-make-trainable
    gives them the program's `random_key` variable and streams numbered with
    the dropouts', so every training step draws new numbers (torchvision's
    dropout and stochastic depth exported in training mode).
  }];
  let arguments = (ins StaticShapeTensorOf<[I64]>:$key, F32Attr:$low,
                       F32Attr:$high, DefaultValuedAttr<I64Attr, "0">:$stream);
  let results = (outs MemOpt_FloatTensor:$output);
  let assemblyFormat = "$key attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def MemOpt_ConstantOfShapeOp
    : MemOpt_Op<"constant_of_shape", [MemOpt_Precision]> {
  let summary = "A tensor filled with `value` (explicit result type)";
  let description = [{
    The result type carries the shape (the `input` operand is the 1-D i64
    shape tensor of ONNX). `value` is a one-element tensor of the result's
    element type; when absent the fill is zero. Always folds to a splat
    constant.
  }];
  let arguments = (ins StaticShapeTensorOf<[I64]>:$input,
                       OptionalAttr<ElementsAttr>:$value);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def MemOpt_RangeOp : MemOpt_Op<"range", [MemOpt_Precision]> {
  let summary = "start, start + delta, ... below limit (explicit result type)";
  let description = [{
    `start`, `limit` and `delta` are scalars (0-d tensors) of the result's
    element type; the 1-D result type carries the length
    `max(ceil((limit - start) / delta), 0)`. Folds when all three are
    constants.
  }];
  let arguments = (ins MemOpt_Tensor:$start, MemOpt_Tensor:$limit,
                       MemOpt_Tensor:$delta);
  let results = (outs MemOpt_Tensor:$output);
  let assemblyFormat = "$start `,` $limit `,` $delta attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
  let hasFolder = 1;
}


//===----------------------------------------------------------------------===//
// Training: state, losses, gradients without a forward twin, optimizers
//===----------------------------------------------------------------------===//

def MemOpt_VariableOp : Op<MemOpt_Dialect, "variable", [
    MemoryEffects<[MemRead]>]> {
  let summary = "Mutable program state: a parameter, an optimizer moment, "
                "the learning rate or the step count";
  let description = [{
    A training step's state lives in the weight region next to the
    constants, at a fixed offset, and survives from one step to the next;
    the update ops write it in place. Unlike `memopt.constant` it is not
    `ConstantLike` and has no folder, so canonicalization never folds a
    trainable parameter into its users. `name` is the ONNX initializer name
    (parameters) or a derived one (`NAME.momentum`, `NAME.exp_avg`, ...);
    `role` is `parameter`, `optimizer_state`, `statistic` (running
    statistics of batch normalization), `learning_rate`, `step`,
    `gradient_accumulator` (`--accumulate`: a parameter's gradient summed
    over the micro-batches of one optimizer step), `micro_step` (the f32
    index of the micro-batch within the step, 0 .. K - 1) or `random_key`
    (`[seed, micro-batch number]` as i64, the key of the dropout masks).
    `initial_value` gives the bytes the weights file starts with (zeros when
    absent). Why not `ml_program.global`: every memopt pass, the liveness
    analysis and the emitter treat weight-region values as SSA values that a
    `memopt.constant` or a `memopt.variable` defines; a global load/store
    pair would add a second way to reach the same bytes.
  }];
  let arguments = (ins StrAttr:$name, StrAttr:$role,
                       OptionalAttr<ElementsAttr>:$initial_value);
  let results = (outs MemOpt_Tensor:$value);
  let assemblyFormat = "$name attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def MemOpt_SoftmaxCrossEntropyOp
    : MemOpt_Op<"softmax_cross_entropy", [], ["getFlops"]> {
  let summary = "Mean softmax cross-entropy over the last axis";
  let description = [{
    `logits` is `[..., C]`, `labels` (i64 or i32) has the leading shape
    `[...]`; rows whose label is `ignore_index` count nothing. The f32
    scalar result is the mean over counted rows of
    `-log softmax(logits)[label]` (PyTorch's `F.cross_entropy` with
    `reduction="mean"`, on the last axis).
  }];
  let arguments = (ins MemOpt_FloatTensor:$logits, MemOpt_IndexTensor:$labels,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs StaticShapeTensorOf<[F32]>:$loss);
  let assemblyFormat = "$logits `,` $labels attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def MemOpt_SoftmaxCrossEntropyGradOp
    : MemOpt_Op<"softmax_cross_entropy_grad", [
        DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                                  ["canWriteInPlace"]>], ["getFlops"]> {
  let summary = "The logits' gradient of softmax_cross_entropy";
  let description = [{
    `dloss * (softmax(logits) - onehot(labels)) / count` per counted row, 0
    for ignored rows; the result has the logits' type. Reads the logits, not
    the probabilities: the forward keeps no `[..., C]` tensor of its own.
    The result may take the logits' storage (each row is read before it is
    written), so a language model's logits and their gradient (823 MB each
    for GPT-2 at 8 x 512) never live at once.
  }];
  let arguments = (ins MemOpt_FloatTensor:$logits, MemOpt_IndexTensor:$labels,
                       StaticShapeTensorOf<[F32]>:$dloss,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs MemOpt_FloatTensor:$dlogits);
  let assemblyFormat = "$logits `,` $labels `,` $dloss attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def MemOpt_LinearCrossEntropyOp
    : MemOpt_Op<"linear_cross_entropy", [],
                ["getFlops", "getWorkspaceBytes", "getWorkspaceFloor"]> {
  let summary = "A bias-free linear layer and its softmax cross-entropy, "
                "without the logits";
  let description = [{
    `softmax_cross_entropy(x w^T, labels)` for `x` `[..., K]`, `w` `[C, K]`
    (the classes' rows: nn.Linear's weight, a tied embedding) and `labels`
    `[...]`, computed chunk by chunk over the classes so that no `[..., C]`
    tensor exists: a language model's head and loss (Liger Kernel's fused
    linear cross-entropy, Apple's Cut Cross-Entropy). `lse` (f32, the labels'
    shape) is each row's log-sum-exp, saved for the gradient. memopt-append-
    loss builds it when the trained output is such a product.
  }];
  let arguments = (ins MemOpt_FloatTensor:$x, MemOpt_FloatTensor:$w,
                       MemOpt_IndexTensor:$labels,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs StaticShapeTensorOf<[F32]>:$loss,
                      StaticShapeTensorOf<[F32]>:$lse);
  let assemblyFormat = "$x `,` $w `,` $labels attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def MemOpt_LinearCrossEntropyGradOp
    : MemOpt_Op<"linear_cross_entropy_grad", [],
                ["getFlops", "getWorkspaceBytes", "getWorkspaceFloor"]> {
  let summary = "dx and dw of memopt.linear_cross_entropy";
  let description = [{
    With `d = dloss * (softmax(x w^T) - onehot(labels)) / count` (0 for
    ignored rows), `dx = d w` and `dw = d^T x`: the logits are recomputed
    chunk by chunk from `x`, `w` and the forward's `lse`, and each chunk's
    `d` feeds both products at once.
  }];
  let arguments = (ins MemOpt_FloatTensor:$x, MemOpt_FloatTensor:$w,
                       MemOpt_IndexTensor:$labels,
                       StaticShapeTensorOf<[F32]>:$lse,
                       StaticShapeTensorOf<[F32]>:$dloss,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs MemOpt_FloatTensor:$dx, MemOpt_FloatTensor:$dw);
  let assemblyFormat = "$x `,` $w `,` $labels `,` $lse `,` $dloss attr-dict "
                       "`:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def MemOpt_ConvBackwardFilterOp
    : MemOpt_Op<"conv_backward_filter", [],
                ["getFlops", "getWorkspaceBytes", "getWorkspaceFloor"]> {
  let summary = "The filter gradient of `conv` (cuDNN backward filter)";
  let description = [{
    `X` and `dY` are the forward input and the output gradient; the result
    has the filter's type `[M, C/group, k...]`. The attributes are the
    forward convolution's. (The data gradient is a `conv_transpose` of `dY`
    with the same filter and attributes.)
  }];
  let arguments = (ins MemOpt_FloatTensor:$X, MemOpt_FloatTensor:$dY,
                       DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$group);
  let results = (outs MemOpt_FloatTensor:$dW);
  let assemblyFormat = "$X `,` $dY attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def MemOpt_PoolGradOp : MemOpt_Op<"pool_grad", [], ["getFlops"]> {
  let summary = "The input gradient of `max_pool` or `average_pool`";
  let description = [{
    `kind` is `max` (each output's gradient goes to the first maximum of
    its window, found again in `X`) or `average` (spread over the window as
    the forward divided). The other attributes are the forward pool's; the
    result has `X`'s type.
  }];
  let arguments = (ins MemOpt_FloatTensor:$X, MemOpt_FloatTensor:$dY,
                       StrAttr:$kind, DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "0">:$ceil_mode,
                       DefaultValuedAttr<I64Attr, "0">:$count_include_pad);
  let results = (outs MemOpt_FloatTensor:$dX);
  let assemblyFormat = "$X `,` $dY attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def MemOpt_BatchNormTrainingOp : MemOpt_Op<"batch_norm_training", [
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                              ["canWriteInPlace"]>,
    DeclareOpInterfaceMethods<MemOpt_PrecisionOpInterface,
                              ["acceptsF32Operand", "hasF32Result"]>],
    ["getFlops", "getWorkspaceBytes"]> {
  let summary = "Training-mode batch normalization over axis 1 (batch "
                "statistics)";
  let description = [{
    `X` is `[N, C, ...]` (f32, f16 or bf16; `Y` has its type); `mean` and
    `inv_std` (`[C]` f32, whatever X's type) are each
    channel's mean and `1 / sqrt(var + epsilon)` over N and the spatial axes
    (biased variance, as ONNX's training mode and PyTorch normalize);
    `Y = (X - mean) * inv_std * scale + B`, then `activation` (`none` or
    `relu`, set by --memopt-fuse-epilogues). `scale` and `B` hold C
    f32 elements. Produced by `--memopt-make-trainable` with `bn-batch-stats`;
    the running statistics are updated by `batch_norm_running_update`.
    Workspace: per-channel partial sums, so that few channels of many
    elements fill the GPU.
  }];
  let arguments = (ins MemOpt_FloatTensor:$X, MemOpt_FloatTensor:$scale,
                       MemOpt_FloatTensor:$B,
                       DefaultValuedAttr<F32Attr, "1e-05">:$epsilon,
                       MemOpt_ActivationAttr:$activation);
  let results = (outs MemOpt_FloatTensor:$Y, MemOpt_FloatTensor:$mean,
                      MemOpt_FloatTensor:$inv_std);
  let assemblyFormat = "$X `,` $scale `,` $B attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def MemOpt_BatchNormTrainingGradOp
    : MemOpt_Op<"batch_norm_training_grad", [
        DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                                  ["canWriteInPlace"]>],
        ["getFlops", "getWorkspaceBytes"]> {
  let summary = "The gradients of batch_norm_training";
  let description = [{
    With `xhat = (X - mean) * inv_std` and `M = N * spatial`:
    `dB = sum dY`, `dscale = sum dY * xhat`,
    `dX = scale * inv_std * (dY - dB / M - xhat * dscale / M)` (PyTorch's
    batch_norm_backward). Reads the forward's input and its saved `mean` and
    `inv_std`. `X`, `dY` and `dX` share one float type; `scale`, `mean`,
    `inv_std`, `dscale` and `dB` are f32 (mixed-precision training keeps
    the statistics and the parameters' gradients in f32). `dX` may take
    `dY`'s storage.
  }];
  let arguments = (ins MemOpt_FloatTensor:$X, MemOpt_FloatTensor:$dY,
                       MemOpt_FloatTensor:$scale, MemOpt_FloatTensor:$mean,
                       MemOpt_FloatTensor:$inv_std);
  let results = (outs MemOpt_FloatTensor:$dX, MemOpt_FloatTensor:$dscale,
                      MemOpt_FloatTensor:$dB);
  let assemblyFormat = "$X `,` $dY `,` $scale `,` $mean `,` $inv_std "
                       "attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def MemOpt_LayerNormalizationGradOp
    : MemOpt_Op<"layer_normalization_grad", [],
                ["getFlops", "getWorkspaceBytes"]> {
  let summary = "The gradients of layer_normalization";
  let description = [{
    Over the axes `[axis, rank)` of `X` (f32, f16 or bf16; `dY` and `dX`
    have its type), with `Scale` (f32) holding exactly those elements: the mean and `1/std` of each row are recomputed from
    `X`; `g = dY * Scale`, `dX = inv_std * (g - mean(g) - xhat * mean(g *
    xhat))`, `dScale = sum over rows of dY * xhat`, `dB = sum of dY`
    (PyTorch's layer_norm_backward). The results have the types of `X`,
    `Scale` and `Scale`. Workspace: the row statistics and per-block column
    partial sums.
  }];
  let arguments = (ins MemOpt_FloatTensor:$X, MemOpt_FloatTensor:$dY,
                       MemOpt_FloatTensor:$Scale,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F32Attr, "1e-05">:$epsilon);
  let results = (outs MemOpt_FloatTensor:$dX, MemOpt_FloatTensor:$dScale,
                      MemOpt_FloatTensor:$dB);
  let assemblyFormat = "$X `,` $dY `,` $Scale attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

// State an update writes in place (the operand's effect says so: the
// scheduler orders the write after every other read of that variable).
def MemOpt_WrittenState
    : Arg<StaticShapeTensorOf<[F32]>, "state written in place",
          [MemRead, MemWrite]>;

// The gradient an update reads: f32, or f16 / bf16 from a mixed-precision
// backward (the kernels widen it).
def MemOpt_GradientTensor : StaticShapeTensorOf<[F32, F16, BF16]>;

// Optimizer updates write their operands in place and return nothing: they
// are the only ops with side effects, so they are never folded away, and the
// scheduler orders them after every other reader of the state they write.
class MemOpt_UpdateOp<string mnemonic, list<Trait> traits = []>
    : Op<MemOpt_Dialect, mnemonic, !listconcat(traits, [
         DeclareOpInterfaceMethods<MemOpt_CostOpInterface,
                                   ["getFlops", "getBytesMoved"]>])>;

// Gradient accumulation (--accumulate K) of an update: `accumulator` (a
// gradient_accumulator variable) becomes `grad` on micro-step 0 and
// `accumulator + grad` on the others; the update itself runs only on
// micro-step K - 1, with the accumulator as its gradient. `micro_step` is the
// program's micro_step variable (0 .. K - 1, written by the driver before
// each micro-batch), so one program (one CUDA graph) serves every
// micro-batch.
// The f32 master of an update whose optimizer runs on the host
// (--offload optimizer, memopt-offload-optimizer; ZeRO-Offload's split): the
// update computes on the master and its state, all `memopt.variable`s placed
// on the host (`memopt.placement = "host"`), and then copies the master into
// `param`, the device's working copy.
defvar MemOpt_MasterArg =
    Arg<Optional<StaticShapeTensorOf<[F32]>>, "host master written in place",
        [MemRead, MemWrite]>;

defvar MemOpt_AccumulatorArg =
    Arg<Optional<StaticShapeTensorOf<[F32]>>,
        "gradient accumulator written in place", [MemRead, MemWrite]>;

def MemOpt_AssignOp : MemOpt_UpdateOp<"assign", [MemOpt_Precision]> {
  let summary = "Writes a value into a variable (BatchNormalization's running "
                "statistics)";
  let arguments = (ins MemOpt_WrittenState:$target,
                       StaticShapeTensorOf<[F32]>:$value);
  let assemblyFormat = "$value `to` $target attr-dict `:` type(operands)";
  let hasVerifier = 1;
}

def MemOpt_BatchNormRunningUpdateOp
    : MemOpt_UpdateOp<"batch_norm_running_update", [MemOpt_Precision]> {
  let summary = "Updates BatchNormalization's running statistics in place";
  let description = [{
    ONNX's convention: `running_mean = momentum * running_mean + (1 -
    momentum) * mean`, likewise `running_var` with the batch variance
    recovered from `inv_std` as `1 / inv_std^2 - epsilon` (biased, as
    `batch_norm_training` normalizes). `mean` and `inv_std` are the
    statistics results of a `batch_norm_training`; the running statistics
    are `memopt.variable`s of role `statistic`.
  }];
  let arguments = (ins MemOpt_WrittenState:$running_mean,
                       MemOpt_WrittenState:$running_var,
                       StaticShapeTensorOf<[F32]>:$mean,
                       StaticShapeTensorOf<[F32]>:$inv_std,
                       F32Attr:$momentum,
                       DefaultValuedAttr<F32Attr, "1e-05">:$epsilon);
  let assemblyFormat = "$mean `,` $inv_std `to` $running_mean `,` "
                       "$running_var attr-dict `:` type(operands)";
  let hasVerifier = 1;
}

// ZeRO sharding of an update (`shards = N`, --memopt-data-parallel with
// shard=optimizer|gradients): a parameter of E elements is split into N
// chunks of F = E / N elements, rank r owning elements [r * F, (r + 1) * F),
// and a tail of T = E % N elements [N * F, E) that every rank owns (the
// ranks update it identically: its gradient is all-reduced). A rank's shard
// of the gradient, the optimizer state and the accumulator holds its chunk
// then the tail: getShardElements(E, N) = F + T elements, 1-D. The chunks
// are equal so that the reduce-scatter and the all-gather are NCCL's, in
// place, without padding the parameter (FSDP pads its flat parameter to a
// multiple of N instead).
def MemOpt_SGDUpdateOp
    : MemOpt_UpdateOp<"sgd_update", [AttrSizedOperandSegments]> {
  let summary = "In-place SGD with momentum (torch.optim.SGD)";
  let description = [{
    `param -= lr * buf` with `buf = momentum * buf + grad + weight_decay *
    param` (dampening 0; `buf` absent and `grad + weight_decay * param`
    used directly when `momentum` is 0). Writes `param` and `momentum_buffer`,
    both `memopt.variable`s; `lr` is the program's learning-rate variable.
    With `accumulate %acc, micro_step %m` and `accumulation_steps = K`, the
    gradient is accumulated first and the update runs on micro-step K - 1
    only (see MemOpt_AccumulatorArg); with `micro_step %m` alone it only
    runs on micro-step K - 1 (data parallel: a collective accumulated and
    reduced the gradient). `grad` may be f16 / bf16 (a mixed-precision
    gradient, widened in the kernel). With `loss_scale %s, found_inf %f`
    (dynamic loss scaling, see MemOpt_LossScaleArgs) the gradient is
    multiplied by `1 / s` and nothing is written when `f` is non-zero. With
    `shards = N` (ZeRO, --memopt-data-parallel) `grad`, the momentum buffer
    and the accumulator are this rank's shard of `getShardElements(E, N)`
    elements of a parameter of E elements, and the op updates only the
    parameter elements the rank owns (see MemOpt_ShardedUpdate). With
    `master %w32` (--offload optimizer) the update runs on the host: on the
    f32 master and the host-placed state, and `param` receives the master's
    new value (see MemOpt_MasterArg).
  }];
  let arguments = (ins MemOpt_WrittenState:$param,
                       MemOpt_GradientTensor:$grad,
                       Arg<Optional<StaticShapeTensorOf<[F32]>>,
                           "state written in place", [MemRead, MemWrite]>:
                           $momentum_buffer,
                       StaticShapeTensorOf<[F32]>:$lr,
                       MemOpt_AccumulatorArg:$accumulator,
                       Optional<StaticShapeTensorOf<[F32]>>:$micro_step,
                       Optional<StaticShapeTensorOf<[F32]>>:$loss_scale,
                       Optional<StaticShapeTensorOf<[F32]>>:$found_inf,
                       MemOpt_MasterArg:$master,
                       DefaultValuedAttr<F32Attr, "0.0">:$momentum,
                       DefaultValuedAttr<F32Attr, "0.0">:$weight_decay,
                       DefaultValuedAttr<I64Attr, "1">:$accumulation_steps,
                       DefaultValuedAttr<I64Attr, "1">:$shards);
  // Optional groups open with their keyword (a group that opens with `,`
  // would take the comma of the next group and fail to parse).
  let assemblyFormat = "$param `,` $grad `,` (`momentum` $momentum_buffer^ "
                       "`,`)? `lr` $lr (`accumulate` $accumulator^ `,`)? "
                       "(`micro_step` $micro_step^)? (`loss_scale` "
                       "$loss_scale^ `,` `found_inf` $found_inf)? (`master` "
                       "$master^)? attr-dict `:` type(operands)";
  let hasVerifier = 1;
  let hasCanonicalizeMethod = 1;
}

def MemOpt_AdamWUpdateOp
    : MemOpt_UpdateOp<"adamw_update", [AttrSizedOperandSegments]> {
  let summary = "In-place AdamW (torch.optim.AdamW, decoupled weight decay)";
  let description = [{
    `param *= 1 - lr * weight_decay`, then the Adam step with bias
    correction from the 1-based `step` variable. Writes `param`, `exp_avg`
    and `exp_avg_sq`, all `memopt.variable`s. With `accumulate %acc,
    micro_step %m` and `accumulation_steps = K`, the gradient is accumulated
    first and the update runs on micro-step K - 1 only (see
    MemOpt_AccumulatorArg); with `micro_step %m` alone it only runs on
    micro-step K - 1. `grad` may be f16 / bf16. With `loss_scale %s,
    found_inf %f, loss_scale_state %t` (dynamic loss scaling, see
    MemOpt_LossScaleArgs) the gradient is multiplied by `1 / s`, nothing is
    written when `f` is non-zero, and the bias correction counts the steps
    that were not skipped (`step - t[1]`), as PyTorch's fused AdamW does
    under a GradScaler. With `shards = N`, `grad`, the moments and the
    accumulator are this rank's shard (see MemOpt_ShardedUpdate and
    `sgd_update`). With `master %w32` the update runs on the host, as for
    `sgd_update`.
  }];
  let arguments = (ins MemOpt_WrittenState:$param,
                       MemOpt_GradientTensor:$grad,
                       MemOpt_WrittenState:$exp_avg,
                       MemOpt_WrittenState:$exp_avg_sq,
                       StaticShapeTensorOf<[F32]>:$lr,
                       StaticShapeTensorOf<[F32]>:$step,
                       MemOpt_AccumulatorArg:$accumulator,
                       Optional<StaticShapeTensorOf<[F32]>>:$micro_step,
                       Optional<StaticShapeTensorOf<[F32]>>:$loss_scale,
                       Optional<StaticShapeTensorOf<[F32]>>:$found_inf,
                       Optional<StaticShapeTensorOf<[F32]>>:$loss_scale_state,
                       MemOpt_MasterArg:$master,
                       DefaultValuedAttr<F32Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F32Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F32Attr, "1e-08">:$eps,
                       DefaultValuedAttr<F32Attr, "0.01">:$weight_decay,
                       DefaultValuedAttr<I64Attr, "1">:$accumulation_steps,
                       DefaultValuedAttr<I64Attr, "1">:$shards);
  let assemblyFormat = "$param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` "
                       "`lr` $lr `,` `step` $step (`accumulate` $accumulator^ "
                       "`,`)? (`micro_step` $micro_step^)? (`loss_scale` "
                       "$loss_scale^ `,` `found_inf` $found_inf `,` "
                       "`loss_scale_state` $loss_scale_state)? (`master` "
                       "$master^)? attr-dict `:` type(operands)";
  let hasVerifier = 1;
  let hasCanonicalizeMethod = 1;
}

//===----------------------------------------------------------------------===//
// Dynamic loss scaling (mixed-precision training in f16)
//===----------------------------------------------------------------------===//

// The loss-scaling operands of an update: `loss_scale` is the program's
// loss_scale variable (the backward's seed was multiplied by it, so every
// gradient is scaled), `found_inf` the result of the step's
// `memopt.found_inf` (non-zero: some gradient overflowed and the step is
// skipped). PyTorch's fused optimizers take the same pair (`grad_scale`,
// `found_inf`) under a GradScaler.

def MemOpt_FoundInfOp
    : MemOpt_Op<"found_inf", [AttrSizedOperandSegments], ["getFlops"]> {
  let summary = "1.0 if any element of the gradients is inf or NaN, else 0.0";
  let description = [{
    One flag from a reduction over every gradient of the step (PyTorch's
    `_amp_foreach_non_finite_check_and_unscale_` without the unscale, which
    the update kernels do). With gradient accumulation (`accumulators`,
    `micro_step`), the accumulators are checked too on micro-steps after the
    first: they hold the sum of the step's earlier micro-batches, which is
    non-finite if any of them overflowed, so the flag of the last micro-step
    covers the whole optimizer step without state of its own. Gradients of
    any float type (an f16 gradient is checked before it is widened:
    widening keeps infinities and NaN).
  }];
  let arguments = (ins Variadic<MemOpt_GradientTensor>:$gradients,
                       Variadic<StaticShapeTensorOf<[F32]>>:$accumulators,
                       Optional<StaticShapeTensorOf<[F32]>>:$micro_step);
  let results = (outs StaticShapeTensorOf<[F32]>:$found);
  let assemblyFormat = "$gradients (`accumulators` `(` $accumulators^ `)`)? "
                       "(`micro_step` $micro_step^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
  let hasCanonicalizeMethod = 1;
}

def MemOpt_UpdateLossScaleOp
    : MemOpt_UpdateOp<"update_loss_scale"> {
  let summary = "Dynamic loss scaling: back off on overflow, grow when clean";
  let description = [{
    PyTorch's `_amp_update_scale_`, in place on the device: with `found_inf`
    non-zero, `loss_scale *= backoff_factor`, the clean-step count
    (`state[0]`) restarts at 0 and the skipped-step count (`state[1]`) grows
    by one; otherwise the clean-step count grows and, when it reaches
    `growth_interval`, `loss_scale *= growth_factor` (if the result is
    finite) and the count restarts. `state` is the f32 `[2]`
    `loss_scale_state` variable. With `micro_step` and
    `accumulation_steps = K` it acts on micro-step K - 1 only (once per
    optimizer step, as `scaler.update()`).
  }];
  let arguments = (ins MemOpt_WrittenState:$loss_scale,
                       MemOpt_WrittenState:$state,
                       StaticShapeTensorOf<[F32]>:$found_inf,
                       Optional<StaticShapeTensorOf<[F32]>>:$micro_step,
                       DefaultValuedAttr<F32Attr, "2.0">:$growth_factor,
                       DefaultValuedAttr<F32Attr, "0.5">:$backoff_factor,
                       DefaultValuedAttr<I64Attr, "2000">:$growth_interval,
                       DefaultValuedAttr<I64Attr, "1">:$accumulation_steps);
  let assemblyFormat = "$loss_scale `,` $state `,` `found_inf` $found_inf "
                       "(`,` `micro_step` $micro_step^)? attr-dict `:` "
                       "type(operands)";
  let hasVerifier = 1;
}



//===----------------------------------------------------------------------===//
// Data parallel: collectives between ranks (--memopt-data-parallel)
//===----------------------------------------------------------------------===//

// The collectives talk to the other ranks through the program's
// communicator: this resource. Writing it keeps them from being folded,
// merged or recomputed (every rank must issue the same collectives in the
// same order, which one program scheduled once guarantees).
def MemOpt_CommunicatorResource
    : Resource<"::mlir::memopt::CommunicatorResource">;

class MemOpt_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Op<MemOpt_Dialect, mnemonic, !listconcat(traits, [
         MemoryEffects<[MemRead<MemOpt_CommunicatorResource>,
                        MemWrite<MemOpt_CommunicatorResource>]>,
         DeclareOpInterfaceMethods<MemOpt_CostOpInterface,
                                   ["getFlops", "getBytesMoved"]>])>;

def MemOpt_AllReduceOp : MemOpt_CollectiveOp<"all_reduce", [
    AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                              ["canWriteInPlace"]>]> {
  let summary = "Sum or average of a gradient over the data-parallel ranks";
  let description = [{
    The result (the input's type) is the `reduction` (`sum`, `average` or
    `max`) over the ranks of each rank's `input`: PyTorch DDP's gradient
    all-reduce (DDP averages), or (`max`) the all-reduce of the loss
    scale's overflow flag that makes every rank skip the same steps
    (DeepSpeed's fp16 optimizers, FSDP's ShardedGradScaler). The input is
    f32, or f16 / bf16 for a gradient reduced in its low type (NCCL's
    ncclFloat16 / ncclBfloat16; memopt-data-parallel's reduce-dtype=low).
    It may take the input's storage (NCCL all-reduces in place), so the
    collective costs no arena bytes of its own.

    With `accumulate %acc, micro_step %m` and `accumulation_steps = K`
    (--accumulate K): the input is first summed into the accumulator
    variable (`%acc = input` on micro-step 0, `%acc + input` on the others,
    as an update's accumulation does) and the collective runs on micro-step
    K - 1 only, over the accumulator: the ranks communicate once per
    optimizer step (DDP's `no_sync()` on the other micro-batches). On the
    other micro-steps the result is undefined and its users are gated on
    the same micro-step.
  }];
  let arguments = (ins MemOpt_GradientTensor:$input,
                       MemOpt_AccumulatorArg:$accumulator,
                       Optional<StaticShapeTensorOf<[F32]>>:$micro_step,
                       DefaultValuedAttr<StrAttr, "\"average\"">:$reduction,
                       DefaultValuedAttr<I64Attr, "1">:$accumulation_steps);
  let results = (outs MemOpt_GradientTensor:$result);
  let assemblyFormat = "$input (`,` `accumulate` $accumulator^)? (`,` "
                       "`micro_step` $micro_step^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def MemOpt_ReduceScatterOp : MemOpt_CollectiveOp<"reduce_scatter", [
    AttrSizedOperandSegments]> {
  let summary = "This rank's shard of a gradient reduced over the ranks";
  let description = [{
    `input` holds E elements; the 1-D result holds this rank's
    `getShardElements(E, ranks)` elements (see MemOpt_ShardedUpdate): its
    chunk of the `reduction` over the ranks (NCCL's reduce-scatter of the
    first `ranks * (E / ranks)` elements), then the tail (an all-reduce of
    the last `E % ranks` elements). ZeRO-1/2 and FSDP's gradient
    reduce-scatter: each rank receives only the part of the gradient whose
    optimizer update it owns. The result is a communication buffer of its
    own in the arena (1/N of the gradient's bytes). The result has the
    input's element type (f32, or f16 / bf16 with reduce-dtype=low).
    `accumulate` and `micro_step` as for `all_reduce`.
  }];
  let arguments = (ins MemOpt_GradientTensor:$input,
                       MemOpt_AccumulatorArg:$accumulator,
                       Optional<StaticShapeTensorOf<[F32]>>:$micro_step,
                       I64Attr:$ranks,
                       DefaultValuedAttr<StrAttr, "\"average\"">:$reduction,
                       DefaultValuedAttr<I64Attr, "1">:$accumulation_steps);
  let results = (outs MemOpt_GradientTensor:$result);
  let assemblyFormat = "$input (`,` `accumulate` $accumulator^)? (`,` "
                       "`micro_step` $micro_step^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def MemOpt_AllGatherOp : MemOpt_CollectiveOp<"all_gather"> {
  let summary = "Gathers the ranks' updated chunks of a sharded parameter";
  let description = [{
    In place on the parameter variable: every rank sends the chunk of
    `param` it owns (and updated with a `shards = ranks` update) and
    receives the others' chunks (NCCL's in-place all-gather over the first
    `ranks * (E / ranks)` elements; the tail is identical on every rank
    already). ZeRO-1/2's parameter all-gather after the sharded step. With
    `micro_step %m` and `accumulation_steps = K` it runs on micro-step K - 1
    only, with the update. It writes the parameter after the update did: the
    scheduler keeps an op that writes a variable after the ops before it in
    program order that use that variable.
  }];
  let arguments = (ins MemOpt_WrittenState:$param,
                       Optional<StaticShapeTensorOf<[F32]>>:$micro_step,
                       I64Attr:$ranks,
                       DefaultValuedAttr<I64Attr, "1">:$accumulation_steps);
  let assemblyFormat = "$param (`,` `micro_step` $micro_step^)? attr-dict `:` "
                       "type(operands)";
  let hasVerifier = 1;
}

// memopt-bucket-collectives: the end of a bucket of collectives that run
// asynchronously (on the CUDA backend: on the communication stream).
def MemOpt_WaitCollectivesOp : MemOpt_CollectiveOp<"wait_collectives"> {
  let summary = "Waits for a bucket of collectives started earlier";
  let description = [{
    The collectives carrying `bucket = B` (a contiguous run of
    `memopt.all_reduce` / `memopt.reduce_scatter` ops, issued together as
    soon as the last of them can run) complete here: the ops after this one
    may read their results. The operands are every buffer the bucket's
    collectives read or write (their inputs, accumulators and results):
    the collectives may still be running until this op, so the planner keeps
    all of them alive up to here and reuses none of their bytes before it
    (an in-place all-reduce still writes over its input: the two are one
    buffer). On the CUDA backend the bucket runs on the context's
    communication stream in one NCCL group, after an event recorded on the
    compute stream, and this op makes the compute stream wait on the
    bucket's completion event (PyTorch DDP's bucket all-reduce futures,
    waited on before the optimizer reads `.grad`). On the host backend the
    collectives run at their place in the program and this op does nothing.
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$buffers, I64Attr:$bucket);
  let assemblyFormat = "$buffers attr-dict `:` type($buffers)";
  let hasVerifier = 1;
}

def MemOpt_GatherParameterOp : MemOpt_CollectiveOp<"gather_parameter"> {
  let summary = "A sharded parameter gathered whole from the ranks (ZeRO-3)";
  let description = [{
    `shard` is this rank's shard of a parameter (a `memopt.variable` with
    `memopt.shards = ranks`, shard=parameters): its chunk of the parameter's
    E elements (element [r F, (r + 1) F) of the whole, F = E / ranks), then
    the tail of E % ranks elements every rank holds. The result, in the
    parameter's shape, is the whole parameter: an arena buffer that the
    planner places like any activation (DeepSpeed ZeRO-3's parameter fetch,
    FSDP's unshard). memopt-data-parallel puts one right before the first
    forward use of the parameter and another before the first backward
    use, so the whole parameter is alive only while a layer needs it (FSDP's
    reshard_after_forward). The collective writes the communicator: it is
    never folded, merged or recomputed, and every rank issues the same
    gathers in the same order.
  }];
  let arguments = (ins StaticShapeTensorOf<[F32]>:$shard, I64Attr:$ranks);
  let results = (outs StaticShapeTensorOf<[F32]>:$result);
  let assemblyFormat = "$shard attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTOPS_TD
