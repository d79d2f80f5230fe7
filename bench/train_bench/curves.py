"""curves (GPU): loss curves from the same initial weights (memopt and PyTorch, each
precision), and their SVG chart for `report --curves`."""

import json
import os
import subprocess
import sys

from .configs import (BENCH, PRECISIONS, SCRIPT, SEED, build_module, input_name, log_to,
                      make_batch, precision_suffix)
from .device import library_path, link_executables, run_streamed


def cmd_curves(args):
    """memopt's fp32 / fp16 / bf16 programs (whichever the carry has) and PyTorch fp32 / AMP
    fp16 / AMP bf16, `--steps` steps each on the bench batch, from the same initial weights:
    memopt's --random-weights SEED written by --steps 0 --save-state and loaded into the
    PyTorch module by parameter name (the dynamo exporter names initializers by their
    state_dict key; unmatched parameters are counted in the result)."""
    import numpy as np

    carry = os.path.abspath(args.carry)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    work = os.path.join(args.work, "curves")
    os.makedirs(work, exist_ok=True)
    say = log_to(os.path.join(out, "curves_log.txt"))
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = library_path() + ":" + env.get("LD_LIBRARY_PATH", "")
    result = {"steps": args.steps, "optimizer": args.optimizer, "configs": {}}
    exe_dir = link_executables(carry, args.work, result, say)
    path = os.path.join(out, "curves.json")
    for name in args.configs:
        model, batch, size, classes = BENCH[name]
        x, y = make_batch(model, batch, size, classes)
        xs, ys = os.path.join(work, f"{name}.x.npy"), os.path.join(work, f"{name}.y.npy")
        np.save(xs, x)
        np.save(ys, y)
        entry = result["configs"].setdefault(name, {"memopt": {}, "torch": {}})
        init = os.path.join(work, f"{name}.init")
        for precision in PRECISIONS:
            exe = os.path.join(exe_dir,
                               f"{name}.{args.optimizer}{precision_suffix(precision)}.cuda")
            if not os.path.exists(exe):
                entry["memopt"][precision] = {"error": "no executable (prepare and link it)"}
                continue
            if not os.path.exists(init):
                subprocess.run([exe, "--random-weights", str(SEED), "--input",
                                f"{input_name(model)}={xs}", "--input", f"labels={ys}",
                                "--steps", "0", "--save-state", init], env=env,
                               capture_output=True, text=True, timeout=300)
            log = os.path.join(work, f"{name}.{precision}.csv")
            code, text, _ = run_streamed(
                [exe, "--random-weights", str(SEED), "--input", f"{input_name(model)}={xs}",
                 "--input", f"labels={ys}", "--steps", str(args.steps), "--log", log],
                args.timeout_s, env)
            if code != 0:
                entry["memopt"][precision] = {"error": text[-2000:]}
                say(f"curves memopt {name} {precision}: FAILED\n{text[-1000:]}")
                continue
            rows = [line.split(",") for line in open(log).read().splitlines()[1:]]
            entry["memopt"][precision] = {
                "loss": [float(r[1]) for r in rows],
                "loss_scale": [float(r[2]) for r in rows] if rows and len(rows[0]) > 2 else None,
                "skipped_steps": int(rows[-1][3]) if rows and len(rows[0]) > 3 else 0}
            say(f"curves memopt {name} {precision}: {rows[0][1]} -> {rows[-1][1]}")
        for precision in ("fp32", "fp16", "bf16"):  # (tf32 would be fp32 again here)
            part = os.path.join(work, f"{name}.torch.{precision}.json")
            command = [sys.executable, SCRIPT, "torch-curve", name,
                       "--init", init, "--out", part, "--steps", str(args.steps),
                       "--precision", precision, "--optimizer", args.optimizer]
            try:
                subprocess.run(command, timeout=args.timeout_s,
                               env=dict(os.environ, PYTHONUNBUFFERED="1"))
            except subprocess.TimeoutExpired:
                say(f"curves torch {name} {precision}: timeout")
            if os.path.exists(part):
                entry["torch"][precision] = json.load(open(part))
                losses = entry["torch"][precision].get("loss", [])
                if losses:
                    say(f"curves torch {name} {precision}: {losses[0]} -> {losses[-1]}")
        with open(path, "w") as handle:
            json.dump(result, handle)
    return 0


def cmd_torch_curve(args):
    """PyTorch's curve (fp32, or AMP fp16 with a GradScaler, or AMP bf16) from memopt's
    initial weights (the .npy files of --save-state, loaded by name)."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    model, batch, size, classes = BENCH[args.name]
    module = build_module(model, size, classes).cuda().train()
    low = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(args.precision)
    state = module.state_dict()
    loaded, missing = 0, []
    for key, tensor in state.items():
        file = os.path.join(args.init, "".join("_" if c in "/\\: " else c for c in key) +
                            ".npy")
        if os.path.exists(file):
            value = torch.from_numpy(np.load(file))
            if tuple(value.shape) == tuple(tensor.shape):
                tensor.copy_(value)
                loaded += 1
                continue
        missing.append(key)
    if model == "resnet50" and low is not None:
        module = module.to(memory_format=torch.channels_last)
    x_np, y_np = make_batch(model, batch, size, classes)
    x, y = torch.from_numpy(x_np).cuda(), torch.from_numpy(y_np).cuda()
    if model == "resnet50" and low is not None:
        x = x.contiguous(memory_format=torch.channels_last)
    if args.optimizer == "sgd":
        opt = torch.optim.SGD(module.parameters(), lr=1e-3, momentum=0.9)
    else:
        opt = torch.optim.AdamW(module.parameters(), lr=1e-4, weight_decay=0.01)
    scaler = torch.amp.GradScaler("cuda", enabled=args.precision == "fp16")
    losses, scales = [], []
    for _ in range(args.steps):
        with torch.autocast("cuda", dtype=low, enabled=low is not None):
            logits = module(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss))
        scales.append(float(scaler.get_scale()) if scaler.is_enabled() else None)
    with open(args.out, "w") as handle:
        json.dump({"loss": losses, "loss_scale": scales, "loaded_parameters": loaded,
                   "parameters_not_loaded": missing}, handle)
    return 0


def curves_svg(curves, path, width=720, height=300):
    """A plain SVG line chart per configuration: loss against step, one line per run."""
    colors = {"memopt.fp32": "#1f77b4", "memopt.fp16": "#d62728", "memopt.bf16": "#2ca02c",
              "torch.fp32": "#7f7f7f", "torch.fp16": "#ff9896", "torch.bf16": "#98df8a"}
    parts = []
    top = 0
    for name, entry in curves["configs"].items():
        lines = {f"{side}.{p}": run["loss"] for side in ("memopt", "torch")
                 for p, run in entry[side].items() if run.get("loss")}
        if not lines:
            continue
        values = [v for losses in lines.values() for v in losses if v == v]
        low, high = min(values), max(values)
        steps = max(len(v) for v in lines.values())
        parts.append(f'<text x="10" y="{top + 16}" font-size="14">{name}: loss over '
                     f'{steps} steps ({curves["optimizer"]})</text>')
        for k, (label, losses) in enumerate(lines.items()):
            points = " ".join(
                f"{60 + (width - 200) * i / max(steps - 1, 1):.1f},"
                f"{top + 30 + (height - 60) * (1 - (v - low) / max(high - low, 1e-12)):.1f}"
                for i, v in enumerate(losses) if v == v)
            parts.append(f'<polyline fill="none" stroke="{colors.get(label, "black")}" '
                         f'stroke-width="1.5" points="{points}"/>')
            parts.append(f'<text x="{width - 130}" y="{top + 40 + 16 * k}" font-size="12" '
                         f'fill="{colors.get(label, "black")}">{label}</text>')
        parts.append(f'<text x="10" y="{top + 34}" font-size="11">{high:.3g}</text>')
        parts.append(f'<text x="10" y="{top + height - 30}" font-size="11">{low:.3g}</text>')
        top += height
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{max(top, 1)}">'
           + "".join(parts) + "</svg>\n")
    with open(path, "w") as handle:
        handle.write(svg)
