"""The training benchmark's code, by subject. bench/train_bench.py is its command line (its
docstring the user documentation); `prepare` copies this package next to it into the carry
folder, so that `python3 .dev-NAME/train_bench.py device ...` runs the carry's copy.

  configs  the bench and gradient-check tables, optimizers, precisions, carry names, budgets,
           the input batch, the PyTorch models; the paths (REPO, the entry point, sys.path)
  export   export: the graphs with torch.onnx's dynamo exporter (export-one per graph)
  prepare  prepare: memopt-compile, the runtime and the executables into the carry folder
  device   device: linking, gradient checks, memopt's --bench runs, PyTorch's modes (torch-one)
  curves   curves: loss curves from the same initial weights (torch-curve), their SVG
  report   report: the Markdown tables and the JSON results
"""
