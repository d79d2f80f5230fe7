#!/usr/bin/env python3
"""PyTorch's fp32 attention backward at the shapes memopt's kernel suite times.

Runs on the device machine (PyTorch with CUDA): the backward of
torch.nn.functional.scaled_dot_product_attention in fp32 (TF32 off) with the
memory-efficient kernel (the only fused SDPA kernel that takes fp32), and with
the math backend (the unfused matmul / softmax / matmul autograd graph) for
reference, at ViT-B/16 (32 x 12 heads x 197 x 64) and GPT-2 small (8 x 12 x
512 x 64, causal). Median of 20 timed runs after 3 warm-ups, CUDA events
around `out.backward(dO, retain_graph=True)` (the forward is not timed), plus
the forward alone. memopt's own figures come from
`memopt-kernel-suite-cuda --perf attention_` (attention_bwd_*,
attention_fwd_lse_*) in the same device call; docs/attention.md has both.

    python3 bench/attention_backward_bench.py [--out results.json]
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [("vit_b32", 32, 197, False), ("gpt2_b8", 8, 512, True)]
BACKENDS = {"efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}


def median_ms(fn, runs=20, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    for name, batch, tokens, causal in SHAPES:
        shape = (batch, 12, tokens, 64)
        q, k, v = (torch.randn(shape, device="cuda", requires_grad=True) for _ in range(3))
        grad = torch.randn(shape, device="cuda")
        for backend, kind in BACKENDS.items():
            with sdpa_kernel(kind):
                def forward():
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                          scale=0.125)
                out = forward()
                backward_ms = median_ms(
                    lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True))
                forward_ms = median_ms(lambda: forward())
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                torch.autograd.grad(forward(), (q, k, v), grad)
                peak = torch.cuda.max_memory_allocated() - base
            key = f"{name}_{backend}"
            results[key] = {"backward_ms": backward_ms, "forward_ms": forward_ms,
                            "step_peak_mib": peak / 2**20}
            print(f"{key:20s} forward {forward_ms:7.3f} ms  backward {backward_ms:7.3f} ms  "
                  f"forward+backward peak above inputs {peak / 2**20:8.1f} MiB", flush=True)
    if args.out:
        with open(args.out, "w") as stream:
            json.dump(results, stream, indent=1)


if __name__ == "__main__":
    main()
