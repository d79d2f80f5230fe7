"""memopt: compile ONNX models into programs that need less memory, inspect where the memory
goes, run them on NumPy arrays or PyTorch/DLPack tensors, and train them.

    import memopt, numpy as np
    program = memopt.compile("model.onnx", memory_budget="64MiB")
    print(program.report["arena_bytes"])          # the memory report, as memopt-compile writes it
    outputs = program.run({"input": np.ones((1, 3, 224, 224), np.float32)})

memopt.compile(...)  the compiler (in-process), returns a loaded Program
memopt.fit(...)      the fastest configuration whose training step fits in N bytes, compiled
memopt.load(path)    a program built earlier (memopt-compile --emit lib, or compile's workdir)
memopt.Program       run / train_step / save / load_weights / report / inputs / outputs
memopt.Training      the training options (memopt-compile --train)
memopt.Error         every error it raises (CompileError, InputError, ExecutionError, LoadError)

docs/python.md has the whole story.
"""

from ._errors import CompileError, Error, ExecutionError, InputError, LoadError
from ._program import Program, TensorInfo, load
from ._compile import Training, compile, fit

__all__ = ["compile", "fit", "load", "Program", "Training", "TensorInfo", "Error", "CompileError",
           "InputError", "ExecutionError", "LoadError"]
__version__ = "0.1.0"
