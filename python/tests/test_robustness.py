"""Bad input never crashes memopt (issue 13).

Compiler: structural mutations of valid models (python/tools/mutate_models.py: node types changed,
inputs renamed, emptied, dropped or added, attributes altered, initializer dims altered, nodes
deleted, opsets changed) go through `memopt-compile --emit plan`; each must compile or fail with
one clear error (exit 1) and, when a node was mutated, a message naming a node or value. The
mutations are deterministic (fixed seeds), bounded (300) and run in parallel.

Executable: wrong dtype or shape, truncated or corrupt .npy files, weight files of the wrong size
or of another model (the trailer's fingerprint, docs/runtime.md), NaN/inf with --check-finite:
one clear error, exit 1, and no output file written.
"""

import concurrent.futures
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import REPO, TIER, _tool
import fill_weights
import zoo

sys.path.insert(0, os.path.join(REPO, "python", "tools"))
import mutate_models  # noqa: E402

# (model, mutations, seed): the bundled model (opset 17) and two zoo models, one per exporter
# (opset 17 and opset 20, whose changed operators skip libonnx 1.12's schema check). The fast
# tier (CI, where the sanitizer run repeats this test) takes the first half of each model's
# mutations; MEMOPT_TEST_TIER=all takes them all.
_MUTATIONS = [(zoo.BUNDLED, 150, 3), (zoo.by_id("dynamo/gpt2_nn"), 75, 11),
              (zoo.by_id("torchscript/resnet50"), 75, 11)]
MUTATION_PLAN = [(model, count if TIER == "all" else count // 2, seed)
                 for model, count, seed in _MUTATIONS]


@pytest.fixture(scope="module")
def compiler():
    return _tool("memopt-compile")


def test_structural_mutations_fail_cleanly(compiler, tmp_path):
    jobs = []
    for model, count, seed in MUTATION_PLAN:
        if model is zoo.BUNDLED:
            folder = tmp_path / "bundled"
            folder.mkdir()
            path = str(folder / "tiny_convnet.onnx")
            shutil.copyfile(zoo.BUNDLED_PATH, path)
        else:
            path = fill_weights.fill(model.path, str(tmp_path / model.exporter))
        original = onnx.load(path, load_external_data=False)
        for number, (description, mutated) in enumerate(
                mutate_models.mutations(original, count, seed)):
            mutant = os.path.join(os.path.dirname(path), f"mutant-{model.name}-{number}.onnx")
            onnx.save(mutated, mutant)
            jobs.append((model.id, number, description, mutant))

    def run(job):
        with tempfile.TemporaryDirectory() as out_dir:
            return job, mutate_models.compile_plan(compiler, job[3], out_dir)

    problems, verdicts = [], {"ok": 0, "clean": 0, "crash": 0}
    with concurrent.futures.ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as pool:
        for (model_id, number, description, mutant), (code, stderr) in pool.map(run, jobs):
            verdict = mutate_models.classify(code, stderr)
            verdicts[verdict] += 1
            if verdict == "crash":
                problems.append(f"CRASH {model_id} #{number} ({description}), kept as {mutant}:"
                                f"\n{stderr[-1500:]}")
            elif verdict == "clean" and description.startswith("node '") and \
                    not mutate_models.names_culprit(stderr):
                problems.append(f"unnamed {model_id} #{number} ({description}): {stderr}")
            elif verdict == "clean" and stderr.count("error:") != 1:
                problems.append(f"not one error {model_id} #{number} ({description}): {stderr}")
    assert not problems, f"{verdicts}\n" + "\n".join(problems[:20])
    assert verdicts["clean"] > len(jobs) // 2, verdicts


# --- the executable ------------------------------------------------------------------------------

def _matmul_sqrt_model(path, weight_shape):
    """Y = Sqrt(X @ W): finite inputs can give NaN outputs (negative products)."""
    rows, cols = weight_shape
    rng = np.random.default_rng(1)
    weight = numpy_helper.from_array(rng.standard_normal(weight_shape).astype(np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["P"], name="mm"),
         helper.make_node("Sqrt", ["P"], ["Y"], name="root")], "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, rows])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, cols])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


@pytest.fixture(scope="module")
def programs(compiler, tmp_path_factory):
    """Two executables whose weight regions have the same size but different layouts."""
    folder = tmp_path_factory.mktemp("robust-runtime")
    exes = []
    for name, shape in (("a", (4, 6)), ("b", (6, 4))):
        onnx_path = str(folder / f"{name}.onnx")
        _matmul_sqrt_model(onnx_path, shape)
        out = str(folder / name)
        proc = subprocess.run([compiler, onnx_path, "-o", out, "--target", "host", "--quiet"],
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        exes.append(out)
    return folder, exes


def _run(exe, inputs, out_dir, *extra, weights=None):
    argv = [exe, "--weights", weights or exe + ".weights", "--output-dir", str(out_dir), *extra]
    for name, path in inputs.items():
        argv += ["--input", f"{name}={path}"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def _expect_error(proc, out_dir, *fragments):
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "error:" in proc.stderr and "Stack dump" not in proc.stderr, proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, proc.stderr
    assert not os.path.isdir(out_dir) or os.listdir(out_dir) == [], os.listdir(out_dir)


def test_executable_runs_with_good_inputs(programs, tmp_path):
    _, (exe, _) = programs
    x = tmp_path / "x.npy"
    np.save(x, np.abs(np.random.default_rng(0).standard_normal((2, 4))).astype(np.float32))
    out = tmp_path / "out"
    out.mkdir()
    proc = _run(exe, {"X": x}, out)
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(out)) == ["Y.npy"]
    # A bare region image (no trailer, as before the fingerprint) is still accepted.
    with open(exe + ".weights", "rb") as stream:
        data = stream.read()
    bare = tmp_path / "bare.weights"
    bare.write_bytes(data[:-24])
    assert data[-24:-16] == b"MEMOPTWT"
    assert _run(exe, {"X": x}, out, weights=str(bare)).returncode == 0


@pytest.mark.parametrize("case", ["dtype", "shape", "truncated", "garbage", "empty", "fortran"])
def test_bad_npy_inputs(programs, tmp_path, case):
    _, (exe, _) = programs
    x = tmp_path / "x.npy"
    good = np.ones((2, 4), np.float32)
    if case == "dtype":
        np.save(x, good.astype(np.float64))
        fragments = ("input 'X' has dtype",)
    elif case == "shape":
        np.save(x, np.ones((4, 2), np.float32))
        fragments = ("input 'X' has shape [4, 2]",)
    elif case == "truncated":
        np.save(x, good)
        x.write_bytes(x.read_bytes()[:-5])
        fragments = ("truncated data",)
    elif case == "garbage":
        x.write_bytes(b"this is not a numpy file at all")
        fragments = ("not a .npy file",)
    elif case == "empty":
        x.write_bytes(b"")
        fragments = ("x.npy",)
    else:
        np.save(x, np.asfortranarray(np.ones((2, 4), np.float32)))
        x.write_bytes(x.read_bytes().replace(b"'fortran_order': False", b"'fortran_order': True "))
        fragments = ("Fortran",)
    out = tmp_path / "out"
    out.mkdir()
    _expect_error(_run(exe, {"X": x}, out), out, *fragments)


def test_huge_npy_shape_is_refused(programs, tmp_path):
    """Dimensions whose product overflows 64 bits (the reader multiplied in int64 before)."""
    _, (exe, _) = programs
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (281474976710656, 65536, 2), }"
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    data = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + b"\0" * 32
    x = tmp_path / "x.npy"
    x.write_bytes(data)
    out = tmp_path / "out"
    out.mkdir()
    _expect_error(_run(exe, {"X": x}, out), out, "too large")


@pytest.mark.parametrize("case", ["truncated", "longer", "other_model", "bad_trailer", "missing"])
def test_bad_weight_files(programs, tmp_path, case):
    _, (exe, other) = programs
    x = tmp_path / "x.npy"
    np.save(x, np.ones((2, 4), np.float32))
    with open(exe + ".weights", "rb") as stream:
        data = stream.read()
    weights = tmp_path / "w.weights"
    if case == "truncated":
        weights.write_bytes(data[:len(data) // 2])
        fragments = ("truncated or belongs to another model",)
    elif case == "longer":
        weights.write_bytes(data + b"\0" * 8)
        fragments = ("bytes; the program's weight region has",)
    elif case == "other_model":
        shutil.copyfile(other + ".weights", weights)
        assert os.path.getsize(weights) == len(data)
        fragments = ("was written for another program",)
    elif case == "bad_trailer":
        weights.write_bytes(data[:-24] + b"NOTMEMOP" + data[-16:])
        fragments = ("does not end in a memopt weight trailer",)
    else:
        fragments = ("cannot open weight file",)
    out = tmp_path / "out"
    out.mkdir()
    _expect_error(_run(exe, {"X": x}, out, weights=str(weights)), out, *fragments)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_check_finite_inputs(programs, tmp_path, value):
    _, (exe, _) = programs
    array = np.ones((2, 4), np.float32)
    array[1, 2] = value
    x = tmp_path / "x.npy"
    np.save(x, array)
    out = tmp_path / "out"
    out.mkdir()
    _expect_error(_run(exe, {"X": x}, out, "--check-finite"), out,
                  "input 'X' holds a NaN or infinity (element 6 of 8; --check-finite)")
    # Without the flag the run goes ahead.
    assert _run(exe, {"X": x}, out).returncode == 0


def test_check_finite_outputs_write_nothing(programs, tmp_path):
    """Negative products make Sqrt's output NaN: with --check-finite nothing is written."""
    _, (exe, _) = programs
    x = tmp_path / "x.npy"
    np.save(x, -np.abs(np.random.default_rng(3).standard_normal((2, 4))).astype(np.float32) - 1)
    out = tmp_path / "out"
    out.mkdir()
    proc = _run(exe, {"X": x}, out)
    assert proc.returncode == 0 and np.isnan(np.load(out / "Y.npy")).any(), proc.stderr
    os.remove(out / "Y.npy")
    _expect_error(_run(exe, {"X": x}, out, "--check-finite"), out, "output 'Y' holds a NaN")


def test_missing_output_folder_writes_nothing(programs, tmp_path):
    _, (exe, _) = programs
    x = tmp_path / "x.npy"
    np.save(x, np.ones((2, 4), np.float32))
    missing = tmp_path / "no" / "such" / "folder"
    _expect_error(_run(exe, {"X": x}, missing), missing, "cannot create")
    assert not any(name.endswith(".partial") for name in os.listdir(tmp_path))
