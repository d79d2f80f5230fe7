"""export (torch): the graphs with torch.onnx's dynamo exporter, one child process each."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from .configs import (BENCH, CHECKS, PLAIN_EXPORT, REPO, SCRIPT, build_module, input_name,
                      log_to, make_batch)


def export_one(name, model, batch, size, classes, work):
    """Exports one configuration to work/NAME.onnx (+ .data), logits as the output."""
    import numpy as np  # noqa: F401
    import onnx
    import torch

    import export_common

    torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))
    module = build_module(model, size, classes,
                          attn=None if model in PLAIN_EXPORT else "eager").eval()
    x, _ = make_batch(model, batch, size, classes)
    tmp_dir = tempfile.mkdtemp(prefix=f"export_{name}_")
    tmp = os.path.join(tmp_dir, f"{name}.onnx")
    # The default optimization folds eval-mode BatchNormalization into the convolutions;
    # ResNet-50 keeps it (optimize=False) so that memopt trains it on batch statistics.
    keep_bn = model == "resnet50"
    with torch.no_grad():
        torch.onnx.export(module, (torch.from_numpy(x),), tmp, dynamo=True, external_data=True,
                          optimize=not keep_bn, input_names=[input_name(model)],
                          output_names=["logits"])
    proto = onnx.load(tmp)
    if keep_bn:
        import onnxscript.optimizer

        # Constant folding and dead-code removal only: optimize() would also apply the
        # rewrite rules, BN-into-Conv fusion among them.
        onnxscript.optimizer.fold_constants(proto)
        onnxscript.optimizer.remove_unused_nodes(proto)
        ops = export_common.op_types(proto)
        if "BatchNormalization" not in ops:
            raise SystemExit(f"{name}: BatchNormalization was folded away ({ops})")
    path = os.path.join(work, f"{name}.onnx")
    graph_bytes, data_bytes = export_common.save_with_external_data(proto, path)
    shutil.rmtree(tmp_dir, ignore_errors=True)
    print(json.dumps({"name": name, "graph_bytes": graph_bytes, "data_bytes": data_bytes,
                      "nodes": len(proto.graph.node), "ops": export_common.op_types(proto)}))


def cmd_export(args):
    import torch

    os.makedirs(args.out, exist_ok=True)
    say = log_to(os.path.join(args.out, "export_log.txt"))
    versions = {"torch": torch.__version__}
    for package in ("torchvision", "transformers", "onnx", "onnxscript"):
        versions[package] = __import__(package).__version__
    say("versions: " + json.dumps(versions))
    table = {**BENCH, **CHECKS}
    ok = True
    for name, (model, batch, size, classes) in table.items():
        if args.only and name not in args.only:
            continue
        if model == "tiny_convnet":
            shutil.copy(os.path.join(REPO, "models", "tiny_convnet.onnx"),
                        os.path.join(args.out, "tiny_convnet.onnx"))
            continue
        begin = time.time()
        proc = subprocess.run([sys.executable, SCRIPT, "export-one", name,
                               model, str(batch), str(size), str(classes), args.out],
                              capture_output=True, text=True)
        if proc.returncode == 0:
            info = json.loads(proc.stdout.strip().splitlines()[-1])
            say(f"ok   {name}: {info['nodes']} nodes, data {info['data_bytes']} B, "
                f"{time.time() - begin:.1f} s, ops {','.join(info['ops'])}")
        else:
            ok = False
            say(f"FAIL {name}:\n{(proc.stderr + proc.stdout)[-3000:]}")
    return 0 if ok else 1
