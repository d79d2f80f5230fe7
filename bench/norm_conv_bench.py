#!/usr/bin/env python3
"""Batch norm + ReLU folded into the convolutions (`--fuse-norm-conv`) in training steps.

ResNet-50 b64 and DenseNet-121 b32, SGD with momentum, `--bn-batch-stats`, `--layout auto`
(channels-last), bf16 and fp16: memopt with `--fuse-norm-conv auto` against `off`, and
PyTorch's step (AMP, channels-last, fused SGD) eager and under torch.compile, on the same GPU
in the same call. Step time: the executable's `--bench` median (two runs of each program,
alternating) and PyTorch's median of CUDA events over 30 steps; memory: the program's bytes
(weight region + arena + inputs) and PyTorch's max_memory_allocated. The engine each fused call
site ran (cuDNN's scale-bias-relu-conv fusion or memopt's apply + conv, and their timings) is
collected from MEMOPT_CONV_LOG=1.

  export   (GPU machine: torch)  DenseNet-121 at batch 32 as torch.onnx's dynamo exporter gives
                                 it with the batch normalizations kept (optimize=False, then
                                 onnxscript's constant folding, as bench/train_bench/export.py
                                 exports ResNet-50): OUT/densenet121_b32.onnx, graph only
  prepare  (here)                ResNet-50's graph from python/models/resnet_graph.py, the
                                 exported DenseNet's weights filled (fill_weights.py); each
                                 model x precision x fusion compiled and built with nvcc here,
                                 the executables xz-compressed into CARRY/exe
  device   (GPU machine)         runs the executables and PyTorch -> OUT/device.json
  report   (here)                the table (markdown) and OUT/norm_conv.json

    python3 bench/norm_conv_bench.py export --out OUT                          # GPU
    python3 bench/norm_conv_bench.py prepare --graphs RAW/export --dest .dev-bench/norm_conv \\
        --build build                                                          # here
    python3 bench/norm_conv_bench.py device --carry .dev-bench/norm_conv --out OUT   # GPU
    python3 bench/norm_conv_bench.py report --device-json RAW/run/device.json \\
        --json-out RAW/norm_conv.json                                          # here
"""

import argparse
import json
import lzma
import os
import re
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

# name: (torchvision model, batch, graph file)
MODELS = {"resnet50_b64": ("resnet50", 64, "resnet50_b64.onnx"),
          "densenet121_b32": ("densenet121", 32, "densenet121_b32.onnx")}
PRECISIONS = ("bf16", "fp16")
FUSION = ("auto", "off")


def key(model, precision, fusion):
    return f"{model}.{precision}.{fusion}"


def cmd_export(args):
    import onnx
    import onnxscript.optimizer
    import torch
    import torchvision

    os.makedirs(args.out, exist_ok=True)
    module = torchvision.models.densenet121(num_classes=1000).eval()
    x = torch.randn(32, 3, 224, 224)
    tmp = os.path.join(args.out, "tmp.onnx")
    with torch.no_grad():
        torch.onnx.export(module, (x,), tmp, dynamo=True, external_data=True, optimize=False,
                          input_names=["input"], output_names=["logits"])
    proto = onnx.load(tmp)
    onnxscript.optimizer.fold_constants(proto)
    onnxscript.optimizer.remove_unused_nodes(proto)
    # Small tensors (shapes, axes) stay in the graph; the weights go to a data file that does
    # not travel (prepare fills them).
    path = os.path.join(args.out, "densenet121_b32.onnx")
    onnx.save(proto, path, save_as_external_data=True, all_tensors_to_one_file=True,
              location="densenet121_b32.data", size_threshold=1024)
    for name in ("tmp.onnx", "tmp.onnx.data", "densenet121_b32.data"):
        if os.path.exists(os.path.join(args.out, name)):
            os.remove(os.path.join(args.out, name))
    print(json.dumps({"graph": path, "bytes": os.path.getsize(path)}))


def cmd_prepare(args):
    dest = os.path.abspath(args.dest)
    work = os.path.join(dest, "work")
    os.makedirs(os.path.join(dest, "exe"), exist_ok=True)
    os.makedirs(work, exist_ok=True)
    build = os.path.abspath(args.build)
    graphs = {}
    subprocess.run([sys.executable, os.path.join(REPO, "python", "models", "resnet_graph.py"),
                    "--depth", "50", "--batch", "64", "--out", work], check=True)
    graphs["resnet50_b64"] = os.path.join(work, "resnet50_b64.onnx")
    exported = os.path.join(args.graphs or "", "densenet121_b32.onnx")
    if args.graphs and os.path.exists(exported):
        filled = subprocess.run([sys.executable, os.path.join(REPO, "python", "models",
                                                               "fill_weights.py"),
                                 exported, os.path.join(work, "filled")],
                                check=True, capture_output=True, text=True)
        graphs["densenet121_b32"] = filled.stdout.strip().splitlines()[-1]
    summary = {"configs": {}}
    rt = os.path.join(build, "lib", "Runtime")
    libs = [os.path.join(rt, f"libmemopt_runtime_{n}.a")
            for n in ("main", "driver", "cuda", "common")]
    for model, graph in graphs.items():
        for precision in PRECISIONS:
            for fusion in FUSION:
                name = key(model, precision, fusion)
                out = os.path.join(work, name)
                command = [os.path.join(build, "bin", "memopt-compile"), graph, "--train",
                           "--loss", "cross-entropy", "--loss-output", "logits",
                           "--optimizer", "sgd", "--lr", "0.001", "--momentum", "0.9",
                           "--precision", precision, "--target", "cuda", "--bn-batch-stats",
                           "--fuse-norm-conv", fusion, "--emit", "source", "-o", out,
                           "--report", out + ".json"]
                result = subprocess.run(command, capture_output=True, text=True)
                if result.returncode != 0:
                    summary["configs"][name] = {"error": result.stderr[-2000:]}
                    print(f"{name}: compile failed\n{result.stderr[-800:]}")
                    continue
                fused = re.search(r"(\d+) of (\d+) batch norm \+ relu folded", result.stdout)
                report = json.load(open(out + ".json"))
                exe = os.path.join(work, name + ".exe")
                subprocess.run(["nvcc", "-std=c++17", "-O1", "-arch=sm_90", out + ".cu",
                                f"-I{REPO}/include", "-o", exe, *libs,
                                "-L/usr/local/cuda/lib64", "-lcudart", "-lcublasLt", "-lcudnn"],
                               check=True)
                with open(exe, "rb") as src, lzma.open(os.path.join(dest, "exe", name + ".xz"),
                                                       "wb") as dst:
                    shutil.copyfileobj(src, dst)
                summary["configs"][name] = {
                    "fused": [int(fused.group(1)), int(fused.group(2))] if fused else None,
                    "arena_bytes": report["arena_bytes"],
                    "weights_bytes": report["weights_bytes"], "io_bytes": report["io_bytes"]}
                print(f"{name}: arena {report['arena_bytes'] / 2**30:.2f} GiB"
                      + (f", {fused.group(0)}" if fused else ""))
    shutil.copy(os.path.abspath(__file__), os.path.join(dest, "norm_conv_bench.py"))
    shutil.copy(os.path.join(HERE, "device_env.py"), os.path.join(dest, "device_env.py"))
    json.dump(summary, open(os.path.join(dest, "prepare.json"), "w"), indent=1)


def torch_step(arch, batch, precision, mode, steps=30):
    import torch
    import torchvision

    torch.manual_seed(0)
    model = getattr(torchvision.models, arch)().cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9, fused=True)
    forward = model if mode == "eager" else torch.compile(model)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "fp16")
    x = torch.randn(batch, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=dtype):
            loss = torch.nn.functional.cross_entropy(forward(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    for _ in range(8):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(steps):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        step()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end))
    return {"median_ms": statistics.median(times),
            "peak_bytes": torch.cuda.max_memory_allocated()}


def cmd_device(args):
    sys.path.insert(0, args.carry)
    import device_env
    import numpy as np

    os.makedirs(args.out, exist_ok=True)
    lib = device_env.wheel_library_dirs(("nvidia.cudnn", "nvidia.cublas", "nvidia.cu13"))
    env = dict(os.environ, LD_LIBRARY_PATH=":".join(
        lib + ["/usr/local/cuda/lib64", os.environ.get("LD_LIBRARY_PATH", "")]))
    work = "/tmp/norm_conv_bench"
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(0)
    inputs = {}
    for _, batch, _ in MODELS.values():
        x, labels = os.path.join(work, f"x{batch}.npy"), os.path.join(work, f"y{batch}.npy")
        np.save(x, rng.standard_normal((batch, 3, 224, 224), dtype=np.float32))
        np.save(labels, rng.integers(0, 1000, batch).astype(np.int64))
        inputs[batch] = ["--input", f"input={x}", "--input", f"labels={labels}"]
    result = {"memopt": {}, "torch": {}}
    exes = {}
    for name in sorted(os.listdir(os.path.join(args.carry, "exe"))):
        exe = os.path.join(work, name[:-3])
        with lzma.open(os.path.join(args.carry, "exe", name)) as src, open(exe, "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.chmod(exe, 0o755)
        exes[name[:-3]] = exe
    for run in range(2):
        for name, exe in exes.items():
            batch = MODELS[name.split(".")[0]][1]
            text = subprocess.run([exe, *inputs[batch], "--random-weights", "1", "--steps",
                                   "3", "--bench", "20"], env=env, capture_output=True,
                                  text=True, timeout=300).stdout
            bench = re.search(r"median_ms=([\d.]+)", text)
            peak = re.search(r"device_peak_used_bytes=(\d+)", text)
            losses = [float(v) for v in re.findall(r"step \d+ loss (\S+)", text)]
            entry = result["memopt"].setdefault(name, {"median_ms": [], "losses": None})
            if bench:
                entry["median_ms"].append(float(bench.group(1)))
            entry["device_peak_used_bytes"] = int(peak.group(1)) if peak else None
            entry["losses"] = entry["losses"] or losses
            print(f"{name} run {run}: {bench.group(1) if bench else text[-300:]} ms", flush=True)
    for name, exe in exes.items():
        if name.endswith(".auto"):
            batch = MODELS[name.split(".")[0]][1]
            text = subprocess.run([exe, *inputs[batch], "--random-weights", "1", "--steps", "2"],
                                  env=dict(env, MEMOPT_CONV_LOG="1"), capture_output=True,
                                  text=True, timeout=300).stdout
            result["memopt"][name]["engines"] = sorted(
                set(line.split("memopt conv: ", 1)[1] for line in text.splitlines()
                    if "engine:" in line))
    for model, (arch, batch, _) in MODELS.items():
        for precision in PRECISIONS:
            for mode in ("eager", "compile"):
                try:
                    entry = torch_step(arch, batch, precision, mode)
                except Exception as error:  # noqa: BLE001 - recorded, the rest goes on
                    entry = {"error": repr(error)[:300]}
                result["torch"][f"{model}.{precision}.{mode}"] = entry
                print(model, precision, mode, entry, flush=True)
    json.dump(result, open(os.path.join(args.out, "device.json"), "w"), indent=1)


def cmd_report(args):
    device = json.load(open(args.device_json))
    prepare = json.load(open(args.prepare_json)) if args.prepare_json else {"configs": {}}
    rows = []
    for model in MODELS:
        for precision in PRECISIONS:
            row = {"model": model, "precision": precision}
            for fusion in FUSION:
                name = key(model, precision, fusion)
                run = device["memopt"].get(name, {})
                config = prepare["configs"].get(name, {})
                times = run.get("median_ms") or []
                row[f"memopt {fusion} ms"] = min(times) if times else None
                if config.get("arena_bytes"):
                    row[f"memopt {fusion} GiB"] = (config["arena_bytes"] + config["weights_bytes"]
                                                   + config["io_bytes"]) / 2**30
                if fusion == "auto" and config.get("fused"):
                    row["fused"] = "{} of {}".format(*config["fused"])
            for mode in ("eager", "compile"):
                entry = device["torch"].get(f"{model}.{precision}.{mode}", {})
                row[f"torch {mode} ms"] = entry.get("median_ms")
                if entry.get("peak_bytes"):
                    row[f"torch {mode} GiB"] = entry["peak_bytes"] / 2**30
            rows.append(row)
    columns = ["model", "precision", "fused", "memopt auto ms", "memopt auto GiB",
               "memopt off ms", "memopt off GiB", "torch eager ms", "torch eager GiB",
               "torch compile ms", "torch compile GiB"]
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join(" --- " for _ in columns) + "|")
    for row in rows:
        cells = []
        for column in columns:
            value = row.get(column)
            cells.append("" if value is None else f"{value:.2f}" if isinstance(value, float)
                         else str(value))
        print("| " + " | ".join(cells) + " |")
    if args.json_out:
        json.dump({"rows": rows, "engines": {k: v.get("engines") for k, v in
                                             device["memopt"].items() if v.get("engines")}},
                  open(args.json_out, "w"), indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("export")
    p.add_argument("--out", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--graphs", help="the export step's folder (DenseNet-121's graph)")
    p.add_argument("--dest", required=True)
    p.add_argument("--build", default=os.path.join(REPO, "build"))
    p = sub.add_parser("device")
    p.add_argument("--carry", required=True)
    p.add_argument("--out", required=True)
    p = sub.add_parser("report")
    p.add_argument("--device-json", required=True)
    p.add_argument("--prepare-json")
    p.add_argument("--json-out")
    args = parser.parse_args()
    {"export": cmd_export, "prepare": cmd_prepare, "device": cmd_device,
     "report": cmd_report}[args.command](args)


if __name__ == "__main__":
    main()
