//===- MemOptElementwiseOps.td - elementwise ops -----------*- tablegen -*-===//
//
// Unary and binary elementwise ops, comparisons, where and the fused
// elementwise program. Included by MemOptOps.td in the order the ops were
// defined: one file per op family, named after the .cpp file that holds their
// verifiers and shape inference (MLIR's own dialects split their ODS by op
// family the same way).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTELEMENTWISEOPS_TD
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTELEMENTWISEOPS_TD

include "memopt/Dialect/MemOpt/IR/MemOptBase.td"

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

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTELEMENTWISEOPS_TD
