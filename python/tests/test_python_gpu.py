"""The Python package on a CUDA GPU (marker `gpu`): collected only with `-m gpu` or
MEMOPT_GPU_TESTS=1 (conftest.py), and then failing where PyTorch sees no GPU.

A PyTorch CUDA tensor in, a PyTorch CUDA tensor out, on the caller's (side) stream:
- the result equals the CUDA executable's for the same model, weights and input;
- the run is ordered on the caller's stream without waiting on the host: the input is written
  on the stream behind a ~0.5 s device sleep, run() returns long before the sleep ends, and
  the output read on that stream is right;
- no host copy: CUPTI (torch.profiler) sees device-to-device copies only, none from or to the
  host;
- a CuPy array in and out (another DLPack producer, its own stream), NumPy in and out (the
  runtime copies), a training step's loss against the executable's.

Artifacts: where memopt's compiler and nvcc are (a build machine), the test compiles what it
needs. The GPU machine has no MLIR, so they are made here first,
    python python/tests/test_python_gpu.py prepare DIR
and the test takes them from $MEMOPT_GPU_ARTIFACTS=DIR there, with the runtime half of the
package built there (cmake -S python; docs/python.md).
"""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import zoo  # noqa: E402

pytestmark = pytest.mark.gpu

TRAINING = dict(loss="cross-entropy", optimizer="sgd", lr=0.05, momentum=0.9)
TRAINING_FLAGS = ["--train", "--loss", "cross-entropy", "--optimizer", "sgd", "--lr", "0.05",
                  "--momentum", "0.9"]


def prepare(folder, compiler, arch="sm_90"):
    """Compiles the bundled model for CUDA into `folder`: the inference and the training
    program as libraries (memopt.compile, as a user would) and as executables (memopt-compile),
    plus the input and labels."""
    import memopt
    os.makedirs(folder, exist_ok=True)
    memopt.compile(zoo.BUNDLED_PATH, target="cuda", arch=arch,
                   workdir=os.path.join(folder, "lib"))
    memopt.compile(zoo.BUNDLED_PATH, target="cuda", arch=arch,
                   train=memopt.Training(**TRAINING), workdir=os.path.join(folder, "train"))
    for name, flags in (("exe", []), ("train_exe", TRAINING_FLAGS)):
        subprocess.run([compiler, zoo.BUNDLED_PATH, "-o", os.path.join(folder, name, "model"),
                        "--target", "cuda", "--arch", arch, "--quiet", *flags], check=True)
    rng = np.random.default_rng(11)
    np.save(os.path.join(folder, "x.npy"), rng.standard_normal((1, 3, 32, 32), np.float32))
    np.save(os.path.join(folder, "labels.npy"), np.array([3], np.int64))


@pytest.fixture(scope="module")
def torch():
    try:
        import torch
    except ImportError:
        pytest.fail("the GPU tests need PyTorch with CUDA", pytrace=False)
    if not torch.cuda.is_available():
        pytest.fail("no CUDA GPU visible to PyTorch", pytrace=False)
    return torch


@pytest.fixture(scope="module")
def artifacts(torch, tmp_path_factory):
    folder = os.environ.get("MEMOPT_GPU_ARTIFACTS")
    if folder:
        return folder
    from conftest import _tool
    folder = str(tmp_path_factory.mktemp("gpu"))
    prepare(folder, _tool("memopt-compile"))
    return folder


@pytest.fixture(scope="module")
def memopt():
    import memopt
    return memopt


def executable_output(artifacts, tmp_path):
    exe = os.path.join(artifacts, "exe", "model")
    subprocess.run([exe, "--weights", exe + ".weights", "--input",
                    f"input={os.path.join(artifacts, 'x.npy')}", "--output-dir", str(tmp_path)],
                   check=True, capture_output=True, text=True, timeout=300)
    return np.load(tmp_path / "output.npy")


def relative_error(got, reference):
    return float(np.max(np.abs(np.asarray(got, np.float64) - reference)) /
                 np.max(np.abs(reference)))


def test_torch_cuda_tensor_in_and_out_on_the_callers_stream(torch, memopt, artifacts, tmp_path):
    expected = executable_output(artifacts, tmp_path)
    program = memopt.load(os.path.join(artifacts, "lib", "tiny_convnet"))
    assert program.target == "cuda"
    x_host = np.load(os.path.join(artifacts, "x.npy"))
    x = torch.from_numpy(x_host).cuda()
    for _ in range(3):  # the first run selects algorithms eagerly, the second captures
        program.run({"input": x}, out="torch")
    torch.cuda.synchronize()

    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(int(1e9))  # about 0.5 s of device time on an H100 at ~1.8 GHz
        written_late = x.clone()     # the input is only written after the sleep
        start = time.perf_counter()
        y = program.run({"input": written_late}, out="torch")["output"]
        returned_after = time.perf_counter() - start
        z = y * 1.0                  # read on the caller's stream
    torch.cuda.synchronize()
    slept = time.perf_counter() - start
    print(f"run() returned after {returned_after * 1e3:.2f} ms; the stream finished after "
          f"{slept * 1e3:.1f} ms")
    assert isinstance(y, torch.Tensor) and y.is_cuda and y.dtype == torch.float32
    assert tuple(y.shape) == (1, 10)
    assert returned_after < 0.5 * slept, "run() waited on the host"
    error = relative_error(z.cpu().numpy(), expected)
    print(f"relative error against the CUDA executable: {error:.3g}")
    assert error < 1e-5

    # No copy from or to the host: CUPTI sees the two device-to-device copies only.
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as trace:
        y = program.run({"input": x}, out="torch")["output"]
        torch.cuda.synchronize()
    copies = [event.name for event in trace.events() if "Memcpy" in event.name]
    print("copies seen by CUPTI:", copies)
    assert copies, "CUPTI recorded no copy at all: the check cannot be made here"
    assert not [c for c in copies if "HtoD" in c or "DtoH" in c], copies
    assert len([c for c in copies if "DtoD" in c]) == 2, copies
    assert relative_error(y.cpu().numpy(), expected) < 1e-5


def test_other_dlpack_producers_and_numpy(torch, memopt, artifacts, tmp_path):
    expected = executable_output(artifacts, tmp_path)
    program = memopt.load(os.path.join(artifacts, "lib", "tiny_convnet"))
    x_host = np.load(os.path.join(artifacts, "x.npy"))
    # NumPy in and out: the runtime copies in and out.
    assert relative_error(program.run({"input": x_host})["output"], expected) < 1e-5
    # CuPy in and out, on CuPy's stream.
    cupy = pytest.importorskip("cupy")
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        x = cupy.asarray(x_host)
        y = cupy.empty((1, 10), cupy.float32)
        got = program.run({"input": x}, outputs={"output": y}, stream=stream.ptr)
        assert got["output"] is y
        result = cupy.asnumpy(y, stream=stream)
    stream.synchronize()
    assert relative_error(result, expected) < 1e-5


def test_training_step_on_cuda_matches_the_executable(torch, memopt, artifacts):
    exe = os.path.join(artifacts, "train_exe", "model")
    proc = subprocess.run([exe, "--weights", exe + ".weights", "--input",
                           f"input={os.path.join(artifacts, 'x.npy')}", "--input",
                           f"labels={os.path.join(artifacts, 'labels.npy')}", "--steps", "3"],
                          check=True, capture_output=True, text=True, timeout=300)
    expected = [float(line.split()[-1]) for line in proc.stdout.splitlines()
                if line.startswith("step ")]
    program = memopt.load(os.path.join(artifacts, "train", "tiny_convnet"))
    batch = {"input": np.load(os.path.join(artifacts, "x.npy")),
             "labels": np.load(os.path.join(artifacts, "labels.npy"))}
    losses = [program.train_step(batch) for _ in range(3)]
    print("losses:", losses, "executable:", expected)
    assert losses == pytest.approx(expected, rel=1e-5)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "prepare":
        sys.exit("usage: test_python_gpu.py prepare DIR")
    build = os.environ.get("MEMOPT_BUILD_DIR", os.path.join(zoo.REPO, "build"))
    sys.path.insert(0, os.path.join(build, "python_packages"))
    prepare(sys.argv[2], os.path.join(build, "bin", "memopt-compile"))
    print(f"prepared {sys.argv[2]}")
