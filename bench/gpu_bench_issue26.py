"""The report of issue 26's benchmarks 1 and 2 (`gpu_bench_precision.py report --issue 26`).

Reads what the device calls wrote and holds each figure to its target:

  inference (gpu_bench_precision.py call2 --issue 26: memopt.json and torch.json of one or more
      calls, merged; a run with a median wins over a failed or missing one): memopt
      `--precision fp16` / `bf16` (layout auto) against torch.compile + autocast of the same
      precision, target at most 1.0x its latency and memory beyond the weights below it;
  training (train_bench.py device --precision fp16|bf16: one device.json per precision):
      memopt's step against torch.compile AMP (PyTorch's step with `--tf32 default`), target
      at most 1.0x its step time and at most 0.8x its memory: memopt's whole step (weight
      region + arena + inputs + workspace) against PyTorch's peak allocated bytes.

Writes issue26.json (the rows bench/run.py's suite `issue26` records) and the tables as
Markdown. The design is the one of gpu_bench_precision.py's issue-12 report (XLA / IREE style
benchmark rows held to a stated target); it goes further in naming, per row, what misses.
"""

import json
import os

TRAIN_CONFIGS = ["vit_b_16_b32", "gpt2_b8", "gpt2_medium_b4", "resnet50_b64"]
PRECISIONS = ("fp16", "bf16")
TRAIN_MEMORY_TARGET = 0.8


def merge_inference(raws):
    """memopt programs and PyTorch configs of every raw folder, the measured ones winning."""
    programs, torch_configs, prepare, environment = {}, {}, {}, {}
    for raw in raws:
        path = os.path.join(raw, "memopt.json")
        if os.path.exists(path):
            for name, entry in json.load(open(path)).get("programs", {}).items():
                if "memopt" in entry or name not in programs:
                    programs[name] = entry
        path = os.path.join(raw, "torch.json")
        if os.path.exists(path):
            for case, entry in json.load(open(path)).get("configs", {}).items():
                old = torch_configs.setdefault(case, {"modes": {}})
                for key, value in entry.items():
                    if key != "modes":
                        old.setdefault(key, value)
                for mode, run in entry.get("modes", {}).items():
                    if "median_ms" in run or mode not in old["modes"]:
                        old["modes"][mode] = run
                environment = environment or entry.get("environment", {})
        path = os.path.join(raw, "prepare.json")
        if os.path.exists(path):
            prepare.update(json.load(open(path)))
    return programs, torch_configs, prepare, environment


def ratio(a, b):
    return a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None


def inference_rows(bench, programs, torch_configs, prepare):
    """{config: {precision: row}} for every case of issue 26."""
    rows = {}
    for case in bench.profile_cases("issue26"):
        config = bench.config_name(case)
        modes = torch_configs.get(case, {}).get("modes", {})
        for precision in PRECISIONS:
            program = bench.program_name(case, precision, "auto")
            entry = programs.get(program, {})
            m = entry.get("memopt", {})
            t = modes.get(f"compile_{precision}", {})
            e = modes.get(f"eager_{precision}", {})
            row = {"program": program,
                   "memopt_ms": m.get("median_ms"),
                   "compile_ms": t.get("median_ms"),
                   "eager_ms": e.get("median_ms"),
                   "memopt_beyond_weights_bytes": m.get("beyond_weights_bytes"),
                   "compile_beyond_weights_bytes": t.get("peak_beyond_weights_bytes"),
                   "layout": (prepare.get(program, {}).get("layout_line") or "")[9:] or None}
            row["over_compile"] = ratio(row["memopt_ms"], row["compile_ms"])
            row["memory_over_compile"] = ratio(row["memopt_beyond_weights_bytes"],
                                               row["compile_beyond_weights_bytes"])
            row["time_ok"] = (row["over_compile"] <= 1.0
                              if row["over_compile"] is not None else None)
            row["memory_ok"] = (row["memory_over_compile"] < 1.0
                                if row["memory_over_compile"] is not None else None)
            row["meets_target"] = (row["time_ok"] and row["memory_ok"]
                                   if None not in (row["time_ok"], row["memory_ok"]) else None)
            problems = [text for text in (entry.get("cuda_error"), t.get("error"),
                                          prepare.get(program, {}).get("error"))
                        if isinstance(text, str)]
            if entry.get("build_error"):
                problems.append("build failed")
            if problems:
                row["error"] = problems[0].strip().splitlines()[-1][:200] if problems[0].strip() \
                    else "failed"
            profile = entry.get("ncu_profile", {})
            if profile.get("top"):
                row["top_kernels"] = [{"name": k["name"][:100], "calls": k["calls"],
                                       "ms": k["ms"]} for k in profile["top"][:3]]
            rows.setdefault(config, {})[precision] = row
        # The forced channels-last variants of the grouped nets (issue 26, item 4).
        for precision, layout in bench.LAYOUT_AB26.get(case, []):
            m = programs.get(bench.program_name(case, precision, layout), {}).get("memopt", {})
            if "median_ms" in m:
                rows[config][precision][f"memopt_{layout}_ms"] = m["median_ms"]
    return rows


def training_rows(device_jsons, prepare):
    """{NAME.OPT.PREC: row} from train_bench's device.json of each precision."""
    rows, environment = {}, {}
    for path in device_jsons:
        device = path if isinstance(path, dict) else json.load(open(path))
        precision = device.get("precision", "fp32")
        for key, m in device.get("memopt", {}).items():
            name, opt = key.split(".")[:2]
            if name not in TRAIN_CONFIGS or key != f"{name}.{opt}":
                continue
            runs = {}
            for setting in ("default", "off", "on"):
                found = device.get("torch", {}).get(f"{name}.tf32={setting}")
                if found:
                    runs = found.get("runs", {})
                    environment = environment or found.get("environment", {})
                    break
            c, e = runs.get(f"compile.{opt}", {}), runs.get(f"eager.{opt}", {})
            compiled = prepare.get("configs", {}).get(f"{key}.{precision}", {})
            row = {"config": name, "optimizer": opt, "precision": precision,
                   "memopt_ms": m.get("median_ms"), "compile_ms": c.get("median_ms"),
                   "eager_ms": e.get("median_ms"),
                   "memopt_total_bytes": m.get("total_bytes"),
                   "compile_peak_bytes": c.get("peak_allocated_bytes"),
                   "memopt_beyond_state_bytes": m.get("beyond_state_bytes"),
                   "compile_beyond_state_bytes": c.get("beyond_state_bytes"),
                   "channels_last_torch": c.get("channels_last"),
                   "layout": (compiled.get("layout_line") or "")[9:] or None}
            row["over_compile"] = ratio(row["memopt_ms"], row["compile_ms"])
            row["memory_over_compile"] = ratio(row["memopt_total_bytes"],
                                               row["compile_peak_bytes"])
            row["time_ok"] = (row["over_compile"] <= 1.0
                              if row["over_compile"] is not None else None)
            row["memory_ok"] = (row["memory_over_compile"] <= TRAIN_MEMORY_TARGET
                                if row["memory_over_compile"] is not None else None)
            row["meets_target"] = (row["time_ok"] and row["memory_ok"]
                                   if None not in (row["time_ok"], row["memory_ok"]) else None)
            error = m.get("error") or c.get("error")
            if error:
                row["error"] = str(error).strip().splitlines()[-1][:200] if str(error).strip() \
                    else "failed"
            rows[f"{key}.{precision}"] = row
    return rows, environment


def device_from_log(precision, path):
    """A device.json's figures (as training_rows reads them) from train_bench device's printed
    summary table, for a call whose device.json the run tool did not bring back (it returns a
    limited number of files). The table gives milliseconds to 0.1 and MiB: memopt's whole step
    and PyTorch's peak allocated bytes, and both beyond the training state."""
    mib = 1 << 20
    device = {"precision": precision, "memopt": {}, "torch": {}, "from_log": path}
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 11 or not cells[0] or cells[0] in ("config", "---"):
            continue
        try:
            values = [float(c) for c in cells[2:]]
        except ValueError:
            continue
        name, opt = cells[0], cells[1]
        ms, eager, compiled, total, eager_peak, compile_peak, beyond, eager_b, compile_b = values
        device["memopt"][f"{name}.{opt}"] = {
            "median_ms": ms, "total_bytes": int(total * mib),
            "beyond_state_bytes": int(beyond * mib)}
        device["torch"][f"{name}.tf32=default"] = {"runs": {
            f"compile.{opt}": {"median_ms": compiled, "peak_allocated_bytes": int(compile_peak * mib),
                               "beyond_state_bytes": int(compile_b * mib)},
            f"eager.{opt}": {"median_ms": eager, "peak_allocated_bytes": int(eager_peak * mib),
                             "beyond_state_bytes": int(eager_b * mib)}}}
    return device


def fmt(value, digits=2):
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) else "—"


def mib(value):
    return fmt(value / 2**20, 1) if isinstance(value, (int, float)) else "—"


def verdict(ok):
    return {True: "yes", False: "**no**", None: "—"}[ok]


def markdown(inference, training, environment):
    lines = ["Device: " + ", ".join(f"{k} {v}" for k, v in environment.items()), "",
             "### Inference: memopt against torch.compile + autocast (ms, MiB beyond weights)",
             "",
             "| config | precision | memopt | compile | memopt / compile | eager | memopt MiB | "
             "compile MiB | faster | less memory | memopt layout |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |"]
    for config, per in inference.items():
        for precision, r in per.items():
            lines.append(
                f"| {config} | {precision} | {fmt(r['memopt_ms'])} | {fmt(r['compile_ms'])} | "
                f"{fmt(r['over_compile'])} | {fmt(r['eager_ms'])} | "
                f"{mib(r['memopt_beyond_weights_bytes'])} | "
                f"{mib(r['compile_beyond_weights_bytes'])} | {verdict(r['time_ok'])} | "
                f"{verdict(r['memory_ok'])} | {r.get('layout') or '—'}"
                f"{' (' + r['error'] + ')' if r.get('error') else ''} |")
    met = [r["meets_target"] for per in inference.values() for r in per.values()]
    lines += ["", f"Targets met on {met.count(True)} of {len(met)} (missed on {met.count(False)}, "
              f"not measured {met.count(None)})."]
    grouped = [(c, p, r) for c, per in inference.items() for p, r in per.items()
               if "memopt_nhwc_ms" in r]
    if grouped:
        lines += ["", "Grouped-convolution nets forced channels-last: " + ", ".join(
            f"{c} {p} {fmt(r['memopt_nhwc_ms'])} ms (auto {fmt(r['memopt_ms'])})"
            for c, p, r in grouped) + "."]
    misses = [(c, p, r) for c, per in inference.items() for p, r in per.items()
              if r.get("top_kernels")]
    for config, precision, r in misses:
        lines.append(f"- {config} {precision} ({fmt(r['over_compile'])}x): " + "; ".join(
            f"`{k['name']}` x{k['calls']} {k['ms']:.3f} ms" for k in r["top_kernels"]))
    lines += ["", "### Training step (AMP): memopt against torch.compile AMP (ms, MiB)", "",
              "| config | optimizer | precision | memopt | compile | memopt / compile | eager | "
              "memopt whole step | compile peak | memory ratio | faster | memory <= 0.8x | "
              "layout |",
              "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | "
              "--- |"]
    for key, r in training.items():
        lines.append(
            f"| {r['config']} | {r['optimizer']} | {r['precision']} | {fmt(r['memopt_ms'])} | "
            f"{fmt(r['compile_ms'])} | {fmt(r['over_compile'])} | {fmt(r['eager_ms'])} | "
            f"{mib(r['memopt_total_bytes'])} | {mib(r['compile_peak_bytes'])} | "
            f"{fmt(r['memory_over_compile'])} | {verdict(r['time_ok'])} | "
            f"{verdict(r['memory_ok'])} | {r.get('layout') or '—'}"
            f"{'; PyTorch channels-last' if r.get('channels_last_torch') else ''}"
            f"{' (' + r['error'] + ')' if r.get('error') else ''} |")
    met = [r["meets_target"] for r in training.values()]
    lines += ["", f"Targets met on {met.count(True)} of {len(met)} (missed on {met.count(False)}, "
              f"not measured {met.count(None)})."]
    return "\n".join(lines) + "\n"


def report(args, bench):
    """`report --issue 26`: issue26.json and the Markdown tables (see the module docstring)."""
    programs, torch_configs, prepare, environment = merge_inference(args.raw)
    inference = inference_rows(bench, programs, torch_configs, prepare)
    train_prepare = json.load(open(args.train_prepare_json)) if args.train_prepare_json else {}
    logs = [device_from_log(*spec.split("=", 1)) for spec in getattr(args, "train_log", [])]
    training, train_environment = training_rows(list(args.train_json) + logs, train_prepare)
    environment = environment or train_environment
    result = {"environment": environment, "inference": inference, "training": training}
    json_out = args.json_out or os.path.join(args.raw[0], "issue26.json")
    with open(json_out, "w") as handle:
        json.dump(result, handle, indent=1)
    text = markdown(inference, training, environment)
    if args.md_out:
        with open(args.md_out, "w") as handle:
            handle.write(text)
    print(text)
    print(f"wrote {json_out}" + (f" and {args.md_out}" if args.md_out else ""))
    measured = [r for per in inference.values() for r in per.values() if r["memopt_ms"]]
    measured += [r for r in training.values() if r["memopt_ms"]]
    if not measured:
        print("no memopt figure in the inputs")
        return 1
    return 0
