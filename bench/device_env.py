"""The GPU machine's library set-up, shared by bench/run.py and the tools it runs.

The device machine has no system cuDNN, cuBLAS or NCCL: PyTorch's pip wheels (nvidia.cudnn,
nvidia.cublas, nvidia.nccl, nvidia.cu13) carry them. Every tool used to find them with its
own lines (and each per-run device script repeated them); this module is the one place.
bench/run.py puts these folders on LD_LIBRARY_PATH for every device step; the tools that also
run on their own (gpu_bench, train_bench) ask here too. Importing it needs no GPU and no
PyTorch (the wheels are found without being imported).
"""

import importlib.util
import os

# The wheels whose lib/ folders the runtime and PyTorch load from.
WHEELS = ("nvidia.cudnn", "nvidia.cublas", "nvidia.nccl", "nvidia.cu13", "nvidia.cuda_runtime")
CUDA_TOOLKIT_LIB = "/usr/local/cuda/lib64"
SYSTEM_CUDNN_INCLUDES = ("/usr/include", "/usr/local/include", "/usr/local/cuda/include")


def wheel_dir(module):
    """The folder of a (namespace) package, or None when it is not installed."""
    try:
        spec = importlib.util.find_spec(module)
    except (ModuleNotFoundError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec else []
    return locations[0] if locations else None


def wheel_library_dirs(modules=WHEELS):
    """The existing lib/ folders of the given wheels, in that order."""
    dirs = []
    for module in modules:
        base = wheel_dir(module)
        if base and os.path.isdir(os.path.join(base, "lib")):
            dirs.append(os.path.join(base, "lib"))
    return dirs


def cudnn_paths():
    """(include dir, library dir) of cuDNN for building the runtime: (None, None) when the
    system has cudnn.h, else PyTorch's wheel."""
    for include in SYSTEM_CUDNN_INCLUDES:
        if os.path.exists(os.path.join(include, "cudnn.h")):
            return None, None
    base = wheel_dir("nvidia.cudnn")
    if base is None:
        raise RuntimeError("no cudnn.h on the system and no nvidia.cudnn wheel")
    return os.path.join(base, "include"), os.path.join(base, "lib")


def with_library_path(env, dirs):
    """env with dirs put first on its LD_LIBRARY_PATH."""
    env = dict(env)
    env["LD_LIBRARY_PATH"] = ":".join(list(dirs) + [p for p in [env.get("LD_LIBRARY_PATH")]
                                                     if p])
    return env
