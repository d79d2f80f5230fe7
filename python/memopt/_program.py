"""memopt.Program: a compiled program, loaded and ready to run or train.

A program is what `memopt-compile --emit lib` writes: PREFIX.so (the generated program, the
runtime and one backend, exporting the C API of memopt_c_api.h), PREFIX.weights (the weight
region), and, from memopt.compile, PREFIX.report.json (the memory report), PREFIX.timeline.svg
(its picture) and, for training, PREFIX.onnx-template (what save() completes). The extension
memopt._runtime loads the library with dlopen and calls that C API; this file only maps names to
table positions, allocates outputs and converts between array libraries.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import sys
import tempfile
import threading
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _runtime
from ._errors import InputError, LoadError

PathLike = Union[str, "os.PathLike[str]"]

# The runtime's DType values (include/memopt/Runtime/Runtime.h) as NumPy-style names.
_DTYPE_NAMES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "int8", "uint8",
                "bool")
# WeightRole's values (include/memopt/Runtime/Program.h) in order.
_ROLE_NAMES = ("constant", "parameter", "optimizer_state", "learning_rate", "step", "statistic",
               "gradient_accumulator", "micro_step", "random_key")
# DLPack device types that are host memory.
_DLPACK_HOST_DEVICES = (1, 3)


class TensorInfo(NamedTuple):
    """An input, output or weight of a program."""

    name: str
    shape: Tuple[int, ...]
    dtype: str  # "float32", "float16", "bfloat16", "float64", "int64", "int32", "int8", ...


def _numpy_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise InputError("the program has a bfloat16 tensor and NumPy has no bfloat16: "
                             "install ml_dtypes, or use out='torch'") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _torch_dtype(name: str):
    import torch
    return getattr(torch, "bool" if name == "bool" else name)


def _torch_from_numpy(torch: Any, array: np.ndarray) -> Any:
    """A tensor sharing `array`'s memory; a bfloat16 array through its int16 bits (torch reads
    no ml_dtypes array)."""
    if array.dtype.name == "bfloat16":
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def _torch_module():
    """torch when the caller has imported it (memopt never imports it on its own)."""
    return sys.modules.get("torch")


# Libraries loaded in this process: path -> the file's identity when it was loaded. dlopen
# returns the already loaded library for a path it knows, so a program rebuilt at the same path
# is loaded through a private copy instead (memopt.compile into the same workdir twice).
_loaded_libraries: Dict[str, Tuple[int, int, int, int]] = {}
_loaded_lock = threading.Lock()


def _identity(path: str) -> Tuple[int, int, int, int]:
    status = os.stat(path)
    return (status.st_dev, status.st_ino, status.st_mtime_ns, status.st_size)


def _load(library: str, weights: str) -> "_runtime.Program":
    path = os.path.realpath(library)
    if not os.path.isfile(path):
        raise LoadError(f"program library '{library}' does not exist")
    with _loaded_lock:
        identity = _identity(path)
        known = _loaded_libraries.setdefault(path, identity)
        if known == identity:
            return _runtime.Program(path, weights)
        folder = tempfile.mkdtemp(prefix="memopt-lib-")
        try:
            copy = os.path.join(folder, os.path.basename(path))
            shutil.copy2(path, copy)
            return _runtime.Program(copy, weights)
        finally:
            shutil.rmtree(folder, ignore_errors=True)  # the mapping stays valid


def _is_ndarray(value: Any) -> bool:
    return isinstance(value, np.ndarray)


def _dlpack_device(value: Any) -> Optional[Tuple[int, int]]:
    device = getattr(value, "__dlpack_device__", None)
    if device is None:
        return None
    kind, index = device()
    return int(kind), int(index)


def _on_host(value: Any) -> bool:
    if _is_ndarray(value):
        return True
    device = _dlpack_device(value)
    return device is None or device[0] in _DLPACK_HOST_DEVICES


def _runtime_view(value: Any) -> Any:
    """`value` as the extension takes it: NumPy's bfloat16 (ml_dtypes) exports neither DLPack
    nor a buffer, so such an array goes as its uint16 view (the same bytes, which the extension
    accepts for a bfloat16 tensor); anything else as it is."""
    if _is_ndarray(value) and value.dtype.name == "bfloat16":
        return value.view(np.uint16)
    return value


def _as_tensor(name: str, value: Any, info: TensorInfo, kind: str) -> Any:
    """What the extension accepts: NumPy arrays (made contiguous; bfloat16 ones as their bits)
    and DLPack producers; other values (lists, scalars) become NumPy arrays of the program's
    dtype."""
    if _is_ndarray(value):
        return _runtime_view(np.ascontiguousarray(value))
    if hasattr(value, "__dlpack__"):
        torch = _torch_module()
        if torch is not None and isinstance(value, torch.Tensor) and value.requires_grad:
            value = value.detach()
        return value
    try:
        return _runtime_view(np.ascontiguousarray(np.asarray(value,
                                                             dtype=_numpy_dtype(info.dtype))))
    except (TypeError, ValueError) as error:
        raise InputError(f"{kind} '{name}' is a {type(value).__name__}, not an array: "
                         f"{error}") from None


class Program:
    """A compiled memopt program, loaded: its arena, its weights and (CUDA) its context are
    allocated once here, so a run allocates nothing.

    Get one from memopt.compile(...) or memopt.load(PREFIX). Inputs and outputs are addressed
    by their ONNX names (`inputs`, `outputs`); `report` is the memory report.
    """

    def __init__(self, path: PathLike, *, weights: Optional[PathLike] = None,
                 load: bool = True):
        """Loads the program PATH.so (PATH may also name the .so) with its weights (PATH.weights
        unless `weights` names a weight file), and PATH.report.json, PATH.timeline.svg and
        PATH.onnx-template when they are there. With load=False the library loads at first use
        (a CUDA program compiled on a machine without a GPU)."""
        path = os.fspath(path)
        prefix = path[:-3] if path.endswith(".so") else path
        self._prefix = prefix
        self._weights_path = os.fspath(weights) if weights is not None else prefix + ".weights"
        self._report_path = prefix + ".report.json"
        self._svg_path = prefix + ".timeline.svg"
        self._template_path = prefix + ".onnx-template"
        self._report: Optional[Dict[str, Any]] = None
        self._handle: Optional["_runtime.Program"] = None
        self._lock = threading.Lock()
        self.compile_log = ""
        if load:
            self._program  # noqa: B018 - loads it

    @property
    def _program(self) -> "_runtime.Program":
        """The loaded program (loaded here on first use)."""
        if self._handle is None:
            if not os.path.isfile(self._weights_path):
                raise LoadError(f"weight file '{self._weights_path}' does not exist")
            handle = _load(self._prefix + ".so", self._weights_path)

            def describe(kind: int) -> List[TensorInfo]:
                return [TensorInfo(name, tuple(shape), _DTYPE_NAMES[dtype])
                        for name, dtype, shape, *_ in handle.tensors(kind)]
            self._inputs = describe(_runtime.TENSOR_INPUT)
            self._outputs = describe(_runtime.TENSOR_OUTPUT)
            self._weights = [
                (TensorInfo(name, tuple(shape), _DTYPE_NAMES[dtype]), nbytes, offset,
                 _ROLE_NAMES[role] if 0 <= role < len(_ROLE_NAMES) else "constant")
                for name, dtype, shape, nbytes, offset, role in
                handle.tensors(_runtime.TENSOR_WEIGHT)]
            self._handle = handle
        return self._handle

    # -- what the program is ---------------------------------------------------------------

    @property
    def inputs(self) -> List[TensorInfo]:
        """The program's inputs (name, shape, dtype), in order."""
        self._program  # noqa: B018 - loads it
        return list(self._inputs)

    @property
    def outputs(self) -> List[TensorInfo]:
        """The program's outputs (name, shape, dtype), in order. A training step's first
        output is its loss."""
        self._program  # noqa: B018 - loads it
        return list(self._outputs)

    @property
    def target(self) -> str:
        """'host' or 'cuda': the backend the program was built for."""
        return self._program.backend

    @property
    def name(self) -> str:
        return self._program.name

    @property
    def path(self) -> str:
        """The program's files: PATH.so, PATH.weights, PATH.report.json, ..."""
        return self._prefix

    @property
    def arena_bytes(self) -> int:
        """Bytes of the one activation arena (allocated when the program loaded)."""
        return self._program.arena_bytes

    @property
    def weight_bytes(self) -> int:
        """Bytes of the weight region (weights, and a training step's optimizer state)."""
        return self._program.weight_bytes

    @property
    def is_training(self) -> bool:
        """True for a training step (memopt.compile(..., train=memopt.Training(...)))."""
        return self._program.is_training

    @property
    def ranks(self) -> int:
        """Data-parallel ranks: N for a step compiled with Training(data_parallel=N), else 1.
        train_step then takes the global batch (every input's axis 0 N times the compiled
        one)."""
        return self._program.ranks

    @property
    def rank(self) -> int:
        """The global rank of this process's first rank: 0 when the ranks are threads of this
        process (host programs), RANK of the launcher's environment when each is a process
        (CUDA programs under torchrun)."""
        return self._program.rank

    @property
    def report(self) -> Optional[Dict[str, Any]]:
        """The memory report as a dict: the JSON memopt-compile --report writes (precision,
        weights_bytes, io_bytes, output_bytes, arena_bytes, max_live_bytes, naive_bytes,
        inplace_saved_bytes, fragmentation_index, buffers, and a training section for a
        training step). None for a program loaded without its report."""
        if self._report is None and os.path.isfile(self._report_path):
            try:
                with open(self._report_path) as stream:
                    self._report = json.load(stream)
            except (OSError, ValueError) as error:
                raise LoadError(f"cannot read the memory report '{self._report_path}': "
                                f"{error}") from None
        return self._report

    def timeline_svg(self) -> Optional[str]:
        """The memory report's timeline picture (SVG text), or None."""
        if not os.path.isfile(self._svg_path):
            return None
        with open(self._svg_path) as stream:
            return stream.read()

    def _describe(self) -> Tuple[str, str]:
        """(kind and name, target) for the representations; works unloaded too."""
        try:
            kind = "training step" if self.is_training else "program"
            return f"{kind} '{self.name}'", self.target
        except LoadError as error:
            return f"program '{os.path.basename(self._prefix)}'", f"not loaded: {error}"

    def __repr__(self) -> str:
        title, target = self._describe()
        if self._handle is None:
            return f"<memopt {title} ({target})>"
        inputs = ", ".join(f"{i.name}: {i.dtype}{list(i.shape)}" for i in self._inputs)
        return (f"<memopt {title} ({target}) inputs {inputs}; "
                f"arena {self.arena_bytes} bytes, weights {self.weight_bytes} bytes>")

    def _repr_html_(self) -> str:
        """The report's totals and its timeline picture, for notebooks."""
        report = self.report or {}
        title, target = self._describe()
        rows = [("target", target), ("precision", report.get("precision", "?"))]
        for key, label in (("arena_bytes", "arena"), ("max_live_bytes", "max-live (lower bound)"),
                           ("naive_bytes", "naive (no reuse)"),
                           ("inplace_saved_bytes", "saved in place"),
                           ("weights_bytes", "weights"), ("io_bytes", "inputs and outputs")):
            if key in report:
                rows.append((label, _format_bytes(report[key])))
        if "fragmentation_index" in report:
            rows.append(("fragmentation at the peak", f"{report['fragmentation_index']:.1f} %"))
        table = "".join(f"<tr><td>{html.escape(k)}</td><td style='text-align:right'>"
                        f"{html.escape(str(v))}</td></tr>" for k, v in rows)
        title = html.escape(f"memopt {title}")
        svg = self.timeline_svg() or "<p>(no timeline: the program was loaded without it)</p>"
        return (f"<div class='memopt-program'><b>{title}</b><table>{table}</table>"
                f"<div style='overflow-x:auto'>{svg}</div></div>")

    # -- running ---------------------------------------------------------------------------

    def _bind(self, inputs: Any, table: Sequence[TensorInfo], kind: str) -> List[Any]:
        if not isinstance(inputs, Mapping):
            if len(table) != 1:
                raise InputError(f"the program takes {len(table)} {kind}s "
                                 f"({', '.join(i.name for i in table)}): pass a dict")
            inputs = {table[0].name: inputs}
        names = [info.name for info in table]
        unknown = [name for name in inputs if name not in names]
        if unknown:
            raise InputError(f"unknown {kind} '{unknown[0]}' (the program takes: "
                             f"{', '.join(names)})")
        missing = [name for name in names if name not in inputs]
        if missing:
            raise InputError(f"missing {kind} '{missing[0]}' (the program takes: "
                             f"{', '.join(names)})")
        return [_as_tensor(info.name, inputs[info.name], info, kind) for info in table]

    def run(self, inputs: Union[Mapping[str, Any], Any], *, out: str = "numpy",
            outputs: Optional[Mapping[str, Any]] = None,
            stream: Optional[int] = None) -> Dict[str, Any]:
        """Runs the program once and returns {output name: array}.

        inputs   {input name: array}: NumPy arrays, or any DLPack tensor (PyTorch, CuPy, JAX,
                 ...), of the program's dtype and shape (see `inputs`); a program with one input
                 also takes the array alone. CUDA programs take host or GPU tensors.
        out      'numpy': NumPy arrays. 'torch': PyTorch tensors on the program's device (CUDA
                 programs: GPU tensors, written without passing through the host).
        outputs  {output name: tensor} to write into (any writable DLPack tensor or NumPy array,
                 host or GPU): the run fills them in place and returns them, as onnxruntime's
                 IOBinding does. Outputs not named here are made as `out` says.
        stream   CUDA programs with GPU tensors: the CUDA stream (its address, e.g.
                 torch.cuda.current_stream().cuda_stream or cupy's stream.ptr) the run is
                 ordered on. Default: PyTorch's current stream when torch is imported, else
                 the legacy default stream. Nothing waits on the host; read the results on
                 that stream (PyTorch does so by itself).

        GPU tensors in and out: the inputs are copied into the program's arena on the GPU (its
        planner reuses their bytes) and the outputs from it, device to device; nothing goes
        through the host.
        """
        if out not in ("numpy", "torch"):
            raise InputError(f"out='{out}': expected 'numpy' or 'torch'")
        self._program  # noqa: B018 - loads it
        arrays = self._bind(inputs, self._inputs, "input")
        given = dict(outputs or {})
        unknown = [name for name in given if name not in [o.name for o in self._outputs]]
        if unknown:
            raise InputError(f"unknown output '{unknown[0]}' (the program has: "
                             f"{', '.join(o.name for o in self._outputs)})")
        cuda = self.target == "cuda"
        on_device = cuda and (out == "torch" or not all(_on_host(a) for a in arrays)
                              or not all(_on_host(v) for v in given.values()))
        results: Dict[str, Any] = {}
        buffers = []
        for info in self._outputs:
            if info.name in given:
                buffer = given[info.name]
            elif on_device and out == "torch":
                torch = _torch_module()
                if torch is None:
                    import torch  # out='torch' asks for it
                buffer = torch.empty(info.shape, dtype=_torch_dtype(info.dtype), device="cuda:0")
            else:
                buffer = np.empty(info.shape, dtype=_numpy_dtype(info.dtype))
            results[info.name] = buffer
            buffers.append(_runtime_view(buffer))
        if on_device:
            if stream is None:
                torch = _torch_module()
                stream = (torch.cuda.current_stream(0).cuda_stream
                          if torch is not None and torch.cuda.is_available() else 0)
            with self._lock:
                self._program.run_buffers(arrays, buffers, int(stream))
                if any(_on_host(b) for b in buffers):
                    # Host outputs are read as soon as this returns.
                    self._program.synchronize()
        else:
            with self._lock:
                self._program.run(arrays, buffers)
        if out == "torch" and not on_device:
            torch = _torch_module()
            if torch is None:
                import torch  # noqa: F811 - out='torch' asks for it
            results = {name: _torch_from_numpy(torch, value) if _is_ndarray(value) else value
                       for name, value in results.items()}
        return results

    __call__ = run

    # -- training --------------------------------------------------------------------------

    def train_step(self, inputs: Mapping[str, Any], *, lr: Optional[float] = None) -> float:
        """One training step on one batch (host arrays of the compiled batch size; inputs
        include `labels` for cross-entropy or `target` for mse) with learning rate `lr` (default:
        the compiled one). The parameters and optimizer state update in place; the step count
        goes on from the weights'. With Training(accumulate=K) each call is one micro-batch and
        every K-th call updates. Returns the (micro-)batch's loss (NaN or inf included).

        A data-parallel step (Training(data_parallel=N), `ranks` N) takes the global batch:
        every input N times the compiled batch along axis 0, rank r training on the r-th slice
        (a host program runs the N ranks as threads; a CUDA program, one rank per process,
        trains on its RANK-th slice). The loss is the mean over the ranks. Any other batch
        raises InputError naming the input, the per-rank batch and N."""
        if not self.is_training:
            raise InputError("train_step needs a training program: compile with "
                             "train=memopt.Training(...)")
        arrays = self._bind(inputs, self._inputs, "input")
        with self._lock:
            return float(self._program.train_step(arrays, -1.0 if lr is None else float(lr)))

    def save(self, path: PathLike, *, external_data: Optional[bool] = None) -> None:
        """Writes the trained model as ONNX to `path` (a training program: its ONNX model with
        the current parameters), as the executable's --save does. The parameters go to
        `path`.data beside it (ONNX external data) with external_data=True, inline with False,
        and by default inline unless the model would pass 1.5 GiB (protobuf's limit is 2 GiB)."""
        if not self.is_training:
            raise InputError("save() writes a trained model: this is not a training program "
                             "(use save_weights for any program's weight file)")
        if not os.path.isfile(self._template_path):
            raise LoadError(f"save() needs the training template '{self._template_path}' "
                            f"(memopt.compile writes it next to the program)")
        with self._lock:
            self._program.save_onnx(self._template_path, os.fspath(path),
                                    0 if external_data is None else 1 if external_data else -1)

    def save_weights(self, path: PathLike) -> None:
        """Writes the weight region (weights, optimizer state, step count) as a weight file
        that load_weights() and the executable's --weights read back into this program."""
        with self._lock:
            self._program.save_weights(os.fspath(path))

    def get_weights(self, role: Optional[str] = None) -> Dict[str, np.ndarray]:
        """{name: copy} of the program's weights, or of those of one `role` ('parameter',
        'optimizer_state', 'statistic', 'constant', 'learning_rate', 'step',
        'gradient_accumulator', 'micro_step', 'random_key')."""
        region = np.empty(self.weight_bytes, dtype=np.uint8)
        with self._lock:
            self._program.read_weights(region)
        result = {}
        for info, nbytes, offset, weight_role in self._weights:
            if role is not None and weight_role != role:
                continue
            data = region[offset:offset + nbytes]
            result[info.name] = data.view(_numpy_dtype(info.dtype)).reshape(info.shape).copy()
        return result

    def load_weights(self, source: Union[PathLike, Mapping[str, Any], Any], *,
                     strict: bool = True) -> List[str]:
        """Replaces weights and returns the names it set.

        source  a weight file (save_weights(), PREFIX.weights or the executable's
                --save-weights) for this program; or, for a training step, an ONNX model (a
                path ending in .onnx, or an onnx.ModelProto: a model written by save(), or the
                original) whose initializers replace the parameters and statistics of the same
                name; or {name: array} with names from get_weights().
        strict  ONNX: every trained parameter of the program must be in the model. Dict: every
                name must be a weight of the program.

        An inference program holds the compiler's constants (folded, cast, fused), not the
        ONNX initializers: to run a trained model, compile the ONNX model save() wrote.
        Values are converted to the program's dtype (a float16 program takes float32 arrays);
        shapes must match.
        """
        if isinstance(source, (str, os.PathLike)) and not os.fspath(source).endswith(".onnx"):
            with self._lock:
                self._program.load_weights(os.fspath(source))
            return [info.name for info, *_ in self._weights]
        from_onnx = not isinstance(source, Mapping)
        if from_onnx and not self.is_training:
            raise InputError("load_weights takes an ONNX model only for a training step: an "
                             "inference program's weights are the compiler's folded "
                             "constants; compile the ONNX model instead (memopt.compile)")
        values = _onnx_initializers(source) if from_onnx else source
        by_name: Dict[str, List[int]] = {}
        for index, (info, *_rest) in enumerate(self._weights):
            by_name.setdefault(info.name, []).append(index)
        if strict and not from_onnx:
            unknown = [name for name in values if name not in by_name]
            if unknown:
                raise InputError(f"'{unknown[0]}' is not a weight of the program")
        if strict and from_onnx:
            missing = [info.name for info, _, _, role in self._weights
                       if role == "parameter" and info.name not in values]
            if missing:
                raise InputError(f"the ONNX model has no initializer '{missing[0]}', a "
                                 f"trained parameter of the program")
        region = np.empty(self.weight_bytes, dtype=np.uint8)
        with self._lock:
            self._program.read_weights(region)
        loaded = []
        for name, value in values.items():
            indices = by_name.get(name)
            if not indices:
                continue
            if from_onnx and self._weights[indices[0]][3] not in ("parameter", "statistic"):
                continue  # the compiler's constants stay as compiled
            if len(indices) > 1:
                raise InputError(f"the program holds {len(indices)} weights named '{name}': "
                                 f"load it through a weight file instead")
            info, nbytes, offset, _ = self._weights[indices[0]]
            array = np.asarray(value)
            if tuple(array.shape) != info.shape:
                raise InputError(f"weight '{name}' has shape {tuple(array.shape)}; the program "
                                 f"holds {info.shape}")
            target = _numpy_dtype(info.dtype)
            if array.dtype != target and array.dtype.kind != target.kind and not (
                    array.dtype.kind == "f" and target.name == "bfloat16"):
                raise InputError(f"weight '{name}' is {array.dtype}; the program holds "
                                 f"{info.dtype}")
            region[offset:offset + nbytes] = np.ascontiguousarray(
                array.astype(target, copy=False)).reshape(-1).view(np.uint8)
            loaded.append(name)
        with self._lock:
            self._program.write_weights(region)
        return loaded


def _onnx_initializers(source: Any) -> Dict[str, np.ndarray]:
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError:
        raise InputError("loading weights from an ONNX model needs the onnx package") from None
    if isinstance(source, (str, os.PathLike)):
        try:
            source = onnx.load(os.fspath(source))
        except Exception as error:  # onnx raises several kinds for a bad file
            raise LoadError(f"cannot read ONNX model '{os.fspath(source)}': {error}") from None
    graph = getattr(source, "graph", None)
    if graph is None:
        raise InputError(f"load_weights takes a weight file, an ONNX model or a dict, not "
                         f"{type(source).__name__}")
    return {tensor.name: numpy_helper.to_array(tensor) for tensor in graph.initializer}


def _format_bytes(count: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.2f} {unit}"
    return f"{count} B"


def load(path: PathLike, *, weights: Optional[PathLike] = None) -> Program:
    """Loads a compiled program: PATH.so from memopt-compile --emit lib (or memopt.compile's
    workdir), with PATH.weights or the weight file `weights`. Needs no compiler: a machine that
    only runs programs can install memopt's runtime part alone."""
    return Program(path, weights=weights)
