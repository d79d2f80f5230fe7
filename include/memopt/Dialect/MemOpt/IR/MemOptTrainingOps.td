//===- MemOptTrainingOps.td - training ops -----------------*- tablegen -*-===//
//
// Training: state, losses, gradients without a forward twin, optimizer updates,
// loss scaling and the data-parallel collectives. Included by MemOptOps.td in
// the order the ops were defined: one file per op family, named after the .cpp
// file that holds their verifiers and shape inference (MLIR's own dialects
// split their ODS by op family the same way).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_IR_MEMOPTTRAININGOPS_TD
#define MEMOPT_DIALECT_MEMOPT_IR_MEMOPTTRAININGOPS_TD

include "memopt/Dialect/MemOpt/IR/MemOptBase.td"

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
    with the same filter and attributes.) With `channels_last` (set by
    `--memopt-layout`), X is [N, spatial..., C], dY [N, out..., M] and dW
    [M, k..., C/group] (cuDNN's NHWC tensors and KRSC filter).
  }];
  let arguments = (ins MemOpt_FloatTensor:$X, MemOpt_FloatTensor:$dY,
                       DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$group,
                       UnitAttr:$channels_last);
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
    result has `X`'s type. With `channels_last`, X, dY and dX are
    [N, spatial..., C].
  }];
  let arguments = (ins MemOpt_FloatTensor:$X, MemOpt_FloatTensor:$dY,
                       StrAttr:$kind, DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "0">:$ceil_mode,
                       DefaultValuedAttr<I64Attr, "0">:$count_include_pad,
                       UnitAttr:$channels_last);
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
    elements fill the GPU. With `channels_last` (set by `--memopt-layout`)
    X and Y are [N, ..., C]: the channel axis is the last one.

    With the optional `residual` Z (Y's type), set by memopt-fuse-norm-conv
    for a training step's `relu(batch_norm_training(X) + Z)` (a ResNet
    block's last normalization; cuDNN's NormAddRelu):
    `Y = activation(BN(X) + Z)`, rounded once, so that BN(X) is never
    stored. Its gradient is then `batch_norm_add_relu_grad`; autodiff does
    not differentiate it. Y may take X's or Z's storage.
  }];
  let arguments = (ins MemOpt_FloatTensor:$X, MemOpt_FloatTensor:$scale,
                       MemOpt_FloatTensor:$B,
                       Optional<MemOpt_FloatTensor>:$Z,
                       DefaultValuedAttr<F32Attr, "1e-05">:$epsilon,
                       MemOpt_ActivationAttr:$activation,
                       UnitAttr:$channels_last);
  let results = (outs MemOpt_FloatTensor:$Y, MemOpt_FloatTensor:$mean,
                      MemOpt_FloatTensor:$inv_std);
  let assemblyFormat = "$X `,` $scale `,` $B (`residual` $Z^)? attr-dict "
                       "`:` functional-type(operands, results)";
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
    `dY`'s storage. With `channels_last` the channel axis of X, dY and dX
    is the last one.
  }];
  let arguments = (ins MemOpt_FloatTensor:$X, MemOpt_FloatTensor:$dY,
                       MemOpt_FloatTensor:$scale, MemOpt_FloatTensor:$mean,
                       MemOpt_FloatTensor:$inv_std, UnitAttr:$channels_last);
  let results = (outs MemOpt_FloatTensor:$dX, MemOpt_FloatTensor:$dscale,
                      MemOpt_FloatTensor:$dB);
  let assemblyFormat = "$X `,` $dY `,` $scale `,` $mean `,` $inv_std "
                       "attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

// The batch normalization -> ReLU -> convolution of a training step, fused
// (memopt-fuse-norm-conv, docs/layout.md "Normalization fused into the
// convolutions"): the normalized activation R = relu(bn(X)) is never
// stored; its convolutions apply the normalization as they load X (cuDNN's
// ConvBNfprop / ConvBNwgrad fusions) and the normalization's gradient
// recomputes the ReLU's mask from X.
def MemOpt_BatchNormStatsOp : MemOpt_Op<"batch_norm_stats", [],
    ["getFlops", "getWorkspaceBytes"]> {
  let summary = "The statistics of batch_norm_training, and the per-channel "
                "scale and shift that apply it";
  let description = [{
    `mean` and `inv_std` as `batch_norm_training` computes them (the same
    kernels: a fused and an unfused step agree on them bit for bit), and
    `applied_scale = scale * inv_std`, `applied_bias = B - mean *
    applied_scale` (one f32 fma): the normalization as one multiply-add per
    element, which `norm_relu_conv`, `norm_relu_conv_backward_filter` and
    `batch_norm_relu_grad` apply to X (cuDNN's BN finalize). All results
    are `[C]` f32. Workspace and `channels_last` as `batch_norm_training`.
  }];
  let arguments = (ins MemOpt_FloatTensor:$X, MemOpt_FloatTensor:$scale,
                       MemOpt_FloatTensor:$B,
                       DefaultValuedAttr<F32Attr, "1e-05">:$epsilon,
                       UnitAttr:$channels_last);
  let results = (outs MemOpt_FloatTensor:$mean, MemOpt_FloatTensor:$inv_std,
                      MemOpt_FloatTensor:$applied_scale,
                      MemOpt_FloatTensor:$applied_bias);
  let assemblyFormat = "$X `,` $scale `,` $B attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def MemOpt_NormReluApplyOp : MemOpt_Op<"norm_relu_apply", [],
    ["getFlops"]> {
  let summary = "relu(X * scale + bias) per channel: a normalized activation "
                "formed where it is read";
  let description = [{
    `R = relu(fma(X, scale[c], bias[c]))` rounded to X's type, with `scale`
    and `bias` the `applied_scale` / `applied_bias` of a `batch_norm_stats`
    (`[C]` f32): the arithmetic `norm_relu_conv` applies on load. Made by
    memopt-fuse-norm-conv for a fused normalization's readers that are not
    convolutions (a max pool and its gradient: ResNet's stem), one right
    before each, so that R lives for one op in the forward and is formed
    again for the backward instead of being kept between them.
  }];
  let arguments = (ins MemOpt_FloatTensor:$X, MemOpt_FloatTensor:$scale,
                       MemOpt_FloatTensor:$bias, UnitAttr:$channels_last);
  let results = (outs MemOpt_FloatTensor:$R);
  let assemblyFormat = "$X `,` $scale `,` $bias attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def MemOpt_NormReluConvOp : MemOpt_Op<"norm_relu_conv", [],
    ["getFlops", "getWorkspaceBytes", "getWorkspaceFloor"]> {
  let summary = "conv(relu(X * scale + bias), W): a convolution that "
                "normalizes its input as it loads it";
  let description = [{
    `Y = conv(R, W) + B` with `R = relu(fma(X, scale[c], bias[c]))` rounded
    to X's type, `scale` and `bias` the `applied_scale` / `applied_bias` of
    a `batch_norm_stats` (`[C]` f32), and `B` (optional, `[M]` of X's type)
    the convolution's own bias, as `memopt.conv`'s (an exporter's zero
    bias before the next normalization, when it is trained). The attributes
    are `memopt.conv`'s (no activation). The CUDA runtime runs cuDNN's scale-bias-relu
    convolution fusion where cuDNN offers it and it is faster, else it
    writes R into the workspace and runs the plain convolution: the
    workspace holds at least R (its floor), so R is a transient, never a
    saved activation.
  }];
  let arguments = (ins MemOpt_FloatTensor:$X, MemOpt_FloatTensor:$W,
                       MemOpt_FloatTensor:$scale, MemOpt_FloatTensor:$bias,
                       Optional<MemOpt_FloatTensor>:$B,
                       DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$group,
                       UnitAttr:$channels_last);
  let results = (outs MemOpt_FloatTensor:$Y);
  let assemblyFormat = "$X `,` $W `,` $scale `,` $bias (`,` $B^)? attr-dict "
                       "`:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def MemOpt_NormReluConvBackwardFilterOp
    : MemOpt_Op<"norm_relu_conv_backward_filter", [],
                ["getFlops", "getWorkspaceBytes", "getWorkspaceFloor"]> {
  let summary = "The filter gradient of norm_relu_conv";
  let description = [{
    `conv_backward_filter(R, dY)` with R as `norm_relu_conv` forms it from
    X, `scale` and `bias` (cuDNN's ConvBNwgrad). Attributes, layouts and
    workspace as `norm_relu_conv`.
  }];
  let arguments = (ins MemOpt_FloatTensor:$X, MemOpt_FloatTensor:$dY,
                       MemOpt_FloatTensor:$scale, MemOpt_FloatTensor:$bias,
                       DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$group,
                       UnitAttr:$channels_last);
  let results = (outs MemOpt_FloatTensor:$dW);
  let assemblyFormat = "$X `,` $dY `,` $scale `,` $bias attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def MemOpt_BatchNormReluGradOp
    : MemOpt_Op<"batch_norm_relu_grad", [
        DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                                  ["canWriteInPlace"]>],
        ["getFlops", "getWorkspaceBytes"]> {
  let summary = "The gradients of relu(batch_norm_training) from X alone";
  let description = [{
    `batch_norm_training_grad(X, G, scale, mean, inv_std)` with `G = dY`
    where `fma(X, applied_scale[c], applied_bias[c]) > 0` and 0 elsewhere:
    the ReLU's mask recomputed from X (as cuDNN's DReluForkDNorm does)
    instead of read from a stored ReLU output. Types, workspace,
    `channels_last` and the in-place `dX` as `batch_norm_training_grad`.
  }];
  let arguments = (ins MemOpt_FloatTensor:$X, MemOpt_FloatTensor:$dY,
                       MemOpt_FloatTensor:$scale, MemOpt_FloatTensor:$mean,
                       MemOpt_FloatTensor:$inv_std,
                       MemOpt_FloatTensor:$applied_scale,
                       MemOpt_FloatTensor:$applied_bias,
                       UnitAttr:$channels_last);
  let results = (outs MemOpt_FloatTensor:$dX, MemOpt_FloatTensor:$dscale,
                      MemOpt_FloatTensor:$dB);
  let assemblyFormat = "$X `,` $dY `,` $scale `,` $mean `,` $inv_std `,` "
                       "$applied_scale `,` $applied_bias attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

// The gradient of a fused `relu(batch_norm_training(X) + Z)` (cuDNN's
// DReluForkDNorm: the ReLU's gradient, the fork to the residual branch, and
// the normalization's gradient in one op).
def MemOpt_BatchNormAddReluGradOp
    : MemOpt_Op<"batch_norm_add_relu_grad", [
        DeclareOpInterfaceMethods<MemOpt_BufferBehaviorOpInterface,
                                  ["canWriteInPlace"]>],
        ["getFlops", "getWorkspaceBytes"]> {
  let summary = "The gradients of relu(batch_norm_training(X) + Z) from its "
                "output Y";
  let description = [{
    `dZ = dY` where `Y > 0` and 0 elsewhere (the ReLU's gradient, mask from
    the saved output Y as `relu_grad(dY, Y)` takes it), then
    `dX, dscale, dB = batch_norm_training_grad(X, dZ, scale, mean, inv_std)`.
    `dZ` is the gradient of the sum, which the residual branch reads as
    well. One pass reads dY, Y and X and writes dZ while it reduces; the
    second reads dZ and X and writes dX: one read of dZ and one kernel fewer
    than relu_grad + batch_norm_training_grad, with the same sums in the
    same order. X, dY, Y, dX and dZ share one float type; scale, mean,
    inv_std, dscale and dB are `[C]` f32. `dX` may take `dY`'s storage.
    Workspace and `channels_last` as `batch_norm_training_grad`. Made by
    memopt-fuse-norm-conv.
  }];
  let arguments = (ins MemOpt_FloatTensor:$X, MemOpt_FloatTensor:$dY,
                       MemOpt_FloatTensor:$Y, MemOpt_FloatTensor:$scale,
                       MemOpt_FloatTensor:$mean, MemOpt_FloatTensor:$inv_std,
                       UnitAttr:$channels_last);
  let results = (outs MemOpt_FloatTensor:$dX, MemOpt_FloatTensor:$dscale,
                      MemOpt_FloatTensor:$dB, MemOpt_FloatTensor:$dZ);
  let assemblyFormat = "$X `,` $dY `,` $Y `,` $scale `,` $mean `,` $inv_std "
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
// `param`, the device's working copy. The working copy may then be f16 /
// bf16 of the master's shape (memopt-offload-optimizer's low parameters,
// when every device reader cast the parameter to that type): the update
// writes the master rounded to nearest even into it (what `memopt.cast`
// computes), so the device holds 2 bytes a parameter and the copy back is
// half the bytes. Only with a master: a device update needs its f32
// parameter.
defvar MemOpt_MasterArg =
    Arg<Optional<StaticShapeTensorOf<[F32]>>, "host master written in place",
        [MemRead, MemWrite]>;

// The parameter an update writes: f32, or f16 / bf16 with a `master`
// (see MemOpt_MasterArg).
defvar MemOpt_UpdatedParam =
    Arg<StaticShapeTensorOf<[F32, F16, BF16]>, "parameter written in place",
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
    new value, rounded to f16 / bf16 when `param` has that type (see
    MemOpt_MasterArg).
  }];
  let arguments = (ins MemOpt_UpdatedParam:$param,
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
  let arguments = (ins MemOpt_UpdatedParam:$param,
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
    soon as the last of them can run, or of `memopt.gather_parameter` ops,
    a gather group issued one layer ahead) complete here: the ops after
    this one may read their results. The operands are every buffer the bucket's
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
    never folded or merged (the remat solver may gather again instead of
    keeping), and every rank issues the same gathers in the same order.
    An f16 / bf16 result is the mixed-precision low copy gathered directly
    (FSDP's `param_dtype`): the f32 shard is cast into place, then half the
    bytes are gathered; memopt-data-parallel does so when every reader of
    the gathered parameter casts it to that type. With `bucket = B`
    (memopt-bucket-collectives' gather groups) the gather is one of a group
    issued together on the communication stream, one layer ahead, and a
    `memopt.wait_collectives {bucket = B}` before the first reader ends it.
  }];
  let arguments = (ins StaticShapeTensorOf<[F32]>:$shard, I64Attr:$ranks);
  let results = (outs StaticShapeTensorOf<[F32, F16, BF16]>:$result);
  let assemblyFormat = "$shard attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // MEMOPT_DIALECT_MEMOPT_IR_MEMOPTTRAININGOPS_TD
