"""Compiles and runs ONNX backend node tests in batches, for test_onnx_node_tests.py.

One host program per case would cost one g++ run each (about a thousand). Instead a batch of
cases becomes one ONNX model: every case's values and nodes get a prefix of their own
(`c<index>__`), so the sub-graphs stay disjoint, and every case's outputs are outputs of the
merged graph. The batch compiles once (memopt-compile --target host --emit exe --no-plan: the
planner's search takes seconds on a graph of many short-lived outputs, and the cases test ops,
not plans) and runs once;
each case's outputs are then compared with its expected outputs as onnx's backend runner does
(onnx/backend/test/runner: rtol 1e-3, atol 1e-7 for floats, exact for integers and booleans).

A batch that does not compile loses only the cases at fault: an error that names nodes (the
importer and the passes name the ONNX node) drops those cases and the rest compiles again; an
error naming none, or a crash, splits the batch in halves until the case at fault is alone.
"""

import os
import re
import subprocess
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

RTOL = 1e-3
ATOL = 1e-7
_CASE_IN_MESSAGE = re.compile(r"\bc(\d+)__")


@dataclass
class Case:
    name: str
    model: onnx.ModelProto  # preprocessed: shape-deciding inputs are initializers
    inputs: dict  # graph input name -> numpy value (the inputs left after preprocessing)
    outputs: list  # expected values, in graph output order
    opset: int


@dataclass
class Outcome:
    imported: bool = False
    matched: bool = False
    crashed: bool = False  # a tool died without a message
    detail: str = ""


@dataclass
class BatchRun:
    outcomes: dict = field(default_factory=dict)  # case name -> Outcome
    compiles: int = 0


def _prefixed(case, prefix):
    """The case's graph with every value and node name prefixed."""
    graph = onnx.GraphProto()
    graph.CopyFrom(case.model.graph)

    def rename(name):
        return prefix + name if name else name

    for value in list(graph.input) + list(graph.output) + list(graph.value_info):
        value.name = rename(value.name)
    for tensor in graph.initializer:
        tensor.name = rename(tensor.name)
    for index, node in enumerate(graph.node):
        node.name = prefix + (node.name or f"{node.op_type}_{index}")
        node.input[:] = [rename(name) for name in node.input]
        node.output[:] = [rename(name) for name in node.output]
    return graph


def merge(cases):
    """One model holding every case's graph, names prefixed `c<i>__` (i: index in `cases`)."""
    graph = helper.make_graph([], "node_tests", [], [])
    for index, case in enumerate(cases):
        part = _prefixed(case, f"c{index}__")
        graph.node.extend(part.node)
        graph.input.extend(part.input)
        graph.output.extend(part.output)
        graph.initializer.extend(part.initializer)
        graph.value_info.extend(part.value_info)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", cases[0].opset)])
    model.ir_version = max(case.model.ir_version for case in cases)
    return model


def _file_name(name):
    return re.sub(r"[/\\: ]", "_", name) + ".npy"


def _first_error(text):
    """The first error line, without the scratch file's path."""
    lines = [line for line in text.splitlines() if "error" in line.lower()]
    line = (lines[0] if lines else text.strip()[:300]).strip()
    return re.sub(r"^\S*(batch|case)\.onnx(:0:0)?: ", "", line)[:400]


def compare(expected, got):
    """'' when `got` matches `expected` as onnx's backend runner checks it, else why not."""
    if not isinstance(expected, (np.ndarray, np.generic)):
        return f"the expected value is a {type(expected).__name__}, not a tensor"
    expected = np.asarray(expected)
    got = np.asarray(got)
    if got.shape != expected.shape:
        return f"shape {got.shape}, expected {expected.shape}"
    if expected.dtype.kind in "biuU" or expected.dtype == object:
        if expected.dtype.kind in "biu" and got.dtype.kind not in "biu":
            return f"element type {got.dtype}, expected {expected.dtype}"
        if not np.array_equal(got, expected):
            wrong = int(np.sum(got != expected))
            return f"{wrong} of {expected.size} elements differ (exact comparison)"
        return ""
    try:
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64),
                                   rtol=RTOL, atol=ATOL, equal_nan=True)
    except AssertionError as error:
        lines = [line.strip() for line in str(error).splitlines() if "Max" in line]
        return "values differ: " + "; ".join(lines)[:300]
    return ""


class BatchRunner:
    """Compiles, runs and compares batches of cases in a scratch folder."""

    def __init__(self, compiler, translate, folder):
        self.compiler = compiler
        self.translate = translate
        self.folder = folder
        self.count = 0

    def _scratch(self):
        self.count += 1
        path = os.path.join(self.folder, f"b{self.count}")
        os.makedirs(path, exist_ok=True)
        return path

    def _compile(self, cases, folder):
        model = merge(cases)
        path = os.path.join(folder, "batch.onnx")
        onnx.save_model(model, path)
        argv = [self.compiler, path, "-o", os.path.join(folder, "batch"), "--target", "host",
                "--emit", "exe", "--quiet", "--no-plan"]
        for index, case in enumerate(cases):
            for name, value in case.inputs.items():
                dims = "x".join(str(d) for d in np.shape(value))
                argv += ["--input-shape", f"c{index}__{name}={dims}"]
        return subprocess.run(argv, capture_output=True, text=True, timeout=600)

    def _run(self, cases, folder):
        exe = os.path.join(folder, "batch")
        argv = [exe, "--weights", exe + ".weights", "--output-dir", folder]
        for index, case in enumerate(cases):
            for name, value in case.inputs.items():
                full = f"c{index}__{name}"
                path = os.path.join(folder, "in_" + _file_name(full))
                np.save(path, np.asarray(value))
                argv += ["--input", f"{full}={path}"]
        return subprocess.run(argv, capture_output=True, text=True, timeout=300)

    def _import_alone(self, case):
        """Whether memopt-translate imports the case by itself (for cases a batch dropped)."""
        folder = self._scratch()
        path = os.path.join(folder, "case.onnx")
        onnx.save_model(case.model, path)
        argv = [self.translate, "--import-onnx", path, "-o", os.path.join(folder, "out.mlir")]
        for name, value in case.inputs.items():
            argv += ["--input-shape", f"{name}={'x'.join(str(d) for d in np.shape(value))}"]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        return result.returncode == 0, result

    def _fail(self, run, case, detail, result=None):
        imported, alone = self._import_alone(case)
        outcome = Outcome(imported=imported)
        if not imported:
            if alone.returncode not in (0, 1) or "error" not in alone.stderr:
                outcome.detail = f"memopt-translate crashed or gave no message " \
                                 f"(exit {alone.returncode}): {alone.stderr.strip()[-300:]}"
            else:
                outcome.detail = "import: " + _first_error(alone.stderr)
        else:
            outcome.detail = detail
        outcome.crashed = result is not None and result.returncode not in (0, 1)
        run.outcomes[case.name] = outcome

    def run(self, cases):
        """Compiles, runs and compares `cases`; BatchRun.outcomes has one Outcome each."""
        run = BatchRun()
        self._run_batch(cases, run)
        return run

    def import_only(self, cases):
        """Imports `cases` (memopt-translate on the merged model) without compiling them: for
        the excluded cases, which must only end cleanly."""
        run = BatchRun()
        self._import_batch(list(cases), run)
        return run

    def _import_batch(self, pending, run):
        while pending:
            folder = self._scratch()
            path = os.path.join(folder, "batch.onnx")
            onnx.save_model(merge(pending), path)
            argv = [self.translate, "--import-onnx", path, "-o", os.path.join(folder, "out.mlir")]
            for index, case in enumerate(pending):
                for name, value in case.inputs.items():
                    dims = "x".join(str(d) for d in np.shape(value))
                    argv += ["--input-shape", f"c{index}__{name}={dims}"]
            result = subprocess.run(argv, capture_output=True, text=True, timeout=300)
            run.compiles += 1
            if result.returncode == 0:
                for case in pending:
                    run.outcomes[case.name] = Outcome(imported=True)
                return
            named = self._named(result, pending)
            if not named and len(pending) > 1:
                middle = len(pending) // 2
                self._import_batch(pending[:middle], run)
                self._import_batch(pending[middle:], run)
                return
            for index in named or {0}:
                crashed = result.returncode != 1 or "error" not in result.stderr
                run.outcomes[pending[index].name] = Outcome(
                    crashed=crashed, detail="import: " + _first_error(result.stderr))
            pending = [case for i, case in enumerate(pending) if i not in (named or {0})]

    def _named(self, result, pending):
        """The indices of `pending` that a failed tool's message names (exit 1 only: a crash
        may name whatever ran last)."""
        if result.returncode != 1:
            return set()
        return {int(i) for i in _CASE_IN_MESSAGE.findall(result.stderr)} & set(
            range(len(pending)))

    def _bisect(self, pending, run, stage, result):
        if len(pending) == 1:
            self._fail(run, pending[0], f"{stage}: exit {result.returncode}: "
                                        f"{_first_error(result.stderr)}", result)
            return
        middle = len(pending) // 2
        self._run_batch(pending[:middle], run)
        self._run_batch(pending[middle:], run)

    def _run_batch(self, cases, run):
        pending = list(cases)
        while pending:
            folder = self._scratch()
            result = self._compile(pending, folder)
            run.compiles += 1
            stage = "compile"
            if result.returncode == 0:
                result = self._run(pending, folder)
                stage = "run"
                if result.returncode == 0:
                    self._compare(pending, folder, run)
                    return
            named = self._named(result, pending)
            if not named:
                self._bisect(pending, run, stage, result)
                return
            for index in sorted(named):
                self._fail(run, pending[index], f"{stage}: {_first_error(result.stderr)}")
            pending = [case for i, case in enumerate(pending) if i not in named]

    def _compare(self, pending, folder, run):
        for index, case in enumerate(pending):
            outcome = Outcome(imported=True)
            problems = []
            for output, expected in zip(case.model.graph.output, case.outputs):
                path = os.path.join(folder, _file_name(f"c{index}__{output.name}"))
                if not os.path.isfile(path):
                    problems.append(f"{output.name}: no output file")
                    continue
                problem = compare(expected, np.load(path))
                if problem:
                    problems.append(f"{output.name}: {problem}")
            outcome.matched = not problems
            outcome.detail = "; ".join(problems)[:400]
            run.outcomes[case.name] = outcome


def expected_outputs(values):
    """Expected output values: TensorProtos as numpy arrays, sequences as they come."""
    return [numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else v for v in values]
