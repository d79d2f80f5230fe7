#!/usr/bin/env python3
"""memopt's attention on its two CUDA engines against PyTorch's SDPA.

Runs on a GPU machine with PyTorch. The runtime's attention() and
attentionBackward() are reached through the ctypes shim
libmemopt-attention-bench-cuda.so (unittests/Runtime/AttentionBenchShim.cpp,
built with the CUDA runtime), on tensors that PyTorch allocates.

Correctness: each case runs forward (with the row statistics) and backward on
a context that uses cuDNN's fused SDPA engine and on one forced onto memopt's
kernels, and compares O, the log-sum-exp, dQ, dK and dV with a float64
reference (and PyTorch's own cuDNN SDPA against the same reference, for the
error a half-precision engine has anyway). Each case also records which engine
ran it (the runtime's attentionEngineReport).

Time: per layer, forward (inference, no statistics) and backward, as a
generated program runs them: `--calls` calls captured in one CUDA graph,
replayed `--replays` times, the median per call. memopt with cuDNN, memopt's
kernels fused (no workspace) and chunked (the whole batch's scores in a
workspace, as the planner gives when bytes are free); PyTorch's
scaled_dot_product_attention with its cuDNN and flash backends, captured the
same way (its backward is torch.autograd.grad of the output).

    python3 bench/attention_sdpa_bench.py --lib BUILD/libmemopt-attention-bench-cuda.so \
        [--out OUT/attention_sdpa.json] [--skip-time]
"""
import argparse
import ctypes
import json
import statistics
import sys
import zlib

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from cuda_timing import graph_time

MAX_RANK = 8
F16, BF16 = 1, 2  # memopt::rt::DType
DTYPES = {"f16": (torch.float16, F16), "bf16": (torch.bfloat16, BF16)}
# Relative error (of the reference's largest magnitude) each output may have.
TOLERANCE = {"f16": 4e-3, "bf16": 3e-2}


class Problem(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int32), ("rank", ctypes.c_int32),
                ("q", ctypes.c_int64 * MAX_RANK), ("k", ctypes.c_int64 * MAX_RANK),
                ("v", ctypes.c_int64 * MAX_RANK), ("bias", ctypes.c_int64 * MAX_RANK),
                ("biasRank", ctypes.c_int32), ("scale", ctypes.c_float),
                ("causal", ctypes.c_int32), ("keyTransposed", ctypes.c_int32),
                ("safeSoftmax", ctypes.c_int32), ("groupedGradients", ctypes.c_int32)] + \
        [(name, ctypes.c_void_p) for name in
         ("qData", "kData", "vData", "biasData", "yData", "lseData", "dyData", "dqData",
          "dkData", "dvData", "workspace")] + [("workspaceBytes", ctypes.c_int64)]


class Shim:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.mab_create.restype = ctypes.c_void_p
        self.lib.mab_create.argtypes = [ctypes.c_int]
        self.lib.mab_destroy.argtypes = [ctypes.c_void_p]
        self.lib.mab_run.argtypes = [ctypes.c_void_p, ctypes.POINTER(Problem), ctypes.c_int,
                                     ctypes.c_char_p, ctypes.c_int]
        self.lib.mab_report.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        self.lib.mab_time.argtypes = [ctypes.c_int, ctypes.POINTER(Problem), ctypes.c_int,
                                      ctypes.c_int, ctypes.c_int,
                                      ctypes.POINTER(ctypes.c_double), ctypes.c_char_p,
                                      ctypes.c_char_p, ctypes.c_int]
        self.lib.mab_cudnn_bytes.restype = ctypes.c_int64
        self.lib.mab_cudnn_bytes.argtypes = [ctypes.POINTER(Problem), ctypes.c_int]
        self.lib.mab_chunk_bytes.restype = ctypes.c_int64
        self.lib.mab_chunk_bytes.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64,
                                             ctypes.c_int64, ctypes.c_int32]


def set_shape(field, shape):
    for i, n in enumerate(shape):
        field[i] = n


class Case:
    """One attention problem in memopt's layout (GQA: [B, Hkv, G, S, D] with K / V
    [B, Hkv, 1, S, D], the fusion pass's view of repeat_kv), with its tensors."""

    def __init__(self, name, batch, heads, kv_heads, queries, keys, head, dtype, causal=False,
                 bias=None, key_transposed=False, safe=False, filled_rows=False):
        self.name, self.dtype_name = name, dtype
        self.torch_dtype, self.code = DTYPES[dtype]
        self.b, self.h, self.hk, self.s, self.sk, self.d = batch, heads, kv_heads, queries, keys, head
        self.g = heads // kv_heads
        self.causal, self.key_transposed, self.safe = causal, key_transposed, safe
        self.scale = head ** -0.5
        gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(f"{name} {dtype}".encode()))
        rnd = lambda *shape: torch.randn(*shape, device="cuda", generator=gen)
        self.q = rnd(batch, heads, queries, head).to(self.torch_dtype)
        self.k = rnd(batch, kv_heads, keys, head).to(self.torch_dtype)
        self.v = rnd(batch, kv_heads, keys, head).to(self.torch_dtype)
        self.dy = rnd(batch, heads, queries, head).to(self.torch_dtype)
        self.bias = None if bias is None else bias(self, gen).to(self.torch_dtype)
        # filled_rows: rows whose every score is a finite fill (finfo.min) are
        # uniform in the graph; cuDNN gives them zeros. No token reads them, so
        # their output gradient is zero (as a loss over real tokens makes it),
        # and O is compared on the other rows (the filled rows' gap is reported).
        self.filled = None
        if filled_rows:
            scores = self.bias.float().expand(batch, 1, queries, keys)
            if causal:
                scores = scores.masked_fill(torch.ones(queries, keys, device="cuda",
                                                       dtype=torch.bool).triu(1), float("-inf"))
            self.filled = scores.amax(-1) < -1e30  # [B, 1, S]
            self.dy = self.dy.masked_fill(self.filled.unsqueeze(-1), 0)

    def memopt_views(self):
        """Q, K (maybe as [D, Sk]), V and bias in the op's layout."""
        q, k, v, bias = self.q, self.k, self.v, self.bias
        if self.key_transposed:
            k = k.transpose(-1, -2).contiguous()
        if self.g > 1:
            q = q.view(self.b, self.hk, self.g, self.s, self.d)
            k, v = k.unsqueeze(2), v.unsqueeze(2)
            bias = None if bias is None else bias.unsqueeze(2)
        return q, k, v, bias

    def problem(self, outputs, workspace=None):
        q, k, v, bias = self.memopt_views()
        p = Problem()
        p.dtype, p.rank = self.code, q.dim()
        set_shape(p.q, q.shape)
        set_shape(p.k, k.shape)
        set_shape(p.v, v.shape)
        if bias is not None:
            p.biasRank = bias.dim()
            set_shape(p.bias, bias.shape)
            p.biasData = bias.data_ptr()
        p.scale, p.causal = self.scale, int(self.causal)
        p.keyTransposed, p.safeSoftmax = int(self.key_transposed), int(self.safe)
        # Grouped-query K / V: dK and dV in K's and V's own shapes (summed over
        # each group by the engine), as memopt-autodiff emits them.
        p.groupedGradients = int(self.g > 1)
        p.qData, p.kData, p.vData = q.data_ptr(), k.data_ptr(), v.data_ptr()
        p.dyData = self.dy.data_ptr()
        for name, tensor in outputs.items():
            setattr(p, name, tensor.data_ptr())
        if workspace is not None:
            p.workspace, p.workspaceBytes = workspace.data_ptr(), workspace.numel()
        self._keep = (q, k, v, bias, outputs, workspace)
        return p

    def new_outputs(self):
        like = dict(device="cuda", dtype=self.torch_dtype)
        dk_shape = (self.b, self.hk) + ((self.d, self.sk) if self.key_transposed
                                        else (self.sk, self.d))
        return {"yData": torch.zeros(self.b, self.h, self.s, self.d, **like),
                "lseData": torch.zeros(self.b, self.h, self.s, 2, device="cuda"),
                "dqData": torch.zeros(self.b, self.h, self.s, self.d, **like),
                "dkData": torch.zeros(dk_shape, **like),
                "dvData": torch.zeros(self.b, self.hk, self.sk, self.d, **like)}

    def reference(self):
        """Float64 forward and gradients; a row whose scores are all -inf gives zeros
        (the safe softmax); a row of equal finite fills is uniform (as the graph)."""
        q, k, v = (t.double().requires_grad_() for t in (self.q, self.k, self.v))
        kk, vv = k.repeat_interleave(self.g, 1), v.repeat_interleave(self.g, 1)
        s = (q @ kk.transpose(-1, -2)) * self.scale
        if self.bias is not None:
            s = s + self.bias.double()
        if self.causal:
            mask = torch.ones(self.s, self.sk, device="cuda", dtype=torch.bool).triu(1)
            s = s.masked_fill(mask, float("-inf"))
        dead = (s.amax(-1, keepdim=True) == float("-inf"))
        s_safe = torch.where(dead, torch.zeros_like(s), s)
        p = torch.where(dead, torch.zeros_like(s), torch.softmax(s_safe, -1))
        o = p @ vv
        lse = torch.where(dead.squeeze(-1), torch.full_like(dead.squeeze(-1), float("-inf"),
                                                           dtype=torch.float64),
                          torch.logsumexp(s_safe, -1))
        dq, dk, dv = torch.autograd.grad(o, (q, k, v), self.dy.double())
        return {"o": o.detach(), "lse": lse.detach(), "dq": dq, "dk": dk, "dv": dv}

    def cudnn_workspace(self, shim, outputs):
        """The arena room a program for target cuda plans for cuDNN's SDPA (forward
        with statistics or backward, whichever is larger), or None where it plans none."""
        p = self.problem(outputs)
        nbytes = max(shim.lib.mab_cudnn_bytes(ctypes.byref(p), b) for b in (0, 1))
        return torch.empty(nbytes, dtype=torch.uint8, device="cuda") if nbytes else None

    def memopt(self, shim, cudnn):
        """Forward with statistics, then backward, on a fresh context (a cuDNN context
        gets the workspace a compiled program plans for it)."""
        out = self.new_outputs()
        p = self.problem(out, self.cudnn_workspace(shim, out) if cudnn else None)
        ctx = shim.lib.mab_create(cudnn)
        error = ctypes.create_string_buffer(4096)
        torch.cuda.synchronize()
        status = shim.lib.mab_run(ctx, ctypes.byref(p), 0, error, 4096) or \
            shim.lib.mab_run(ctx, ctypes.byref(p), 1, error, 4096)
        report = ctypes.create_string_buffer(8192)
        shim.lib.mab_report(ctx, report, 8192)
        shim.lib.mab_destroy(ctx)
        if status:
            return None, error.value.decode(), report.value.decode()
        lse = out["lseData"].double().sum(-1)
        dk = out["dkData"]
        if self.key_transposed:
            dk = dk.transpose(-1, -2)
        dv = out["dvData"]  # K's and V's own shapes (grouped gradients)
        return {"o": out["yData"], "lse": lse, "dq": out["dqData"], "dk": dk,
                "dv": dv}, "", report.value.decode()

    def torch_sdpa(self, backend):
        q, k, v = (t.detach().clone().requires_grad_() for t in (self.q, self.k, self.v))
        with sdpa_kernel(backend):
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=self.bias, is_causal=self.causal,
                                               scale=self.scale, enable_gqa=self.g > 1)
            dq, dk, dv = torch.autograd.grad(o, (q, k, v), self.dy)
        return {"o": o, "dq": dq, "dk": dk, "dv": dv}


def errors(result, reference, filled=None):
    out = {}
    for name, ref in reference.items():
        if name not in result:
            continue
        got = result[name].double()
        if name == "o" and filled is not None and filled.any():
            keep = ~filled.expand(ref.shape[:-1])
            gap = (got - ref)[~keep].abs().max().item() / max(ref.abs().max().item(), 1e-6)
            out["o_filled_rows"] = gap
            got, ref = got[keep], ref[keep]
        if name == "lse":  # rows of finite fills or fully masked: not comparable
            keep = ref > -1e30
            got, ref = got[keep], ref[keep]
        scale = max(ref.abs().max().item(), 1e-6) if ref.numel() else 1.0
        diff = (got - ref).abs().max().item() if ref.numel() else 0.0
        out[name] = diff / scale if diff == diff else float("nan")
    return out


def padding_bias(case, gen):
    """Sequence b keeps its first keys - 17 (b + 1) keys (-inf after them)."""
    keep = torch.arange(case.sk, device="cuda")[None, :] < \
        (case.sk - 17 * (torch.arange(case.b, device="cuda")[:, None] + 1))
    return torch.where(keep, 0.0, float("-inf")).view(case.b, 1, 1, case.sk)


def full_bias(case, gen):
    return torch.randn(case.b, 1, case.s, case.sk, device="cuda", generator=gen)


def dead_rows_bias(case, gen):
    """Query rows i % 5 == 0 see no key (-inf everywhere): safe softmax zeros."""
    rows = (torch.arange(case.s, device="cuda") % 5 == 0)[:, None]
    keys = torch.arange(case.sk, device="cuda")[None, :] >= case.sk - 9
    masked = (rows | keys).expand(case.b, 1, case.s, case.sk)
    return torch.where(masked, float("-inf"), 0.0)


def lowest_fill_bias(case, gen):
    """torch 2.11's exports: Where(mask, 0, finfo.min), causal with left padding
    (the first 7 (b + 1) keys), so left rows are uniform over finite fills."""
    lowest = torch.finfo(case.torch_dtype).min
    i = torch.arange(case.s, device="cuda")[:, None]
    j = torch.arange(case.sk, device="cuda")[None, :]
    pad = 7 * (torch.arange(case.b, device="cuda") + 1).view(case.b, 1, 1, 1)
    masked = (j > i) | (j < pad)
    return torch.where(masked, lowest, 0.0).view(case.b, 1, case.s, case.sk).float()


# The three shapes of issue 26, then smaller cases for each feature.
SHAPES = {"gpt2": dict(batch=8, heads=12, kv_heads=12, queries=512, keys=512, head=64,
                       causal=True),
          "vit": dict(batch=64, heads=12, kv_heads=12, queries=197, keys=197, head=64),
          "llama": dict(batch=4, heads=32, kv_heads=8, queries=1024, keys=1024, head=64,
                        causal=True)}
FEATURES = {"gpt2_kt": dict(batch=2, heads=4, kv_heads=4, queries=256, keys=256, head=64,
                            causal=True, key_transposed=True),
            "padding_bias": dict(batch=2, heads=4, kv_heads=4, queries=128, keys=128, head=64,
                                 bias=padding_bias),
            "full_bias_gqa": dict(batch=2, heads=8, kv_heads=2, queries=128, keys=128, head=64,
                                  bias=full_bias),
            "causal_bias_d128": dict(batch=2, heads=4, kv_heads=4, queries=136, keys=136,
                                     head=128, causal=True, bias=full_bias),
            "safe_dead_rows": dict(batch=2, heads=2, kv_heads=2, queries=128, keys=128, head=64,
                                   bias=dead_rows_bias, safe=True),
            "lowest_fill_rows": dict(batch=2, heads=2, kv_heads=2, queries=72, keys=72,
                                     head=32, bias=lowest_fill_bias, safe=True,
                                     filled_rows=True),
            "relpos_bias": dict(batch=2, heads=4, kv_heads=4, queries=128, keys=128, head=64,
                                bias=lambda case, gen: torch.randn(
                                    1, case.h, case.s, case.sk, device="cuda", generator=gen)),
            "vit_bias_197": dict(batch=2, heads=4, kv_heads=4, queries=197, keys=197, head=64,
                                 bias=full_bias)}


def check(shim, results):
    failures = 0
    for name, spec in list(SHAPES.items()) + list(FEATURES.items()):
        for dtype in DTYPES:
            case = Case(name, dtype=dtype, **spec)
            reference = case.reference()
            row = {"case": name, "dtype": dtype}
            for label, cudnn in (("memopt_cudnn", 1), ("memopt_kernels", 0)):
                got, error, report = case.memopt(shim, cudnn)
                row[label + "_engine"] = report.strip().splitlines()
                if got is None:
                    row[label] = {"error": error}
                    failures += 1
                    continue
                row[label] = errors(got, reference, case.filled)
                bad = [k for k, e in row[label].items()
                       if k != "o_filled_rows" and not e <= TOLERANCE[dtype]]
                if bad:
                    row[label]["fail"] = bad
                    failures += 1
            try:
                row["torch_cudnn"] = errors(case.torch_sdpa(SDPBackend.CUDNN_ATTENTION), reference,
                                            case.filled)
            except RuntimeError as e:
                row["torch_cudnn"] = {"error": str(e).splitlines()[0][:200]}
            results.append(row)
            fmt = lambda r: " ".join(f"{k} {v:.1e}" if isinstance(v, float) else f"{k} {v}"
                                     for k, v in r.items())
            print(f"{name:18s} {dtype:5s} cudnn: {fmt(row['memopt_cudnn'])}", flush=True)
            print(f"{'':24s} kernels: {fmt(row['memopt_kernels'])}", flush=True)
            print(f"{'':24s} torch cudnn: {fmt(row['torch_cudnn'])}", flush=True)
            for line in row["memopt_cudnn_engine"]:
                print(f"{'':24s} engine: {line}", flush=True)
    return failures


def memopt_time(shim, case, cudnn, backward, chunked, calls, replays):
    out = case.new_outputs()
    workspace = None
    if chunked:
        items = case.b * case.h
        nbytes = shim.lib.mab_chunk_bytes(int(backward), items, case.s, case.sk, case.code)
        workspace = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    elif cudnn:
        workspace = case.cudnn_workspace(shim, out)
    p = case.problem(out, workspace)
    if not backward:
        p.lseData = None
    else:  # the backward reads the forward's output and statistics
        ctx = shim.lib.mab_create(cudnn)
        error = ctypes.create_string_buffer(4096)
        torch.cuda.synchronize()
        status = shim.lib.mab_run(ctx, ctypes.byref(p), 0, error, 4096)
        shim.lib.mab_destroy(ctx)
        if status:
            return None, error.value.decode()
    samples = (ctypes.c_double * replays)()
    report, error = ctypes.create_string_buffer(4096), ctypes.create_string_buffer(4096)
    torch.cuda.synchronize()
    if shim.lib.mab_time(cudnn, ctypes.byref(p), int(backward), calls, replays, samples,
                         report, error, 4096):
        return None, error.value.decode()
    return statistics.median(samples), report.value.decode().strip()


def eager_time(fn, calls, replays):
    for _ in range(3):
        fn()
    samples = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / calls)
    return statistics.median(samples)


def torch_time(case, backend, backward, calls, replays):
    """(ms, how): captured in a CUDA graph, or eager when a capture fails twice."""
    gqa = case.g > 1
    q, k, v = (t.detach().clone().requires_grad_(backward) for t in (case.q, case.k, case.v))
    with sdpa_kernel(backend):
        def forward():
            return F.scaled_dot_product_attention(q, k, v, attn_mask=case.bias,
                                                  is_causal=case.causal, scale=case.scale,
                                                  enable_gqa=gqa)
        fn = forward
        if backward:
            o = forward()
            fn = lambda: torch.autograd.grad(o, (q, k, v), case.dy, retain_graph=True)
        for _ in range(2):
            try:
                return graph_time(fn, calls, replays), "graph"
            except RuntimeError:
                torch.cuda.synchronize()
        return eager_time(fn, calls, replays), "eager"



def bench(shim, results, calls, replays):
    shapes = dict(SHAPES)
    shapes["gpt2_kt"] = dict(SHAPES["gpt2"], key_transposed=True)
    for name, spec in shapes.items():
        for dtype in DTYPES:
            case = Case(name, dtype=dtype, **spec)
            flops = 4 * case.b * case.h * case.s * case.sk * case.d * (0.5 if case.causal else 1)
            for backward in (False, True):
                row = {"shape": name, "dtype": dtype,
                       "direction": "backward" if backward else "forward",
                       "flops": flops * (2.5 if backward else 1)}
                # memopt_measured: a program's default engine choice (the
                # faster of cuDNN's SDPA and memopt's kernels as the call's
                # first eager run times them; mab_create(2)).
                for label, cudnn, chunked in (("memopt_cudnn", 1, False),
                                              ("memopt_fused", 0, False),
                                              ("memopt_chunked", 0, True),
                                              ("memopt_measured", 2, False)):
                    if chunked and case.g > 1:
                        continue  # broadcast K / V: the chunked path does not apply
                    ms, note = memopt_time(shim, case, cudnn, backward, chunked, calls, replays)
                    row[label] = ms
                    if label in ("memopt_cudnn", "memopt_measured"):
                        row[label + "_engine"] = note
                if name != "gpt2_kt":
                    for label, backend in (("torch_cudnn", SDPBackend.CUDNN_ATTENTION),
                                           ("torch_flash", SDPBackend.FLASH_ATTENTION)):
                        try:
                            row[label], how = torch_time(case, backend, backward, calls, replays)
                            if how != "graph":
                                row[label + "_timed"] = how
                        except RuntimeError as e:
                            row[label] = None
                            row[label + "_error"] = str(e).splitlines()[0][:160]
                results.append(row)
                cells = " ".join(f"{k} {v * 1e3:.1f}us" for k, v in row.items()
                                 if k.startswith(("memopt_", "torch_")) and isinstance(v, float))
                print(f"time {name:8s} {dtype:5s} {row['direction']:8s} {cells}", flush=True)
                for label in ("memopt_cudnn", "memopt_measured"):
                    if isinstance(row.get(label + "_engine"), str):
                        print(f"      {label} engine: "
                              f"{row[label + '_engine'].splitlines()[0]}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", required=True, help="libmemopt-attention-bench-cuda.so")
    parser.add_argument("--out", help="JSON results")
    parser.add_argument("--calls", type=int, default=10, help="calls per captured graph")
    parser.add_argument("--replays", type=int, default=30)
    parser.add_argument("--skip-time", action="store_true")
    args = parser.parse_args()
    shim = Shim(args.lib)
    summary = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
               "cudnn": torch.backends.cudnn.version(), "calls": args.calls,
               "replays": args.replays, "checks": [], "times": []}
    print(f"{summary['device']}, torch {summary['torch']}, cuDNN {summary['cudnn']}", flush=True)
    failures = check(shim, summary["checks"])
    if not args.skip_time:
        bench(shim, summary["times"], args.calls, args.replays)
    summary["failures"] = failures
    if args.out:
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=1)
    print("CHECKS FAILED" if failures else "CHECKS PASSED", failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
