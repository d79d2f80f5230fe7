"""report (here): docs/training-benchmark.md and train.json, and with --remat issue 17's tables
(docs/training-benchmark-remat.md, train_remat.json); bench/run.py records the JSONs."""

import json
import os

from .configs import BENCH, OPTIMIZERS, REPO, precision_suffix
from .curves import curves_svg


def mib(n):
    return f"{n / 2**20:,.0f}"


def merge_devices(devices):
    """The device calls' results as one (a run with a median wins over a failed one)."""
    merged = {"memopt": {}, "torch": {}, "checks": {}, "gpu_check": None, "phases": []}
    for d in devices:
        for key, entry in d.get("memopt", {}).items():
            if "median_ms" in entry or key not in merged["memopt"]:
                merged["memopt"][key] = entry
        for key, entry in d.get("torch", {}).items():
            old = merged["torch"].setdefault(key, {"runs": {}})
            old.setdefault("environment", entry.get("environment"))
            old.setdefault("tf32_flags", entry.get("tf32_flags"))
            for mode, run in entry.get("runs", {}).items():
                if "median_ms" in run or mode not in old["runs"]:
                    old["runs"][mode] = run
        for key, entry in d.get("checks", {}).items():
            if entry.get("worst") or key not in merged["checks"]:
                merged["checks"][key] = entry
        if d.get("gpu_check"):
            merged["gpu_check"] = d["gpu_check"]
        merged["phases"].append(d.get("phases"))
        merged["nvidia_smi"] = d.get("nvidia_smi", merged.get("nvidia_smi"))
    return merged


def cmd_report(args):
    if args.remat:
        return cmd_report_remat(args)
    args.doc_out = args.doc_out or os.path.join(REPO, "docs", "training-benchmark.md")
    args.json_out = args.json_out or os.path.join(REPO, ".dev-bench", "train", "raw",
                                                              "train.json")
    devices = [json.load(open(p)) for p in args.device_json]
    prepare = json.load(open(args.prepare_json))
    merged = merge_devices(devices)
    env = next((t.get("environment") for t in merged["torch"].values()
                if t.get("environment")), {})
    precision = next((d.get("precision") for d in devices if d.get("precision")), "fp32")
    budget_column = any(mode.startswith("compile-budget")
                        for t in merged["torch"].values() for mode in t.get("runs", {}))
    rows, tf32_rows = [], []
    for name in BENCH:
        for opt in OPTIMIZERS:
            key = f"{name}.{opt}"
            m = merged["memopt"].get(key, {})
            # TF32 off, else PyTorch's defaults (`--tf32 default`, what AMP runs used).
            t = (merged["torch"].get(f"{name}.tf32=off") or
                 merged["torch"].get(f"{name}.tf32=default", {})).get("runs", {})
            t32 = merged["torch"].get(f"{name}.tf32=on", {}).get("runs", {})
            e, c = t.get(f"eager.{opt}", {}), t.get(f"compile.{opt}", {})
            cb = (t.get(f"compile-budget.{opt}") or
                  t.get(f"compile-budget=0.5.{opt}", {}))
            e32, c32 = t32.get(f"eager.{opt}", {}), t32.get(f"compile.{opt}", {})
            suffix = precision_suffix(precision)
            rep = prepare["configs"].get(key + suffix, {}).get("report", {}).get("training",
                                                                                  {})

            def ms(r):
                return f"{r['median_ms']:.1f}" if "median_ms" in r else \
                    ("failed" if "error" in r else "—")

            def mb(r, k):
                return mib(r[k]) if k in r else "—"

            ratio = (f"{m['median_ms'] / c['median_ms']:.2f}"
                     if "median_ms" in m and "median_ms" in c else "—")
            mem_ok = ("yes" if "total_bytes" in m and "peak_allocated_bytes" in e and
                      "peak_allocated_bytes" in c and
                      m["total_bytes"] < min(e["peak_allocated_bytes"],
                                             c["peak_allocated_bytes"]) else
                      ("no" if "total_bytes" in m else "—"))
            rows.append(f"| {name} | {opt} | {mb(m, 'total_bytes')} | "
                        f"{mb(e, 'peak_allocated_bytes')} | {mb(c, 'peak_allocated_bytes')} | "
                        f"{mb(m, 'beyond_state_bytes')} | {mb(e, 'beyond_state_bytes')} | "
                        f"{mb(c, 'beyond_state_bytes')} | {ms(m)} | {ms(e)} | {ms(c)} | "
                        f"{ratio} | {mem_ok} | {mb(m, 'device_peak_used_bytes')} | "
                        f"{mb(e, 'device_used_bytes')} | {mb(c, 'device_used_bytes')} |" +
                        (f" {ms(cb)} | {mb(cb, 'peak_allocated_bytes')} | "
                         f"{mb(cb, 'beyond_state_bytes')} |" if budget_column else ""))
            tf32_rows.append(f"| {name} | {opt} | {ms(m)} (fp32) | {ms(e32)} | {ms(c32)} | "
                             f"{mb(e32, 'peak_allocated_bytes')} | "
                             f"{mb(c32, 'peak_allocated_bytes')} |")
            merged.setdefault("configs", {})[key] = {
                "memopt": m, "eager": e, "compile": c, "eager_tf32": e32,
                "compile_tf32": c32, "compile_budget": cb, "precision": precision,
                "memopt_report_training": rep}
    check_rows = []
    for name, check in merged["checks"].items():
        worst = check.get("worst") or {}
        big = check.get("worst_significant") or {}
        host, cuda = check.get("host", {}), check.get("cuda", {})
        total = check.get("global_rel_l2", float("nan"))
        status = ("ok" if big and big.get("rel_l2", 1) < 1e-4 else
                  ("FAILED: " + (cuda.get("log_tail") or host.get("log_tail") or "")[-300:]
                   .replace("\n", " ").replace("|", "/")) if not worst else "**too large**")
        check_rows.append(
            f"| {name} | {check.get('tensors', '—')} | {total:.1e} | "
            f"{big.get('rel_l2', float('nan')):.1e} (`{big.get('name', '—')}`) | "
            f"{worst.get('rel_l2', float('nan')):.1e} (`{worst.get('name', '—')}`, norm "
            f"{worst.get('host_norm', float('nan')):.1e}) | "
            f"{host.get('loss', '—')} | {cuda.get('loss', '—')} | {status} |")
    header = ("| model | optimizer | memopt total | eager peak | compile peak | memopt beyond "
              "state | eager beyond state | compile beyond state | memopt ms | eager ms | "
              "compile ms | memopt / compile | memory below both | memopt device used | "
              "eager device used | compile device used |" +
              (" compile (budget 0.5) ms | compile (budget 0.5) peak | compile (budget 0.5) "
               "beyond state |" if budget_column else "") + "\n"
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
              "---: | --- | ---: | ---: | ---: |" +
              (" ---: | ---: | ---: |" if budget_column else ""))
    if precision != "fp32":
        header = (f"memopt `--precision {precision}` against PyTorch autocast "
                  f"({precision}{', GradScaler' if precision == 'fp16' else ''}; ResNet-50 "
                  "channels-last):\n\n" + header)
    tf32_header = ("| model | optimizer | memopt ms | eager ms (TF32) | compile ms (TF32) | "
                   "eager peak (TF32) | compile peak (TF32) |\n"
                   "| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    check_header = ("| configuration | gradients | all gradients rel. L2 | worst tensor (norm >= "
                    "1e-4 of the largest) | worst tensor (any norm) | host loss | CUDA loss | "
                    "status |\n| --- | ---: | ---: | --- | --- | ---: | ---: | --- |")
    text = open(args.template).read()
    text = text.replace("@TABLE@", header + "\n" + "\n".join(rows))
    text = text.replace("@TF32@", tf32_header + "\n" + "\n".join(tf32_rows))
    text = text.replace("@CHECKS@", check_header + "\n" + "\n".join(check_rows))
    text = text.replace("@ENV@", ", ".join(f"{k} {v}" for k, v in env.items()) +
                        f"; nvidia-smi: {merged.get('nvidia_smi')}; memopt at "
                        f"{prepare.get('commit', '?')[:10]}")
    gc = merged["gpu_check"] or {}
    text = text.replace("@GPUCHECK@", f"exit {gc.get('exit')}, {gc.get('summary')}" +
                        ("" if not gc.get("failures") else
                         "; failing lines: " + "; ".join(f"`{f}`" for f in gc["failures"][:10])))
    notes = open(args.notes).read().strip() if args.notes else ""
    text = text.replace("@NOTES@", notes)
    if args.curves:
        curves = json.load(open(args.curves))
        svg = os.path.splitext(args.doc_out)[0] + "-curves.svg"
        curves_svg(curves, svg)
        lines = ["| config | run | first loss | last loss | skipped steps |",
                 "| --- | --- | ---: | ---: | ---: |"]
        for name, entry in curves["configs"].items():
            for side in ("memopt", "torch"):
                for p, run in entry[side].items():
                    losses = run.get("loss") or []
                    skipped = run.get("skipped_steps", "-")
                    lines.append(f"| {name} | {side} {p} | "
                                 f"{losses[0] if losses else run.get('error', '-')[:60]} | "
                                 f"{losses[-1] if losses else '-'} | {skipped} |")
        block = (f"Loss curves ({curves['steps']} steps, the same initial weights and batch; "
                 f"![curves]({os.path.basename(svg)})):\n\n" + "\n".join(lines))
        text = text.replace("@CURVES@", block) if "@CURVES@" in text else text + "\n" + block
    merged["curves"] = args.curves
    with open(args.doc_out, "w") as handle:
        handle.write(text)
    merged["prepare"] = prepare
    with open(args.json_out, "w") as handle:
        json.dump(merged, handle, indent=1)
    print(header + "\n" + "\n".join(rows))
    print(tf32_header + "\n" + "\n".join(tf32_rows))
    print(check_header + "\n" + "\n".join(check_rows))
    return 0


REMAT_DOC = """# Training under a memory budget: memopt's rematerialization against PyTorch

Written by `python3 bench/train_bench.py report --remat` (issue 17, "Benchmarks and targets",
GPU) from the JSON of the device calls; docs/benchmarks/train_remat.md records the figures, the
commands are in the script's docstring.

Device: @ENV@.

memopt `--precision @PRECISION@`; PyTorch fp32 with TF32 switches @TORCH_TF32@.

## What the budgets are

`memopt-compile --memory-budget BYTES` bounds memopt's packed arena alone (docs/remat.md,
"budget= vs memory-budget="): the weight region (parameters, optimizer state, BatchNorm
statistics, constants) is outside it. Besides activations (saved for backward, temporaries,
workspaces) the arena holds the gradients still alive at its peak (fused updates free the
others at once: the report's `training.gradient_bytes_at_peak`). So the unconstrained
*activation arena* is A = arena - gradients at the peak, and "F of it" is the budget
`gradients at the peak + F x A` (`remat_budget` in the script). An infeasible budget is shown
with the smallest arena memopt reached.

PyTorch, at comparable memory: `checkpoint` is eager mode with `torch.utils.checkpoint(...,
use_reentrant=False)` around each block (ResNet-50: each of the 16 bottleneck blocks; ViT:
each of the 12 encoder layers; GPT-2: each of the 12 transformer blocks, through
transformers' `gradient_checkpointing_enable`); `compile-budget=B` is `torch.compile` with
`torch._functorch.config.activation_memory_budget = B` (a fraction of the saved activations'
bytes, not of the whole step's memory), each B in its own process.

Columns: "step ms": median of the timed steps; "overhead": against memopt's unconstrained
step (memopt rows), eager (checkpoint) or torch.compile without a budget (compile-budget).
"allocated": memopt's weight region + arena + inputs + workspace, PyTorch's
`torch.cuda.max_memory_allocated()` over one step. "device peak": memopt's largest `total -
free` of `cudaMemGetInfo` during its timed steps, PyTorch's `total - free` after its measured
step (CUDA context, libraries and allocator caches included on both). "beyond state":
allocated minus the training state (PyTorch: parameters, buffers, gradients, optimizer state;
memopt: the weight region, so its gradients count as beyond state), and its share of the
same side's unconstrained run. "activation arena", "recomputed", "recomputed FLOPs" and
"estimated time" come from memopt's compile report (FLOPs of the clones over the step's, and
their roofline time over the step's on an H100).

@TABLES@

## Against issue 17's targets

@TARGETS@

@NOTES@
"""


def cmd_report_remat(args):
    """Issue 17's GPU table: per model, memopt unconstrained and under each budget against
    PyTorch eager, checkpoint, torch.compile and torch.compile with activation budgets."""
    args.doc_out = args.doc_out or os.path.join(REPO, "docs", "training-benchmark-remat.md")
    args.json_out = args.json_out or os.path.join(REPO, ".dev-bench", "train_remat",
                                                  "raw", "train_remat.json")
    devices = [json.load(open(p)) for p in args.device_json]
    prepare = json.load(open(args.prepare_json))
    merged = merge_devices(devices)
    precision = next((d.get("precision") for d in devices if d.get("precision")), "fp32")
    suffix = precision_suffix(precision)
    tf32 = args.torch_tf32 or next(
        (v for v in ("default", "off", "on")
         if any(k.endswith(f".tf32={v}") for k in merged["torch"])), "off")
    env = next((t.get("environment") for t in merged["torch"].values()
                if t.get("environment")), {})
    flags = next((t.get("tf32_flags") for k, t in merged["torch"].items()
                  if k.endswith(f".tf32={tf32}") and t.get("tf32_flags")), None)

    def ms(r):
        if "median_ms" in r:
            return f"{r['median_ms']:.1f}"
        if r.get("error") == "deadline":
            return "not run (the call's deadline)"
        return "failed" if "error" in r else "—"

    def mb(n):
        return "—" if n is None else mib(n)

    def pct(x, signed=False):
        return "—" if x is None else (f"{100 * x:+.1f}%" if signed else f"{100 * x:.1f}%")

    def ratio(a, b, key):
        return (a[key] / b[key] - 1) if key in a and key in b and b[key] else None

    def share(a, b, key):
        return a[key] / b[key] if key in a and key in b and b[key] else None

    tables, targets, models = [], [], {}
    for name in BENCH:
        for opt in OPTIMIZERS:
            base_key = f"{name}.{opt}"
            t = merged["torch"].get(f"{name}.tf32={tf32}", {}).get("runs", {})
            if not any(k.startswith(base_key) for k in merged["memopt"]) and not any(
                    k.endswith(f".{opt}") for k in t):
                continue
            variants = sorted(
                ((c.get("remat_budget", {}).get("fraction"), k[len(base_key + suffix):])
                 for k, c in prepare.get("configs", {}).items()
                 if k.startswith(base_key + suffix + ".remat") and c.get("remat_budget")),
                key=lambda fv: -fv[0])
            base = merged["memopt"].get(base_key, {})
            base_prep = prepare.get("configs", {}).get(base_key + suffix, {})
            rows, entry = [], {"memopt": {}, "torch": {}}
            for fraction, variant in [(None, "")] + variants:
                run = merged["memopt"].get(base_key + variant, {})
                prep = prepare.get("configs", {}).get(base_key + suffix + variant, {})
                report = prep.get("report", {})
                remat = report.get("remat") or {}
                training = report.get("training") or {}
                budget = prep.get("remat_budget") or {}
                act = (report["arena_bytes"] - training.get("gradient_bytes_at_peak", 0)
                       if "arena_bytes" in report else None)
                flops = (remat["added_flops"] / remat["step_flops"]
                         if remat.get("step_flops") else (0.0 if report else None))
                label = "memopt unconstrained" if fraction is None else \
                    f"memopt {100 * fraction:g}% of the activation arena"
                if "error" in prep and fraction is not None:
                    reached = prep.get("smallest_arena_bytes")
                    what = ("infeasible" if reached is None else
                            f"infeasible: smallest arena {mib(reached)} MiB "
                            f"({prep.get('smallest_arena_recomputed_ops')} ops recomputed)")
                    rows.append(f"| {label} | {mb(budget.get('budget_bytes'))} | {what} |"
                                + " — |" * 9)
                    entry["memopt"][variant or "unconstrained"] = {
                        "fraction": fraction, "infeasible": what, "budget": budget,
                        "error": prep.get("error")}
                    continue
                over = ratio(run, base, "median_ms") if fraction is not None else None
                rows.append(
                    f"| {label} | {mb(budget.get('budget_bytes'))} | {ms(run)} | "
                    f"{pct(over, True) if fraction is not None else '—'} | "
                    f"{mb(run.get('total_bytes'))} | {mb(run.get('device_peak_used_bytes'))} | "
                    f"{mb(run.get('beyond_state_bytes'))} | "
                    f"{pct(share(run, base, 'beyond_state_bytes'))} | {mb(act)} | "
                    f"{remat.get('recomputed_ops', 0 if report else '—')} | {pct(flops)} | "
                    f"{pct(remat.get('added_time_fraction', 0.0) if report else None)} |")
                entry["memopt"][variant or "unconstrained"] = {
                    "fraction": fraction, "run": run, "overhead": over,
                    "beyond_state_share": share(run, base, "beyond_state_bytes"),
                    "activation_arena_bytes": act, "recomputed_flops_share": flops,
                    "budget": budget, "remat": {k: v for k, v in remat.items()
                                                if k != "recomputed"},
                    "compile_s": prep.get("compile_s")}
            modes = ["eager", "checkpoint", "compile"] + sorted(
                {k.rsplit(".", 1)[0] for k in t if k.startswith("compile-budget")},
                key=lambda m: -float(m.split("=")[1]) if "=" in m else 0)
            for mode in modes:
                run = t.get(f"{mode}.{opt}")
                if run is None:
                    continue
                ref = t.get(("compile" if mode.startswith("compile") else "eager") + f".{opt}",
                            {})
                over = ratio(run, ref, "median_ms") if mode not in ("eager", "compile") \
                    else None
                beyond = share(run, ref, "beyond_state_bytes")
                rows.append(
                    f"| PyTorch {mode} | — | {ms(run)} | "
                    f"{pct(over, True) if over is not None else '—'} | "
                    f"{mb(run.get('peak_allocated_bytes'))} | "
                    f"{mb(run.get('device_used_bytes'))} | "
                    f"{mb(run.get('beyond_state_bytes'))} | {pct(beyond)} |" + " — |" * 4)
                entry["torch"][mode] = {"run": run, "overhead": over,
                                        "beyond_state_share": beyond}
            models[base_key] = entry
            tables.append(
                f"### {name}, {opt}\n\n| run | budget MiB | step ms | overhead | allocated MiB "
                "| device peak MiB | beyond state MiB | beyond state vs unconstrained | "
                "activation arena MiB | recomputed ops | recomputed FLOPs | estimated time |\n"
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
                "---: |\n" + "\n".join(rows))
            # The targets: +5% at 50%, +15% at 25%, below checkpointing's overhead at the
            # same memory (memory compared as shares of each side's own unconstrained run).
            parts = []
            for variant, m in entry["memopt"].items():
                limit = {0.5: 0.05, 0.25: 0.15}.get(m.get("fraction"))
                if m.get("fraction") is None:
                    continue
                if m.get("overhead") is None:
                    parts.append(f"at {100 * m['fraction']:g}%: " +
                                 m.get("infeasible", "not measured"))
                    continue
                parts.append(f"at {100 * m['fraction']:g}%: {pct(m['overhead'], True)}" +
                             (f" (target <= +{100 * limit:g}%: "
                              f"{'met' if m['overhead'] <= limit else 'not met'})"
                              if limit is not None else ""))
            check = entry["torch"].get("checkpoint")
            line = f"- {name} {opt}: memopt " + ("; ".join(parts) or "no budgeted run")
            if check and check.get("overhead") is not None and check.get("beyond_state_share"):
                # memopt's run with the least overhead whose beyond-state share is at most
                # checkpointing's.
                fits = [(v, m) for v, m in entry["memopt"].items()
                        if m.get("fraction") is not None and m.get("overhead") is not None
                        and m.get("beyond_state_share") is not None
                        and m["beyond_state_share"] <= check["beyond_state_share"]]
                line += (f". PyTorch checkpoint: {pct(check['overhead'], True)} at "
                         f"{pct(check['beyond_state_share'])} of eager's beyond-state bytes")
                if fits:
                    v, m = min(fits, key=lambda vm: vm[1]["overhead"])
                    line += (f"; memopt at {pct(m['beyond_state_share'])} of its own "
                             f"({v.lstrip('.')}): {pct(m['overhead'], True)}, "
                             f"{'below' if m['overhead'] < check['overhead'] else 'not below'}"
                             " checkpointing's overhead")
                else:
                    line += "; no memopt run at that memory share or below"
            targets.append(line + ".")
    text = REMAT_DOC.replace("@TABLES@", "\n\n".join(tables) or "(no runs)")
    text = text.replace("@TARGETS@", "\n".join(targets) or "(no runs)")
    text = text.replace("@PRECISION@", precision)
    text = text.replace("@TORCH_TF32@", f"'{tf32}'" + (
        f" (matmul {flags.get('matmul')}, cuDNN {flags.get('cudnn')})" if flags else ""))
    text = text.replace("@ENV@", ", ".join(f"{k} {v}" for k, v in env.items()) +
                        f"; nvidia-smi: {merged.get('nvidia_smi')}; memopt at "
                        f"{prepare.get('commit', '?')[:10]}")
    text = text.replace("@NOTES@", open(args.notes).read().strip() if args.notes else "")
    with open(args.doc_out, "w") as handle:
        handle.write(text)
    with open(args.json_out, "w") as handle:
        json.dump({"precision": precision, "torch_tf32": tf32, "models": models,
                   "merged": merged, "prepare": prepare}, handle, indent=1)
    print("\n\n".join(tables))
    print("\n".join(targets))
    return 0
