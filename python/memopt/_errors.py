"""memopt's exceptions. Every error the package raises is a memopt.Error; the message is the
compiler's or the runtime's own (it names the ONNX node, the tensor or the file)."""


class Error(Exception):
    """Base class of every memopt error."""


class CompileError(Error):
    """The compiler refused the model or the options (unsupported op, bad shape, a memory budget
    below what the program needs, ...). The message is memopt-compile's, naming the node."""


class InputError(Error, ValueError):
    """Arguments that do not fit the program: an unknown or missing input name, a wrong dtype,
    shape or device, a weight that the program does not hold."""


class ExecutionError(Error, RuntimeError):
    """The runtime failed while running the program; the message names the node."""


class LoadError(Error, OSError):
    """A compiled program, its weight file or its report cannot be loaded (missing, truncated,
    or written for another program)."""
