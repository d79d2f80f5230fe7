#!/usr/bin/env python3
"""Runs memopt-plan on MiniMalloc's eleven challenging instances with each
algorithm and prints a markdown table (also written to a results file).

For every instance: greedy best-fit by size (TFLite's order) and by lifetime
(XLA's other order), both unconstrained, and the exact search asked for a
packing within the instance's capacity (the number in the file name). Every
plan the exact search returns is re-checked here, independently of the
planner's own validator.

Usage: bench/planner_bench.py [--binary PATH] [--data DIR] [--time-limit S]
                              [--auto-time-limit S] [--output FILE]
"""
import argparse
import csv
import glob
import io
import os
import platform
import re
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_binary():
    candidates = [os.path.join(ROOT, "build", "bin", "memopt-plan")]
    candidates += sorted(glob.glob(os.path.join(ROOT, "build*", "bin",
                                                "memopt-plan")))
    for path in candidates:
        if os.access(path, os.X_OK):
            return path
    return None


def run(binary, path, algo, capacity, time_limit):
    command = [binary, "--algo", algo, "--time-limit", str(time_limit), path]
    if capacity is not None:
        command[1:1] = ["--capacity", str(capacity)]
    start = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(command, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.monotonic() - start
    cpu = ((after.ru_utime - before.ru_utime)
           + (after.ru_stime - before.ru_stime))
    summary = {}
    for token in proc.stderr.split():
        if "=" in token:
            key, value = token.split("=", 1)
            summary[key] = value
    summary["cpu"] = f"{cpu:.2f}"
    return proc, summary, wall


def check_plan(text, capacity):
    """Independent check of a CSV plan: returns an error string or None."""
    rows = list(csv.DictReader(io.StringIO(text)))
    items = []
    for row in rows:
        size, offset = int(row["size"]), int(row["offset"])
        align = int(row.get("alignment") or 1)
        if offset < 0 or offset % align or offset + size > capacity:
            return f"buffer {row['id']} misplaced"
        if size:
            items.append((int(row["lower"]), int(row["upper"]), offset,
                          offset + size))
    items.sort()
    for i, (lo, hi, begin, end) in enumerate(items):
        for lo2, _, begin2, end2 in items[i + 1:]:
            if lo2 >= hi:
                break
            if begin < end2 and begin2 < end:
                return "overlapping buffers"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=find_binary(),
                        help="memopt-plan to run (default: build*/bin)")
    parser.add_argument("--data", default=os.path.join(
        ROOT, "..", "shared", "data", "minimalloc"))
    parser.add_argument("--time-limit", type=float, default=60.0,
                        help="seconds allowed per exact run (default 60)")
    parser.add_argument("--auto-time-limit", type=float, default=20.0,
                        help="seconds for the minimizing auto run (default 20)")
    parser.add_argument("--output", default=os.path.join(
        ROOT, ".dev-bench", "planner", "raw", "planner.md"),
        help="markdown results file (default .dev-bench/planner/raw/planner.md, where "
        "`bench/run.py report --suite planner` reads it)")
    args = parser.parse_args()
    if not args.binary:
        sys.exit("planner_bench: no memopt-plan binary found; pass --binary")

    files = sorted(glob.glob(os.path.join(args.data, "*.csv")))
    if not files:
        sys.exit(f"planner_bench: no CSV files in {args.data}")

    lines = [
        "| instance | buffers | max-live | best-fit-size arena | ratio "
        "| best-fit-lifetime arena | ratio | exact arena | ratio "
        "| exact time (s) | exact CPU (s) | auto arena | ratio "
        "| auto time (s) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    failures = 0
    for path in files:
        name = os.path.basename(path)
        match = re.match(r"(\w+)\.(\d+)\.csv$", name)
        capacity = int(match.group(2)) if match else None
        _, size_summary, _ = run(args.binary, path, "best-fit-size", None,
                                 args.time_limit)
        _, life_summary, _ = run(args.binary, path, "best-fit-lifetime", None,
                                 args.time_limit)
        proc, exact_summary, wall = run(args.binary, path, "exact", capacity,
                                        args.time_limit)
        auto_proc, auto_summary, _ = run(args.binary, path, "auto", None,
                                         args.auto_time_limit)
        max_live = int(size_summary["max-live"])

        def ratio(summary):
            return f"{int(summary['arena']) / max_live:.4f}"

        if proc.returncode == 0:
            error = check_plan(proc.stdout, capacity or 1 << 62)
            if error:
                failures += 1
                exact_arena, exact_ratio = f"INVALID ({error})", "-"
            else:
                exact_arena = exact_summary["arena"]
                exact_ratio = ratio(exact_summary)
            exact_time = exact_summary["time"].rstrip("s")
        else:
            failures += 1
            exact_arena, exact_ratio = "none found", "-"
            exact_time = f">{wall:.1f}"
        auto_arena, auto_ratio, auto_time = "failed", "-", "-"
        if auto_proc.returncode == 0 and not check_plan(auto_proc.stdout,
                                                        1 << 62):
            auto_arena = auto_summary["arena"] + (
                " (optimal)" if "optimal" in auto_proc.stderr else "")
            auto_ratio = ratio(auto_summary)
            auto_time = auto_summary["time"].rstrip("s")
        else:
            failures += 1
        lines.append(
            f"| {match.group(1) if match else name} "
            f"| {size_summary['buffers']} | {max_live} "
            f"| {size_summary['arena']} | {ratio(size_summary)} "
            f"| {life_summary['arena']} | {ratio(life_summary)} "
            f"| {exact_arena} | {exact_ratio} | {exact_time} "
            f"| {exact_summary['cpu']} "
            f"| {auto_arena} | {auto_ratio} | {auto_time} |")
        print(lines[-1], flush=True)

    command = "bench/planner_bench.py " + " ".join(sys.argv[1:])
    header = [
        "# memopt-plan on MiniMalloc's challenging instances",
        "",
        f"Command: `{command.strip()}` (binary `{os.path.relpath(args.binary, ROOT)}`).",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs visible, "
        f"{platform.python_implementation()} driver; the planner is "
        "single-threaded.",
        "Times are wall-clock as reported by memopt-plan; CPU is the "
        "process's user + system time, which is what the search costs when "
        "the machine is shared.",
        "Ratios are arena / max-live. Best-fit runs without a capacity; the "
        "exact search is asked for a packing within the capacity in the file "
        f"name (time limit {args.time_limit:g} s). Auto runs without a "
        "capacity and minimizes: both heuristics, then exact probes from "
        f"max-live up (time limit {args.auto_time_limit:g} s); '(optimal)' "
        "means proved minimal. Every plan is re-checked by this script.",
        "",
    ]
    report = "\n".join(header + lines) + "\n"
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        f.write(report)
    print(f"\nwrote {args.output}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
