#!/usr/bin/env python3
"""memopt's channels-last depthwise convolution against cuDNN and PyTorch.

Runs on a GPU machine with PyTorch. The runtime's conv() is reached through
the ctypes shim libmemopt-depthwise-bench-cuda.so
(unittests/Runtime/DepthwiseBenchShim.cpp, built with the CUDA runtime), on
channels-last tensors that PyTorch allocates, on three contexts: memopt's
depthwise kernel forced (lib/Runtime/Cuda/DepthwiseKernels.cu), cuDNN forced
(the legacy API with the algorithm search a program runs), and the measured
choice (both timed at the first call, the faster kept; the engine report says
which).

Correctness: each engine's output against F.conv2d in float64 (relative to the
reference's largest magnitude). Time: `--calls` calls captured in one CUDA
graph, replayed `--replays` times, the median per call, for each memopt engine
and for F.conv2d(groups=C) with its bias on channels_last tensors
(torch.backends.cudnn.benchmark on; without the ReLU memopt's calls fuse), captured the
same way. The shapes are the depthwise layers of
ConvNeXt-T (7x7, stride 1), MobileNetV2 (3x3, strides 1 and 2), EfficientNet-B0
(5x5) and an EfficientNetV2-S at 300 px (3x3), batch 32.

    python3 bench/depthwise_conv_bench.py --lib BUILD/lib/libmemopt-depthwise-bench-cuda.so \\
        [--dtypes f16,bf16,f32] [--out OUT/depthwise.json] [--filter convnext]
"""
import argparse
import ctypes
import json
import statistics
import sys
import zlib

import torch
import torch.nn.functional as F

from cuda_timing import graph_time

DTYPES = {"f32": (torch.float32, 0), "f16": (torch.float16, 1), "bf16": (torch.bfloat16, 2)}
ENGINES = {"measured": 0, "cudnn": 1, "memopt": 2}
RELU = 1  # memopt::rt::Activation
TOLERANCE = {"f32": 1e-5, "f16": 2e-3, "bf16": 1.6e-2}

# name: (channels, spatial, kernel, stride); batch 32, padding k // 2.
SHAPES = {
    "convnext_s1_c96_56": (96, 56, 7, 1),
    "convnext_s2_c192_28": (192, 28, 7, 1),
    "convnext_s3_c384_14": (384, 14, 7, 1),
    "convnext_s4_c768_7": (768, 7, 7, 1),
    "mbv2_c32_112": (32, 112, 3, 1),
    "mbv2_c96_112_s2": (96, 112, 3, 2),
    "mbv2_c144_56": (144, 56, 3, 1),
    "mbv2_c144_56_s2": (144, 56, 3, 2),
    "mbv2_c192_28": (192, 28, 3, 1),
    "mbv2_c384_14": (384, 14, 3, 1),
    "mbv2_c576_14_s2": (576, 14, 3, 2),
    "mbv2_c960_7": (960, 7, 3, 1),
    "effb0_c144_56_k5_s2": (144, 56, 5, 2),
    "effb0_c240_28_k5": (240, 28, 5, 1),
    "effb0_c672_14_k5_s2": (672, 14, 5, 2),
    "effb0_c1152_7_k5": (1152, 7, 5, 1),
    "effv2s_c256_38_s2": (256, 38, 3, 2),
    "effv2s_c512_19": (512, 19, 3, 1),
    "effv2s_c768_19": (768, 19, 3, 1),
    "effv2s_c960_19_s2": (960, 19, 3, 2),
    "effv2s_c1536_10": (1536, 10, 3, 1),
}


class Problem(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int32), ("activation", ctypes.c_int32)] + \
        [(n, ctypes.c_int64) for n in
         ("batch", "channels", "height", "width", "kernel", "stride", "pad")] + \
        [(n, ctypes.c_void_p) for n in ("x", "w", "bias", "y", "workspace")] + \
        [("workspaceBytes", ctypes.c_int64)]


class Shim:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.mdb_workspace_bytes.restype = ctypes.c_int64
        self.lib.mdb_workspace_bytes.argtypes = [ctypes.POINTER(Problem)]
        self.lib.mdb_run.argtypes = [ctypes.c_int, ctypes.POINTER(Problem), ctypes.c_char_p,
                                     ctypes.c_char_p, ctypes.c_int]
        self.lib.mdb_time.argtypes = [ctypes.c_int, ctypes.POINTER(Problem), ctypes.c_int,
                                      ctypes.c_int, ctypes.POINTER(ctypes.c_double),
                                      ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]


class Case:
    def __init__(self, name, channels, size, kernel, stride, dtype, batch):
        self.name, self.dtype_name = name, dtype
        self.torch_dtype, self.code = DTYPES[dtype]
        self.c, self.size, self.k, self.stride, self.batch = channels, size, kernel, stride, batch
        self.pad = kernel // 2
        gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(f"{name} {dtype}".encode()))
        self.x = torch.randn(batch, channels, size, size, device="cuda", generator=gen) \
            .to(self.torch_dtype).contiguous(memory_format=torch.channels_last)
        self.w = (torch.randn(channels, 1, kernel, kernel, device="cuda", generator=gen) /
                  kernel).to(self.torch_dtype)
        self.bias = torch.randn(channels, device="cuda", generator=gen).to(self.torch_dtype)
        self.out = (size + 2 * self.pad - kernel) // stride + 1
        # memopt's y [N, OH, OW, C]: a channels_last NCHW tensor has that memory.
        self.y = torch.empty(batch, channels, self.out, self.out, device="cuda",
                             dtype=self.torch_dtype).contiguous(memory_format=torch.channels_last)

    def problem(self, shim):
        p = Problem()
        p.dtype, p.activation = self.code, RELU
        p.batch, p.channels, p.height, p.width = self.batch, self.c, self.size, self.size
        p.kernel, p.stride, p.pad = self.k, self.stride, self.pad
        # The KRSC filter [C, k, k, 1] has the memory of the ONNX [C, 1, k, k].
        p.x, p.w, p.bias, p.y = (t.data_ptr() for t in (self.x, self.w, self.bias, self.y))
        nbytes = shim.lib.mdb_workspace_bytes(ctypes.byref(p))
        self.workspace = torch.empty(max(nbytes, 1), dtype=torch.uint8, device="cuda")
        p.workspace, p.workspaceBytes = self.workspace.data_ptr(), nbytes
        return p

    def torch_call(self):
        """PyTorch's convolution with its bias, without the ReLU that memopt's call fuses
        (so PyTorch is timed doing less, never more)."""
        return F.conv2d(self.x, self.w, self.bias, self.stride, self.pad, 1, self.c)

    def reference(self):
        return F.relu(F.conv2d(self.x.double(), self.w.double(), self.bias.double(), self.stride,
                               self.pad, 1, self.c))

    def bytes_moved(self):
        element = self.x.element_size()
        return element * (self.x.numel() + self.y.numel() + self.w.numel())


def check(shim, case, engine, reference):
    """(relative error, engine report line) of one engine's output, or (None, error)."""
    case.y.zero_()
    p = case.problem(shim)
    report, error = ctypes.create_string_buffer(4096), ctypes.create_string_buffer(4096)
    torch.cuda.synchronize()
    if shim.lib.mdb_run(ENGINES[engine], ctypes.byref(p), report, error, 4096):
        return None, error.value.decode()
    scale = max(reference.abs().max().item(), 1e-6)
    return (case.y.double() - reference).abs().max().item() / scale, \
        report.value.decode().strip()


def memopt_time(shim, case, engine, calls, replays):
    p = case.problem(shim)
    samples = (ctypes.c_double * replays)()
    report, error = ctypes.create_string_buffer(4096), ctypes.create_string_buffer(4096)
    torch.cuda.synchronize()
    if shim.lib.mdb_time(ENGINES[engine], ctypes.byref(p), calls, replays, samples, report,
                         error, 4096):
        raise RuntimeError(error.value.decode())
    return statistics.median(samples[:replays]), report.value.decode().strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lib", required=True)
    parser.add_argument("--dtypes", default="f16,bf16")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--replays", type=int, default=20)
    parser.add_argument("--filter", default="")
    parser.add_argument("--out")
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = True
    shim = Shim(args.lib)
    results, failures = [], 0
    print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}  "
          f"cuDNN {torch.backends.cudnn.version()}  batch {args.batch}, ReLU + bias epilogue")
    header = ("| layer | dtype | torch NHWC ms | memopt kernel ms | cuDNN (memopt) ms | "
              "measured ms -> choice | kernel GB/s | max rel err kernel / cuDNN |")
    print(header)
    print("|" + " --- |" * 8)
    for dtype in args.dtypes.split(","):
        for name, (channels, size, kernel, stride) in SHAPES.items():
            if args.filter and args.filter not in name:
                continue
            case = Case(name, channels, size, kernel, stride, dtype, args.batch)
            reference = case.reference()
            row = {"layer": name, "dtype": dtype, "channels": channels, "size": size,
                   "kernel": kernel, "stride": stride, "batch": args.batch}
            for engine in ("memopt", "cudnn"):
                err, text = check(shim, case, engine, reference)
                row[f"{engine}_error"] = err
                row[f"{engine}_report"] = text
                if err is None or not err <= TOLERANCE[dtype]:
                    failures += 1
            for engine in ENGINES:
                try:
                    row[f"{engine}_ms"], row[f"{engine}_engine"] = memopt_time(
                        shim, case, engine, args.calls, args.replays)
                except RuntimeError as e:
                    row[f"{engine}_ms"], row[f"{engine}_engine"] = None, str(e)[:200]
            try:
                row["torch_ms"] = graph_time(case.torch_call, args.calls, args.replays)
            except RuntimeError as e:
                row["torch_ms"], row["torch_error"] = None, str(e).splitlines()[0][:200]
            results.append(row)
            ms = lambda v: f"{v:.4f}" if v is not None else "fail"
            err = lambda v: f"{v:.1e}" if v is not None else "fail"
            choice = "memopt" if "memopt depthwise" in (row["measured_engine"] or "") else "cudnn"
            rate = case.bytes_moved() / (row["memopt_ms"] * 1e6) if row["memopt_ms"] else 0
            print(f"| {name} | {dtype} | {ms(row['torch_ms'])} | {ms(row['memopt_ms'])} | "
                  f"{ms(row['cudnn_ms'])} | {ms(row['measured_ms'])} -> {choice} | {rate:.0f} | "
                  f"{err(row['memopt_error'])} / {err(row['cudnn_error'])} |", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "cudnn": torch.backends.cudnn.version(), "rows": results}, f, indent=1)
    print(f"{failures} engine outputs outside tolerance" if failures else "all outputs match")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
