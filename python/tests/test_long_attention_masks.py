"""Attention masks at real training lengths: the causal mask transformers builds by ops.

The committed zoos are exported at short sequences, where memopt's folders (65,536 elements at
most) turn the whole mask sub-graph into a constant. From S = 257 on a [B, 1, S, S] mask stays a
computed tensor; the attention fusion must classify it by value all the same
(AttentionMasks.cpp, RowEvaluator.cpp): a causal mask becomes the kernel's `causal` flag and no
S x S tensor is left in the program. The graphs (mask_graphs.py) are Llama- and GPT-2-shaped
decoders whose masks are spelled as torch.onnx.export(dynamo=True) writes transformers 5.x's
(Range / LessOrEqual / Expand / Where, with an attention_mask, Mistral's sliding window, GPT-2's
older causal buffer).
"""

import re
import subprocess

import numpy as np
import onnx
import pytest

import mask_graphs
import tiers
from conftest import _tool
from test_e2e_host import check_against_onnxruntime

FAMILIES = ("llama", "gpt2")
# What the report says of each mask, and whether an S x S bias operand is left (by design for
# masks the kernel has no flag for, and for causal + padding, whose fully masked padding rows
# the graph makes uniform: docs/attention.md).
EXPECTED = {
    "causal": ("causal; causal in the kernel; safe softmax", False),
    "buffer": ("causal; causal in the kernel; safe softmax", False),
    "padding": ("causal + padding; bias operand [{b}, 1, {s}, {s}] (mask); safe softmax", True),
    "window": ("sliding window; bias operand [{b}, 1, {s}, {s}] (mask); safe softmax", True),
}
CASES = [(family, mask) for family in FAMILIES for mask in mask_graphs.MASKS]


def case_id(case):
    return "-".join(case)


def compile_report(path, out):
    """memopt-compile --emit mlir: the [fuse-attention] site lines and the IR."""
    proc = subprocess.run([_tool("memopt-compile"), path, "--emit", "mlir", "-o", out],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    sites = re.findall(r"^  '[^']+': (.*)$", proc.stdout, re.M)
    with open(out) as stream:
        return proc.stdout, sites, stream.read()


def check_report(family, mask, batch, seq, tmp_path):
    path = str(tmp_path / f"{family}_{mask}.onnx")
    onnx.save(mask_graphs.decoder(family, mask, batch, seq), path)
    stdout, sites, ir = compile_report(path, str(tmp_path / "graph.mlir"))
    detail, bias = EXPECTED[mask]
    # The Llama family runs its attention in the grouped-query view [B, Hkv, n, S, S].
    expected = "fused, mask " + detail.format(
        b=f"{batch}, 1" if family == "llama" else batch, s=seq)
    assert sites == [expected] * 2, stdout
    assert "memopt.softmax" not in ir
    square = f"{seq}x{seq}x"
    if bias:
        assert square in ir
    else:
        # No [B, 1, S, S] mask is left, constant or computed: its ops died with the terms.
        assert square not in ir, [line for line in ir.splitlines() if square in line][:5]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_long_mask_report(case, tmp_path):
    """4 x 1024 (a [4, 1, 1024, 1024] mask, 64 times the fold limit)."""
    family, mask = case
    check_report(family, mask, 4, 1024, tmp_path)


@pytest.mark.parametrize("case", [("llama", "causal"), ("gpt2", "padding")], ids=case_id)
def test_long_mask_report_8k(case, tmp_path):
    """1 x 8192: a mask of 67 M elements is read row by row (about half a second)."""
    family, mask = case
    check_report(family, mask, 1, 8192, tmp_path)


def left_padded(shape):
    """attention_mask: sequence b starts with 37 b padding tokens."""
    values = np.ones(shape, dtype=np.int64)
    for row in range(shape[0]):
        values[row, :37 * row] = 0
    return values


@pytest.mark.parametrize("case", tiers.params(CASES, tiers.LONG_MASKS, id=case_id))
def test_long_mask_numerics(case, tmp_path):
    """1 x 320 (2 x 320 with padding), above the fold limit: the fused program on the host
    matches onnxruntime on the same graph (relative 1e-4), planned and unplanned."""
    family, mask = case
    batch = 2 if mask == "padding" else 1
    path = str(tmp_path / f"{family}_{mask}.onnx")
    onnx.save(mask_graphs.decoder(family, mask, batch, 320), path)
    _, sites, _ = compile_report(path, str(tmp_path / "graph.mlir"))
    assert all(site.startswith("fused, mask " + EXPECTED[mask][0].split(";")[0])
               for site in sites) and len(sites) == 2, sites
    values = {"attention_mask": left_padded} if mask == "padding" else None
    check_against_onnxruntime(_tool("memopt-compile"), path, str(tmp_path), values=values)
