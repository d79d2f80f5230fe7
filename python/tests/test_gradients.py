"""Per-op gradients (issue 11, "each VJP against central finite differences in double
precision on small random tensors").

For every op family with a rule in lib/Dialect/MemOpt/IR/Gradients.cpp, a tiny ONNX graph puts
the op's float operands in as initializers (so memopt trains them) and reduces its result(s)
to a scalar with fixed random weights R that come from a graph INPUT (so they are not trained):

    loss = sum_k sum(op(p1 + zero, p2 + zero, ...)[k] * R_k)

`zero` is a scalar 0 read from the graph input too: memopt's importer folds every op whose
operands are all constants, initializers included, so an op that only read parameters would
be folded before its parameters became variables (and silently not trained).

memopt-compile --train --loss output --optimizer sgd --momentum 0.9 --lr 0 builds the step;
after one step each parameter's momentum buffer (--save-state) is exactly d loss / d param.
The reference is a central finite difference in float64 (step 1e-6 * max(1, |p|), every
element, or 48 random ones of a larger parameter): the same graph with every float tensor
made DOUBLE and the parameters as graph inputs, evaluated by onnxruntime (CPU) or, where it
has no double kernel (LeakyRelu, HardSigmoid/HardSwish, Erf, Gelu, Conv, AveragePool), by
onnx's reference evaluator (with float64 Erf and Gelu: its own round to float32).

Tolerance: relative L2 error <= 1e-3 (the f32 program against the f64 difference quotient;
the rules are at 1e-7), and neither gradient may be all zeros. Inputs stay away from kinks
(relu/abs/clip/leaky-relu at their thresholds, ties of max/min/max-pool/reduce-max, the
corners of hard-swish/hard-sigmoid), so no difference quotient straddles one.

Speed (~25 s with -n 2): the cases of a family are compiled into one model (their losses
added), once for all xdist workers (a lock in a folder they share); every case is its own
test item. The training executable reads each input as samples along axis 0, so the model
has one input, `feed` [1, N], that every R and zero is sliced from. If a family does not
compile or run, each of its cases is compiled alone, so the failure names the op. The step's
printed loss is checked against the float64 forward (test_family_forward_loss), so a forward
mismatch does not pass for a gradient bug. See build_step for the planner.
Build folder: $MEMOPT_BUILD_DIR (see conftest.py); it needs bin/memopt-compile and
bin/memopt-opt.
"""

import fcntl
import functools
import json
import math
import os
import re
import subprocess
import zlib
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

from conftest import _tool

OPSET = 20  # Gelu (with approximate='tanh') is opset 20
TOLERANCE = 1e-3  # relative L2, f32 program against f64 central differences
LOSS_TOLERANCE = 1e-4  # memopt's f32 forward loss against the f64 forward
FD_STEP = 1e-6  # relative to max(1, |p|)
FD_MAX_ELEMENTS = 48  # a larger parameter is differentiated on a random subset


#===------------------------------------------------------------------------------------===#
# Cases
#===------------------------------------------------------------------------------------===#


@dataclass
class Case:
    """One op (or a few nodes) under test. Tensor names are local; `params` are float
    initializers memopt trains (and that the reference differentiates), `consts` are
    initializers that are not differentiated (int64 indices and shapes, bools; float ones,
    such as BatchNormalization's running statistics, are made DOUBLE in the reference),
    `inputs` are graph inputs other than the R weights, `outputs` the results that get an R."""
    name: str
    nodes: list
    params: dict
    outputs: list
    consts: dict = field(default_factory=dict)
    inputs: dict = field(default_factory=dict)


def _rng(name):
    """A generator seeded by a name (stable across processes, unlike hash())."""
    return np.random.default_rng(zlib.crc32(name.encode()))


def away_from(rng, shape, low, high, kinks=(0.0,), gap=0.1):
    """Uniform values in [low, high], each at least `gap` from every kink."""
    values = rng.uniform(low, high, size=shape)
    for _ in range(100):
        near = np.zeros(values.shape, bool)
        for kink in kinks:
            near |= np.abs(values - kink) < gap
        if not near.any():
            break
        values[near] = rng.uniform(low, high, size=int(near.sum()))
    return values


def distinct(rng, shape):
    """Random values in [-1.5, 1.5] whose pairwise gaps are at least half the grid spacing
    (>= 0.015 for up to 100 elements): no ties for max pooling and reduce-max."""
    count = int(np.prod(shape))
    grid = np.linspace(-1.5, 1.5, count)
    spacing = 3.0 / max(count - 1, 1)
    values = rng.permutation(grid) + rng.uniform(-0.25, 0.25, count) * spacing
    return values.reshape(shape)


def node(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, **attrs)


def i64(values):
    return np.array(values, dtype=np.int64)


def unary_cases():
    cases = []

    def unary(name, op, values, **attrs):
        cases.append(Case(name, [node(op, ["p"], ["y"], **attrs)], {"p": values}, ["y"]))

    r = _rng("unary")
    shape = (3, 5)
    unary("relu", "Relu", away_from(r, shape, -2, 2))
    unary("leaky_relu", "LeakyRelu", away_from(r, shape, -2, 2), alpha=0.15)
    unary("sigmoid", "Sigmoid", r.uniform(-3, 3, shape))
    unary("tanh", "Tanh", r.uniform(-2, 2, shape))
    unary("exp", "Exp", r.uniform(-2, 1.5, shape))
    unary("log", "Log", r.uniform(0.3, 3, shape))
    unary("sqrt", "Sqrt", r.uniform(0.3, 3, shape))
    unary("reciprocal", "Reciprocal", away_from(r, shape, -2, 2, gap=0.4))
    unary("neg", "Neg", r.uniform(-2, 2, shape))
    unary("abs", "Abs", away_from(r, shape, -2, 2))
    unary("erf", "Erf", r.uniform(-2, 2, shape))
    unary("sin", "Sin", r.uniform(-3, 3, shape))
    unary("cos", "Cos", r.uniform(-3, 3, shape))
    unary("gelu_none", "Gelu", r.uniform(-3, 3, shape))
    unary("gelu_tanh", "Gelu", r.uniform(-3, 3, shape), approximate="tanh")
    # Kinks at -3 and 3; values on all three pieces.
    unary("hard_swish", "HardSwish", away_from(r, (4, 5), -4.5, 4.5, kinks=(-3.0, 3.0)))
    # alpha 0.3, beta 0.4: kinks at -4/3 and 2.
    unary("hard_sigmoid", "HardSigmoid",
          away_from(r, (4, 5), -3, 3.5, kinks=(-4 / 3, 2.0)), alpha=0.3, beta=0.4)
    # Clip with min and max as (float) initializers, and with max only.
    cases.append(Case("clip", [node("Clip", ["p", "lo", "hi"], ["y"])],
                      {"p": away_from(r, (4, 5), -2, 2, kinks=(-0.5, 0.6))}, ["y"],
                      consts={"lo": np.array(-0.5, np.float32),
                              "hi": np.array(0.6, np.float32)}))
    cases.append(Case("clip_max_only", [node("Clip", ["p", "", "hi"], ["y"])],
                      {"p": away_from(r, (4, 5), -2, 2, kinks=(0.6,))}, ["y"],
                      consts={"hi": np.array(0.6, np.float32)}))
    cases.append(Case("clip_min_only", [node("Clip", ["p", "lo"], ["y"])],
                      {"p": away_from(r, (4, 5), -2, 2, kinks=(-0.5,))}, ["y"],
                      consts={"lo": np.array(-0.5, np.float32)}))
    unary("hard_sigmoid_default", "HardSigmoid", away_from(r, (4, 5), -3.5, 3.5,
                                                           kinks=(-2.5, 2.5)))
    unary("identity", "Identity", r.uniform(-2, 2, shape))
    # Cast f32 -> f32 is a no-op (the reference makes it DOUBLE -> DOUBLE).
    cases.append(Case("cast_f32_noop", [node("Cast", ["p"], ["c"], to=TensorProto.FLOAT),
                                        node("Tanh", ["c"], ["y"])],
                      {"p": r.uniform(-2, 2, shape)}, ["y"]))
    return cases


def binary_cases():
    r = _rng("binary")
    cases = []

    def binary(name, op, a, b):
        cases.append(Case(name, [node(op, ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"]))

    binary("add_bcast", "Add", r.normal(size=(2, 3, 4)), r.normal(size=(3, 1)))
    binary("add_same", "Add", r.normal(size=(3, 4)), r.normal(size=(3, 4)))
    binary("sub_bcast_both", "Sub", r.normal(size=(3, 1)), r.normal(size=(1, 4)))
    binary("mul_bcast", "Mul", r.normal(size=(2, 3, 4)), r.normal(size=(4,)))
    binary("mul_scalar", "Mul", r.normal(size=(3, 4)), r.normal(size=()))
    # One value as both operands: its two gradients are added.
    cases.append(Case("mul_square", [node("Mul", ["a", "a"], ["y"])],
                      {"a": r.normal(size=(3, 4))}, ["y"]))
    binary("div_bcast", "Div", r.normal(size=(3, 4)), away_from(r, (3, 1), -2, 2, gap=0.5))
    binary("div_bcast_a", "Div", r.normal(size=(4,)), away_from(r, (3, 4), -2, 2, gap=0.5))
    binary("pow_bcast", "Pow", r.uniform(0.5, 2.0, size=(3, 4)), r.uniform(0.5, 2.5, (4,)))
    binary("pow_scalar_exponent", "Pow", r.uniform(0.5, 2.0, size=(3, 4)),
           np.array(2.0))
    # max/min: the two operands at least 0.1 apart everywhere (no ties).
    a = r.normal(size=(3, 4))
    b = r.normal(size=(4,))
    a = np.where(np.abs(a - b) < 0.1, a + 0.3, a)
    binary("max_bcast", "Max", a, b)
    binary("min_bcast", "Min", a, b)
    # c [2, 1, 4] wins whole columns of one batch and loses the others (no ties).
    top, bottom = np.maximum(a, b).max(axis=0), np.minimum(a, b).min(axis=0)
    wins = r.random((2, 1, 4)) < 0.5
    wins[0, 0, 0], wins[1, 0, 0] = True, False
    c = np.where(wins, top + 0.3, bottom - 0.3)
    cases.append(Case("max_variadic", [node("Max", ["a", "b", "c"], ["y"])],
                      {"a": a, "b": b, "c": c}, ["y"]))
    cases.append(Case("sum_variadic", [node("Sum", ["a", "b", "c"], ["y"])],
                      {"a": a, "b": b, "c": c}, ["y"]))
    # where: the condition comes from a graph input x (not trained), broadcast to [3, 4].
    x = np.array([[1.0], [-1.0], [2.0]], np.float32)
    cases.append(Case("where_bcast",
                      [node("Greater", ["x", "threshold"], ["cond"]),
                       node("Where", ["cond", "a", "b"], ["y"])],
                      {"a": r.normal(size=(1, 4)), "b": r.normal(size=(3, 4))}, ["y"],
                      consts={"threshold": np.array(0.0, np.float32)}, inputs={"x": x}))
    cases.append(Case("where_bool_const",
                      [node("Where", ["cond", "a", "b"], ["y"])],
                      {"a": r.normal(size=(3, 4)), "b": r.normal(size=(4,))}, ["y"],
                      consts={"cond": r.random((3, 4)) < 0.5}))
    return cases


def pow_int_cases():
    """Pow with an int64 exponent (ONNX's T2): the importer casts the exponent to the base's
    type."""
    r = _rng("pow_int")
    return [Case("pow_int64_exponent", [node("Pow", ["a", "e"], ["y"])],
                 {"a": r.uniform(0.5, 2.0, size=(3, 4))}, ["y"],
                 consts={"e": i64([3, 1, 2, 0])})]


def matmul_cases():
    r = _rng("matmul")
    cases = []

    def gemm(name, a, b, c=None, **attrs):
        inputs = ["a", "b"] + (["c"] if c is not None else [])
        params = {"a": a, "b": b}
        if c is not None:
            params["c"] = c
        cases.append(Case(name, [node("Gemm", inputs, ["y"], **attrs)], params, ["y"]))

    gemm("gemm_plain", r.normal(size=(3, 4)), r.normal(size=(4, 5)))
    gemm("gemm_bias_row_alpha_beta", r.normal(size=(3, 4)), r.normal(size=(4, 5)),
         r.normal(size=(5,)), alpha=0.7, beta=1.3)
    gemm("gemm_transA_transB_bias_col", r.normal(size=(4, 3)), r.normal(size=(5, 4)),
         r.normal(size=(3, 1)), transA=1, transB=1, alpha=-0.6, beta=0.5)
    gemm("gemm_transA_bias_full", r.normal(size=(4, 3)), r.normal(size=(4, 5)),
         r.normal(size=(3, 5)), transA=1, beta=2.0)
    gemm("gemm_transB_bias_scalar", r.normal(size=(3, 4)), r.normal(size=(5, 4)),
         r.normal(size=(1,)), transB=1, alpha=1.5)

    def matmul(name, a, b):
        cases.append(Case(name, [node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"]))

    matmul("matmul_2d", r.normal(size=(3, 4)), r.normal(size=(4, 5)))
    matmul("matmul_batched", r.normal(size=(2, 3, 4)), r.normal(size=(2, 4, 5)))
    matmul("matmul_batch_bcast", r.normal(size=(2, 1, 3, 4)), r.normal(size=(3, 4, 2)))
    matmul("matmul_batched_by_2d", r.normal(size=(2, 3, 4)), r.normal(size=(4, 5)))
    matmul("matmul_2d_by_batched", r.normal(size=(3, 4)), r.normal(size=(2, 4, 5)))
    matmul("matmul_1d_left", r.normal(size=(4,)), r.normal(size=(4, 5)))
    matmul("matmul_1d_right", r.normal(size=(3, 4)), r.normal(size=(4,)))
    matmul("matmul_1d_both", r.normal(size=(4,)), r.normal(size=(4,)))
    matmul("matmul_batched_1d_right", r.normal(size=(2, 3, 4)), r.normal(size=(4,)))
    matmul("matmul_1d_left_batched", r.normal(size=(4,)), r.normal(size=(2, 4, 3)))
    return cases


def conv_cases():
    r = _rng("conv")
    cases = []

    def conv(name, x, w, b=None, **attrs):
        inputs = ["x", "w"] + (["b"] if b is not None else [])
        params = {"x": x, "w": w}
        if b is not None:
            params["b"] = b
        cases.append(Case(name, [node("Conv", inputs, ["y"], **attrs)], params, ["y"]))

    conv("conv_plain", r.normal(size=(1, 2, 4, 4)), r.normal(size=(3, 2, 3, 3)))
    conv("conv_stride_pad_bias", r.normal(size=(2, 2, 5, 5)), r.normal(size=(3, 2, 3, 3)),
         r.normal(size=(3,)), strides=[2, 2], pads=[1, 1, 1, 1])
    conv("conv_stride_uncovered", r.normal(size=(1, 2, 6, 6)), r.normal(size=(2, 2, 3, 3)),
         strides=[2, 2])  # the last row/column is never read
    conv("conv_dilation_asym_pad", r.normal(size=(1, 2, 6, 5)), r.normal(size=(2, 2, 2, 3)),
         r.normal(size=(2,)), dilations=[2, 1], pads=[1, 0, 0, 2])
    conv("conv_group2", r.normal(size=(1, 4, 5, 5)), r.normal(size=(4, 2, 3, 3)),
         r.normal(size=(4,)), group=2, pads=[1, 1, 1, 1])
    conv("conv_depthwise_bias", r.normal(size=(2, 3, 5, 5)), r.normal(size=(3, 1, 3, 3)),
         r.normal(size=(3,)), group=3, strides=[2, 2], pads=[1, 1, 1, 1])
    conv("conv_depthwise_multiplier", r.normal(size=(1, 2, 4, 4)),
         r.normal(size=(4, 1, 3, 3)), group=2, dilations=[2, 2], pads=[2, 2, 2, 2])
    conv("conv_auto_pad_same_upper", r.normal(size=(1, 2, 5, 5)),
         r.normal(size=(2, 2, 2, 2)), auto_pad="SAME_UPPER", strides=[2, 2])
    conv("conv_1d", r.normal(size=(2, 2, 7)), r.normal(size=(3, 2, 3)), r.normal(size=(3,)),
         strides=[2], pads=[1, 1])
    return cases


def pool_cases():
    r = _rng("pool")
    cases = []

    def pool(name, op, shape, **attrs):
        cases.append(Case(name, [node(op, ["x"], ["y"], **attrs)],
                          {"x": distinct(r, shape)}, ["y"]))

    pool("maxpool_k3_s2_pad1", "MaxPool", (1, 2, 5, 5), kernel_shape=[3, 3], strides=[2, 2],
         pads=[1, 1, 1, 1])
    pool("maxpool_k2_s1_overlap", "MaxPool", (2, 1, 4, 4), kernel_shape=[2, 2])
    pool("maxpool_ceil", "MaxPool", (1, 2, 5, 5), kernel_shape=[2, 2], strides=[2, 2],
         ceil_mode=1)
    pool("avgpool_exclude_pad", "AveragePool", (1, 2, 5, 5), kernel_shape=[3, 3],
         strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0)
    pool("avgpool_include_pad", "AveragePool", (1, 2, 5, 5), kernel_shape=[3, 3],
         strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1)
    pool("avgpool_ceil", "AveragePool", (1, 2, 5, 5), kernel_shape=[2, 2], strides=[2, 2],
         ceil_mode=1)
    pool("avgpool_k2_s1_overlap", "AveragePool", (2, 1, 4, 4), kernel_shape=[2, 2])
    pool("maxpool_dilated", "MaxPool", (1, 2, 6, 6), kernel_shape=[2, 2], dilations=[2, 2],
         pads=[1, 0, 0, 1])
    pool("avgpool_ceil_pad_include", "AveragePool", (1, 1, 6, 6), kernel_shape=[3, 3],
         strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1)
    pool("global_avgpool", "GlobalAveragePool", (2, 3, 3, 4))
    return cases


def norm_cases():
    r = _rng("norm")
    cases = []
    cases.append(Case("batchnorm_inference",
                      [node("BatchNormalization", ["x", "scale", "b", "mean", "var"], ["y"],
                            epsilon=1e-3)],
                      {"x": r.normal(size=(2, 3, 2, 3)), "scale": r.uniform(0.5, 1.5, 3),
                       "b": r.normal(size=3)}, ["y"],
                      consts={"mean": r.normal(size=3).astype(np.float32) * 0.3,
                              "var": r.uniform(0.5, 2.0, 3).astype(np.float32)}))
    cases.append(Case("batchnorm_2d_input",
                      [node("BatchNormalization", ["x", "scale", "b", "mean", "var"], ["y"])],
                      {"x": r.normal(size=(4, 3)), "scale": r.uniform(0.5, 1.5, 3),
                       "b": r.normal(size=3)}, ["y"],
                      consts={"mean": r.normal(size=3).astype(np.float32) * 0.3,
                              "var": r.uniform(0.5, 2.0, 3).astype(np.float32)}))
    cases.append(Case("layernorm_last_axis",
                      [node("LayerNormalization", ["x", "scale", "b"], ["y"], axis=-1,
                            epsilon=1e-5)],
                      {"x": r.normal(size=(2, 3, 5)), "scale": r.uniform(0.5, 1.5, 5),
                       "b": r.normal(size=5)}, ["y"]))
    cases.append(Case("layernorm_axis1_no_bias",
                      [node("LayerNormalization", ["x", "scale"], ["y"], axis=1,
                            epsilon=1e-3)],
                      {"x": r.normal(size=(2, 3, 4)), "scale": r.uniform(0.5, 1.5, (3, 4))},
                      ["y"]))
    cases.append(Case("softmax_last_axis", [node("Softmax", ["x"], ["y"])],
                      {"x": r.normal(size=(3, 5))}, ["y"]))
    cases.append(Case("softmax_axis1", [node("Softmax", ["x"], ["y"], axis=1)],
                      {"x": r.normal(size=(2, 4, 3))}, ["y"]))
    return cases


def reduce_cases():
    r = _rng("reduce")
    cases = []

    def reduce(name, op, x, axes, keepdims):
        inputs = ["x"] + (["axes"] if axes is not None else [])
        consts = {"axes": i64(axes)} if axes is not None else {}
        cases.append(Case(name, [node(op, inputs, ["y"], keepdims=keepdims)], {"x": x}, ["y"],
                          consts=consts))

    reduce("reduce_sum_axis1", "ReduceSum", r.normal(size=(2, 3, 4)), [1], 0)
    reduce("reduce_sum_all_keepdims", "ReduceSum", r.normal(size=(2, 3, 4)), None, 1)
    reduce("reduce_sum_neg_axes", "ReduceSum", r.normal(size=(2, 3, 4)), [-1, 0], 1)
    reduce("reduce_mean_axes02", "ReduceMean", r.normal(size=(2, 3, 4)), [0, 2], 1)
    reduce("reduce_mean_all", "ReduceMean", r.normal(size=(3, 4)), None, 0)
    reduce("reduce_max_axis1", "ReduceMax", distinct(r, (2, 4, 3)), [1], 0)
    reduce("reduce_max_last_keepdims", "ReduceMax", distinct(r, (3, 5)), [-1], 1)
    return cases


def shape_cases():
    r = _rng("shape")
    cases = []
    x = r.normal(size=(2, 3, 4))
    cases.append(Case("reshape", [node("Reshape", ["x", "shape"], ["y"])], {"x": x}, ["y"],
                      consts={"shape": i64([4, -1])}))
    cases.append(Case("flatten_axis2", [node("Flatten", ["x"], ["y"], axis=2)],
                      {"x": r.normal(size=(2, 3, 2, 2))}, ["y"]))
    cases.append(Case("squeeze", [node("Squeeze", ["x", "axes"], ["y"])],
                      {"x": r.normal(size=(3, 1, 4, 1))}, ["y"], consts={"axes": i64([1, 3])}))
    cases.append(Case("unsqueeze", [node("Unsqueeze", ["x", "axes"], ["y"])],
                      {"x": r.normal(size=(3, 4))}, ["y"], consts={"axes": i64([0, 2])}))
    cases.append(Case("transpose", [node("Transpose", ["x"], ["y"], perm=[2, 0, 1])],
                      {"x": r.normal(size=(2, 3, 4))}, ["y"]))
    cases.append(Case("transpose_4d", [node("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1])],
                      {"x": r.normal(size=(2, 3, 2, 4))}, ["y"]))
    cases.append(Case("expand", [node("Expand", ["x", "shape"], ["y"])],
                      {"x": r.normal(size=(3, 1))}, ["y"], consts={"shape": i64([2, 3, 4])}))
    cases.append(Case("expand_same_rank", [node("Expand", ["x", "shape"], ["y"])],
                      {"x": r.normal(size=(1, 4))}, ["y"], consts={"shape": i64([3, 4])}))
    cases.append(Case("concat_axis1", [node("Concat", ["a", "b", "c"], ["y"], axis=1)],
                      {"a": r.normal(size=(2, 1, 3)), "b": r.normal(size=(2, 3, 3)),
                       "c": r.normal(size=(2, 2, 3))}, ["y"]))
    cases.append(Case("concat_neg_axis", [node("Concat", ["a", "b"], ["y"], axis=-1)],
                      {"a": r.normal(size=(3, 2)), "b": r.normal(size=(3, 4))}, ["y"]))
    cases.append(Case("split_sizes", [node("Split", ["x", "split"], ["y0", "y1", "y2"],
                                           axis=1)],
                      {"x": r.normal(size=(2, 5, 3))}, ["y0", "y1", "y2"],
                      consts={"split": i64([1, 2, 2])}))
    # Only pieces 0 and 2 reach the loss: the middle one's gradient is zeros.
    cases.append(Case("split_unused_piece", [node("Split", ["x"], ["y0", "y1", "y2"], axis=0,
                                                  num_outputs=3)],
                      {"x": r.normal(size=(6, 2))}, ["y0", "y2"]))
    cases.append(Case("slice_step1", [node("Slice", ["x", "starts", "ends", "axes"], ["y"])],
                      {"x": r.normal(size=(5, 6))}, ["y"],
                      consts={"starts": i64([1, -4]), "ends": i64([4, 100]),
                              "axes": i64([0, 1])}))
    cases.append(Case("slice_step2", [node("Slice", ["x", "starts", "ends", "axes", "steps"],
                                           ["y"])],
                      {"x": r.normal(size=(5, 7))}, ["y"],
                      consts={"starts": i64([0, 1]), "ends": i64([5, 6]),
                              "axes": i64([0, 1]), "steps": i64([2, 2])}))
    cases.append(Case("slice_step2_one_axis",
                      [node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])],
                      {"x": r.normal(size=(2, 7, 3))}, ["y"],
                      consts={"starts": i64([-6]), "ends": i64([7]), "axes": i64([1]),
                              "steps": i64([2])}))
    cases.append(Case("pad_constant", [node("Pad", ["x", "pads", "value"], ["y"],
                                            mode="constant")],
                      {"x": r.normal(size=(3, 4))}, ["y"],
                      consts={"pads": i64([1, 0, 2, 3]),
                              "value": np.array(0.5, np.float32)}))
    cases.append(Case("pad_constant_4d", [node("Pad", ["x", "pads"], ["y"])],
                      {"x": r.normal(size=(1, 2, 3, 3))}, ["y"],
                      consts={"pads": i64([0, 0, 1, 2, 0, 0, 2, 1])}))
    return cases


def gather_cases():
    r = _rng("gather")
    cases = []
    # Repeated indices: the table's gradient must add both rows.
    cases.append(Case("gather_axis0", [node("Gather", ["x", "idx"], ["y"], axis=0)],
                      {"x": r.normal(size=(5, 3))}, ["y"],
                      consts={"idx": i64([[0, 2], [4, 2]])}))
    cases.append(Case("gather_axis1", [node("Gather", ["x", "idx"], ["y"], axis=1)],
                      {"x": r.normal(size=(3, 5))}, ["y"], consts={"idx": i64([1, 3, 1])}))
    cases.append(Case("gather_axis1_3d_neg_idx", [node("Gather", ["x", "idx"], ["y"], axis=1)],
                      {"x": r.normal(size=(2, 4, 3))}, ["y"],
                      consts={"idx": i64([[3, 0], [-1, 2]])}))
    cases.append(Case("gather_scalar_index", [node("Gather", ["x", "idx"], ["y"], axis=0)],
                      {"x": r.normal(size=(4, 3))}, ["y"], consts={"idx": i64(2)}))
    cases.append(Case("scatter_nd", [node("ScatterND", ["x", "idx", "u"], ["y"])],
                      {"x": r.normal(size=(5, 3)), "u": r.normal(size=(2, 3))}, ["y"],
                      consts={"idx": i64([[1], [3]])}))
    cases.append(Case("scatter_nd_2d_tuples", [node("ScatterND", ["x", "idx", "u"], ["y"])],
                      {"x": r.normal(size=(5, 3)), "u": r.normal(size=(2, 2, 3))}, ["y"],
                      consts={"idx": i64([[[0], [2]], [[3], [1]]])}))
    return cases


def constant(name, value):
    """An ONNX Constant node (not an initializer: memopt trains float initializers, and
    attention fusion needs its scale and fills as constants). The f64 reference makes it
    DOUBLE (prefixed_nodes)."""
    return node("Constant", [], [name],
                value=numpy_helper.from_array(np.asarray(value, np.float32), name))


def attention_cases():
    """Exporters' op-by-op attention, which memopt-compile --train fuses into
    memopt.attention (test_attention_family_is_fused checks that every case was) and
    differentiates with memopt.attention_grad: recomputed probabilities, no S x S tensor."""
    r = _rng("attention")
    cases = []

    def probs_to_output(scores, nodes, safe=False, value="v"):
        nodes.append(node("Softmax", [scores], ["p"], axis=-1))
        probs = "p"
        if safe:  # PyTorch's safe softmax: fully masked rows give zeros
            nodes += [constant("nan_fill", 0.0),
                      node("IsNaN", ["p"], ["p_nan"]),
                      node("Where", ["p_nan", "nan_fill", "p"], ["p_safe"])]
            probs = "p_safe"
        nodes.append(node("MatMul", [probs, value], ["y"]))
        return nodes

    # Scaled (Mul by a constant), K transposed by a Transpose of its last two axes.
    nodes = [node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             node("MatMul", ["q", "kt"], ["s"]), constant("scale", 0.5),
             node("Mul", ["s", "scale"], ["scaled"])]
    cases.append(Case("attention_scaled", probs_to_output("scaled", nodes),
                      {"q": r.normal(size=(2, 2, 5, 4)), "k": r.normal(size=(2, 2, 5, 4)),
                       "v": r.normal(size=(2, 2, 5, 3))}, ["y"]))
    # GPT-2: K^T as it comes (key_transposed), Div by sqrt(d), causal Where(tril, s, -inf).
    tril = np.tril(np.ones((6, 6), bool))
    nodes = [node("MatMul", ["q", "kt"], ["s"]), constant("sqrt_d", 2.0),
             node("Div", ["s", "sqrt_d"], ["scaled"]),
             node("Where", ["tril", "scaled", "neg_inf"], ["masked"])]
    cases.append(Case("attention_causal_key_transposed", probs_to_output("masked", nodes),
                      {"q": r.normal(size=(2, 2, 6, 4)), "kt": r.normal(size=(2, 2, 4, 6)),
                       "v": r.normal(size=(2, 2, 6, 3))}, ["y"],
                      consts={"tril": tril, "neg_inf": np.array(-np.inf, np.float32)}))
    # Swin: a trained relative-position bias [H, S, S] broadcast over the batch, plus a
    # constant padding mask of -inf (the last key of the second sequence).
    mask = np.zeros((2, 1, 1, 5), np.float32)
    mask[1, 0, 0, 4] = -np.inf
    nodes = [node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             node("MatMul", ["q", "kt"], ["s"]), constant("scale", 0.35),
             node("Mul", ["s", "scale"], ["scaled"]),
             node("Add", ["scaled", "relative_bias"], ["biased"]),
             node("Add", ["biased", "mask"], ["masked"])]
    cases.append(Case("attention_trained_bias", probs_to_output("masked", nodes),
                      {"q": r.normal(size=(2, 2, 5, 4)), "k": r.normal(size=(2, 2, 5, 4)),
                       "v": r.normal(size=(2, 2, 5, 4)),
                       "relative_bias": r.normal(size=(2, 5, 5)) * 0.5},
                      ["y"], consts={"mask": mask}))
    # Safe softmax: causal with left padding, so the first query rows of the second
    # sequence see no key at all (zeros, and zero gradients).
    pad = np.zeros((2, 1, 1, 6), np.float32)
    pad[1, 0, 0, :2] = -np.inf
    nodes = [node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             node("MatMul", ["q", "kt"], ["s"]), constant("scale", 0.5),
             node("Mul", ["s", "scale"], ["scaled"]),
             node("Where", ["tril", "scaled", "neg_inf"], ["causal"]),
             node("Add", ["causal", "pad"], ["masked"])]
    cases.append(Case("attention_safe_softmax_masked_rows",
                      probs_to_output("masked", nodes, safe=True),
                      {"q": r.normal(size=(2, 2, 6, 4)), "k": r.normal(size=(2, 2, 6, 4)),
                       "v": r.normal(size=(2, 2, 6, 3))}, ["y"],
                      consts={"tril": tril, "neg_inf": np.array(-np.inf, np.float32),
                              "pad": pad}))
    # K and V shared by the batch (broadcast): their gradients are summed over it.
    nodes = [node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
             node("MatMul", ["q", "kt"], ["s"]), constant("scale", 0.5),
             node("Mul", ["s", "scale"], ["scaled"])]
    cases.append(Case("attention_broadcast_key_value", probs_to_output("scaled", nodes),
                      {"q": r.normal(size=(3, 2, 4, 4)), "k": r.normal(size=(2, 7, 4)),
                       "v": r.normal(size=(2, 7, 3))}, ["y"]))
    # GPT-2 / BERT exporters: K^T = Transpose(K [B, S, H, D], perm [0, 2, 3, 1]), causal;
    # the fusion takes K as [Sk, D] (the transpose's last two axes swapped).
    nodes = [node("Transpose", ["k_bshd"], ["kt"], perm=[0, 2, 3, 1]),
             node("MatMul", ["q", "kt"], ["s"]), constant("sqrt_d", 2.0),
             node("Div", ["s", "sqrt_d"], ["scaled"]),
             node("Where", ["tril", "scaled", "neg_inf"], ["masked"])]
    cases.append(Case("attention_key_bshd", probs_to_output("masked", nodes),
                      {"q": r.normal(size=(2, 2, 6, 4)), "k_bshd": r.normal(size=(2, 6, 2, 4)),
                       "v": r.normal(size=(2, 2, 6, 3))}, ["y"],
                      consts={"tril": tril, "neg_inf": np.array(-np.inf, np.float32)}))
    # Grouped-query attention (Llama's repeat_kv: Unsqueeze -> Expand -> Reshape of K and
    # V's 2 heads for 4 query heads): the op reads K and V before the repeat and its
    # gradient gives dK and dV summed over each group (grouped_gradients).
    nodes = []
    for name, width in (("k", 4), ("v", 3)):
        nodes += [node("Unsqueeze", [name, "kv_axes"], [name + "_1"]),
                  node("Expand", [name + "_1", name + "_expand"], [name + "_x"]),
                  node("Reshape", [name + "_x", name + "_heads"], [name + "_r"])]
    nodes += [node("Transpose", ["k_r"], ["kt"], perm=[0, 1, 3, 2]),
              node("MatMul", ["q", "kt"], ["s"]), constant("scale", 0.5),
              node("Mul", ["s", "scale"], ["scaled"])]
    cases.append(Case("attention_grouped_query", probs_to_output("scaled", nodes, value="v_r"),
                      {"q": r.normal(size=(2, 4, 5, 4)), "k": r.normal(size=(2, 2, 5, 4)),
                       "v": r.normal(size=(2, 2, 5, 3))}, ["y"],
                      consts={"kv_axes": i64([2]), "k_expand": i64([2, 2, 2, 5, 4]),
                              "v_expand": i64([2, 2, 2, 5, 3]),
                              "k_heads": i64([2, 4, 5, 4]), "v_heads": i64([2, 4, 5, 3])}))
    return cases


FAMILIES = {
    "unary": unary_cases,
    "binary": binary_cases,
    "pow_int": pow_int_cases,
    "matmul": matmul_cases,
    "conv": conv_cases,
    "pool": pool_cases,
    "norm": norm_cases,
    "reduce": reduce_cases,
    "shape": shape_cases,
    "gather": gather_cases,
    "attention": attention_cases,
}


@functools.lru_cache(maxsize=None)
def family_cases(family):
    cases = FAMILIES[family]()
    for case in cases:
        # Parameters are f32 in memopt: the reference differentiates at the same f32 point.
        case.params = {k: np.asarray(v, np.float32).astype(np.float64)
                       for k, v in case.params.items()}
    return cases


#===------------------------------------------------------------------------------------===#
# Models
#===------------------------------------------------------------------------------------===#
#
# The ONNX importer folds every op whose operands are all constants, initializers included,
# so a parameter that only meets constants would be folded away before it becomes a variable.
# Each parameter p therefore enters as p + zero, where `zero` is a scalar that comes from a
# graph input: the op under test sees a non-constant operand, and d(p + zero)/dp = 1.
# The training executable reads every input as samples along axis 0 (one batch size for
# all), so the memopt model has ONE graph input, `feed` [1, N]: every case's R weights, its
# other inputs and its zero are sliced out of it. The f64 reference takes them as inputs.


def scoped(case, name):
    return f"{case.name}__{name}" if name else ""


def entry(case, name):
    """The name the op reads for its operand `name` (a parameter's goes through + zero)."""
    return scoped(case, name + "__in" if name in case.params else name)


def prefixed_nodes(case, double):
    out = []
    for name in case.params:
        out.append(node("Add", [scoped(case, name), scoped(case, "zero")], [entry(case, name)],
                        name=scoped(case, "enter_" + name)))
    for n in case.nodes:
        copy = onnx.NodeProto()
        copy.CopyFrom(n)
        copy.name = scoped(case, n.name or n.output[0])
        copy.input[:] = [entry(case, i) if i else "" for i in n.input]
        copy.output[:] = [scoped(case, o) for o in n.output]
        if double and copy.op_type == "Cast":
            for attr in copy.attribute:
                if attr.name == "to" and attr.i == TensorProto.FLOAT:
                    attr.i = TensorProto.DOUBLE
        if double and copy.op_type == "Constant":
            for attr in copy.attribute:
                if attr.name == "value" and attr.t.data_type == TensorProto.FLOAT:
                    attr.t.CopyFrom(numpy_helper.from_array(
                        numpy_helper.to_array(attr.t).astype(np.float64), attr.t.name))
        out.append(copy)
    return out


def r_name(case, output):
    return scoped(case, "R_" + output)


def elem_type(array, double):
    if array.dtype.kind == "f":
        return TensorProto.DOUBLE if double else TensorProto.FLOAT
    return helper.np_dtype_to_tensor_dtype(array.dtype)


def float_array(array, double):
    return np.asarray(array, np.float64 if double else np.float32)


def fed(case):
    """The case's non-trained float inputs by (scoped) name: R weights, inputs, zero."""
    values = {scoped(case, "zero"): np.zeros((), np.float32)}
    values.update({scoped(case, n): np.asarray(v, np.float32) for n, v in case.inputs.items()})
    values.update({r_name(case, o): w for o, w in getattr(case, "weights", {}).items()})
    return values


def case_tensors(case, double):
    """(nodes, initializers, loss name) of one case: the fed values are left undefined,
    and in the `double` reference graph so are the parameters (they become inputs)."""
    nodes = prefixed_nodes(case, double)
    inits = []
    if not double:
        inits += [numpy_helper.from_array(float_array(v, False), scoped(case, n))
                  for n, v in case.params.items()]
    for name, value in case.consts.items():
        value = float_array(value, double) if value.dtype.kind == "f" else value
        inits.append(numpy_helper.from_array(value, scoped(case, name)))
    terms = []
    for output in case.outputs:
        weighted = scoped(case, "weighted_" + output)
        term = scoped(case, "term_" + output)
        nodes.append(node("Mul", [scoped(case, output), r_name(case, output)], [weighted]))
        if case.weights[output].ndim:
            nodes.append(node("ReduceSum", [weighted], [term], keepdims=0))
        else:  # memopt's importer refuses a ReduceSum of a rank-0 tensor
            nodes.append(node("Identity", [weighted], [term]))
        terms.append(term)
    loss = terms[0]
    for index, term in enumerate(terms[1:]):
        total = scoped(case, f"loss_{index}")
        nodes.append(node("Add", [loss, term], [total]))
        loss = total
    return nodes, inits, loss


def make_model(nodes, inputs, outputs, inits):
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 9
    return model


def reference_model(case, outputs=None):
    """The f64 graph: parameters and fed values are DOUBLE inputs; its output is the case's
    loss, or the op's `outputs` (of unknown shape) when given."""
    if outputs is None:
        nodes, inits, loss = case_tensors(case, double=True)
        outputs = [helper.make_tensor_value_info(loss, TensorProto.DOUBLE, [])]
        feeds = fed(case)
    else:
        nodes = prefixed_nodes(case, True)
        inits = [numpy_helper.from_array(float_array(v, True) if v.dtype.kind == "f" else v,
                                         scoped(case, n)) for n, v in case.consts.items()]
        outputs = [helper.make_tensor_value_info(scoped(case, o), TensorProto.DOUBLE, None)
                   for o in outputs]
        feeds = fed(case)
    inputs = [helper.make_tensor_value_info(scoped(case, n), TensorProto.DOUBLE, list(v.shape))
              for n, v in case.params.items()]
    inputs += [helper.make_tensor_value_info(n, TensorProto.DOUBLE, list(v.shape))
               for n, v in feeds.items()]
    feeds = {n: v.astype(np.float64) for n, v in feeds.items()}
    return make_model(nodes, inputs, outputs, inits), feeds


def prepare(case):
    """Output shapes (onnx's reference evaluator on the bare op) and the R weights."""
    if hasattr(case, "weights"):
        return
    case.weights = {}
    model, feeds = reference_model(case, case.outputs)
    feeds.update({scoped(case, n): v for n, v in case.params.items()})
    shapes = [np.asarray(v).shape for v in ReferenceEvaluator(model).run(None, feeds)]
    rng = _rng("R" + case.name)
    for output, shape in zip(case.outputs, shapes):
        weight = rng.uniform(0.5, 1.5, shape) * np.where(rng.random(shape) < 0.5, -1, 1)
        case.weights[output] = np.asarray(weight, np.float32)


def memopt_model(cases):
    """One f32 model whose single output is the sum of the cases' losses, and its feed."""
    nodes, inits, losses, pieces = [], [], [], []
    offset = 0
    for case in cases:
        for name, value in fed(case).items():
            size = value.size
            flat = name + "__flat"
            inits += [numpy_helper.from_array(i64([0, offset]), name + "__start"),
                      numpy_helper.from_array(i64([1, offset + size]), name + "__end"),
                      numpy_helper.from_array(i64(list(value.shape)), name + "__shape")]
            nodes.append(node("Slice", ["feed", name + "__start", name + "__end"], [flat]))
            nodes.append(node("Reshape", [flat, name + "__shape"], [name]))
            pieces.append(value.reshape(-1))
            offset += size
        n, t, loss = case_tensors(case, double=False)
        nodes += n
        inits += t
        losses.append(loss)
    total = losses[0]
    for index, loss in enumerate(losses[1:]):
        nodes.append(node("Add", [total, loss], [f"total_{index}"]))
        total = f"total_{index}"
    nodes.append(node("Identity", [total], ["loss"]))
    model = make_model(nodes, [helper.make_tensor_value_info("feed", TensorProto.FLOAT,
                                                             [1, offset])],
                       [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], inits)
    onnx.checker.check_model(model)
    return model, np.concatenate(pieces).astype(np.float32).reshape(1, -1)


_erf = np.vectorize(math.erf, otypes=[np.float64])


# onnx.reference's Erf rounds to float32 (np.vectorize(math.erf, otypes=["f"])) and its Gelu
# is a function body with float32 constants: both are replaced by float64 ones (new_ops
# matches the class name, hence the names).
class Erf(OpRun):
    op_domain = ""

    def _run(self, x):
        return (_erf(x).astype(x.dtype),)


class Gelu(OpRun):
    op_domain = ""

    def _run(self, x, approximate=None):
        if (approximate or getattr(self, "approximate", None) or "none") == "tanh":
            y = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
        else:
            y = 0.5 * x * (1 + _erf(x / math.sqrt(2)))
        return (y.astype(x.dtype),)


def reference_evaluator(model):
    return ReferenceEvaluator(model, new_ops=[Erf, Gelu])


class Reference:
    """The f64 loss of one case as a function of its parameters."""

    def __init__(self, case):
        prepare(case)
        model, self.feeds = reference_model(case)
        self.case = case
        try:
            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            session = ort.InferenceSession(model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
            self.evaluator = "onnxruntime"
            self._run = lambda feeds: session.run(None, feeds)[0]
            self.loss(case.params)
        except Exception:  # no double kernel for some op: onnx's reference evaluator
            evaluator = reference_evaluator(model)
            self.evaluator = "onnx.reference"
            self._run = lambda feeds: evaluator.run(None, feeds)[0]

    def loss(self, params):
        feeds = dict(self.feeds)
        feeds.update({scoped(self.case, n): v for n, v in params.items()})
        return float(np.asarray(self._run(feeds)))

    def gradient(self, name, indices):
        """Central differences of the loss at the flat `indices` of parameter `name`."""
        params = {n: v.copy() for n, v in self.case.params.items()}
        flat = params[name].reshape(-1)
        base = flat.copy()
        result = np.empty(len(indices))
        for k, index in enumerate(indices):
            step = FD_STEP * max(1.0, abs(base[index]))
            flat[index] = base[index] + step
            plus = self.loss(params)
            flat[index] = base[index] - step
            minus = self.loss(params)
            flat[index] = base[index]
            result[k] = (plus - minus) / (2 * step)
        return result


#===------------------------------------------------------------------------------------===#
# Running memopt
#===------------------------------------------------------------------------------------===#


def file_name(name):
    """The executable's file name for a tensor (Main.cpp: fileNameFor)."""
    return re.sub(r"[/\\: ]", "_", name) + ".npy"


def run(argv, timeout=300):
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                          timeout=timeout)


def build_step(model_path, exe, trained):
    """The training step's executable. memopt-compile's own planner (algorithm auto) runs
    its exact search to the 10 s limit on these graphs, whose tensors are all far below the
    256-byte alignment (its lower bound ignores the padding, so it cannot prove a packing
    optimal): the graph IR is planned by memopt-opt with best-fit instead, the same passes
    memopt-compile runs, and lowered with --lower-only. MEMOPT_GRADIENTS_DRIVER=1 uses the
    one-command driver (slow)."""
    # The cases' parameters by name: without an exporter's graph signature, memopt would leave
    # scalars untrained (a scalar initializer is a constant by the exporters' conventions).
    train = ["--train", "--loss", "output", "--optimizer", "sgd", "--momentum", "0.9", "--lr",
             "0", "--target", "host", "--quiet", "--train-params", ",".join(trained)]
    if os.environ.get("MEMOPT_GRADIENTS_DRIVER") == "1":
        steps = [[_tool("memopt-compile"), model_path, *train, "-o", exe]]
    else:
        graph, planned = exe + ".graph.mlir", exe + ".planned.mlir"
        steps = [[_tool("memopt-compile"), model_path, *train, "--emit", "mlir", "-o", graph],
                 [_tool("memopt-opt"), graph, "--memopt-schedule", "--memopt-bufferize",
                  "--memopt-plan-memory=algorithm=best-fit-size outputs-in-arena=true",
                  "-o", planned],
                 [_tool("memopt-compile"), planned, "--lower-only", "--target", "host",
                  "--quiet", "-o", exe]]
    for argv in steps:
        proc = run(argv)
        if proc.returncode != 0:
            raise AssertionError(f"{os.path.basename(argv[0])} failed ({proc.returncode}):\n"
                                 f"{proc.stderr[-3000:]}\n{proc.stdout[-1000:]}")


def memopt_step(cases, folder):
    """Compiles the cases into one training step and runs one step in `folder`; returns
    the step's loss or raises AssertionError with the tool's message."""
    os.makedirs(folder, exist_ok=True)
    for case in cases:
        prepare(case)
    model, feed = memopt_model(cases)
    model_path = os.path.join(folder, "model.onnx")
    onnx.save(model, model_path)
    exe = os.path.join(folder, "step")
    build_step(model_path, exe, [scoped(case, n) for case in cases for n in case.params])
    feed_path = os.path.join(folder, "feed.npy")
    np.save(feed_path, feed)
    proc = run([exe, "--steps", "1", "--save-state", os.path.join(folder, "state"), "--input",
                f"feed={feed_path}"])
    if proc.returncode != 0:
        raise AssertionError(f"training step failed ({proc.returncode}):\n"
                             f"{proc.stderr[-3000:]}\n{proc.stdout[-1000:]}")
    losses = [float(line.split()[-1]) for line in proc.stdout.splitlines()
              if line.startswith("step ")]
    assert len(losses) == 1, proc.stdout
    return losses[0]


def load_gradient(folder, case, name):
    """memopt's gradient of a case's parameter (its momentum buffer), None if it has none."""
    path = os.path.join(folder, "state", file_name(scoped(case, name) + ".momentum_buffer"))
    return np.load(path) if os.path.exists(path) else None


def family_step(family, root):
    """A family's step, run once for all xdist workers (they share `root`; a lock file
    makes the others wait and read the first one's result): its loss or the error text."""
    os.makedirs(root, exist_ok=True)
    folder = os.path.join(root, family)
    with open(os.path.join(root, family + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = os.path.join(root, family + ".json")
        if not os.path.exists(done):
            try:
                result = {"loss": memopt_step(family_cases(family), folder)}
            except AssertionError as error:
                result = {"error": str(error)}
            with open(done, "w") as stream:
                json.dump(result, stream)
        with open(done) as stream:
            result = json.load(stream)
    return result.get("loss"), result.get("error"), folder


@pytest.fixture(scope="session")
def shared_root(tmp_path_factory):
    """A folder all xdist workers of this run share (pytest-xdist's documented idiom)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    return str(base / "gradients")


#===------------------------------------------------------------------------------------===#
# Tests
#===------------------------------------------------------------------------------------===#


def relative_error(actual, expected):
    return float(np.linalg.norm(actual.astype(np.float64) - expected) /
                 max(np.linalg.norm(expected), 1e-30))


# Known gaps outside the gradient rules (strict: they fail the suite once they work).
XFAIL_FAMILIES = {}


def _marks(family):
    reason = XFAIL_FAMILIES.get(family)
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


PARAMS = [pytest.param(family, index, id=case.name, marks=_marks(family))
          for family in FAMILIES for index, case in enumerate(family_cases(family))]


@pytest.mark.parametrize("family,index", PARAMS)
def test_vjp_matches_finite_differences(family, index, shared_root):
    case = family_cases(family)[index]
    reference = Reference(case)
    _, error, folder = family_step(family, shared_root)
    note = ""
    if error is not None:
        # The family does not compile or run as one model: this case alone, so the
        # failure names the op; its forward is checked here too.
        note = f"(family {family} failed as a whole: {error[:300]})"
        folder = os.path.join(shared_root, family + "-alone", case.name)
        loss = memopt_step([case], folder)
        expected = reference.loss(case.params)
        assert loss == pytest.approx(expected, rel=LOSS_TOLERANCE, abs=1e-5), (
            f"forward loss {loss} != float64 {expected} ({reference.evaluator}) {note}")
    failures = []
    for name, value in case.params.items():
        actual = load_gradient(folder, case, name)
        if actual is None:
            failures.append(f"{name}: memopt trained no gradient (no momentum buffer)")
            continue
        assert actual.shape == value.shape, (name, actual.shape, value.shape)
        assert np.any(actual != 0), f"{case.name}: gradient of {name} is all zeros {note}"
        count = value.size
        rng = _rng("fd" + case.name + name)
        indices = (np.arange(count) if count <= FD_MAX_ELEMENTS else
                   np.sort(rng.choice(count, FD_MAX_ELEMENTS, replace=False)))
        expected = reference.gradient(name, indices)
        got = actual.reshape(-1)[indices]
        assert np.any(expected != 0), f"{case.name}: reference gradient of {name} is zero"
        error = relative_error(got, expected)
        if not error <= TOLERANCE:
            worst = int(np.argmax(np.abs(got - expected)))
            failures.append(
                f"{name} {tuple(value.shape)}: relative L2 error {error:.3g} > {TOLERANCE} "
                f"(reference {reference.evaluator}); worst flat index {indices[worst]}: "
                f"memopt {got[worst]:.6g} vs finite differences {expected[worst]:.6g}; "
                f"|memopt| {np.linalg.norm(got):.4g}, |reference| "
                f"{np.linalg.norm(expected):.4g}")
    assert not failures, f"{case.name} {note}:\n" + "\n".join(failures)


def test_attention_family_is_fused(shared_root):
    """Every attention case became memopt.attention and memopt.attention_grad (else the
    finite differences above would test the op-by-op gradient instead)."""
    _, error, folder = family_step("attention", shared_root)
    assert error is None, error
    with open(os.path.join(folder, "step.graph.mlir")) as stream:
        graph = stream.read()
    count = len(attention_cases())
    assert graph.count("memopt.attention_grad ") == count, graph.count("memopt.attention_grad")
    assert len(re.findall(r"= memopt\.attention .*return_lse = true", graph)) == count
    assert "memopt.softmax " not in graph


@pytest.mark.parametrize("family", [pytest.param(f, marks=_marks(f)) for f in FAMILIES])
def test_family_forward_loss(family, shared_root):
    """The family's step loss (memopt, f32) against the sum of the f64 case losses."""
    loss, error, _ = family_step(family, shared_root)
    if error is not None:
        pytest.fail(f"family {family} does not compile or run as one model:\n{error}")
    losses = [Reference(case).loss(case.params) for case in family_cases(family)]
    expected, scale = sum(losses), sum(abs(x) for x in losses)
    assert abs(loss - expected) <= LOSS_TOLERANCE * max(scale, 1.0), (loss, expected)
