"""The Python package (python/memopt, docs/python.md) on the host backend.

- every foundation-set model (both exporters) compiled with memopt.compile and run from Python
  matches onnxruntime (float32, relative error < 1e-4 of the reference's largest magnitude, as
  test_e2e_host.py checks the executables);
- DLPack: objects that only speak the DLPack protocol in and out, np.from_dlpack of outputs;
- errors: memopt.Error subclasses with the compiler's and the runtime's messages (node names);
- the report equals the JSON memopt-compile --report writes for the same options;
- a training step's loss equals the executable's, save() writes the model the executable's
  --save writes (inline or as external data), load_weights/save_weights/get_weights round
  trips;
- memopt.load of a library memopt-compile built, a rebuilt library at the same path, stubs
  and docstrings.
The package is the one this build assembled (<build>/python_packages; conftest.py).
"""

import json
import os
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import BUILD_DIR, PYTHON_PACKAGES, _tool
import fill_weights
import zoo
import tiers
from test_e2e_host import RELATIVE_TOLERANCE, random_inputs

FOUNDATION = [m for m in zoo.MODELS if m.name in zoo.VISION + zoo.TEXT]
BUNDLED_SHAPES = {name: shape for name, (shape, _) in zoo.BUNDLED.inputs.items()}


@pytest.fixture(scope="module")
def memopt(memopt_package):
    return memopt_package


def relative_error(got, reference):
    scale = float(np.max(np.abs(reference)))
    assert scale > 0, "the reference is all zeros"
    return float(np.max(np.abs(np.asarray(got, np.float64) - reference))) / scale


def check_outputs(results, names, expected, tolerance=RELATIVE_TOLERANCE):
    assert sorted(results) == sorted(names)
    for name, reference in zip(names, expected):
        got = results[name]
        assert isinstance(got, np.ndarray) and got.shape == reference.shape, (name, got.shape)
        if reference.dtype.kind in "biu":
            np.testing.assert_array_equal(got, reference, err_msg=name)
        else:
            error = relative_error(got, reference)
            assert error < tolerance, f"{name}: relative error {error:.3g}"


def _model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


# ---------------------------------------------------------------------------------------------
# The foundation set, compiled and run from Python.
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("model", tiers.params(FOUNDATION, tiers.ZOO_NO_HF, id=lambda m: m.id))
def test_foundation_model_matches_onnxruntime(memopt, model, tmp_path):
    path = fill_weights.fill(model.path, str(tmp_path / "model"), log=open(os.devnull, "w"))
    shapes = {name: shape for name, (shape, _) in model.inputs.items()}
    session, inputs = random_inputs(path, shapes)
    for name, make in model.values.items():
        inputs[name] = make(inputs[name].shape).astype(inputs[name].dtype)
    expected = session.run(None, inputs)
    names = [o.name for o in session.get_outputs()]
    program = memopt.compile(path, input_shapes=shapes)
    assert [i.name for i in program.inputs] == [i.name for i in session.get_inputs()]
    assert program.report["arena_bytes"] >= program.report["max_live_bytes"] > 0
    check_outputs(program.run(inputs), names, expected)


# ---------------------------------------------------------------------------------------------
# What a program says about itself: inputs, outputs, the report, its picture.
# ---------------------------------------------------------------------------------------------

def test_report_agrees_with_cli_json(memopt, tmp_path):
    """The same numbers as memopt-compile --report, for the same model and budget."""
    budget = 300 * 1024
    program = memopt.compile(zoo.BUNDLED_PATH, memory_budget=budget, workdir=tmp_path / "py")
    cli_report = tmp_path / "cli.json"
    proc = subprocess.run([_tool("memopt-compile"), zoo.BUNDLED_PATH, "-o",
                           str(tmp_path / "cli"), "--emit", "lib", "--memory-budget",
                           str(budget), "--report", str(cli_report), "--quiet"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    with open(cli_report) as stream:
        expected = json.load(stream)
    got = dict(program.report)
    for report in (got, expected):
        report.pop("plan_seconds")  # a timing, not a number of the plan
    assert got == expected
    assert got["arena_bytes"] <= budget
    assert program.arena_bytes == got["arena_bytes"]
    # The same as the string form of the budget.
    again = memopt.compile(zoo.BUNDLED_PATH, memory_budget="300KiB")
    assert again.report["arena_bytes"] == got["arena_bytes"]


def test_inputs_outputs_and_html(memopt):
    program = memopt.compile(zoo.BUNDLED_PATH)
    assert program.inputs == [memopt.TensorInfo("input", (1, 3, 32, 32), "float32")]
    assert program.outputs == [memopt.TensorInfo("output", (1, 10), "float32")]
    assert program.target == "host" and not program.is_training
    assert program.weight_bytes > 0 and program.arena_bytes == program.report["arena_bytes"]
    page = program._repr_html_()
    assert "<svg" in page and "max-live" in page and "tiny_convnet" in page
    assert "tiny_convnet" in repr(program)


def test_precision_fp16(memopt):
    program = memopt.compile(zoo.BUNDLED_PATH, precision="fp16")
    assert program.report["precision"] == "f16"
    assert program.inputs[0].dtype == "float32"  # inputs and outputs stay f32
    session, inputs = random_inputs(zoo.BUNDLED_PATH, BUNDLED_SHAPES)
    (expected,) = session.run(None, inputs)
    assert relative_error(program.run(inputs)["output"], expected) < 1e-2


# ---------------------------------------------------------------------------------------------
# DLPack
# ---------------------------------------------------------------------------------------------

class DLPackOnly:
    """A tensor that only speaks the DLPack protocol (as a foreign framework's would)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_dlpack_round_trip(memopt):
    program = memopt.compile(zoo.BUNDLED_PATH)
    session, inputs = random_inputs(zoo.BUNDLED_PATH, BUNDLED_SHAPES)
    (expected,) = session.run(None, inputs)
    # DLPack in, NumPy out.
    results = program.run({"input": DLPackOnly(inputs["input"])})
    assert relative_error(results["output"], expected) < RELATIVE_TOLERANCE
    # DLPack in and out: the run writes into the caller's tensor and returns it.
    target = np.zeros((1, 10), np.float32)
    bound = DLPackOnly(target)
    results = program.run({"input": DLPackOnly(inputs["input"])}, outputs={"output": bound})
    assert results["output"] is bound
    assert relative_error(target, expected) < RELATIVE_TOLERANCE
    # Outputs go on through DLPack without a copy.
    out = program.run(inputs)["output"]
    view = np.from_dlpack(DLPackOnly(out))
    assert np.shares_memory(view, out)
    # A read-only array is a fine input; a strided NumPy array is made contiguous.
    frozen = inputs["input"].copy()
    frozen.setflags(write=False)
    assert relative_error(program.run(frozen)["output"], expected) < RELATIVE_TOLERANCE
    wide = np.zeros((1, 3, 32, 64), np.float32)
    wide[..., ::2] = inputs["input"]
    assert relative_error(program.run(wide[..., ::2])["output"], expected) < RELATIVE_TOLERANCE
    # A strided DLPack tensor is refused with the reason (the caller owns its layout).
    with pytest.raises(memopt.InputError, match="input 'input' is not contiguous"):
        program.run(DLPackOnly(wide[..., ::2]))
    # A nested list becomes an array of the program's dtype.
    assert relative_error(program.run(inputs["input"].tolist())["output"],
                          expected) < RELATIVE_TOLERANCE


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------

def test_run_errors_name_the_tensor(memopt):
    program = memopt.compile(zoo.BUNDLED_PATH)
    good = np.ones((1, 3, 32, 32), np.float32)
    cases = [({"input": good.astype(np.float64)},
              "input 'input' is float64; the program expects float32"),
             ({"input": good[:, :, :31]},
              r"input 'input' has shape \(1, 3, 31, 32\); the program expects \(1, 3, 32, 32\)"),
             ({"image": good}, r"unknown input 'image' \(the program takes: input\)"),
             ({}, "missing input 'input'")]
    for inputs, message in cases:
        with pytest.raises(memopt.InputError, match=message):
            program.run(inputs)
    with pytest.raises(memopt.InputError, match="output 'output' is float64"):
        program.run(good, outputs={"output": np.zeros((1, 10))})
    with pytest.raises(memopt.InputError, match="unknown output 'logits'"):
        program.run(good, outputs={"logits": np.zeros((1, 10), np.float32)})
    with pytest.raises(memopt.InputError, match="out='jax'"):
        program.run(good, out="jax")
    with pytest.raises(memopt.InputError, match="needs a training program"):
        program.train_step(good)
    # InputError is also a ValueError, every error a memopt.Error.
    assert issubclass(memopt.InputError, ValueError)
    assert all(issubclass(e, memopt.Error) for e in (memopt.CompileError, memopt.InputError,
                                                     memopt.ExecutionError, memopt.LoadError))


def test_compile_errors_carry_the_compilers_message(memopt, tmp_path):
    unsupported = _model([helper.make_node("Relu", ["x"], ["r"], name="first_relu"),
                          helper.make_node("NonMaxSuppression", ["r", "r"], ["y"],
                                           name="the_nms")],
                         [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 3])])
    with pytest.raises(memopt.CompileError, match="NonMaxSuppression.*the_nms"):
        memopt.compile(unsupported)
    with pytest.raises(memopt.CompileError, match="does not fit in the memory budget of 4.00 KiB"):
        memopt.compile(zoo.BUNDLED_PATH, memory_budget=4096)
    with pytest.raises(memopt.CompileError, match="does-not-exist.onnx"):
        memopt.compile(str(tmp_path / "does-not-exist.onnx"))
    with pytest.raises(memopt.InputError, match="memory_budget 'lots' is not a size"):
        memopt.compile(zoo.BUNDLED_PATH, memory_budget="lots")
    with pytest.raises(memopt.InputError, match="memory_budget -1"):
        memopt.compile(zoo.BUNDLED_PATH, memory_budget=-1)
    with pytest.raises(memopt.InputError, match="precision 'fp8' is not one this memopt knows"):
        memopt.compile(zoo.BUNDLED_PATH, precision="fp8")
    with pytest.raises(memopt.InputError, match="target 'tpu'"):
        memopt.compile(zoo.BUNDLED_PATH, target="tpu")
    with pytest.raises(memopt.InputError, match=r"input_shapes\['input'\]"):
        memopt.compile(zoo.BUNDLED_PATH, input_shapes={"input": "big"})
    with pytest.raises(memopt.CompileError, match="names 'nothing', which is not a graph input"):
        memopt.compile(zoo.BUNDLED_PATH, input_shapes={"nothing": (1, 2)})
    with pytest.raises(memopt.InputError, match="expected a path or an onnx.ModelProto"):
        memopt.compile(42)
    # A failed compile into a folder of the caller's leaves no program there.
    with pytest.raises(memopt.CompileError):
        memopt.compile(zoo.BUNDLED_PATH, memory_budget=4096, workdir=tmp_path / "w")
    assert not (tmp_path / "w" / "tiny_convnet.so").exists()


def test_model_proto_and_execution_error(memopt):
    """An onnx.ModelProto compiles as it is; a runtime failure raises ExecutionError naming
    the node (a Gather index outside the table)."""
    table = numpy_helper.from_array(np.arange(10, dtype=np.float32).reshape(5, 2), "table")
    model = _model([helper.make_node("Gather", ["table", "ids"], ["rows"], name="lookup"),
                    helper.make_node("Relu", ["rows"], ["y"], name="relu")],
                   [helper.make_tensor_value_info("ids", TensorProto.INT64, [3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])], [table])
    program = memopt.compile(model)
    rows = program.run({"ids": np.array([4, 0, 2], np.int64)})["y"]
    np.testing.assert_array_equal(rows, [[8, 9], [0, 1], [4, 5]])
    with pytest.raises(memopt.ExecutionError, match="node 'lookup'.*out of range"):
        program.run({"ids": np.array([1, 7, 0], np.int64)})


def test_load_errors(memopt, tmp_path):
    with pytest.raises(memopt.LoadError, match="does not exist"):
        memopt.load(tmp_path / "nothing")
    tiny = memopt.compile(zoo.BUNDLED_PATH, workdir=tmp_path / "tiny")
    other = _model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                   [numpy_helper.from_array(np.ones(3, np.float32), "unused")])
    relu = memopt.compile(other, workdir=tmp_path / "relu")
    with pytest.raises(memopt.LoadError, match="truncated or belongs to another model"):
        relu.load_weights(tiny.path + ".weights")
    with pytest.raises(memopt.LoadError, match="cannot create the program"):
        memopt.load(tiny.path, weights=relu.path + ".weights")


# ---------------------------------------------------------------------------------------------
# Loading programs built elsewhere
# ---------------------------------------------------------------------------------------------

def test_load_a_library_memopt_compile_built(memopt, tmp_path):
    out = str(tmp_path / "tiny")
    proc = subprocess.run([_tool("memopt-compile"), zoo.BUNDLED_PATH, "-o", out, "--emit",
                           "lib", "--quiet"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    program = memopt.load(out + ".so")
    assert program.report is None  # no report was asked for
    session, inputs = random_inputs(zoo.BUNDLED_PATH, BUNDLED_SHAPES)
    (expected,) = session.run(None, inputs)
    assert relative_error(program.run(inputs)["output"], expected) < RELATIVE_TOLERANCE
    assert "(no timeline" in program._repr_html_()


def test_recompiling_into_the_same_folder_loads_the_new_program(memopt, tmp_path):
    """dlopen returns the library it has for a path: a rebuilt one must load anew."""
    def scale(factor):
        return _model([helper.make_node("Mul", ["x", "k"], ["y"], name="scale")],
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                      [numpy_helper.from_array(np.full(4, factor, np.float32), "k")])
    x = np.arange(1, 5, dtype=np.float32)
    first = memopt.compile(scale(2.0), workdir=tmp_path)
    second = memopt.compile(scale(3.0), workdir=tmp_path)
    np.testing.assert_array_equal(second.run(x)["y"], 3 * x)
    np.testing.assert_array_equal(first.run(x)["y"], 2 * x)


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------

def test_training_step_matches_the_executable(memopt, tmp_path):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    labels = np.array([7], np.int64)
    options = memopt.Training(loss="cross-entropy", optimizer="sgd", lr=0.05, momentum=0.9)
    program = memopt.compile(zoo.BUNDLED_PATH, train=options, workdir=tmp_path / "py")
    assert program.is_training
    assert [i.name for i in program.inputs] == ["input", "labels"]
    assert program.report["training"]["parameter_bytes"] > 0

    exe = str(tmp_path / "cli" / "step")
    proc = subprocess.run([_tool("memopt-compile"), zoo.BUNDLED_PATH, "--train", "--loss",
                           "cross-entropy", "--optimizer", "sgd", "--lr", "0.05", "--momentum",
                           "0.9", "-o", exe, "--quiet"], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", labels)
    saved_by_exe = tmp_path / "exe.onnx"
    proc = subprocess.run([exe, "--input", f"input={tmp_path / 'x.npy'}", "--input",
                           f"labels={tmp_path / 'y.npy'}", "--steps", "3", "--save",
                           str(saved_by_exe)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    exe_losses = [float(line.split()[-1]) for line in proc.stdout.splitlines()
                  if line.startswith("step ")]
    losses = [program.train_step({"input": x, "labels": labels}) for _ in range(3)]
    assert losses == pytest.approx(exe_losses, rel=1e-6)
    assert losses[2] < losses[0]  # it learns

    # save() writes what the executable's --save writes.
    saved = tmp_path / "python.onnx"
    program.save(saved)
    mine = {t.name: numpy_helper.to_array(t) for t in onnx.load(saved).graph.initializer}
    theirs = {t.name: numpy_helper.to_array(t) for t in onnx.load(saved_by_exe).graph.initializer}
    assert sorted(mine) == sorted(theirs)
    for name, value in theirs.items():
        np.testing.assert_allclose(mine[name], value, rtol=1e-6, atol=1e-7, err_msg=name)

    # The trained model compiles for inference and matches onnxruntime on it.
    session = ort.InferenceSession(str(saved), providers=["CPUExecutionProvider"])
    inference = memopt.compile(saved)
    (expected,) = session.run(None, {"input": x})
    assert relative_error(inference.run(x)["output"], expected) < RELATIVE_TOLERANCE

    # load_weights from the ONNX model: a fresh training step takes the trained parameters.
    fresh = memopt.compile(zoo.BUNDLED_PATH, train=options)
    loaded = fresh.load_weights(saved)
    trained = program.get_weights("parameter")
    assert sorted(loaded) == sorted(trained)
    for name, value in fresh.get_weights("parameter").items():
        np.testing.assert_array_equal(value, trained[name], err_msg=name)
    with pytest.raises(memopt.InputError, match="compile the ONNX model instead"):
        inference.load_weights(saved)


def test_save_as_external_data(memopt, tmp_path):
    """save(external_data=True) and the executable's --save --save-external-data keep the
    trained initializers in OUT.onnx.data beside the model (ONNX external data; a model that
    would pass 1.5 GiB gets them there by default): onnx and onnxruntime read the values the
    inline save holds. The tensors come from the device one at a time."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    labels = np.array([2], np.int64)
    options = memopt.Training(loss="cross-entropy", optimizer="sgd", lr=0.05)
    program = memopt.compile(zoo.BUNDLED_PATH, train=options, workdir=tmp_path / "py")
    program.train_step({"input": x, "labels": labels})
    inline, outside = tmp_path / "inline.onnx", tmp_path / "outside.onnx"
    program.save(inline)
    program.save(outside, external_data=True)
    assert not (tmp_path / "inline.onnx.data").exists()
    data = tmp_path / "outside.onnx.data"
    assert data.is_file() and os.path.getsize(outside) < os.path.getsize(data)
    assert os.path.getsize(outside) + os.path.getsize(data) > os.path.getsize(inline) * 0.9
    onnx.checker.check_model(str(outside))
    loaded = onnx.load(str(outside))
    located = [t for t in loaded.graph.initializer
               if any(e.key == "location" for e in t.external_data)]
    assert located == []  # onnx.load brought every external tensor in
    values = {t.name: numpy_helper.to_array(t) for t in loaded.graph.initializer}
    reference = {t.name: numpy_helper.to_array(t) for t in onnx.load(inline).graph.initializer}
    assert sorted(values) == sorted(reference)
    for name, value in reference.items():
        np.testing.assert_array_equal(values[name], value, err_msg=name)
    outputs = [ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
               .run(None, {"input": x})[0] for path in (inline, outside)]
    np.testing.assert_array_equal(outputs[0], outputs[1])

    exe = str(tmp_path / "step")
    proc = subprocess.run([_tool("memopt-compile"), zoo.BUNDLED_PATH, "--train", "--loss",
                           "cross-entropy", "--optimizer", "sgd", "--lr", "0.05", "-o", exe,
                           "--quiet"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", labels)
    saved = tmp_path / "exe.onnx"
    proc = subprocess.run([exe, "--input", f"input={tmp_path / 'x.npy'}", "--input",
                           f"labels={tmp_path / 'y.npy'}", "--steps", "1", "--save", str(saved),
                           "--save-external-data", "--verbose"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "[load] weights: " in proc.stdout and f"from file '{exe}.weights'" in proc.stdout
    assert (tmp_path / "exe.onnx.data").is_file()
    exe_values = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(saved)).graph.initializer}
    for name, value in values.items():
        np.testing.assert_allclose(exe_values[name], value, rtol=1e-6, atol=1e-7, err_msg=name)


def test_weights_round_trip(memopt, tmp_path):
    options = memopt.Training(optimizer="adamw", lr=1e-3)
    program = memopt.compile(zoo.BUNDLED_PATH, train=options)
    x = np.ones((1, 3, 32, 32), np.float32)
    labels = np.array([1], np.int64)
    program.train_step({"input": x, "labels": labels})
    # save_weights / load_weights carry parameters, optimizer state and the step count:
    # the next step is the same in a copy that loaded them.
    copy = memopt.compile(zoo.BUNDLED_PATH, train=options)
    program.save_weights(tmp_path / "state.weights")
    copy.load_weights(tmp_path / "state.weights")
    for role in ("parameter", "optimizer_state"):
        for name, value in program.get_weights(role).items():
            np.testing.assert_array_equal(copy.get_weights(role)[name], value, err_msg=name)
    assert copy.train_step({"input": x, "labels": labels}, lr=1e-3) == \
        program.train_step({"input": x, "labels": labels}, lr=1e-3)
    # A dict sets the weights it names; values are cast to the program's dtype.
    zeros = {"head.fc.bias": np.zeros(10, np.float64)}
    assert copy.load_weights(zeros) == ["head.fc.bias"]
    assert not copy.get_weights("parameter")["head.fc.bias"].any()
    with pytest.raises(memopt.InputError, match="'head.fc.gain' is not a weight"):
        copy.load_weights({"head.fc.gain": np.zeros(10)})
    with pytest.raises(memopt.InputError, match=r"weight 'head.fc.bias' has shape \(9,\)"):
        copy.load_weights({"head.fc.bias": np.zeros(9)})


def _linear_model(batch):
    rng = np.random.default_rng(5)
    weight = numpy_helper.from_array(rng.standard_normal((8, 3)).astype(np.float32), "fc.weight")
    bias = numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "fc.bias")
    return _model([helper.make_node("MatMul", ["x", "fc.weight"], ["h"]),
                   helper.make_node("Add", ["h", "fc.bias"], ["y"])],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3])],
                  [weight, bias])


def test_accumulation_equals_the_whole_batch(memopt):
    """Training(accumulate=2): two train_step calls on half batches update once, as one step
    on the whole batch does (mean losses: each micro-batch's gradient is taken of loss / 2)."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    target = rng.standard_normal((4, 3)).astype(np.float32)
    whole = memopt.compile(_linear_model(4), train=memopt.Training(loss="mse", lr=0.1))
    halves = memopt.compile(_linear_model(2),
                            train=memopt.Training(loss="mse", lr=0.1, accumulate=2))
    assert halves.report["training"]["gradient_accumulator_bytes"] == (8 * 3 + 3) * 4
    whole.train_step({"x": x, "target": target})
    halves.train_step({"x": x[:2], "target": target[:2]})
    # After the first micro-batch only the accumulators moved.
    start = memopt.compile(_linear_model(2), train=memopt.Training(loss="mse"))
    for name, value in start.get_weights("parameter").items():
        np.testing.assert_array_equal(halves.get_weights("parameter")[name], value)
    halves.train_step({"x": x[2:], "target": target[2:]})
    for name, value in whole.get_weights("parameter").items():
        np.testing.assert_allclose(halves.get_weights("parameter")[name], value, rtol=1e-5,
                                   atol=1e-6, err_msg=name)
    with pytest.raises(memopt.InputError, match="accumulate 0"):
        memopt.compile(_linear_model(2), train=memopt.Training(loss="mse", accumulate=0))
    with pytest.raises(memopt.InputError, match="fuse_head 'yes': expected 'on' or 'off'"):
        memopt.compile(_linear_model(2), train=memopt.Training(loss="mse", fuse_head="yes"))
    with pytest.raises(memopt.InputError, match="remat_max_computations 0"):
        memopt.compile(_linear_model(2), memory_budget=1024, remat_max_computations=0)


# ---------------------------------------------------------------------------------------------
# Documentation
# ---------------------------------------------------------------------------------------------

def test_docstrings_and_stubs(memopt):
    for text, words in ((memopt.compile.__doc__, ["memory_budget", "input_shapes", "workdir",
                                                  "CompileError", "Example"]),
                        (memopt.Program.run.__doc__, ["DLPack", "stream", "torch"]),
                        (memopt.Training.__doc__, ["optimizer", "momentum", "freeze"])):
        for word in words:
            assert word in text, word
    package = os.path.join(PYTHON_PACKAGES, "memopt")
    for name in ("_runtime.pyi", "_compiler.pyi", "py.typed"):
        assert os.path.isfile(os.path.join(package, name)), name
    with open(os.path.join(package, "_compiler.pyi")) as stream:
        stub = stream.read()
    assert "def run_compile(" in stub and "class CompileOptions" in stub
    assert BUILD_DIR in memopt.__file__


def test_readme_example_runs(memopt, monkeypatch, capsys):
    """README's Python example, run as written from the repository root."""
    with open(os.path.join(zoo.REPO, "README.md")) as stream:
        readme = stream.read()
    start = readme.index("## Python")
    block = readme[readme.index("```python\n", start) + len("```python\n"):]
    block = block[:block.index("```")]
    assert 8 <= len(block.strip().splitlines()) <= 12, "the README promises a short example"
    monkeypatch.chdir(zoo.REPO)
    exec(compile(block, "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    # The figures README quotes.
    assert printed[0] == "arena 262144 B, max-live 262144 B, no reuse 1204392 B"
    assert len(printed[1].split()) == 10


def test_cuda_program_compiles_without_a_gpu(memopt, tmp_path):
    """target='cuda' builds with nvcc (no GPU needed); the program loads at its first use, so
    it can be compiled here and run on a GPU machine (memopt.load)."""
    program = memopt.compile(zoo.BUNDLED_PATH, target="cuda", workdir=tmp_path)
    assert os.path.isfile(program.path + ".so") and program.report["arena_bytes"] > 0
    with open(program.path + ".so", "rb") as stream:
        assert stream.read(4) == b"\x7fELF"
    has_gpu = subprocess.run(["sh", "-c", "nvidia-smi -L"], capture_output=True).returncode == 0
    if not has_gpu:
        assert "not loaded" in repr(program) and "<svg" in program._repr_html_()
        with pytest.raises(memopt.LoadError, match="cannot create the program"):
            program.run(np.ones((1, 3, 32, 32), np.float32))
