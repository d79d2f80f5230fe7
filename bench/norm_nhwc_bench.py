#!/usr/bin/env python3
"""memopt's channels-last batch normalization and max-pool gradient against PyTorch.

Runs on a GPU machine with PyTorch. The runtime's batchNormTraining(),
batchNormTrainingGrad() and poolGrad() on [N, H, W, C] tensors are reached
through the ctypes shim libmemopt-norm-bench-cuda.so
(unittests/Runtime/NormBenchShim.cpp, built with the CUDA runtime), on tensors
that PyTorch allocates, at ResNet-50's training shapes (batch 64, bf16 by
default): the 53 batch normalizations' 12 distinct shapes and the stem's 3x3 / 2
max pool over 64 x 112 x 112 x 64.

Correctness: memopt's mean, 1/std, y, dx, dscale and dbias against PyTorch's
aten.native_batch_norm / native_batch_norm_backward on channels-last tensors
(f32 statistics, the activations' dtype for y and dx), and the max-pool
gradient against aten.max_pool2d_with_indices_backward (which must match bit
for bit: the same first-maximum rule, at most 4 windows summed in f32).

Time: each op as a generated program runs it (`--calls` calls captured in one
CUDA graph, replayed `--replays` times, the median per call), against
PyTorch's native kernels captured the same way (channels_last memory format);
GB/s counts the bytes an op must move (BN forward: x read twice, y written;
backward: x and dy read twice, dx written; pool gradient: x, dy read, dx
written).

    python3 bench/norm_nhwc_bench.py --lib BUILD/libmemopt-norm-bench-cuda.so \
        [--out OUT/norm_nhwc.json] [--dtype bf16] [--skip-time]
"""
import argparse
import ctypes
import json
import statistics
import sys

import torch

from cuda_timing import graph_time

F32, F16, BF16 = 0, 1, 2  # memopt::rt::DType
DTYPES = {"f32": (torch.float32, F32), "f16": (torch.float16, F16),
          "bf16": (torch.bfloat16, BF16)}
# Largest error relative to the reference's largest magnitude.
TOLERANCE = {"f32": 1e-4, "f16": 5e-3, "bf16": 3e-2}

# ResNet-50's batch normalizations (channels, spatial) at batch 64 and how many
# of the 53 have that shape.
BN_SHAPES = [(64, 112, 1), (64, 56, 6), (256, 56, 4), (128, 56, 1), (128, 28, 7),
             (512, 28, 5), (256, 28, 1), (256, 14, 11), (1024, 14, 7), (512, 14, 1),
             (512, 7, 5), (2048, 7, 4)]


class Problem(ctypes.Structure):
    _fields_ = [("op", ctypes.c_int32), ("dtype", ctypes.c_int32)] + \
        [(n, ctypes.c_int64) for n in ("n", "h", "w", "c", "kernel", "stride", "pad",
                                         "outH", "outW")] + \
        [("epsilon", ctypes.c_float)] + \
        [(n, ctypes.c_void_p) for n in ("x", "y", "dy", "dx", "scale", "bias", "mean",
                                         "invStd", "dscale", "dbias", "workspace")] + \
        [("workspaceBytes", ctypes.c_int64)]


class Shim:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.mnb_bn_workspace_bytes.restype = ctypes.c_int64
        self.lib.mnb_bn_workspace_bytes.argtypes = [ctypes.c_int64, ctypes.c_int64]
        self.lib.mnb_run.argtypes = [ctypes.POINTER(Problem), ctypes.c_char_p, ctypes.c_int]
        self.lib.mnb_time.argtypes = [ctypes.POINTER(Problem), ctypes.c_int, ctypes.c_int,
                                      ctypes.POINTER(ctypes.c_double), ctypes.c_char_p,
                                      ctypes.c_int]

    def run(self, p):
        torch.cuda.synchronize()
        error = ctypes.create_string_buffer(4096)
        if self.lib.mnb_run(ctypes.byref(p), error, 4096):
            raise RuntimeError(error.value.decode())

    def time(self, p, calls, replays):
        torch.cuda.synchronize()
        samples = (ctypes.c_double * replays)()
        error = ctypes.create_string_buffer(4096)
        if self.lib.mnb_time(ctypes.byref(p), calls, replays, samples, error, 4096):
            raise RuntimeError(error.value.decode())
        return statistics.median(samples)


def ptr(t):
    return ctypes.c_void_p(t.data_ptr()) if t is not None else None


def nhwc(n, c, h, w, dtype, gen, low=-1.0, high=1.0):
    """[N, C, H, W] in channels_last memory: memopt sees [N, H, W, C]."""
    t = torch.rand(n, c, h, w, generator=gen, device="cuda") * (high - low) + low
    return t.to(dtype).contiguous(memory_format=torch.channels_last)


def rel(got, ref):
    ref = ref.float()
    return ((got.float() - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()


class BatchNorm:
    def __init__(self, n, c, s, dtype, gen):
        self.n, self.c, self.s, self.dtype = n, c, s, dtype
        self.torch_dtype, self.code = DTYPES[dtype]
        self.x = nhwc(n, c, s, s, self.torch_dtype, gen, 0.1, 3.0)
        self.dy = nhwc(n, c, s, s, self.torch_dtype, gen)
        self.scale = torch.rand(c, generator=gen, device="cuda") + 0.5
        self.bias = torch.rand(c, generator=gen, device="cuda") - 0.5
        self.y, self.dx = torch.empty_like(self.x), torch.empty_like(self.x)
        self.mean, self.inv, self.dscale, self.dbias = (
            torch.empty(c, device="cuda") for _ in range(4))
        self.running = (torch.zeros(c, device="cuda"), torch.ones(c, device="cuda"))

    def problem(self, shim, op):
        """The forward (op 0) or the gradient (op 1); both share one workspace,
        as the planner's arena gives them, which lives as long as the case (a
        problem must not outlive the tensors its pointers name)."""
        p = Problem(op=op, dtype=self.code, n=self.n, h=self.s, w=self.s, c=self.c,
                    epsilon=1e-5)
        nbytes = shim.lib.mnb_bn_workspace_bytes(self.c, self.n * self.s * self.s)
        if getattr(self, "workspace", None) is None:
            self.workspace = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        for name in ("x", "y", "dy", "dx", "scale", "bias", "mean", "dscale", "dbias",
                     "workspace"):
            setattr(p, name, ptr(getattr(self, name)))
        p.invStd = ptr(self.inv)
        p.workspaceBytes = nbytes
        return p

    def torch_forward(self):
        return torch.ops.aten.native_batch_norm(self.x, self.scale, self.bias, None, None,
                                                True, 0.1, 1e-5)

    def torch_backward(self, saved):
        _, mean, inv = saved
        return torch.ops.aten.native_batch_norm_backward(
            self.dy, self.x, self.scale, None, None, mean, inv, True, 1e-5,
            [True, True, True])

    def bytes(self):
        elements = self.n * self.c * self.s * self.s * self.x.element_size()
        return 3 * elements, 5 * elements


class MaxPoolGrad:
    def __init__(self, n, c, s, dtype, gen, kernel=3, stride=2, pad=1):
        self.n, self.c, self.s, self.dtype = n, c, s, dtype
        self.kernel, self.stride, self.pad = kernel, stride, pad
        self.torch_dtype, self.code = DTYPES[dtype]
        self.out = (s + 2 * pad - kernel) // stride + 1
        # Values on a coarse grid: ties inside windows are common.
        self.x = (nhwc(n, c, s, s, torch.float32, gen, -8.0, 8.0) * 4).round().to(
            self.torch_dtype)
        self.dy = nhwc(n, c, self.out, self.out, self.torch_dtype, gen)
        self.dx = torch.empty_like(self.x)
        _, self.indices = torch.ops.aten.max_pool2d_with_indices(
            self.x, [kernel] * 2, [stride] * 2, [pad] * 2, [1, 1], False)

    def problem(self, shim):
        p = Problem(op=2, dtype=self.code, n=self.n, h=self.s, w=self.s, c=self.c,
                    kernel=self.kernel, stride=self.stride, pad=self.pad, outH=self.out,
                    outW=self.out)
        p.x, p.dy, p.dx = ptr(self.x), ptr(self.dy), ptr(self.dx)
        return p

    def torch_backward(self):
        return torch.ops.aten.max_pool2d_with_indices_backward(
            self.dy, self.x, [self.kernel] * 2, [self.stride] * 2, [self.pad] * 2, [1, 1],
            False, self.indices)

    def bytes(self):
        e = self.x.element_size()
        return (2 * self.n * self.c * self.s * self.s + self.n * self.c * self.out ** 2) * e


def profile(shim, args, gen):
    """Per-kernel device time (torch.profiler, CUPTI) of memopt's and
    PyTorch's kernels on one BN shape and the stem's pool gradient."""
    from torch.profiler import ProfilerActivity, profile as torch_profile
    c, s = args.profile_shape
    bn = BatchNorm(args.batch, c, s, args.dtype, gen)
    pool = MaxPoolGrad(args.batch, 64, 112, args.dtype, gen)
    fwd, bwd, pg = bn.problem(shim, 0), bn.problem(shim, 1), pool.problem(shim)
    for p in (fwd, bwd, pg):
        shim.run(p)
    saved = bn.torch_forward()
    bn.torch_backward(saved)
    pool.torch_backward()
    torch.cuda.synchronize()
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            for p in (fwd, bwd, pg):
                shim.run(p)
            saved = bn.torch_forward()
            bn.torch_backward(saved)
            pool.torch_backward()
        torch.cuda.synchronize()
    print(f"profile: bn {args.batch}x{s}x{s}x{c}, max_pool_grad {args.batch}x112x112x64, "
          "5 calls each", flush=True)
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25), flush=True)


def run(args):
    shim = Shim(args.lib)
    gen = torch.Generator(device="cuda").manual_seed(0)
    results, failures = {"batch_norm": [], "max_pool_grad": []}, 0
    totals = {"memopt_fwd": 0.0, "memopt_bwd": 0.0, "torch_fwd": 0.0, "torch_bwd": 0.0}
    for c, s, count in BN_SHAPES:
        case = BatchNorm(args.batch, c, s, args.dtype, gen)
        fwd, bwd = case.problem(shim, 0), case.problem(shim, 1)
        shim.run(fwd)
        shim.run(bwd)
        first = [t.clone() for t in (case.y, case.mean, case.inv, case.dx, case.dscale,
                                     case.dbias)]
        shim.run(fwd)
        shim.run(bwd)
        # The split merge runs in a fixed order: a second run is bit-identical.
        repeat = all(torch.equal(a, b) for a, b in
                     zip(first, (case.y, case.mean, case.inv, case.dx, case.dscale,
                                 case.dbias)))
        saved = case.torch_forward()
        grads = case.torch_backward(saved)
        row = {"shape": [args.batch, s, s, c], "count": count,
               "err": {"y": rel(case.y, saved[0]), "mean": rel(case.mean, saved[1]),
                       "inv_std": rel(case.inv, saved[2]), "dx": rel(case.dx, grads[0]),
                       "dscale": rel(case.dscale, grads[1]),
                       "dbias": rel(case.dbias, grads[2])}}
        row["run_to_run_identical"] = repeat
        bad = [k for k, e in row["err"].items() if not e <= TOLERANCE[args.dtype]]
        if not repeat:
            bad.append("run_to_run")
        if bad:
            row["fail"] = bad
            failures += 1
        if not args.skip_time:
            fb, bb = case.bytes()
            t = {"memopt_fwd": shim.time(fwd, args.calls, args.replays),
                 "memopt_bwd": shim.time(bwd, args.calls, args.replays),
                 "torch_fwd": graph_time(case.torch_forward, args.calls, args.replays,
                                         warmup=2),
                 "torch_bwd": graph_time(lambda: case.torch_backward(saved), args.calls,
                                         args.replays, warmup=2)}
            row["ms"] = t
            row["memopt_gbs"] = [fb / t["memopt_fwd"] / 1e6, bb / t["memopt_bwd"] / 1e6]
            for k in totals:
                totals[k] += count * t[k]
        results["batch_norm"].append(row)
        errs = " ".join(f"{k} {v:.1e}" for k, v in row["err"].items())
        times = ""
        if "ms" in row:
            t = row["ms"]
            times = (f" | memopt fwd {t['memopt_fwd']*1e3:6.1f} us bwd {t['memopt_bwd']*1e3:6.1f}"
                     f" us ({row['memopt_gbs'][0]:.0f} / {row['memopt_gbs'][1]:.0f} GB/s)"
                     f" | torch fwd {t['torch_fwd']*1e3:6.1f} us bwd {t['torch_bwd']*1e3:6.1f} us")
        print(f"bn {args.batch}x{s}x{s}x{c:<5d} x{count:<2d} {errs}{times}"
              f"{' FAIL ' + ','.join(bad) if bad else ''}", flush=True)
    if not args.skip_time:
        results["batch_norm_per_step_ms"] = totals
        print("bn per step (53 ops, ms): " +
              " ".join(f"{k} {v:.2f}" for k, v in totals.items()), flush=True)
    for c, s in ((64, 112), (3, 33), (200, 35)):
        case = MaxPoolGrad(args.batch if s == 112 else 4, c, s, args.dtype, gen)
        p = case.problem(shim)
        shim.run(p)
        ref = case.torch_backward()
        exact = bool(torch.equal(case.dx, ref))
        row = {"shape": [case.n, s, s, c], "bit_identical_to_torch": exact,
               "err": rel(case.dx, ref)}
        if not exact:
            failures += 1
        if not args.skip_time and s == 112:
            t = {"memopt": shim.time(p, args.calls, args.replays),
                 "torch": graph_time(case.torch_backward, args.calls, args.replays, warmup=2)}
            row["ms"] = t
            row["memopt_gbs"] = case.bytes() / t["memopt"] / 1e6
        results["max_pool_grad"].append(row)
        times = ""
        if "ms" in row:
            times = (f" | memopt {row['ms']['memopt']*1e3:6.1f} us ({row['memopt_gbs']:.0f}"
                     f" GB/s) torch {row['ms']['torch']*1e3:6.1f} us")
        print(f"max_pool_grad {case.n}x{s}x{s}x{c} identical {exact} err {row['err']:.1e}"
              f"{times}", flush=True)
    return results, failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", required=True)
    parser.add_argument("--out")
    parser.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--replays", type=int, default=10)
    parser.add_argument("--skip-time", action="store_true")
    parser.add_argument("--profile", action="store_true",
                        help="print a per-kernel profile of one BN shape and the pool gradient")
    parser.add_argument("--profile-shape", type=int, nargs=2, default=(256, 56),
                        metavar=("C", "HW"))
    args = parser.parse_args()
    if args.profile:
        profile(Shim(args.lib), args, torch.Generator(device="cuda").manual_seed(1))
    results, failures = run(args)
    results["device"] = torch.cuda.get_device_name()
    results["torch"] = torch.__version__
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
