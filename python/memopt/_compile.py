"""memopt.compile and memopt.Training: the compile driver (memopt._compiler, the library behind
memopt-compile) called in-process, its options filled from Python arguments."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import weakref
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Sequence, Union

from ._errors import CompileError, InputError
from ._program import PathLike, Program

# Where `pip install` puts the runtime's headers and archives for the programs memopt.compile
# builds (include/, lib/). Absent in the build tree, where the driver finds them itself.
_SHARE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "share")


@dataclass(frozen=True)
class Training:
    """Compile one training step instead of inference: the loss, reverse-mode gradients and the
    optimizer update, planned in one arena (memopt-compile --train; docs/training.md).

    loss              'cross-entropy' (a new int64 input `labels`), 'mse' (a new input
                      `target` shaped like the output) or 'output' (the model's output is the
                      loss).
    loss_output       the model output the loss reads (default: the first).
    ignore_index      cross-entropy: rows with this label count nothing.
    optimizer         'sgd' or 'adamw' (PyTorch's definitions).
    lr                learning rate (default 0.01 for sgd, 0.001 for adamw); train_step can
                      override it per step.
    momentum          SGD momentum.
    weight_decay      default 0 for sgd, 0.01 for adamw.
    beta1, beta2, eps AdamW's.
    accumulate        micro-batches per optimizer step (--accumulate K): gradients of K
                      train_step calls are summed (each of loss / K), the update runs on the
                      K-th.
    batch_statistics  BatchNormalization normalizes with batch statistics and updates its running
                      mean and variance (training mode; --bn-batch-stats).
    freeze            initializer names (prefixes or globs) that are not trained.
    train_params      initializer names (prefixes or globs) trained whatever the exporter
                      calls them; by default only the model's parameters are (module buffers
                      and the exporter's constants are not).
    fuse_head         'on' (default) or 'off': cross-entropy of a language model's head (a
                      bias-free linear layer) as one op without the [tokens, vocabulary]
                      logits (--fuse-head).

    Mixed-precision training (with precision='fp16' or 'bf16'; docs/training.md):
    loss_scale        'auto' (dynamic for fp16, none otherwise), 'dynamic' (GradScaler's) or
                      'none'; loss_scale_init, loss_scale_growth, loss_scale_backoff,
                      loss_scale_interval: GradScaler's settings (65536, 2, 0.5, 2000).
    weight_casts      'auto', 'keep' or 'recast': the parameters' low-precision copies.

    Data parallel (docs/data-parallel.md, docs/python.md):
    data_parallel     N: one rank's step of N ranks (the model's inputs, and input_shapes,
                      are one rank's micro-batch; Program.train_step takes the global batch,
                      N micro-batches along axis 0). 'auto': N is the launcher's WORLD_SIZE
                      (torchrun), as the executable reads it; an error when it is not set.
                      A host program runs its N ranks as threads of this process; a CUDA
                      program is one rank per process, RANK of the launcher's environment.
    shard             'none' (all-reduce), 'optimizer' (ZeRO-1), 'gradients' (ZeRO-2) or
                      'parameters' (ZeRO-3, FSDP's full shard).
    reduce_dtype      'f32' or 'low': the type fp16 / bf16 gradients are reduced in (PyTorch's
                      FSDP MixedPrecisionPolicy.reduce_dtype; docs/data-parallel.md).
    bucket_mib        the cap in MiB of a bucket of gradient collectives overlapping the
                      backward (25, the first bucket 1, as DDP; 0: no overlap).
    gather_mib        ZeRO-3: the cap in MiB of a group of parameter gathers issued together
                      one group ahead of its use (25; 0: every gather where it is).

    Host memory (docs/offload.md):
    offload           what lives in pinned host memory: 'none', 'activations', 'optimizer',
                      a comma list ('activations,optimizer') or a list of them. activations:
                      the memory budget's third choice, saved activations copied to the host
                      and back where that hides under compute or costs less than recomputing
                      them (needs memory_budget, or memopt.fit); optimizer: f32 master weights
                      and optimizer state on the host, the update on the CPU (--offload).
    offload_accumulators  with offload 'optimizer' and accumulate: 'host' (the CPU sums the
                      gradients) or 'device' (the GPU sums them in f32, the CPU updates from
                      the sum on the last micro-batch only).

    None leaves the compiler's default (docs/cli.md lists them all).
    """

    loss: str = "cross-entropy"
    loss_output: Optional[str] = None
    ignore_index: int = -100
    optimizer: str = "sgd"
    lr: Optional[float] = None
    momentum: float = 0.0
    weight_decay: Optional[float] = None
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    accumulate: int = 1
    batch_statistics: bool = False
    freeze: Sequence[str] = field(default_factory=tuple)
    train_params: Sequence[str] = field(default_factory=tuple)
    fuse_head: str = "on"
    # Set through the option table when not None (_set_table_options).
    loss_scale: Optional[str] = None
    loss_scale_init: Optional[float] = None
    loss_scale_growth: Optional[float] = None
    loss_scale_backoff: Optional[float] = None
    loss_scale_interval: Optional[int] = None
    weight_casts: Optional[str] = None
    data_parallel: Union[None, int, str] = None
    shard: Optional[str] = None
    reduce_dtype: Optional[str] = None
    bucket_mib: Optional[float] = None
    gather_mib: Optional[float] = None
    offload: Union[None, str, Sequence[str]] = None
    offload_accumulators: Optional[str] = None

    def _fill(self, options: Any) -> None:
        options.enabled = True
        options.loss = self.loss
        options.loss_output = self.loss_output or ""
        options.ignore_index = int(self.ignore_index)
        options.optimizer = self.optimizer
        # < 0: the optimizer's default, as memopt-compile --lr does.
        options.learning_rate = -1.0 if self.lr is None else float(self.lr)
        options.momentum = float(self.momentum)
        options.weight_decay = -1.0 if self.weight_decay is None else float(self.weight_decay)
        options.beta1 = float(self.beta1)
        options.beta2 = float(self.beta2)
        options.eps = float(self.eps)
        if isinstance(self.accumulate, bool) or not isinstance(self.accumulate, int) \
                or self.accumulate < 1:
            raise InputError(f"accumulate {self.accumulate!r}: expected a whole number of "
                             f"micro-batches, at least 1")
        options.accumulate = int(self.accumulate)
        options.batch_statistics = bool(self.batch_statistics)
        for name in ("freeze", "train_params"):
            patterns = getattr(self, name)
            patterns = [patterns] if isinstance(patterns, str) else list(patterns)
            setattr(options, name, [str(pattern) for pattern in patterns])
        if self.fuse_head not in ("on", "off"):
            raise InputError(f"fuse_head {self.fuse_head!r}: expected 'on' or 'off'")
        options.fuse_head = self.fuse_head == "on"

    def _table_values(self) -> Dict[str, Any]:
        """The fields the option table sets (compile's _set_table_options), data_parallel
        resolved: 'auto' is the launcher's WORLD_SIZE."""
        values = {name: getattr(self, name) for name in self.__dataclass_fields__}
        ranks = self.data_parallel
        if ranks == "auto":
            world = os.environ.get("WORLD_SIZE", "")
            if not world.isdigit() or int(world) < 1:
                raise InputError(
                    "data_parallel='auto' takes the number of ranks from the launcher's "
                    f"WORLD_SIZE, which is {'not set' if not world else repr(world)}: launch "
                    "with torchrun (or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT), or "
                    "give the number of ranks")
            values["data_parallel"] = int(world)
        elif ranks is not None and (isinstance(ranks, (bool, float))
                                    or not isinstance(ranks, (int, str))):
            raise InputError(f"data_parallel {ranks!r}: expected a number of ranks or 'auto' "
                             f"(the launcher's WORLD_SIZE)")
        # Other values go through the option table, which parses them as --data-parallel
        # does (0 or "x" get its message).
        return values


# The keywords filled by hand above and in compile(); every other keyword of the option table
# (CompileOptions.def, _compiler.options()) goes through _compiler.set_option, which parses
# it as the command line does: a new option is a keyword of compile() (or a Training field)
# defaulting to None, nothing more.
_FILLED_BY_HAND = {"model", "target", "precision", "memory_budget", "remat_allow",
                   "remat_max_computations", "layout", "input_shapes", "train", "arch",
                   "loss", "loss_output", "ignore_index", "optimizer", "lr",
                   "momentum", "weight_decay", "beta1", "beta2", "eps", "accumulate",
                   "batch_statistics", "freeze", "train_params", "fuse_head"}


def _option_text(value: Any) -> str:
    """A Python value as the command line spells it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(item) for item in value)
    return str(os.fspath(value) if isinstance(value, os.PathLike) else value)


def _set_table_options(compiler: Any, options: Any, struct: str, values: Mapping[str, Any]) -> None:
    """Sets the table's options of `struct` ('Compile' or 'Training') whose Python keyword is in
    `values` and not None."""
    for info in compiler.options():
        name = info["python"]
        if info["struct"] != struct or not name or name in _FILLED_BY_HAND:
            continue
        value = values.get(name)
        if value is not None:
            compiler.set_option(options, name, _option_text(value))


def _shape_spec(name: str, shape: Any) -> str:
    try:
        dims = [int(d) for d in shape]
    except (TypeError, ValueError):
        raise InputError(f"input_shapes['{name}'] = {shape!r} is not a sequence of "
                         f"integers") from None
    return f"{name}={'x'.join(str(d) for d in dims)}"


def _write_model(model: Any, folder: str) -> str:
    """An onnx.ModelProto written into `folder` (external data for models past protobuf's 2 GiB
    limit)."""
    path = os.path.join(folder, "model.onnx")
    if model.ByteSize() < (1 << 31) - (1 << 20):
        with open(path, "wb") as stream:
            stream.write(model.SerializeToString())
    else:
        import onnx
        onnx.save_model(model, path, save_as_external_data=True, location="model.onnx.data")
    return path


def compile(model: Union[PathLike, Any], *, target: str = "host", precision: str = "fp32",
            output_precision: Optional[str] = None,
            memory_budget: Union[None, int, str] = None,
            remat_allow: Optional[Sequence[str]] = None,
            remat_max_computations: int = 2, layout: str = "auto",
            input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
            train: Optional[Training] = None, workdir: Optional[PathLike] = None,
            arch: str = "sm_90", verbose: bool = False,
            remat_time_limit: Optional[float] = None,
            remat_kernel_times: Optional[PathLike] = None,
            fuse_attention: Optional[bool] = None, fuse_epilogues: Optional[bool] = None,
            fuse_elementwise: Optional[bool] = None, fuse_norm_conv: Optional[str] = None,
            attention_dropout_rng: Optional[str] = None,
            no_plan: Optional[bool] = None,
            outputs_in_arena: Optional[bool] = None, lower_only: Optional[bool] = None,
            timing: Optional[bool] = None,
            split_lines: Optional[int] = None, split_part_lines: Optional[int] = None,
            jobs: Optional[int] = None,
            offload_bandwidth: Optional[float] = None,
            fold_limit_elements: Optional[int] = None,
            options: Optional[Mapping[str, Any]] = None) -> Program:
    """Compiles an ONNX model into a memopt program and loads it.

    model          a path to an .onnx file (or a planned .mlir), or an onnx.ModelProto.
    target         'host' (the CPU backend, anywhere) or 'cuda' (needs nvcc to build; runs on a
                   GPU of compute capability `arch`).
    precision      'fp32', 'fp16' or 'bf16' (weights and activations in half precision where
                   safe, inputs and outputs stay float32), or 'tf32' (float32 tensors, TF32
                   math in convolutions and matrix products on CUDA).
    output_precision  with precision 'fp16' / 'bf16': 'f32' (the default: outputs float32) or
                   'low': outputs the model computes in the low type are returned in it, as
                   autocast does (float16 arrays; bfloat16 as ml_dtypes.bfloat16, or
                   torch.bfloat16 with out='torch'), half the output bytes; outputs computed
                   in float32 and a training step's loss stay float32
                   (docs/mixed-precision.md, "Outputs stored in f32").
    memory_budget  the most bytes the activation arena may take: an int, or '2GiB', '512MiB',
                   ... When the plan needs more, ops are recomputed until it fits
                   (docs/remat.md); a budget no recomputation meets fails with the smallest
                   arena reached.
    remat_allow    op kinds that may be recomputed to meet memory_budget (e.g. ['relu',
                   'fused_elementwise']; default: every op with a cost).
    remat_max_computations  how often one op may be computed to meet memory_budget (3
                   reaches smaller arenas at less added compute on GPT-2; docs/remat.md).
    layout         'auto', 'nchw' or 'nhwc': the layout of convolution regions (auto:
                   channels-last where it is faster on CUDA; docs/layout.md).
    input_shapes   {input name: shape} fixing dynamic dimensions, e.g. {'input': (8, 3, 224,
                   224)}.
    train          memopt.Training(...): compile one training step (Program.train_step).
    workdir        the folder for the program's files (PREFIX.so, .weights, .report.json,
                   .timeline.svg, the generated source); kept. Default: a temporary folder,
                   removed with the Program.
    arch           the GPU architecture for target='cuda' (nvcc's sm_NN).
    verbose        print the compiler's phase lines and reports.
    remat_time_limit, remat_kernel_times, fuse_attention, fuse_epilogues, fuse_elementwise,
    fuse_norm_conv, attention_dropout_rng, no_plan, outputs_in_arena, lower_only, timing
                   memopt-compile's --remat-time-limit, --remat-kernel-times,
                   --no-fuse-attention (fuse_attention=False), --no-fuse-epilogues,
                   --no-fuse-elementwise, --fuse-norm-conv ('auto', 'on' or 'off'),
                   --attention-dropout-rng ('auto' or 'memopt'), --no-plan,
                   --separate-outputs
                   (outputs_in_arena=False), --lower-only and --timing (docs/cli.md); None
                   leaves the compiler's default.
    split_lines, split_part_lines, jobs
                   --split-lines, --split-part-lines and --jobs: a large program's run
                   function in functions of about split_lines lines, in files compiled
                   `jobs` at a time (docs/lowering.md, "Split programs"); None leaves the
                   compiler's default.
    offload_bandwidth
                   --offload-bandwidth GBPS: the host copy bandwidth that
                   Training(offload='activations') and the fit's offload choices are priced
                   at (docs/offload.md).
    fold_limit_elements
                   --fold-limit-elements N: ops of constants with no folder are evaluated at
                   import by the host kernels up to N elements per operand and result (1 Mi by
                   default; 0 turns it off; docs/import.md).
    options        any option of docs/cli.md's reference by its flag, pipeline or Python name,
                   e.g. {'remat-time-limit': 10, 'loss-scale': 'dynamic'} (values as the
                   command line spells them, lists as Python lists); applied last.

    Returns the memopt.Program, loaded (a CUDA program loads at its first use, so that it can
    be compiled on a machine without a GPU and run elsewhere: memopt.load(workdir/STEM)). Raises memopt.CompileError with the compiler's message
    (naming the ONNX node) when the model cannot be compiled.

    Example:
        program = memopt.compile("model.onnx", memory_budget="64MiB",
                                 input_shapes={"input": (1, 3, 224, 224)})
        print(program.report["arena_bytes"], program.report["max_live_bytes"])
        outputs = program.run({"input": numpy.ones((1, 3, 224, 224), numpy.float32)})
    """
    # Every keyword: those of the option table not filled by hand below go through
    # _compiler.set_option, so a new table option needs only its keyword in the signature.
    table_values = dict(locals())
    from . import _compiler  # the compiler (MLIR): not needed to load and run programs

    extra_options = dict(options or {})
    options = _compiler.CompileOptions()
    if target not in ("host", "cuda"):
        raise InputError(f"target '{target}': expected 'host' or 'cuda'")
    options.target = getattr(_compiler.Target, target)
    options.precision = _compiler.parse_precision(str(precision))
    if memory_budget is not None:
        if isinstance(memory_budget, bool) or not isinstance(memory_budget, (int, str)):
            raise InputError(f"memory_budget {memory_budget!r}: expected bytes (int) or a size "
                             f"such as '2GiB'")
        if isinstance(memory_budget, int):
            if memory_budget <= 0:
                raise InputError(f"memory_budget {memory_budget}: expected a positive number "
                                 f"of bytes")
            options.memory_budget = memory_budget
        else:
            options.memory_budget = _compiler.parse_byte_size(memory_budget)
    if remat_allow is not None:
        kinds = [remat_allow] if isinstance(remat_allow, str) else list(remat_allow)
        options.remat_allow = [str(kind) for kind in kinds]
    if isinstance(remat_max_computations, bool) or \
            not isinstance(remat_max_computations, int) or remat_max_computations < 1:
        raise InputError(f"remat_max_computations {remat_max_computations!r}: expected a "
                         f"whole number, at least 1")
    options.remat_max_computations = remat_max_computations
    if layout not in ("auto", "nchw", "nhwc"):
        raise InputError(f"layout '{layout}': expected 'auto', 'nchw' or 'nhwc'")
    options.layout = layout
    options.input_shapes = [_shape_spec(name, shape)
                            for name, shape in (input_shapes or {}).items()]
    if train is not None:
        if not isinstance(train, Training):
            raise InputError("train= takes a memopt.Training(...)")
        training = _compiler.TrainingOptions()
        train._fill(training)
        options.training = training
        _set_table_options(_compiler, options, "Training", train._table_values())
    _set_table_options(_compiler, options, "Compile", table_values)
    options.cuda_arch = arch
    options.emit = _compiler.Emit.lib
    options.quiet = not verbose
    if os.path.isdir(os.path.join(_SHARE, "lib")):
        options.runtime_dir = _SHARE
    for name, value in extra_options.items():
        _compiler.set_option(options, str(name), _option_text(value))

    owned = workdir is None
    folder = tempfile.mkdtemp(prefix="memopt-") if owned else os.fspath(workdir)
    try:
        os.makedirs(folder, exist_ok=True)
        if isinstance(model, (str, os.PathLike)):
            model_path = os.fspath(model)
        elif hasattr(model, "SerializeToString") and hasattr(model, "graph"):
            model_path = _write_model(model, folder)
        else:
            raise InputError(f"model: expected a path or an onnx.ModelProto, not "
                             f"{type(model).__name__}")
        stem = os.path.splitext(os.path.basename(model_path))[0] or "model"
        prefix = os.path.join(folder, stem)
        options.input_path = model_path
        options.output_path = prefix
        options.report_path = prefix + ".report.json"
        options.report_svg_path = prefix + ".timeline.svg"
        status, log, errors = _compiler.run_compile(options)
        if verbose and log:
            sys.stdout.write(log)
        if status != 0:
            raise CompileError(errors.strip() or f"compiling '{model_path}' failed")
        # A CUDA program compiled where there is no GPU loads at first use.
        program = Program(prefix, load=target == "host")
        program.compile_log = log
    except BaseException:
        if owned:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    if owned:
        weakref.finalize(program, shutil.rmtree, folder, True)
    return program


def fit(model: Union[PathLike, Any], memory: Union[int, str], *, global_batch: int,
        train: Optional[Training] = None, precisions: Optional[Sequence[str]] = None,
        offload: Optional[Sequence[str]] = None,
        host_memory: Union[None, int, str] = None,
        target: str = "host",
        kernel_times: Union[None, PathLike, Sequence[PathLike]] = None,
        remat_allow: Optional[Sequence[str]] = None, remat_max_computations: int = 2,
        layout: str = "auto", input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
        workdir: Optional[PathLike] = None, arch: str = "sm_90", verbose: bool = False,
        options: Optional[Mapping[str, Any]] = None) -> Program:
    """Finds the fastest configuration whose whole training step fits in `memory` bytes of
    device memory, compiles it and loads it (memopt-compile --fit; docs/fit.md).

    memory         bytes (int), a size ('24GiB'), or 'auto': the free memory of the GPU (the
                   CUDA driver; MEMOPT_DEVICE_FREE_BYTES states it where there is none).
    global_batch   samples per optimizer step: the search splits it into micro-batch x
                   accumulation (the model's inputs re-batched along dimension 0).
    train          memopt.Training(...) (its accumulate is the search's to choose); None
                   fits an inference batch (run the program global_batch / micro-batch times).
    precisions     the precisions to try, e.g. ['fp32', 'bf16'] (default ['fp32']).
    offload        the offload choices to try, of 'none', 'activations', 'optimizer' and
                   'activations+optimizer', the last two also with '+device-accumulators'
                   (the gradient accumulators on the device; --fit-offload; default: every
                   subset of train.offload, or with none given all four, and
                   'optimizer+device-accumulators' where the optimizer's is one).
    host_memory    the most pinned host memory a configuration may take (bytes or a size such
                   as '120GiB'; --fit-host-memory): the host state of an optimizer offload, its
                   gradient staging and the activation pool; default: no limit.
    kernel_times   measured kernel times (--remat-kernel-times) for the predicted step time:
                   a file, or a list of files measured at different micro-batches (each
                   --profile-times file says its micro-batch; the times are scaled to the
                   others by the roofline's work); the roofline otherwise.
    The other arguments are compile's.

    Returns the Program; program.report['fit'] holds every configuration tried (device bytes,
    predicted step time, samples/s, whether it fits, the Pareto front) and the chosen one.
    Raises memopt.CompileError when nothing fits, with the smallest footprint found.
    """
    if isinstance(global_batch, bool) or not isinstance(global_batch, int) or global_batch < 1:
        raise InputError(f"global_batch {global_batch!r}: expected a whole number of samples, "
                         f"at least 1")
    if isinstance(train, Training) and train.accumulate != 1:
        raise InputError("fit chooses the accumulation itself: leave Training.accumulate at 1")
    if memory == "auto":
        limit = "auto"
    elif isinstance(memory, bool) or not isinstance(memory, (int, str)):
        raise InputError(f"memory {memory!r}: expected bytes (int), a size such as '24GiB', "
                         f"or 'auto'")
    elif isinstance(memory, int):
        if memory <= 0:
            raise InputError(f"memory {memory}: expected a positive number of bytes")
        limit = str(memory)
    else:
        from . import _compiler
        limit = str(_compiler.parse_byte_size(memory))
    names = [precisions] if isinstance(precisions, str) else list(precisions or [])
    for name in names:
        if name not in ("fp32", "tf32", "fp16", "bf16"):
            raise InputError(f"precision '{name}': expected fp32, tf32, fp16 or bf16")
    fit_options: Dict[str, Any] = {"fit": limit, "global-batch": global_batch}
    if names:
        fit_options["fit-precisions"] = names
    choices = [offload] if isinstance(offload, str) else list(offload or [])
    known = ("none", "activations", "optimizer", "activations+optimizer",
             "optimizer+device-accumulators", "activations+optimizer+device-accumulators")
    for choice in choices:
        if choice not in known:
            raise InputError(f"offload '{choice}': expected one of {', '.join(known)}")
    if choices:
        fit_options["fit-offload"] = choices
    if host_memory is not None:
        if isinstance(host_memory, bool) or not isinstance(host_memory, (int, str)) or (
                isinstance(host_memory, int) and host_memory <= 0):
            raise InputError(f"host_memory {host_memory!r}: expected a positive number of "
                             f"bytes or a size such as '120GiB'")
        fit_options["fit-host-memory"] = str(host_memory)
    times = kernel_times
    if isinstance(kernel_times, (list, tuple)):
        times = ",".join(str(path) for path in kernel_times)
    fit_options.update(options or {})
    return compile(model, target=target, remat_allow=remat_allow,
                   remat_max_computations=remat_max_computations, layout=layout,
                   input_shapes=input_shapes, train=train, workdir=workdir, arch=arch,
                   verbose=verbose, remat_kernel_times=times, options=fit_options)
