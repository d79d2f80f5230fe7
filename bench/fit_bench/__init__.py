"""The `--fit` benchmark's code by subject; bench/fit_bench.py is its command line.

  graphs      exported graphs made batch-free for --fit's re-batching
  search      the PyTorch side's configuration search (no torch: tested with a fake runner)
  torch_side  the PyTorch trial runner on the GPU (memory fraction, AMP, accumulation, ...)
"""
