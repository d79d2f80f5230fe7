//===- Passes.td - memopt passes ----------------------------*- tablegen -*-===//

#ifndef MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_TD
#define MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MemOptSummary : Pass<"memopt-summary", "ModuleOp"> {
  let summary = "Print per-op counts and weight and activation bytes";
  let description = [{
    A read-only report of what the importer produced: how many operations of
    each kind each function holds, how many tensors, the bytes of weights
    (constants) and of activations (every other op result), and the bytes of
    the function's inputs and outputs. The IR is left unchanged.
  }];
  let options = [
    Option<"outputFile", "output", "std::string", /*default=*/"\"-\"",
           "Where to write the summary ('-' for stdout)">,
  ];
  let dependentDialects = ["::mlir::memopt::MemOptDialect"];
}

def MemOptFuseAttention
    : Pass<"memopt-fuse-attention", "::mlir::func::FuncOp"> {
  let summary = "Fuse MatMul -> Softmax -> MatMul attention into memopt.attention";
  let description = [{
    Rewrites the attention that exporters spell out op by op,

      MatMul(Q, K^T) [-> scale | Add(term) | Where(mask, -inf, .) | Reshape
                        | Cast]... -> Softmax(last axis)
                     [-> Where(IsNaN(P), 0, P)] [-> Cast | Reshape
                                                 | Dropout]...
                     -> MatMul(., V)

    into one `memopt.attention`, so that the `[..., S, Sk]` scores and
    probabilities are never materialized (the memory-efficient / flash
    attention of PyTorch's SDPA, onnxruntime's Attention and
    MultiHeadAttention contrib ops, TensorRT's MHA fusion). Each op is judged
    by its effect on the scores (docs/attention.md), when every intermediate
    has exactly one use:
    - scaling by a one-element factor computed from constants (evaluated:
      `sqrt(d)`, `pow(d, -0.25)`), of the scores, before or after a term (which
      it then scales too), or of Q and/or K before the first MatMul (folded
      into `scale`);
    - K^T given by a transpose of the last two axes or the dynamo SDPA's
      reshape-transpose-reshape (its operand becomes K) or by anything else
      (`key_transposed`); K and V repeated for grouped-query attention
      (Expand + Reshape) are read before the repeat;
    - additive terms (masks, ALiBi, relative-position and disentangled
      biases), `Where(mask, fill, scores)` / `Where(mask, scores, fill)` with
      a fill of -inf or below -1e30, float casts (softmax in f32), and
      reshapes of the batch axes before and after the softmax (BLOOM's
      merged batch x heads, swin's 5-D window view);
    - a constant mask that is exactly the top-left causal pattern in every
      batch entry becomes `causal = true`; an all-zero additive constant is
      dropped; other terms are summed into the `bias` operand;
    - one training dropout of the probabilities (memopt.dropout with its
      key) becomes `dropout_ratio`, `dropout_stream` and the `dropout_key`
      operand (the op draws the dropout's own mask); a keyless or ratio-0
      dropout (inference) is the identity and goes.
    Heads wider than `max-head-size` are left alone (the CUDA kernels keep
    tiles of Q, K and V with whole rows in shared memory). With `report`,
    prints how many attentions were fused and the bytes of score and
    probability tensors that no longer exist, then one line per softmax over
    attention scores: fused with its mask class (none, causal, padding,
    causal + padding, sliding window, arbitrary), or the node that broke the
    pattern and why.
  }];
  let options = [
    Option<"maxHeadSize", "max-head-size", "int64_t", /*default=*/"128",
           "Fuse only when the head sizes of Q and V are at most this">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Print the attentions fused, the causal masks recognised, the "
           "score bytes no longer materialized and one line per attention "
           "site">,
  ];
  let dependentDialects = ["::mlir::memopt::MemOptDialect"];
}

def MemOptMixedPrecision
    : Pass<"memopt-mixed-precision", "::mlir::func::FuncOp"> {
  let summary = "Run the model in f16 or bf16 where that is safe";
  let description = [{
    Mixed precision for inference, decided per op by
    `PrecisionOpInterface::getPrecisionPolicy` (docs/mixed-precision.md):
    compute-bound ops (matmul, gemm, conv, conv_transpose) run in the low type;
    ops whose low-type result would overflow or lose precision (exp, pow,
    log, reciprocal, reduce_sum) run in f32 and keep their consumers in f32
    (PyTorch type promotion) until a compute-bound op or an op with a bounded
    result (tanh, sigmoid, softmax, layer_normalization, ...) ends the
    island; everything else runs in the low type.

    - f32 constants are converted at compile time, once per type they are
      used in (`dense` and `dense_resource` alike), so the weight region
      halves. Finite values beyond the low type's range clamp to its largest
      finite value (with a warning naming the constant); non-zero values that
      would round to zero become its smallest subnormal of the same sign
      (onnxconverter-common's float16 converter raises them likewise).
    - The function's inputs and results keep their types (onnxconverter's
      `keep_io_types`): casts sit at the boundary. With
      `output-precision=low` (onnxconverter's `keep_io_types=False` for
      outputs, autocast's result types), a result computed in the low type
      is returned in it (no cast; the signature changes); a result computed
      in f32 (an f32 island) stays f32. Training ignores it: the results
      are the loss's inputs, and the step returns only its f32 loss.
    - A cast is inserted once per value and type, right before its first
      user, so no round trip (f16 -> f32 -> f16) is created.
    - Integer and bool values and f64 are never touched.

    The function gets `memopt.precision` ("f16" or "bf16"), which the memory
    report shows. With `report`, prints how many ops run in each type, the
    casts inserted and the weight bytes before and after.

    `precision=tf32` changes no type: it only sets `memopt.precision =
    "tf32"`, and the lowering then lets every f32 contraction (matmul, gemm,
    conv, conv_transpose, conv_backward_filter, attention's library calls)
    multiply in TF32 on tensor cores with f32 accumulation (PyTorch's
    `allow_tf32`, TensorRT's default). The host backend computes the same
    program in f32 (double). Training programs take it too.

    `training=true` (memopt-compile --train --precision fp16|bf16) runs on
    the model before memopt-append-loss and memopt-autodiff, as PyTorch's
    autocast runs the forward and the backward inherits its types
    (docs/training.md, "Mixed precision"). Parameters (`memopt.variable`s)
    stay f32 master weights: an op that runs low reads a cast of the
    parameter, whose gradient (CastOp's rule) returns an f32 gradient to the
    master. Departures from inference: the function's results are not
    widened (the loss reads the low logits itself); an operand the op
    accepts in f32 (`acceptsF32Operand`: normalization scale and bias) keeps
    a parameter f32, results `hasF32Result` names (batch statistics) stay
    f32; an op whose gradient has no low-precision form
    (`hasLowPrecisionGradient`: an attention with a trained bias) runs in f32
    with a warning naming
    the node; an op that only moves data out of parameters into a smaller
    result (an embedding gather) reads them in f32 and its result is cast
    where it is needed; the tanh GELU spelled as eight ops is fused first,
    as memopt-autodiff does.
  }];
  let options = [
    Option<"precision", "precision", "std::string", /*default=*/"\"f16\"",
           "The low float type: f16 or bf16; or tf32 (f32 storage, TF32 "
           "math in contractions)">,
    Option<"training", "training", "bool", /*default=*/"false",
           "The model is about to be trained: keep parameters f32 (see "
           "the description)">,
    Option<"outputPrecision", "output-precision", "std::string",
           /*default=*/"\"f32\"",
           "f32: results keep f32 (keep_io_types); low: a result computed "
           "in the low type is returned in it">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Print ops per type, casts inserted and weight bytes">,
  ];
  let dependentDialects = ["::mlir::memopt::MemOptDialect"];
}

def MemOptLayout : Pass<"memopt-layout", "::mlir::func::FuncOp"> {
  let summary = "Channels-last (NHWC) regions around the convolutions that are faster in it";
  let description = [{
    Chooses the layout of each convolution (`conv`, `conv_residual`, and in
    a training program the gradients `conv_transpose` and
    `conv_backward_filter`):
    `layout=nhwc` makes every one channels-last, `nchw` none, and `auto`
    (memopt-compile's default) those the target runs faster channels-last,
    from whole-model measurements (docs/layout.md): on `target=cuda`, the
    convolutions of an f16, bf16 or TF32 (`memopt.precision = "tf32"`)
    function that has no grouped convolution (cuDNN's channels-last grouped
    kernels are slow); f32 functions stay NCHW; on `target=host` none (its
    kernels are channels-first). Training programs follow the same policy:
    their filters (variables) keep the ONNX layout and are transposed in the
    step (docs/layout.md, "Training").

    A chosen convolution gets `channels_last`, its filter is transposed to
    KRSC at compile time, and transposes are placed around it; the NHWC ->
    NCHW transposes are then pushed down through the ops that can follow
    the layout (elementwise ops, with broadcast operands permuted for free;
    max / average / global average pooling, batch normalization (inference
    and training), pooling and batch-normalization gradients, which get
    `channels_last`; broadcasts of an operand that moves only 1s; reductions and concatenations, whose axes are
    renumbered; nearest resizes) until they cancel against the next
    convolution's NCHW -> NHWC transpose. Transposes that only move axes of
    size 1 become reshapes (free views). The few left sit at region borders
    and are planned like any op. A function with convolutions gets
    `memopt.layout` ("nhwc" when one was converted, else "nchw"). With `report`,
    prints the convolutions converted and the transposes left.
  }];
  let options = [
    Option<"layout", "layout", "std::string", /*default=*/"\"auto\"",
           "auto, nchw or nhwc">,
    Option<"target", "target", "std::string", /*default=*/"\"cuda\"",
           "The backend whose kernels `auto` decides for: cuda or host">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Print the convolutions converted and the transposes left">,
  ];
  let dependentDialects = ["::mlir::memopt::MemOptDialect"];
}

def MemOptAttentionEngine
    : Pass<"memopt-attention-engine", "::mlir::func::FuncOp"> {
  let summary = "Reserve cuDNN's fused SDPA workspace at each attention the "
                "CUDA target runs on it";
  let description = [{
    On `target=cuda`, each `memopt.attention` and `memopt.attention_grad`
    that cuDNN's fused SDPA can run (f16 / bf16, head sizes multiples of 8
    up to 256, Q holding the whole batch, a bias only over keys a multiple
    of 8, no trained bias) gets `memopt.cudnn_workspace = N`: a bound of
    the workspace the runtime needs there (workspace::cudnnAttentionBytes /
    cudnnAttentionBackwardBytes of include/memopt/Runtime/Workspace.h:
    cuDNN's own, f32 row statistics, K transposed when it is stored
    `[D, Sk]`; the backward's f32 dQ accumulator). The planner promises
    those bytes (getWorkspaceFloor), so the arena, the memory report and
    `--fit` count them; the runtime runs memopt's kernels where cuDNN's
    plan states more (docs/attention.md, "Engines"). On `target=host`
    nothing changes. With `report`, prints one line per function.

    An attention with dropout and its gradients (grouped by Q, K, V, the
    dropout key and stream) run on cuDNN only together: cuDNN draws its own
    mask, which memopt's kernels cannot reproduce. Where every op of the
    group can run on cuDNN (each reserved a workspace above; a gradient with
    a trained bias is not) and `dropout-rng=auto`, each gets
    `dropout_cudnn_rng` and keeps its workspace; otherwise none does, and
    none keeps a cuDNN workspace (memopt's mask on memopt's kernels).
    `dropout-rng=memopt` takes memopt's mask everywhere.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cuda\"",
           "The backend: cuda (reserve) or host (nothing)">,
    Option<"dropoutRng", "dropout-rng", "std::string", /*default=*/"\"auto\"",
           "Attention dropout's mask: auto (cuDNN's generator where cuDNN "
           "runs a forward and its gradients) or memopt (memopt's Philox "
           "mask, memopt's kernels)">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Print the attentions reserved for and their bytes">,
  ];
  let dependentDialects = ["::mlir::memopt::MemOptDialect"];
}

def MemOptFuseNormConv : Pass<"memopt-fuse-norm-conv", "::mlir::func::FuncOp"> {
  let summary = "Fold a training step's batch norm + ReLU into the "
                "convolutions that read it";
  let description = [{
    For each `batch_norm_training {activation = relu}` whose output R is
    read only by forward convolutions (`memopt.conv` without an
    activation, as X; a bias goes along), their filter gradients
    (`conv_backward_filter`, as X), pools (a max or average pool of R and
    its gradient: ResNet's stem) and the ReLU's gradient (`relu_grad(dR,
    R)` feeding the normalization's own `batch_norm_training_grad`): the
    normalization becomes `batch_norm_stats` (mean, 1/std and the
    per-channel scale and shift that apply it), each convolution a
    `norm_relu_conv` and each filter gradient a
    `norm_relu_conv_backward_filter` that normalize X as they load it, each
    pool reads R formed right before it (`norm_relu_apply`), and the
    gradient pair becomes one `batch_norm_relu_grad` that recomputes the
    ReLU's mask from X. R is never kept from the forward to the backward:
    one activation
    per fused normalization leaves the saved set (cuDNN's ConvBNfprop,
    ConvBNwgrad and DReluForkDNorm fusions; docs/layout.md, "Batch norm
    folded into the convolutions").
    A `batch_norm_training` (no activation) whose output is read only by
    `relu(add(Y, Z))` (a residual block's last normalization), with Z
    defined before it, becomes one `batch_norm_training ... residual Z
    {activation = relu}` (cuDNN's NormAddRelu: BN(X) is never stored), and
    each `relu_grad(dR, R)` of that relu that feeds its
    `batch_norm_training_grad` one `batch_norm_add_relu_grad` whose `dZ`
    also replaces the relu gradient's other uses (DReluForkDNorm).
    `mode=auto` fuses on `target=cuda` where the normalization is
    channels-last f16 / bf16 (cuDNN's fused engines); `on` wherever the
    pattern is (the host runs the same ops: its tests); `off` nowhere.
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"auto\"",
           "auto, on or off">,
    Option<"target", "target", "std::string", /*default=*/"\"cuda\"",
           "The backend auto decides for: cuda or host">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Print how many normalizations were fused">,
  ];
  let dependentDialects = ["::mlir::memopt::MemOptDialect"];
}

def MemOptBufferize : Pass<"memopt-bufferize", "::mlir::func::FuncOp"> {
  let summary = "Decide which results are written in place over a dying operand";
  let description = [{
    Bufferization with in-place reuse. View ops (reshape, flatten, squeeze,
    unsqueeze, identity) alias their operand and cost no bytes: that needs no
    rewrite, the liveness analysis groups them. An op that may write in place
    (`BufferBehaviorOpInterface::canWriteInPlace`: elementwise ops,
    normalizations, softmax) gets `memopt.in_place = N` when operand N lives in
    the arena, dies at this op and has the result's byte size. Decisions are
    greedy in program order (as TFLite and XLA do), so run the scheduler
    first. With `report`, prints the bytes saved.
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Print the number of in-place ops and the bytes they save">,
  ];
  let dependentDialects = ["::mlir::memopt::MemOptDialect"];
}

def MemOptFuseEpilogues
    : Pass<"memopt-fuse-epilogues", "::mlir::func::FuncOp"> {
  let summary = "Fold bias adds and activations into gemm and conv";
  let description = [{
    Rewrites the elementwise tails of contractions into the contraction, so
    that they run as the library call's epilogue and their intermediates need
    no arena space: the eight-op tanh GELU of GPT-2-style exports becomes
    `gelu {approximate = "tanh"}`; matmul with a 2-D right operand becomes a
    2-D gemm between aliasing reshapes; a row-vector bias add becomes the
    gemm's C; relu / gelu after a gemm or conv, and relu after a training-mode
    batch normalization, becomes the op's `activation`.
    Only single-use intermediates are fused; one reshape between the
    contraction and its tail is looked through. Runs the dialect's
    canonicalization patterns too.
  }];
  let dependentDialects = ["::mlir::memopt::MemOptDialect"];
}

def MemOptFuseElementwise
    : Pass<"memopt-fuse-elementwise", "::mlir::func::FuncOp"> {
  let summary = "Fuse trees of float elementwise ops into fused_elementwise";
  let description = [{
    Groups unary and binary float ops whose intermediates are used only
    inside the group and have the group result's shape into one
    `memopt.fused_elementwise` (a step program the runtime runs in one
    kernel): no intermediate tensors, each input read once. Broadcast operands stay inputs. At most 8 inputs and 16
    steps per group. With `report`, prints how many ops were fused into how
    many groups.
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Print the number of ops fused">,
  ];
  let dependentDialects = ["::mlir::memopt::MemOptDialect"];
}

def MemOptSchedule : Pass<"memopt-schedule", "::mlir::func::FuncOp"> {
  let summary = "Reorder ops to lower the peak of live activation bytes";
  let description = [{
    Memory-aware scheduling: among valid topological orders, choose one with
    a lower max-live. Like XLA's scheduler it runs several algorithms and
    keeps the best: the original order, a greedy list scheduler that always
    runs the ready op with the smallest net allocation (bytes it allocates
    minus bytes it frees), preferring ops that free the most, and a
    depth-first post-order that finishes one branch before starting the next
    (XLA's DFS scheduler). Every candidate is scored by the liveness analysis
    with the in-place decisions bufferization would take. The order is only
    changed when it lowers max-live. With `report`, prints max-live before
    and after.
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Print max-live before and after and the algorithm chosen">,
  ];
  let dependentDialects = ["::mlir::memopt::MemOptDialect"];
}

def MemOptRematerialize : Pass<"memopt-rematerialize", "::mlir::ModuleOp"> {
  let summary = "Recompute values instead of keeping them, to fit a byte budget";
  let description = [{
    Rematerialization under a byte budget (docs/remat.md). The function, in
    its current op order, becomes the solver's graph (lib/Remat): one node
    per op that produces a buffer (views join their root's node, as
    BufferLiveness groups them), its cost the op's estimated time on an H100
    roofline (CostOpInterface FLOPs and bytes; `kernel-times` gives measured
    times by ONNX node name), its bytes its results'; the function's outputs
    stay live to the end. Ops that must not run twice are computed once:
    anything with memory effects (optimizer updates, `memopt.assign` of
    BatchNormalization statistics), ops outside `allow`, and any
    recomputation that would land after an update of the state it reads.
    The solver's schedule is applied by cloning each recomputed op (and the
    views its users read through) right before its late users, which then
    read the newest copy (XLA's HloRematerialization places its clones the
    same way). Clones carry `memopt.recomputed` and keep the original's
    attributes and location, so a dropout's key and the ONNX node name
    survive. The function gets `memopt.remat` (RematSummary.h: the budget,
    the solver's peaks and the measured kernel times that priced its ops)
    for the memory report.

    Two ways to give the budget:
    - `budget`: bytes in the solver's model of memory (views and in-place
      reuse as bufferization sees them, workspaces at the planner's floor),
      for each function. A budget no schedule meets is an error naming the
      smallest peak found.
    - `memory-budget` (memopt-compile --memory-budget, the same name): only
      the packed arena counts. The module's one function is planned without
      recomputation (scheduleFunction, bufferizeFunction and
      planFunctionMemory of MemoryPhase.h, called directly on a copy); if
      the arena is over the budget, the pass solves at a budget in the
      model's bytes, plans a copy, lowers the solver budget by the excess
      until the arena fits, then bisects for the cheapest fit. A budget no
      recomputation meets is one error giving the smallest arena reached and
      the buffers that hold it there. The function comes back in the order
      its arena was measured in (scheduled, so the pipeline does not
      schedule it again) but not planned: the pipeline plans it.
    With `report`, prints the decisions (and each attempt).
  }];
  let options = [
    Option<"budget", "budget", "int64_t", /*default=*/"0",
           "Peak bytes of the solver's model the schedule must stay within">,
    Option<"memoryBudget", "memory-budget", "int64_t", /*default=*/"0",
           "Bytes the planned arena must fit in (solve and replan until it "
           "does)">,
    Option<"outputsInArena", "outputs-in-arena", "bool", /*default=*/"true",
           "memory-budget: plan the function's outputs inside the arena (as "
           "memopt-compile does)">,
    Option<"planTimeLimit", "plan-time-limit", "double", /*default=*/"0.2",
           "memory-budget: seconds the planner's exact search may take per "
           "probe (the unconstrained plan and the final plan search as long "
           "as memopt-plan-memory does)">,
    Option<"maxProbes", "max-probes", "int", /*default=*/"8",
           "memory-budget: the most solver runs">,
    ListOption<"allow", "allow", "std::string",
               "Op kinds that may be recomputed, e.g. relu,conv,fused_elementwise "
               "(default: every op with a cost)">,
    Option<"maxComputations", "max-computations", "int", /*default=*/"2",
           "The most times one op may be computed">,
    Option<"timeLimit", "time-limit", "double", /*default=*/"5.0",
           "Seconds the solver may search">,
    Option<"method", "method", "std::string", /*default=*/"\"auto\"",
           "auto, fast or exact (lib/Remat)">,
    Option<"offload", "offload", "bool", /*default=*/"false",
           "Also copy saved values to pinned host memory and back where "
           "that is cheaper than recomputing them (docs/offload.md)">,
    Option<"offloadBandwidth", "offload-bandwidth", "double",
           /*default=*/"40.0",
           "Copy bandwidth per direction, GB/s (PCIe 5, pinned)">,
    Option<"kernelTimes", "kernel-times", "std::string", /*default=*/"\"\"",
           "JSON file of measured kernel times {\"NODE\": seconds}">,
    Option<"bucketMib", "bucket-mib", "double", /*default=*/"0",
           "memory-budget: plan each candidate with the data-parallel "
           "gradient buckets of this size (memopt-bucket-collectives), as "
           "memopt-compile's pipeline plans the chosen one; 0: none">,
    Option<"gatherMib", "gather-mib", "double", /*default=*/"0",
           "memory-budget: plan each candidate with the ZeRO-3 gather groups "
           "of this size prefetched one ahead (memopt-bucket-collectives); "
           "0: none">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Print the ops recomputed, the FLOPs and time added and the peaks">,
  ];
  let dependentDialects = ["::mlir::memopt::MemOptDialect"];
}

def MemOptPlanMemory : Pass<"memopt-plan-memory", "::mlir::ModuleOp"> {
  let summary = "Give every intermediate tensor a fixed offset in one arena";
  let description = [{
    Static memory planning. The liveness analysis groups tensors into
    storages (views and in-place results share one) with live ranges; the
    planner library (lib/Planner) packs the arena storages into one arena and
    its independent validator checks the result. The plan is recorded in the
    IR so that lowering only reads it:
    - every executed op gets `memopt.offsets`: the arena offset of each
      result's storage, -1 for results outside the arena (function outputs,
      which are the caller's buffers);
    - an op whose kernel needs scratch (a convolution's workspace) gets
      `memopt.workspace_offset` and `memopt.workspace_size`;
    - every constant gets `memopt.weight_offset` in the weight region;
    - the function gets `memopt.arena_size`, `memopt.weights_size`,
      `memopt.max_live` and `memopt.output_offsets` (per result: its arena
      offset, or -1 for a caller's buffer).
    With `outputs-in-arena`, function outputs are planned in the arena too,
    live from their producer to the end (what memopt-compile does: the
    driver then reads results straight from the arena, so an output reuses
    bytes that died before it was produced, e.g. GPT-2's logits).
    The memory report (JSON, text, SVG timeline, HTML page) is written on
    request.
  }];
  let options = [
    Option<"algorithm", "algorithm", "std::string", /*default=*/"\"auto\"",
           "best-fit-size, best-fit-lifetime, exact or auto">,
    Option<"timeLimit", "time-limit", "double", /*default=*/"10.0",
           "Seconds the exact search may take per function">,
    Option<"alignment", "alignment", "int64_t", /*default=*/"256",
           "Byte alignment of every arena and weight offset">,
    Option<"capacity", "capacity", "int64_t", /*default=*/"0",
           "Fail unless the arena fits in this many bytes (0: no limit)">,
    Option<"reportJson", "report", "std::string", /*default=*/"\"\"",
           "Write the memory report as JSON to this file">,
    Option<"reportSvg", "svg", "std::string", /*default=*/"\"\"",
           "Write the memory timeline picture (SVG) to this file">,
    Option<"reportHtml", "html", "std::string", /*default=*/"\"\"",
           "Write a self-contained HTML report to this file">,
    Option<"printReport", "print", "bool", /*default=*/"false",
           "Print the text report on stdout">,
    Option<"outputsInArena", "outputs-in-arena", "bool", /*default=*/"false",
           "Plan the function's outputs inside the arena">,
  ];
  let dependentDialects = ["::mlir::memopt::MemOptDialect"];
}


//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

def MemOptMakeTrainable
    : Pass<"memopt-make-trainable", "::mlir::func::FuncOp"> {
  let summary = "Turn float ONNX initializers into trainable memopt.variable ops";
  let description = [{
    Every float `memopt.constant` that the importer made from an ONNX
    initializer (it carries `memopt.initializer`) and that is one of the
    model's parameters becomes a `memopt.variable` with role `parameter`.
    A parameter is what the importer's `memopt.state_kind` calls one (the
    exporter's graph signature: module buffers and lifted constants are
    not), or any initializer without that attribute; initializers matching
    a `train-params` pattern are trained whatever their kind, and those
    matching a `freeze` pattern are not. A pattern is a glob when it holds
    `*`, `?` or `[`, else a name prefix. Run it before canonicalization: a
    variable is never folded into its users. Parameters that later get no
    gradient (e.g. BatchNormalization's running statistics) are turned back
    into constants by memopt-autodiff. A pattern that matches no float
    initializer is an error (it is almost always a typo).

    Training-mode dropouts (`memopt.dropout` without a key: ONNX Dropout
    with `training_mode` true) become active: they read a new `random_key`
    variable `memopt.random_key` (i64 `[seed, micro-batch]`, written by the
    driver before each run) and get streams 1, 2, ... in program order.

    Every BatchNormalization exported with `training_mode=1` (and, with
    `bn-batch-stats`, every other one too) becomes its training-mode form, as
    ONNX defines it for `training_mode=1`: a `memopt.batch_norm_training`
    normalizes with the mean and (population) variance of the batch over all
    axes but 1 (and returns the mean and 1/std its gradient reads), and the
    running statistics become `statistic` variables that a
    `memopt.batch_norm_running_update` updates in place with
    `running = running * momentum + batch * (1 - momentum)`.
  }];
  let options = [
    ListOption<"freeze", "freeze", "std::string",
               "Initializer name patterns (globs or prefixes) that are not "
               "trained">,
    ListOption<"trainParams", "train-params", "std::string",
               "Initializer name patterns (globs or prefixes) trained "
               "whatever the exporter calls them">,
    Option<"batchStatistics", "bn-batch-stats", "bool", /*default=*/"false",
           "BatchNormalization normalizes with the batch's statistics and "
           "updates its running mean and variance (training mode)">,
  ];
  let dependentDialects = ["::mlir::memopt::MemOptDialect"];
}

def MemOptAppendLoss : Pass<"memopt-append-loss", "::mlir::func::FuncOp"> {
  let summary = "Append the training loss; the function returns it alone";
  let description = [{
    `kind=cross-entropy`: softmax cross-entropy over the last axis of the
    model output (`output`, or the only float result), mean over the other
    axes, against a new i64 argument `labels` of the output's shape without
    its last axis; `ignore-index` rows count nothing. `kind=mse`: mean
    squared error against a new argument `target` of the output's type.
    `kind=output`: the chosen output already is the scalar loss. The
    function then returns the f32 scalar loss only (result name `loss`).
    After mixed precision (training), an output that is an f16 / bf16 value
    widened by a cast gives cross-entropy the low logits themselves: the
    kernel computes in f32 whatever the logits' type, so the loss is the same
    and no f32 copy of the logits (nor of their gradient) exists.
  }];
  let options = [
    Option<"kind", "kind", "std::string", /*default=*/"\"cross-entropy\"",
           "cross-entropy, mse or output">,
    Option<"output", "output", "std::string", /*default=*/"\"\"",
           "The model output the loss is computed from (default: the only "
           "float output)">,
    Option<"ignoreIndex", "ignore-index", "int64_t", /*default=*/"-100",
           "cross-entropy: rows with this label count nothing">,
    Option<"fuseHead", "fuse-head", "bool", /*default=*/"true",
           "cross-entropy of a bias-free linear layer's output (a language "
           "model's head): one memopt.linear_cross_entropy, which never "
           "holds the logits">,
  ];
  let dependentDialects = ["::mlir::memopt::MemOptDialect"];
}

def MemOptAutodiff : Pass<"memopt-autodiff", "::mlir::func::FuncOp"> {
  let summary = "Reverse-mode autodiff of the loss and the optimizer update";
  let description = [{
    The function returns one f32 scalar (memopt-append-loss). Its ops are
    visited in reverse; each op on a path from a `parameter` variable to the
    loss builds its vector-Jacobian product (GradientOpInterface), and
    gradients of values with several users are summed. Integer and shape
    values need none; a float op on that path without a rule is an error
    naming the ONNX node. As soon as a parameter's gradient is complete its
    optimizer update (`memopt.sgd_update` / `memopt.adamw_update`) is
    emitted, so a gradient dies at its update instead of living to the end
    of the step (PyTorch keeps every gradient until optimizer.step()).
    Optimizer state and the learning rate / step count are new variables.
    With `accumulate=K` (K > 1) the loss's gradient is seeded with 1 / K
    (PyTorch's `(loss / K).backward()`), every parameter gets a
    `gradient_accumulator` variable `NAME.grad`, and each update op takes it
    with the `micro_step` variable: it sums the gradient into the
    accumulator and updates only on micro-step K - 1 (docs/training.md).
    Parameters without a gradient become constants again. With `report`,
    prints the parameters, their bytes and the optimizer state added.

    `loss-scale=dynamic` (f16 training): PyTorch GradScaler's dynamic loss
    scaling on the device. A `loss_scale` variable (`loss-scale-init`,
    2^16) multiplies the backward's seed; a `loss_scale_state` variable
    `[clean steps, skipped steps]` follows it. The updates no longer ride
    on the backward: one `memopt.found_inf` over every gradient of the step
    comes first (a skip decision needs them all), then the updates, which
    unscale inside their kernels and write nothing when it found an inf or
    NaN, then `memopt.update_loss_scale` (`loss-scale-backoff`,
    `loss-scale-growth`, `loss-scale-interval`). The gradients that wait
    for the check are the low-precision ones wherever the forward ran low.
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"sgd\"",
           "sgd or adamw">,
    Option<"learningRate", "lr", "double", /*default=*/"0.01",
           "Learning rate compiled into the program (the executable may "
           "override it)">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0",
           "SGD momentum">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"-1.0",
           "Weight decay (default: 0 for sgd, 0.01 for adamw, as PyTorch)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "AdamW epsilon">,
    Option<"accumulate", "accumulate", "int64_t", /*default=*/"1",
           "Micro-batches per optimizer step: gradients of loss / K are "
           "summed in persistent gradient_accumulator variables and the "
           "updates run on the last micro-step (micro_step variable)">,
    Option<"lossScale", "loss-scale", "std::string", /*default=*/"\"none\"",
           "none or dynamic (GradScaler's dynamic loss scaling)">,
    Option<"lossScaleInit", "loss-scale-init", "double",
           /*default=*/"65536.0", "Initial loss scale">,
    Option<"lossScaleGrowth", "loss-scale-growth", "double",
           /*default=*/"2.0", "Factor after loss-scale-interval clean steps">,
    Option<"lossScaleBackoff", "loss-scale-backoff", "double",
           /*default=*/"0.5", "Factor after a step with inf / NaN gradients">,
    Option<"lossScaleInterval", "loss-scale-interval", "int64_t",
           /*default=*/"2000", "Clean steps before the scale grows">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Print the parameters trained and the state added">,
  ];
  let dependentDialects = ["::mlir::memopt::MemOptDialect"];
}

def MemOptWeightCasts : Pass<"memopt-weight-casts", "::mlir::func::FuncOp"> {
  let summary = "Keep a parameter's low-precision copy for the backward or "
                "cast it again there";
  let description = [{
    After mixed precision (training) and memopt-autodiff, each f32 parameter
    that runs low is read through one cast, used by the forward op and by
    the backward ops that read the weight (a matmul's input gradient). Kept,
    the copy is an arena buffer alive from the forward to the backward, the
    whole middle of the step, as PyTorch's autocast weight cache keeps it;
    cast again, a second cast right before the first backward user makes a
    copy that lives only through the backward users, and the forward copy
    dies after the forward.

    `policy=auto` decides for all parameters together by bytes and time:
    recasting adds one elementwise kernel per parameter (f32 read, low
    write: the roofline time of the casts, CostModel.h) and takes the low
    copies out of the tensors held across the forward/backward boundary.
    It recasts when the fraction of those held bytes it saves is larger
    than the fraction of the step's estimated time it adds (the same
    exchange rate as a 1% slower step for 1% less memory). `keep` and
    `recast` force one choice. The function gets `memopt.weight_casts`
    (policy, decision, bytes, seconds), which the memory report prints;
    with `report`, a line with the same.
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"auto\"",
           "auto, keep or recast">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Print the decision and its figures">,
  ];
  let dependentDialects = ["::mlir::memopt::MemOptDialect"];
}

def MemOptDataParallel : Pass<"memopt-data-parallel", "::mlir::func::FuncOp"> {
  let summary = "Data-parallel training step: gradient collectives and "
                "ZeRO-sharded optimizer state";
  let description = [{
    Runs after memopt-autodiff. The step becomes one rank's step of `ranks`
    data-parallel ranks, each on its own micro-batch (the function's input
    shapes are one rank's). Right before each optimizer update, where its
    gradient is complete:
      - `shard=none` (DDP): `memopt.all_reduce` averages the gradient over
        the ranks, in place; the update is unchanged.
      - `shard=optimizer` (ZeRO-1) and `shard=gradients` (ZeRO-2):
        `memopt.reduce_scatter` gives this rank its shard of the averaged
        gradient; the optimizer state becomes shard-shaped variables; the
        update gets `shards = ranks` and updates only the parameter
        elements the rank owns; `memopt.all_gather` after it gives every
        rank the whole updated parameter.
      - `shard=parameters` (ZeRO-3, FSDP FULL_SHARD): as `gradients`, and
        the parameter variable holds this rank's shard too
        (`memopt.shards = ranks`); the update is a plain update of the
        shard and `memopt.gather_parameter` gathers the whole parameter
        into the arena right before its first forward use and again before
        its first backward use.
    With gradient accumulation (the updates' `accumulation_steps` K > 1),
    none and optimizer move the accumulator into the collective, which sums
    the gradient on every micro-step and communicates on the last one only
    (the accumulators stay whole, as DDP's no_sync() keeps them); the update
    and the all-gather run on the last micro-step only. `gradients` reduces
    on every micro-step and keeps shard-shaped accumulators (1/N of the
    bytes, DeepSpeed ZeRO-2's and FSDP's choice). The function gets
    `memopt.data_parallel = {ranks, shard, reduce_dtype}`. With `report`,
    prints the collectives and the per-rank state bytes.

    Mixed precision (memopt-mixed-precision's f16 / bf16 gradients): with
    `reduce-dtype=f32` (the default, PyTorch DDP + AMP's numerics: the f32
    parameters' gradients are reduced in f32) a gradient is widened
    (`memopt.cast`) before its collective; with `reduce-dtype=low` the
    collective reduces the f16 / bf16 gradient itself (half the bytes
    sent; DeepSpeed's fp16 engine and FSDP's reduce_dtype do this), except
    where an f32 accumulator is reduced (none / optimizer with
    accumulation: refused). Dynamic loss scaling: every `memopt.found_inf`
    flag is all-reduced with `max` before the updates and the scale update
    read it, so every rank skips the same steps and keeps the same scale
    (DeepSpeed's CheckOverflow, FSDP's ShardedGradScaler).
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", /*default=*/"1",
           "Data-parallel ranks (processes or threads) the step runs on">,
    Option<"shard", "shard", "std::string", /*default=*/"\"none\"",
           "none (all-reduce), optimizer (ZeRO-1), gradients (ZeRO-2) or "
           "parameters (ZeRO-3)">,
    Option<"reduceDtype", "reduce-dtype", "std::string", /*default=*/"\"f32\"",
           "Mixed precision: reduce f16 / bf16 gradients in f32 (widened "
           "first) or in their low type">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Print the collectives and the per-rank state bytes">,
  ];
  let dependentDialects = ["::mlir::memopt::MemOptDialect"];
}

def MemOptBucketCollectives
    : Pass<"memopt-bucket-collectives", "::mlir::func::FuncOp"> {
  let summary = "Groups the gradient collectives into buckets that overlap "
                "the backward";
  let description = [{
    After the last scheduling of a data-parallel step (memopt-data-parallel
    put each gradient's all-reduce or reduce-scatter right before its
    update): walks the gradient collectives in the order the schedule
    completes their gradients (the reverse of the forward, as PyTorch DDP's
    Reducer fills its buckets) and closes a bucket when its gradient bytes
    reach the cap (`first-bucket-mib` for the first bucket, DDP's 1 MiB, so
    that communication starts early; `bucket-mib` after it, DDP's 25 MiB).
    A bucket also closes before a collective that needs its results. Each
    bucket's collectives get `bucket = B` and move together to where the
    schedule put the last of them (after its gradient is produced), where
    they are issued as one group. A `memopt.wait_collectives` over every
    buffer the bucket reads or writes goes after the next bucket's
    collectives (the last bucket's after its own), right before the first
    op that needs the bucket; the ops that use the bucket's results (its
    updates, a ZeRO all-gather, and what depends on them) move after that
    wait, keeping their order. So the collectives of bucket B run
    while the backward computes bucket B + 1's gradients, and an update
    waits on its own bucket only. The gradients of a bucket stay alive until
    its wait: at most two buckets' worth more than without overlap. The
    flag all-reduce of dynamic loss scaling and the all-gathers are not
    bucketed (they run where they are, synchronously).

    ZeRO-3's `memopt.gather_parameter` ops (shard=parameters) are grouped
    in the schedule's order into gather groups of at most `gather-mib` MiB
    (a group closes at the gather that reaches the cap: about a layer, as
    FSDP2's per-module all-gather), numbered after the gradient buckets.
    Group 0 is issued where its first gather was; group k right after group
    k - 1's wait, before the first op that reads group k - 1 (the next
    layer's parameters are gathered while this layer computes, in the
    forward and, in the schedule's reverse order, in the backward); a
    `memopt.wait_collectives` over the group's shards and gathered buffers
    goes right before the first op that reads any of them. A gathered
    buffer is alive from its group's issue, so the planner keeps its bytes
    from any other buffer while the communication stream writes it.
    With `report`, prints the buckets' and gather groups' count and bytes.
  }];
  let options = [
    Option<"bucketMib", "bucket-mib", "double", /*default=*/"25",
           "Cap of a bucket's gradient bytes in MiB (0: no buckets, every "
           "collective synchronous where it is)">,
    Option<"firstBucketMib", "first-bucket-mib", "double", /*default=*/"1",
           "Cap of the first bucket in MiB">,
    Option<"gatherMib", "gather-mib", "double", /*default=*/"25",
           "Cap of a ZeRO-3 gather group's gathered bytes in MiB (0: every "
           "gather synchronous where it is)">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Print the buckets">,
  ];
  let dependentDialects = ["::mlir::memopt::MemOptDialect"];
}

def MemOptOffloadOptimizer
    : Pass<"memopt-offload-optimizer", "::mlir::func::FuncOp"> {
  let summary = "f32 masters and optimizer state in pinned host memory, the "
                "update on the CPU (--offload optimizer)";
  let description = [{
    ZeRO-Offload's split (Ren et al., 2021; DeepSpeed's CPU Adam, torchao's
    CPUOffloadOptimizer). Runs after memopt-autodiff. Every `sgd_update` /
    `adamw_update` gets a `master`: a new f32 variable `NAME.master` of role
    `master` whose initial value is the parameter's. The master, the
    momentum buffer or Adam moments and the gradient accumulator are placed
    on the host (`memopt.placement = "host"`): memopt-plan-memory gives
    them offsets in the host state region instead of the device weight
    region. The lowering then copies the gradient to pinned host memory
    right after its update point, runs the update on the CPU (overlapped
    with the rest of the backward) and copies the master back into the
    device's working parameter before the step ends (docs/offload.md).
    With `accumulators-on-device` the gradient accumulators stay in the
    device weight region: the device sums each micro-batch's gradient and
    the update stages the sum (--offload-accumulators device).
    With `low-parameters` (the default), a parameter whose every device
    reader but its update reads it through a `memopt.cast` to one f16 /
    bf16 type becomes that type: the casts go, the readers read the
    variable, and the update writes the rounded master into it (see
    MemOpt_MasterArg), so the device holds 2 bytes a parameter instead of
    4 plus a low copy per step; its initial value is the master's.
    Parameters read in f32 anywhere stay f32.
    Refused: sharded updates (--shard) and dynamic loss scaling with
    gradient accumulation on the host (the overflow check reads the
    accumulators). With `report`, one line with the bytes moved.
  }];
  let options = [
    Option<"report", "report", "bool", /*default=*/"false",
           "Print the bytes placed on the host">,
    Option<"accumulatorsOnDevice", "accumulators-on-device", "bool",
           /*default=*/"false",
           "Keep the gradient accumulators on the device">,
    Option<"lowParameters", "low-parameters", "bool", /*default=*/"true",
           "Make a parameter that every device reader casts to f16 / bf16 "
           "that type (the host master stays f32)">,
  ];
  let dependentDialects = ["::mlir::memopt::MemOptDialect"];
}

#endif // MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_TD
