# -*- Python -*-
import os
import shutil
import subprocess

import lit.formats
from lit.llvm import llvm_config

config.name = "MEMOPT"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".onnxtext", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.memopt_obj_root, "test")
config.excludes = ["Inputs", "CMakeLists.txt", "README.md", "lit.cfg.py",
                   "lit.site.cfg.py"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%memopt_src", config.memopt_src_root))
config.substitutions.append(("%shared_data",
                             os.path.join(config.memopt_src_root, "..",
                                          "shared", "data")))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()
# FileCheck, not, count and split-file come from LLVM's tools directory.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.memopt_tools_dir, append_path=True)

tool_dirs = [config.memopt_tools_dir, config.llvm_tools_dir]
tools = ["memopt-opt", "memopt-translate", "memopt-plan", "memopt-remat",
         "memopt-compile"]
llvm_config.add_tool_substitutions(
    [t for t in tools if shutil.which(t, path=config.memopt_tools_dir)],
    tool_dirs)

# GPU tests need a device; see test/GPU/lit.local.cfg.
def has_cuda_gpu():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        return subprocess.run([smi, "-L"], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False

if has_cuda_gpu():
    config.available_features.add("cuda-gpu")
if os.path.exists(os.path.join(config.cuda_root, "bin", "nvcc")):
    config.available_features.add("nvcc")
