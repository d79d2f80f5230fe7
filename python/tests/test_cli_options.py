"""The option table (include/memopt/Conversion/CompileOptions.def) reaches every binding.

- every option of the table (memopt._compiler.options()) is a keyword of memopt.compile (struct
  Compile) or a field of memopt.Training (struct Training), or one of the few memopt.compile
  sets itself (SET_BY_COMPILE); Python's own defaults, where it has one, equal the table's;
- every flag is in `memopt-compile --help`, and every pipeline option in `memopt-opt --help`;
- memopt.compile(options={...}) and the keywords reach the fields (set_option), with the
  command line's parsers and messages;
- docs/cli.md's flag reference is what the table prints (python/tools/gen_cli_doc.py), and the
  Python module prints the same.
"""

import dataclasses
import inspect
import os
import subprocess
import sys

import pytest

from conftest import BUILD_DIR, REPO, _tool

sys.path.insert(0, os.path.join(REPO, "python", "tools"))
import gen_cli_doc  # noqa: E402

# Options memopt.compile sets itself: where the program goes (workdir), what it is (a library
# it loads), the report and its timeline it writes next to the program (PREFIX.timeline.svg)
# and --quiet (verbose=False).
SET_BY_COMPILE = {"o", "emit", "report", "report-svg", "quiet"}
# memopt.fit's arguments (docs/fit.md): memory, global_batch, precisions and offload set them.
SET_BY_COMPILE |= {"fit", "global-batch", "fit-precisions", "fit-offload", "fit-host-memory"}


@pytest.fixture(scope="module")
def memopt(memopt_package):
    return memopt_package


@pytest.fixture(scope="module")
def table(memopt):
    from memopt import _compiler
    return _compiler.options()


def test_table_is_whole(table):
    flags = [info["flag"] for info in table if info["flag"]]
    assert len(flags) == len(set(flags)), "a flag is declared twice"
    pipeline = [info["pipeline"] for info in table if info["pipeline"]]
    assert len(pipeline) == len(set(pipeline)), "a pipeline option is declared twice"
    for info in table:
        assert info["help"], f"{info['field']}: no help text"
        assert info["struct"] in ("Compile", "Training")


def test_every_option_reaches_python(memopt, table):
    keywords = inspect.signature(memopt.compile).parameters
    fields = {name: field for name, field in memopt.Training.__dataclass_fields__.items()}
    missing = []
    for info in table:
        name = info["python"]
        if not name:
            if info["flag"] not in SET_BY_COMPILE:
                missing.append(f"--{info['flag']} (no Python keyword in CompileOptions.def)")
            continue
        where = keywords if info["struct"] == "Compile" or name == "train" else fields
        if name not in where:
            owner = "memopt.compile" if where is keywords else "memopt.Training"
            missing.append(f"--{info['flag']} ({owner} has no '{name}')")
    assert not missing, "options Python cannot reach:\n" + "\n".join(missing)
    assert SET_BY_COMPILE <= {info["flag"] for info in table}, "SET_BY_COMPILE names a flag " \
        "the table does not have"


def _python_default(memopt, info):
    if info["struct"] == "Compile" or info["python"] == "train":
        return inspect.signature(memopt.compile).parameters[info["python"]].default
    field = memopt.Training.__dataclass_fields__[info["python"]]
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def test_python_defaults_equal_the_table(memopt, table):
    """A Python default other than None (which leaves the table's) must be the table's."""
    from memopt import _compiler
    defaults = _compiler.CompileOptions()
    differ = []
    for info in table:
        if not info["python"] or info["python"] in ("model", "train", "verbose"):
            continue
        value = _python_default(memopt, info)
        if value is None or value is inspect.Parameter.empty:
            continue
        if info["struct"] == "Compile":
            field = getattr(defaults, info["field"])
        else:
            field = getattr(defaults.training, info["field"])
        if info["kind"] == "Enum":
            field = field.name
        if info["kind"] == "OnOff":
            field = "on" if field else "off"
        if isinstance(value, (tuple, list)):
            value, field = list(value), list(field)
        if value != field:
            differ.append(f"{info['python']}: Python {value!r}, CompileOptions.def {field!r}")
    assert not differ, "\n".join(differ)


def test_every_flag_is_in_help(table):
    text = subprocess.run([_tool("memopt-compile"), "--help"], capture_output=True, text=True,
                          check=True).stdout
    missing = [info["flag"] for info in table
               if info["kind"] != "Positional" and f"-{info['flag']}" not in text]
    assert not missing, f"memopt-compile --help lacks {missing}"
    assert "--print-options-markdown" in text


def test_every_pipeline_option_is_in_memopt_opt(table):
    text = subprocess.run([_tool("memopt-opt"), "--help"], capture_output=True, text=True,
                          check=True).stdout
    start = text.index("--memopt-compile-pipeline")
    section = text[start:start + 20000]
    missing = [info["pipeline"] for info in table
               if info["pipeline"] and f"--{info['pipeline']}" not in section]
    assert not missing, f"memopt-opt --memopt-compile-pipeline lacks {missing}"


def test_set_option_parses_as_the_command_line(memopt):
    from memopt import _compiler
    options = _compiler.CompileOptions()
    _compiler.set_option(options, "memory-budget", "2GiB")
    assert options.memory_budget == 2 << 30
    _compiler.set_option(options, "--no-fuse-attention", "true")
    assert options.fuse_attention is False
    _compiler.set_option(options, "fuse_epilogues", "false")  # Python name: the field's sense
    assert options.fuse_epilogues is False
    _compiler.set_option(options, "separate-outputs", "true")
    assert options.outputs_in_arena is False
    _compiler.set_option(options, "precision", "tf32")
    assert options.precision == _compiler.Precision.tf32
    _compiler.set_option(options, "remat-allow", "relu,fused_elementwise")
    assert options.remat_allow == ["relu", "fused_elementwise"]
    _compiler.set_option(options, "loss_scale_init", "1024")
    assert options.training.loss_scale_init == 1024.0
    _compiler.set_option(options, "data-parallel", "2")
    assert options.training.data_parallel == 2 and options.training.data_parallel_given
    _compiler.set_option(options, "fuse-head", "off")
    assert options.training.fuse_head is False
    for name, text, message in [
            ("memory-budget", "lots", "memory-budget 'lots' is not a size"),
            ("fuse-head", "maybe", "fuse-head 'maybe' is not one of on, off"),
            ("target", "tpu", "target 'tpu' is not one of host, cuda"),
            ("remat-time-limit", "soon", "remat-time-limit 'soon' is not a number"),
            ("colour", "red", "'colour' is not a memopt-compile option")]:
        with pytest.raises(memopt.InputError, match=message):
            _compiler.set_option(options, name, text)


def test_compile_keywords_reach_the_options(memopt, tmp_path):
    """memopt.compile's table keywords, memopt.Training's and options= reach the driver."""
    import onnx
    from onnx import TensorProto, helper
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"], name="relu"),
         helper.make_node("Exp", ["t"], ["y"], name="exp")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = str(tmp_path / "relu_exp.onnx")
    onnx.save(model, path)
    # --data-parallel 0 given is an error: Training(data_parallel=0) goes through set_option.
    with pytest.raises(memopt.CompileError, match="data-parallel 0"):
        memopt.compile(path, train=memopt.Training(loss="mse", data_parallel=0),
                       workdir=tmp_path / "dp")
    with pytest.raises(memopt.InputError, match="'colour' is not a memopt-compile option"):
        memopt.compile(path, options={"colour": "red"}, workdir=tmp_path / "bad")
    # Relu -> Exp is one fused op whose 32-byte output is the arena.
    default = memopt.compile(path, workdir=tmp_path / "default").report
    assert (default["num_ops"], default["arena_bytes"]) == (1, 32)
    unfused = memopt.compile(path, fuse_elementwise=False, workdir=tmp_path / "unfused").report
    assert unfused["num_ops"] == 2
    for name, kwargs in [("keyword", {"outputs_in_arena": False}),
                         ("flag", {"options": {"separate-outputs": True}}),
                         ("pipeline", {"options": {"outputs-in-arena": False}})]:
        report = memopt.compile(path, workdir=tmp_path / name, **kwargs).report
        assert report["arena_bytes"] == 0, name


def test_cli_doc_is_generated(memopt):
    from memopt import _compiler
    with open(gen_cli_doc.PAGE) as stream:
        page = stream.read()
    printed = gen_cli_doc.reference(BUILD_DIR)
    assert printed == _compiler.options_markdown()
    assert gen_cli_doc.splice(page, printed) == page, \
        "docs/cli.md's flag reference is not the table's: run python3 python/tools/gen_cli_doc.py"
