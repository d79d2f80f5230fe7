"""ONNX op types that memopt imports: the op list of docs/dialect.md mapped back to ONNX names.

The dialect names ops `memopt.<onnx name in snake_case>`; this module holds the ONNX spelling, so
tests can select models and node tests by `node.op_type`. Some ONNX ops have no dialect op of
their own: `Dropout` (inference) imports as `identity` (training mode: `dropout`), `Constant` as
`constant`, `GatherND` with constant indices as `reshape` + `gather`, and the composed ops of
EXTRA_ONNX_OPS as a few memopt ops each.
Keep in sync with docs/dialect.md (test_supported_ops_match_dialect_doc checks it).
"""

import re

# dialect op name (snake_case) -> ONNX op type
DIALECT_TO_ONNX = {
    "conv": "Conv",
    "conv_transpose": "ConvTranspose",
    "gemm": "Gemm",
    "matmul": "MatMul",
    "batch_normalization": "BatchNormalization",
    "layer_normalization": "LayerNormalization",
    "softmax": "Softmax",
    "max_pool": "MaxPool",
    "average_pool": "AveragePool",
    "global_average_pool": "GlobalAveragePool",
    "add": "Add",
    "sub": "Sub",
    "mul": "Mul",
    "div": "Div",
    "mod": "Mod",
    "pow": "Pow",
    "sqrt": "Sqrt",
    "reciprocal": "Reciprocal",
    "neg": "Neg",
    "exp": "Exp",
    "log": "Log",
    "abs": "Abs",
    "relu": "Relu",
    "leaky_relu": "LeakyRelu",
    "sigmoid": "Sigmoid",
    "tanh": "Tanh",
    "erf": "Erf",
    "gelu": "Gelu",
    "hard_swish": "HardSwish",
    "hard_sigmoid": "HardSigmoid",
    "clip": "Clip",
    "min": "Min",
    "max": "Max",
    "reduce_mean": "ReduceMean",
    "reduce_sum": "ReduceSum",
    "reduce_max": "ReduceMax",
    "cum_sum": "CumSum",
    "reshape": "Reshape",
    "flatten": "Flatten",
    "transpose": "Transpose",
    "squeeze": "Squeeze",
    "unsqueeze": "Unsqueeze",
    "concat": "Concat",
    "split": "Split",
    "slice": "Slice",
    "gather": "Gather",
    "gather_elements": "GatherElements",
    "scatter_nd": "ScatterND",
    "expand": "Expand",
    "where": "Where",
    "equal": "Equal",
    "less": "Less",
    "greater": "Greater",
    "and": "And",
    "or": "Or",
    "not": "Not",
    "is_nan": "IsNaN",
    "cast": "Cast",
    "constant": "Constant",
    "constant_of_shape": "ConstantOfShape",
    "shape": "Shape",
    "range": "Range",
    "sin": "Sin",
    "cos": "Cos",
    "identity": "Identity",
    "resize": "Resize",
    "pad": "Pad",
    # training mode (keyless until memopt-make-trainable keys it); inference mode: identity
    "dropout": "Dropout",
    # a constant key [seed, 0]; memopt-make-trainable keys it like a dropout
    "random_uniform": "RandomUniform",
}

# ONNX ops with no dialect op of their own, imported as another op (the composed ones:
# lib/Import/OnnxComposedOps.cpp) -> the op that carries their meaning.
EXTRA_ONNX_OPS = {
    "Dropout": "identity",
    "RandomUniformLike": "random_uniform",
    "RandomNormal": "random_uniform",
    "RandomNormalLike": "random_uniform",
    "Bernoulli": "random_uniform",
    "GatherND": "gather",
    "CastLike": "cast",
    "LessOrEqual": "or",
    "GreaterOrEqual": "or",
    "Tile": "expand",
    "ReduceL1": "reduce_sum",
    "ReduceL2": "reduce_sum",
    "ReduceSumSquare": "reduce_sum",
    "ReduceLogSum": "reduce_sum",
    "ReduceLogSumExp": "reduce_sum",
    "InstanceNormalization": "layer_normalization",
    "GroupNormalization": "layer_normalization",
    "RMSNormalization": "reduce_mean",
    "SplitToSequence": "split",
    "SequenceAt": "split",
    "ConcatFromSequence": "concat",
    "SequenceLength": "constant",
    "Size": "constant",
    "Sum": "add",
    "ReduceMin": "reduce_max",
    "LogSoftmax": "reduce_sum",
    "NegativeLogLikelihoodLoss": "gather_elements",
    "SoftmaxCrossEntropyLoss": "gather_elements",
    "Attention": "softmax",
    # activations and unary math (lib/Import/OnnxComposedMath.cpp)
    "Elu": "where",
    "Selu": "where",
    "Softplus": "log",
    "Softsign": "div",
    "ThresholdedRelu": "where",
    "Mish": "tanh",
    "Sign": "where",
    "Tan": "sin",
    "Sinh": "exp",
    "Cosh": "exp",
    "Asinh": "log",
    "Acosh": "log",
    "Atanh": "log",
    "Asin": "where",
    "Acos": "where",
    "Atan": "where",
    "Floor": "cast",
    "Ceil": "cast",
    "Round": "cast",
    "IsInf": "equal",
    "PRelu": "where",
    "Mean": "add",
    # reductions (lib/Import/OnnxComposedReductions.cpp)
    "ArgMax": "reduce_max",
    "ArgMin": "reduce_max",
    "Hardmax": "cum_sum",
    "ReduceProd": "mul",
    "GlobalMaxPool": "reduce_max",
    "LpNormalization": "reduce_sum",
    "MeanVarianceNormalization": "reduce_mean",
    "LpPool": "average_pool",
    "LRN": "average_pool",
    "TopK": "reduce_max",
    "Det": "mul",
    # unrolled over the sequence (lib/Import/OnnxComposedRecurrent.cpp)
    "RNN": "gemm",
    "GRU": "gemm",
    "LSTM": "gemm",
    # products with cosine / sine matrices (lib/Import/OnnxComposedSignal.cpp)
    "DFT": "matmul",
    "STFT": "matmul",
    # weighted gathers (lib/Import/OnnxComposedSampling.cpp)
    "GridSample": "gather_elements",
    # selection by position (lib/Import/OnnxIndexOps.cpp)
    "Trilu": "where",
    "ScatterElements": "scatter_nd",
    "CenterCropPad": "pad",
    "RotaryEmbedding": "mul",
    "AffineGrid": "matmul",
    "MaxUnpool": "scatter_nd",
    "Col2Im": "scatter_nd",
    "NonZero": "constant",
    # reduce_sum, transposes and matmuls (lib/Import/OnnxComposedEinsum.cpp)
    "Einsum": "matmul",
}

SUPPORTED_ONNX_OPS = frozenset(DIALECT_TO_ONNX.values()) | frozenset(EXTRA_ONNX_OPS)

# ONNX opsets the importer accepts for the default domain.
MIN_OPSET = 13
MAX_OPSET = 28


def dialect_ops_in_doc(text):
    """The op names listed in docs/dialect.md's 'Op names' bullet (backticked snake_case)."""
    match = re.search(r"\*\*Op names\*\*(.*?)ONNX `Dropout`", text, re.S)
    if not match:
        raise ValueError("docs/dialect.md: 'Op names' bullet not found")
    names = re.findall(r"`([a-z_]+)`", match.group(1))
    return [n for n in names if n != "memopt"]


def is_supported(op_type, domain=""):
    return domain in ("", "ai.onnx") and op_type in SUPPORTED_ONNX_OPS
