"""CUDA-graph timing shared by the layer micro-benchmarks (attention_sdpa_bench.py,
depthwise_conv_bench.py, norm_nhwc_bench.py): calls captured in one graph and replayed, so
launch overhead is not what is timed, as PyTorch's own `torch.cuda.CUDAGraph` benchmarks do."""

import statistics

import torch


def graph_time(fn, calls, replays, warmup=3):
    """Median ms per call of `calls` calls of fn captured in one CUDA graph (after `warmup`
    calls on a side stream, as graph capture requires)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    samples = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / calls)
    return statistics.median(samples)
