"""Split programs (docs/lowering.md, "Split programs"; issue 25 item 3): a large generated
program's run function in chunk functions across part files, compiled in parallel.

* A host training step compiled split (its files at -O0) gives, step for step, the same losses
  and the same trained state, to the bit, as the same step compiled as one function (at -O1);
  so does the program its build script (OUT.build.sh, which compiles the parts itself) builds.
* A compile error in one part names that part, with the compiler's message, and leaves no
  executable and no temporary objects behind.
"""

import os
import stat
import subprocess

import numpy as np

import llama_graph
from conftest import BUILD_DIR, REPO, _tool

TRAIN_FLAGS = ["--train", "--loss", "cross-entropy", "--loss-output", "logits",
               "--optimizer", "adamw", "--lr", "1e-3", "--target", "host"]
# Small enough that the tiny Llama's step (about 2,800 lines) becomes several parts.
SPLIT_FLAGS = ["--split-lines", "150", "--split-part-lines", "600"]
STEPS = 3


def _run(argv, env=None, check=True):
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                          timeout=900, env=env)
    if check:
        assert proc.returncode == 0, (f"{' '.join(map(str, argv))} failed:\n"
                                      f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def _parts(prefix):
    folder, stem = os.path.split(prefix)
    return sorted(name for name in os.listdir(folder) if name.startswith(stem + ".part"))


def _train(exe, inputs, state):
    argv = [exe, "--steps", str(STEPS), "--save-state", state]
    for name, path in inputs.items():
        argv += ["--input", f"{name}={path}"]
    losses = [line for line in _run(argv).stdout.splitlines() if line.startswith("step ")]
    assert len(losses) == STEPS, losses
    return losses


def _state(folder):
    return {name: open(os.path.join(folder, name), "rb").read()
            for name in sorted(os.listdir(folder))}


def _tiny_llama(tmp_path):
    config = llama_graph.CONFIGS["tiny"]
    graph = llama_graph.generate(config, str(tmp_path / "model"), 2, 32, "tiny")
    rng = np.random.default_rng(0)
    inputs = {}
    for name in ("input_ids", "labels"):
        inputs[name] = str(tmp_path / f"{name}.npy")
        np.save(inputs[name], rng.integers(0, config.vocab, (2, 32), dtype=np.int64))
    return graph, inputs


def _fake_tool(folder, name, script):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    with open(path, "w") as stream:
        stream.write("#!/bin/sh\n" + script)
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)


def test_split_training_step_is_bit_identical(tmp_path):
    graph, inputs = _tiny_llama(tmp_path)
    whole = str(tmp_path / "whole" / "step")
    _run([_tool("memopt-compile"), graph, "-o", whole, *TRAIN_FLAGS, "--split-lines", "0",
          "--quiet"])
    assert _parts(whole) == []
    split = str(tmp_path / "split" / "step")
    proc = _run([_tool("memopt-compile"), graph, "-o", split, *TRAIN_FLAGS, *SPLIT_FLAGS,
                 "--jobs", "2", "--timing"])
    parts = _parts(split)
    assert "step.parts.h" in parts and len(parts) >= 4, parts
    # --timing: the build's line, one line per file, and the files in MLIR's report.
    files = len(parts)  # the main file and the parts, not the header
    assert f"[build] {files} files, 2 at once: compile" in proc.stdout, proc.stdout
    for name in ["step.cpp"] + [p for p in parts if p.endswith(".cpp")]:
        assert f"[build]   {name}: " in proc.stdout, proc.stdout
        assert f"      {name}\n" in proc.stderr, proc.stderr
    assert "emit (source, weights)" in proc.stderr and \
        f"compile {files} files, 2 at once" in proc.stderr, proc.stderr
    with open(split + ".cpp") as main:
        text = main.read()
    calls = [line.strip() for line in text.splitlines() if "memopt_generated::runChunk" in line]
    assert calls == [f"memopt_generated::runChunk{k}(ctx, arena, weights, inputs, outputs);"
                     for k in range(1, len(calls) + 1)] and len(calls) >= 3, calls

    expected = _train(whole, inputs, tmp_path / "whole_state")
    assert _train(split, inputs, tmp_path / "split_state") == expected
    assert _state(tmp_path / "split_state") == _state(tmp_path / "whole_state")

    # The build script compiles the same parts (xargs -P) and links them: here against this
    # build's runtime archives (a stand-in cmake: the runtime is already built).
    source = str(tmp_path / "source" / "step")
    _run([_tool("memopt-compile"), graph, "-o", source, *TRAIN_FLAGS, *SPLIT_FLAGS,
          "--emit", "source", "--quiet"])
    assert _parts(source) == parts
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    for library in ("main", "capi", "driver", "host", "common"):
        name = f"libmemopt_runtime_{library}.a"
        os.symlink(os.path.join(BUILD_DIR, "lib", "Runtime", name), runtime / name)
    _fake_tool(str(tmp_path / "bin"), "cmake", "exit 0\n")
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}", MEMOPT_ROOT=REPO,
               MEMOPT_RUNTIME_BUILD=str(runtime), JOBS="2")
    _run(["sh", source + ".build.sh"], env=env)
    assert _train(source, inputs, tmp_path / "script_state") == expected
    assert _state(tmp_path / "script_state") == _state(tmp_path / "whole_state")


def test_a_failing_part_is_named(tmp_path):
    graph, _ = _tiny_llama(tmp_path)
    # g++ (found on PATH) fails on part 2 with a message of its own.
    _fake_tool(str(tmp_path / "bin"), "g++",
               'for a in "$@"; do case "$a" in *.part2.cpp) '
               'echo "$a: error: something the compiler said" >&2; exit 1;; esac; done\n'
               'exec /usr/bin/g++ "$@"\n')
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}",
               TMPDIR=str(temporary))
    out = str(tmp_path / "program" / "model")
    proc = _run([_tool("memopt-compile"), graph, "-o", out, "--target", "host", *SPLIT_FLAGS,
                 "--quiet"], env=env, check=False)
    assert proc.returncode != 0
    assert f"{out}.part2.cpp: error: something the compiler said" in proc.stderr, proc.stderr
    assert f"memopt-compile: error: g++ failed on {out}.part2.cpp (exit 1)" in proc.stderr, \
        proc.stderr
    assert "part1.cpp" not in proc.stderr and "part3.cpp" not in proc.stderr, proc.stderr
    assert not os.path.exists(out), "an executable was linked from a failed build"
    assert os.listdir(temporary) == [], "the objects' temporary folder was left behind"
