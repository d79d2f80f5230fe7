//===- MemOptNeuralNetOps.td - neural-network ops ----------*- tablegen -*-===//
//
// Matmul, gemm, convolutions, pooling, normalization, softmax, attention and
// reductions. Included by MemOptOps.td in the order the ops were defined: one
// file per op family, named after the .cpp file that holds their verifiers and
// shape inference (MLIR's own dialects split their ODS by op family the same
// way).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTNEURALNETOPS_TD
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTNEURALNETOPS_TD

include "memopt/Dialect/MemOpt/IR/MemOptBase.td"

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
    With `channels_last` (set by `--memopt-layout` on a convolution's data
    gradient), X is [N, spatial..., C], W [C, k..., M/group] (the forward
    convolution's KRSC filter) and Y [N, out..., M]: cuDNN's backward data
    with NHWC tensors and filter.
  }];
  let arguments = (ins MemOpt_FloatTensor:$X, MemOpt_FloatTensor:$W,
                       Optional<MemOpt_FloatTensor>:$B,
                       DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{}">:$output_padding,
                       DefaultValuedAttr<I64Attr, "1">:$group,
                       UnitAttr:$channels_last);
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
    AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<MemOpt_PrecisionOpInterface,
                              ["hasLowPrecisionGradient"]>,
    DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface>],
    ["getFlops", "getWorkspaceBytes", "isWorkspaceOptional",
     "getWorkspaceFloor"]> {
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

    With `dropout_ratio` r > 0 (training dropout of the probabilities,
    folded in by `--memopt-fuse-attention` from `softmax -> memopt.dropout
    -> matmul`): `result = (P * keep / (1 - r)) V`, where P[..., i, j] is
    kept unless the Philox 4x32-10 word of its index in the row-major
    `[result's batch dims..., S, Sk]` probabilities, keyed by the I64 [2]
    `dropout_key` operand (`[seed, micro-batch]`, the program's random_key)
    and counted with `dropout_stream`, is below `r * 2^32`: exactly the mask
    `memopt.dropout {ratio = r, stream = dropout_stream}` draws on the
    unfused graph's probabilities (lib/Runtime/Philox.h). The row
    statistics are those of the undropped P. No mask is stored: the
    gradient (`memopt.attention_grad` with the same dropout attributes and
    key) and a recomputed attention (rematerialization) regenerate it.
    `dropout_key` is present exactly when `dropout_ratio` > 0. With
    `dropout_cudnn_rng` (set by `--memopt-attention-engine` on a forward and
    its gradients together, only where cuDNN's SDPA runs all of them) the
    CUDA runtime draws the mask with cuDNN's own generator, seeded from the
    key and the stream, instead (another mask, the same distribution; the
    host ignores it).

    The results never share storage with an operand.

    Workspace: when `Q`, `K` and `V` hold the whole batch, the op asks for
    room for all f32 scores (plus the probabilities in the element type when
    it is not f32). It is optional: the planner promises none and grows it
    into bytes that are free anyway while the op runs; the CUDA runtime
    computes the attention chunk by chunk through library GEMMs when that
    space holds enough of the batch, and with a fused kernel otherwise.
    With `memopt.cudnn_workspace = N` (set by `--memopt-attention-engine`
    for the CUDA target) the first N bytes are promised: cuDNN's fused SDPA
    needs them (its own workspace, the statistics, a transposed K).
  }];
  let arguments = (ins MemOpt_FloatTensor:$Q, MemOpt_FloatTensor:$K,
                       MemOpt_FloatTensor:$V,
                       Optional<MemOpt_FloatTensor>:$bias,
                       Optional<StaticShapeTensorOf<[I64]>>:$dropout_key,
                       F32Attr:$scale,
                       DefaultValuedAttr<BoolAttr, "false">:$causal,
                       DefaultValuedAttr<BoolAttr, "false">:$key_transposed,
                       DefaultValuedAttr<BoolAttr, "false">:$safe_softmax,
                       DefaultValuedAttr<BoolAttr, "false">:$return_lse,
                       DefaultValuedAttr<F32Attr, "0.0f">:$dropout_ratio,
                       DefaultValuedAttr<I64Attr, "0">:$dropout_stream,
                       UnitAttr:$dropout_cudnn_rng);
  let results = (outs MemOpt_FloatTensor:$Y,
                      Optional<MemOpt_TensorOf<[F32]>>:$lse);
  let assemblyFormat = "$Q `,` $K `,` $V (`,` $bias^)? "
                       "(`dropout_key` $dropout_key^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Score elements that are not masked by `causal`, per batch entry.
    int64_t getUnmaskedScoreCount();
    /// Whether the probabilities are dropped out (dropout_ratio > 0).
    bool hasDropout() { return !getDropoutRatio().isZero(); }
  }];
}

def MemOpt_AttentionGradOp : MemOpt_InferredOp<"attention_grad",
    [AttrSizedOperandSegments],
    ["getFlops", "getWorkspaceBytes", "isWorkspaceOptional",
     "getWorkspaceFloor"]> {
  let summary = "dQ, dK, dV (and dbias) of memopt.attention, no S x Sk tensor";
  let description = [{
    The vector-Jacobian product of `memopt.attention` (FlashAttention-2's
    backward): from the forward's operands, its output `O`, the output's
    gradient `dO` and the row statistics `lse` (`return_lse`), it recomputes
    the probabilities block by block, `P = exp(S - lse)`, with
    `D = rowsum(dO * O)`:

        dV = P^T dO,  dP = dO V^T,  dS = P * (dP - D),
        dQ = scale * dS K,  dK = scale * dS^T Q,  dbias = dS

    With the forward's dropout (`dropout_ratio` r > 0, `dropout_stream`,
    the same `dropout_key` operand) the keep mask M of the forward is
    regenerated (memopt.attention's description says which it is) and, with
    s = 1 / (1 - r): `dV = (s M * P)^T dO`, `dP = s M * (dO V^T)`, the rest
    unchanged (D = rowsum(dO * O) is still sum_j P_ij dP_ij).
    `dropout_cudnn_rng` as for the forward: set on both or on neither.

    The attributes are the forward's. `dQ`, `dK` and `dV` have the shapes of
    `Q`, `K` (in its layout: `[..., D, Sk]` with `key_transposed`) and `V`
    with the broadcast batch dimensions of the output (the gradient rule sums
    broadcast axes back). With `grouped_gradients` (grouped-query attention:
    `K` and `V` have the same batch dimensions, the output's up to a
    trailing run that they broadcast along, as the fusion's `[B, Hkv, n]`
    view gives them) `dK` and `dV` have `K`'s and `V`'s own shapes: each is
    the sum over the query heads of its group, computed by the kernels (no
    per-query-head copy, no sum after). With `bias_gradient`, `dbias` has the bias's own
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
    always run the fused kernels. With `memopt.cudnn_workspace = N` (as
    for the forward) the first N bytes are promised: cuDNN's SDPA backward
    needs them (its f32 dQ accumulator and more).
  }];
  let arguments = (ins MemOpt_TensorOf<[F32, F16, BF16]>:$Q,
                       MemOpt_TensorOf<[F32, F16, BF16]>:$K,
                       MemOpt_TensorOf<[F32, F16, BF16]>:$V,
                       MemOpt_TensorOf<[F32, F16, BF16]>:$O,
                       MemOpt_TensorOf<[F32, F16, BF16]>:$dO,
                       MemOpt_TensorOf<[F32]>:$lse,
                       Optional<MemOpt_TensorOf<[F32, F16, BF16]>>:$bias,
                       Optional<StaticShapeTensorOf<[I64]>>:$dropout_key,
                       F32Attr:$scale,
                       DefaultValuedAttr<BoolAttr, "false">:$causal,
                       DefaultValuedAttr<BoolAttr, "false">:$key_transposed,
                       DefaultValuedAttr<BoolAttr, "false">:$safe_softmax,
                       DefaultValuedAttr<BoolAttr, "false">:$bias_gradient,
                       DefaultValuedAttr<BoolAttr, "false">:$grouped_gradients,
                       DefaultValuedAttr<F32Attr, "0.0f">:$dropout_ratio,
                       DefaultValuedAttr<I64Attr, "0">:$dropout_stream,
                       UnitAttr:$dropout_cudnn_rng);
  let results = (outs MemOpt_TensorOf<[F32, F16, BF16]>:$dQ,
                      MemOpt_TensorOf<[F32, F16, BF16]>:$dK,
                      MemOpt_TensorOf<[F32, F16, BF16]>:$dV,
                      Optional<MemOpt_TensorOf<[F32]>>:$dbias);
  let assemblyFormat = "$Q `,` $K `,` $V `,` $O `,` $dO `,` $lse "
                       "(`,` $bias^)? (`dropout_key` $dropout_key^)? "
                       "attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether the forward's probabilities were dropped out.
    bool hasDropout() { return !getDropoutRatio().isZero(); }
    /// Score elements that are not masked by `causal`, per batch entry.
    int64_t getUnmaskedScoreCount();
    /// The query heads that share one K / V entry when `k` and `v` can take
    /// `grouped_gradients` against an output of type `output` (the same
    /// batch dims, the output's up to a trailing run of 1s where the
    /// output's are not all 1), else 0.
    static int64_t getGradientGroup(::mlir::Type output, ::mlir::Type k,
                                    ::mlir::Type v);
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

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTNEURALNETOPS_TD
