#!/usr/bin/python3
"""Exports the model zoo with PyTorch's TorchScript-based ONNX exporter (torch.onnx.export,
opset 17), with random weights, batch 1, and writes graph + external data per model.

Run with the distro Python that has python3-torch 1.13 and python3-torchvision 0.14:
    /usr/bin/python3 python/models/export_torchscript.py --out /tmp/ts [--models resnet50 ...]
Then copy the graph files (not the .data) into models/torchscript/.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import onnx  # noqa: E402
import torch  # noqa: E402

import export_common  # noqa: E402
import nn_models  # noqa: E402

OPSET = 17


def export(name, out_dir):
    model, args, input_names, output_names = nn_models.build(name)
    path = os.path.join(out_dir, f"{name}.onnx")
    tmp = path + ".tmp"
    # Not under torch.no_grad(): with grad off, nn.MultiheadAttention (ViT) takes its fused
    # fast path, aten::_native_multi_head_attention, which has no ONNX symbolic in 1.13.
    torch.onnx.export(model, args, tmp, export_params=True, opset_version=OPSET,
                      input_names=input_names, output_names=output_names,
                      do_constant_folding=True)
    proto = onnx.load(tmp)  # pulls in any external data torch wrote beside it
    os.remove(tmp)
    sizes = export_common.save_with_external_data(proto, path)
    return path, sizes, export_common.op_types(proto)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--models", nargs="*",
                        default=nn_models.VISION_MODELS + nn_models.TEXT_MODELS)
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))
    failures = 0
    for name in args.models:
        start = time.time()
        try:
            path, (graph_bytes, data_bytes), ops = export(name, args.out)
        except Exception as error:  # report and go on with the other models
            failures += 1
            print(f"FAIL {name}: {type(error).__name__}: {error}", flush=True)
            continue
        print(f"ok   {name}: graph {graph_bytes} B, data {data_bytes} B, "
              f"{time.time() - start:.1f} s, ops {','.join(ops)}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
