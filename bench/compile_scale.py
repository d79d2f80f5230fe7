#!/usr/bin/env python3
"""Compile-scale benchmark (issue 25): memopt-compile's wall time and peak memory on
Llama-shaped models from 2 M to 7 B parameters, on this machine.

Each run generates its model with python/models/llama_graph.py if the cache folder lacks it
(weights as one external-data file, shared by every batch x sequence of a config), then runs
memopt-compile under `/usr/bin/time -v` and records:
  * wall, user and system time and the peak resident set size (time -v's maximum RSS),
  * per-phase times: the compiler's phase lines ([import], [fuse-attention], [memory], ...) read
    as they are printed (through a pseudo-terminal, so the compiler's stdout is unbuffered)
    and stamped; a phase's time is the gap since the line before it (most lines are printed as
    their phase ends; [precision], [memory] and [build] as theirs begins), and the coarse
    phases import / graph passes / memory planning / emission / build are the gaps between
    the [import], [memory], `memory report`, [lower] (or [emit]) and [done] lines,
  * the memory report (--report JSON): weights, gradients, optimizer state, saved activations
    and arena, also per parameter (ZeRO's accounting is 16 bytes per parameter for
    mixed-precision Adam),
and prints a table and writes one JSON per run into .dev-bench/compile_scale/raw/ (commit, date,
machine).

Modes of a run:
  plan        the bf16 AdamW training step for CUDA, --emit plan (no nvcc)
  source      the same step, --emit source (the program's source and its weights file)
  exe         the same step, --emit exe (nvcc builds the executable)
  host-infer  the inference program for the host backend (--emit exe), then run on one batch
  infer-bf16  the inference program at 1 x INFER_TOKENS in bf16 for CUDA, --emit source (the
              weights file written converted from the mapped fp32 weights, no nvcc)

Memory guard: this machine (24 GB, shared) must never swap or OOM. A run is skipped, saying
so, when its predicted peak (RSS_PER_WEIGHT_BYTE[mode] x the fp32 weights + RSS_BASE_BYTES:
the appetite of the compiler before issue 25's weight flow; --rss-factor for a compiler that
streams its weights) is above --max-rss-gib or above what the machine has available; a
host-infer run's program likewise (RUN_RSS_PER_WEIGHT_BYTE, --run-rss-factor). While a
command lasts, a watchdog kills it (its own session only) if its anonymous memory passes
--max-rss-gib or the machine's available memory falls below MIN_AVAILABLE_BYTES. Runs go one
at a time.

    python3 bench/compile_scale.py                       # the default runs
    python3 bench/compile_scale.py --runs synthetic-1g:plan tinyllama:plan --max-rss-gib 12
    python3 bench/compile_scale.py --runs llama2-7b:plan --rss-factor 0.3   # new weight flow
    python3 bench/compile_scale.py --list
"""

import argparse
import datetime
import json
import os
import platform
import pty
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python", "models"))

import llama_graph  # noqa: E402

GIB = 2**30
TRAIN_FLAGS = ["--train", "--loss", "cross-entropy", "--loss-output", "logits",
               "--optimizer", "adamw", "--lr", "1e-4", "--precision", "bf16"]
# The compiler before issue 25's weight flow held the weights several times over: peak RSS
# per byte of fp32 weights, from the measurements (TinyLlama's plan 21.7 GB for 4.4 GB
# of weights: 4.9; GPT-2 medium with nvcc 16.2 GB for 1.4 GB: 11.4), rounded up. With the
# streamed weight flow the compiler's peak is a small fraction of the weights (docs/scale.md);
# lower these (or pass --rss-factor) once it is on main.
RSS_PER_WEIGHT_BYTE = {"plan": 5.0, "source": 12.0, "exe": 12.0, "host-infer": 12.0,
                       "infer-bf16": 1.0}
# The host program of a host-infer run reads its whole weights file into memory today (2.0 x
# the fp32 weights measured on synthetic-1g): a 7B model's cannot run here until the runtime
# maps or streams its weights (--run-rss-factor then).
RUN_RSS_PER_WEIGHT_BYTE = 2.5
RSS_BASE_BYTES = 1 * GIB  # the compiler, its graph and the planner, whatever the weights
MIN_AVAILABLE_BYTES = 2 * GIB  # never let the machine's available memory fall below this
MIN_FREE_DISK_BYTES = 10 * GIB  # left free after generating a model (its outputs go there too)
WATCH_INTERVAL_S = 0.2
INFER_TOKENS = 16  # tokens of host-infer's one batch (1 x INFER_TOKENS)


@dataclass(frozen=True)
class Run:
    config: str
    batch: int
    seq: int
    mode: str

    @property
    def name(self):
        return f"{self.config}-{self.batch}x{self.seq}-{self.mode}"


# The shapes each config is measured at (issue 25's targets: TinyLlama 4 x 1024, 7B 1 x 2048).
SHAPES = {"tiny": (2, 32), "synthetic-1g": (1, 128), "llama-124m": (1, 512),
          "llama-355m": (4, 1024), "tinyllama": (4, 1024), "llama2-7b": (1, 2048)}
DEFAULT_RUNS = ["tiny:plan", "synthetic-1g:plan", "tinyllama:plan", "tinyllama:exe",
                "llama2-7b:plan", "llama2-7b:host-infer"]
MODES = ("plan", "source", "exe", "host-infer", "infer-bf16")
INFERENCE_MODES = ("host-infer", "infer-bf16")


def parse_run(text):
    config, _, mode = text.partition(":")
    mode = mode or "plan"
    if config not in llama_graph.CONFIGS or config not in SHAPES:
        raise argparse.ArgumentTypeError(f"unknown config '{config}' "
                                         f"(one of {', '.join(SHAPES)})")
    if mode not in MODES:
        raise argparse.ArgumentTypeError(f"unknown mode '{mode}' (one of {', '.join(MODES)})")
    batch, seq = (1, INFER_TOKENS) if mode in INFERENCE_MODES else SHAPES[config]
    return Run(config, batch, seq, mode)


# ---------------------------------------------------------------------------------------------
# Measuring one command: /usr/bin/time -v, phase lines through a pty, a memory watchdog.
# ---------------------------------------------------------------------------------------------

def _meminfo(key):
    with open("/proc/meminfo") as stream:
        for line in stream:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def _session_anon_bytes(session):
    """Anonymous resident memory (what cannot be paged back to a file) of every process in the
    session `session`: the command and its children (nvcc, the compiler's own tools)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stream:
                fields = stream.read().rsplit(")", 1)[1].split()
            if int(fields[3]) != session:  # field 6 of stat: the session id
                continue
            with open(f"/proc/{entry}/status") as stream:
                for line in stream:
                    if line.startswith("RssAnon:"):
                        total += int(line.split()[1]) * 1024
        except (OSError, IndexError, ValueError):
            continue  # the process ended meanwhile
    return total


class _Watchdog(threading.Thread):
    """Kills the command's session when it passes the memory limit or the machine runs low."""

    def __init__(self, session, limit_bytes):
        super().__init__(daemon=True)
        self.session, self.limit = session, limit_bytes
        self.peak_anon = 0
        self.killed = None
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(WATCH_INTERVAL_S):
            anon = _session_anon_bytes(self.session)
            self.peak_anon = max(self.peak_anon, anon)
            available = _meminfo("MemAvailable")
            if anon > self.limit:
                self.killed = f"anonymous memory {anon / GIB:.1f} GiB above the limit"
            elif available < MIN_AVAILABLE_BYTES:
                self.killed = (f"the machine's available memory fell to "
                               f"{available / GIB:.1f} GiB")
            if self.killed:
                try:
                    os.killpg(self.session, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                return


def _parse_time_v(path):
    fields = {}
    with open(path) as stream:
        for line in stream:
            key, _, value = line.strip().rpartition(": ")
            fields[key] = value
    elapsed = fields.get("Elapsed (wall clock) time (h:mm:ss or m:ss)", "0:0")
    seconds = 0.0
    for part in elapsed.split(":"):
        seconds = seconds * 60 + float(part)
    return {"wall_s": round(seconds, 2),
            "user_s": float(fields.get("User time (seconds)", 0)),
            "sys_s": float(fields.get("System time (seconds)", 0)),
            "peak_rss_bytes": int(fields.get("Maximum resident set size (kbytes)", 0)) * 1024}


def measure(argv, limit_bytes, log_path):
    """Runs argv under /usr/bin/time -v; returns the measurements, the stamped output lines
    [(seconds, text)] and the exit status (None when the watchdog killed it)."""
    with tempfile.NamedTemporaryFile(suffix=".time", delete=False) as handle:
        time_path = handle.name
    master, slave = pty.openpty()
    start = time.monotonic()
    process = subprocess.Popen(["/usr/bin/time", "-v", "-o", time_path, *argv],
                               stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                               start_new_session=True)
    os.close(slave)
    watchdog = _Watchdog(process.pid, limit_bytes)
    watchdog.start()
    lines, pending = [], b""
    with open(log_path, "w") as log:
        while True:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # the pty closes when the command and its children are done
                break
            if not data:
                break
            now = time.monotonic() - start
            pending += data
            *complete, pending = pending.split(b"\n")
            for raw in complete:
                text = raw.decode(errors="replace").rstrip("\r")
                lines.append((round(now, 3), text))
                log.write(f"{now:9.3f} {text}\n")
    os.close(master)
    status = process.wait()
    watchdog.done.set()
    watchdog.join()
    result = _parse_time_v(time_path) if os.path.getsize(time_path) else {}
    os.remove(time_path)
    result.setdefault("wall_s", round(time.monotonic() - start, 2))  # time -v was killed
    result["peak_anon_sampled_bytes"] = watchdog.peak_anon
    if watchdog.killed:
        result["killed"] = watchdog.killed
        status = None
    return result, lines, status


PHASE_LINE = re.compile(r"^\[([\w-]+)\]")


def _phase_tag(text):
    if text.startswith("memory report"):
        return "memory report"
    match = PHASE_LINE.match(text)
    return match.group(1) if match else None


def phase_times(lines, total_s):
    """(every phase line with the gap since the previous one, the coarse phases)."""
    stamps = [(seconds, tag) for seconds, text in lines if (tag := _phase_tag(text))]
    gaps, previous = [], 0.0
    for seconds, tag in stamps:
        gaps.append({"phase": tag, "at_s": seconds, "gap_s": round(seconds - previous, 3)})
        previous = seconds
    marks = {}
    for seconds, tag in stamps:
        marks.setdefault(tag, seconds)  # the first line of each tag
    coarse, previous = {}, 0.0
    for phase, tags in (("import", ["import"]), ("graph passes", ["memory"]),
                        ("memory planning", ["memory report"]),
                        ("emission", ["lower", "emit"]), ("build", ["done"])):
        at = min((marks[tag] for tag in tags if tag in marks), default=None)
        if at is not None:
            coarse[phase] = round(at - previous, 2)
            previous = at
    if total_s is not None and total_s > previous:
        coarse["rest"] = round(total_s - previous, 2)
    return gaps, coarse


# ---------------------------------------------------------------------------------------------
# One run.
# ---------------------------------------------------------------------------------------------

REPORT_FIELDS = ("weights_bytes", "arena_bytes", "max_live_bytes", "io_bytes", "num_ops")
TRAINING_FIELDS = ("parameters", "parameter_bytes", "optimizer_state_bytes", "gradient_bytes",
                   "gradient_bytes_at_peak", "saved_for_backward_bytes", "constant_bytes",
                   "peak_phase")


def _summary_of(report_path):
    with open(report_path) as stream:
        report = json.load(stream)
    summary = {key: report.get(key) for key in REPORT_FIELDS}
    if "training" in report:
        training = report["training"]
        summary["training"] = {key: training.get(key) for key in TRAINING_FIELDS}
        copies = training.get("mixed_precision", {}).get("weight_copies", {})
        summary["training"]["weight_copy_bytes"] = copies.get("bytes")
    return summary


def wait_for_compiler(path, patience_s=300):
    """The compiler's path; a build in progress may replace it for a while, so wait."""
    deadline = time.monotonic() + patience_s
    while not os.access(path, os.X_OK):
        if time.monotonic() > deadline:
            sys.exit(f"compile_scale.py: no memopt-compile at {path} (--build)")
        print(f"waiting for {path} (being rebuilt?)", flush=True)
        time.sleep(10)
    return path


def compile_argv(args, run, graph, out_prefix, report_path):
    argv = [wait_for_compiler(os.path.join(args.build, "memopt-compile")), graph, "-o", out_prefix,
            "--report", report_path]
    if run.mode == "host-infer":
        return argv + ["--target", "host", "--emit", "exe"]
    if run.mode == "infer-bf16":
        return argv + ["--precision", "bf16", "--target", "cuda", "--emit", "source"]
    return argv + TRAIN_FLAGS + ["--target", "cuda", "--emit", run.mode]


def predicted_peak(args, run):
    factor = args.rss_factor if args.rss_factor is not None else RSS_PER_WEIGHT_BYTE[run.mode]
    return factor * llama_graph.data_size(llama_graph.CONFIGS[run.config]) + RSS_BASE_BYTES


def _host_inference(args, run, exe, folder, record):
    """Runs the host program on one batch of token ids; adds its measurements to record."""
    config = llama_graph.CONFIGS[run.config]
    factor = args.run_rss_factor if args.run_rss_factor is not None else RUN_RSS_PER_WEIGHT_BYTE
    predicted = factor * llama_graph.data_size(config) + RSS_BASE_BYTES
    if predicted > min(args.max_rss_gib * GIB, _meminfo("MemAvailable") - MIN_AVAILABLE_BYTES):
        record["inference_run"] = {"skipped": f"predicted peak {predicted / GIB:.1f} GiB"}
        return
    ids_path = os.path.join(folder, "input_ids.npy")
    rng = np.random.default_rng(0)
    np.save(ids_path, rng.integers(0, config.vocab, (run.batch, run.seq), dtype=np.int64))
    argv = [exe, "--weights", exe + ".weights", "--input", f"input_ids={ids_path}",
            "--output-dir", folder]
    measured, _, status = measure(argv, args.max_rss_gib * GIB,
                                  os.path.join(folder, "run.log"))
    record["inference_run"] = dict(measured, exit=status)
    logits = os.path.join(folder, "logits.npy")
    if status == 0 and os.path.exists(logits):
        values = np.load(logits, mmap_mode="r")
        record["inference_run"]["logits_finite"] = bool(np.isfinite(values).all())


def execute(args, run):
    """Generates, compiles (and for host-infer runs) one configuration; returns its record."""
    config = llama_graph.CONFIGS[run.config]
    record = {"run": run.name, "config_name": run.config,
              "config": llama_graph.dataclasses.asdict(config), "batch": run.batch,
              "seq": run.seq, "mode": run.mode,
              "parameters": llama_graph.parameter_count(config),
              "weights_file_bytes": llama_graph.data_size(config)}
    predicted = predicted_peak(args, run)
    available = _meminfo("MemAvailable")
    record["predicted_peak_bytes"] = int(predicted)
    if predicted > args.max_rss_gib * GIB:
        return dict(record, status="skipped",
                    reason=f"predicted peak {predicted / GIB:.1f} GiB above --max-rss-gib "
                           f"{args.max_rss_gib:g}")
    if predicted > available - MIN_AVAILABLE_BYTES:
        return dict(record, status="skipped",
                    reason=f"predicted peak {predicted / GIB:.1f} GiB, the machine has "
                           f"{available / GIB:.1f} GiB available")
    data = llama_graph.data_path(args.cache, run.config)
    missing = 0 if os.path.exists(data) else llama_graph.data_size(config)
    os.makedirs(args.cache, exist_ok=True)
    disk = os.statvfs(args.cache)
    free = disk.f_bavail * disk.f_frsize
    if missing + MIN_FREE_DISK_BYTES > free:
        return dict(record, status="skipped",
                    reason=f"its weights need {missing / GIB:.1f} GiB, {args.cache} has "
                           f"{free / GIB:.1f} GiB free")
    started = time.monotonic()
    graph = llama_graph.generate(config, args.cache, run.batch, run.seq, run.config)
    record["generate_s"] = round(time.monotonic() - started, 1)
    folder = os.path.join(args.cache, "out", run.name)
    os.makedirs(folder, exist_ok=True)
    out_prefix = os.path.join(folder, "step" if run.mode != "host-infer" else "infer")
    report_path = os.path.join(folder, "report.json")
    argv = compile_argv(args, run, graph, out_prefix, report_path)
    record["command"] = " ".join(argv)
    print(f"[{run.name}] {record['command']}", flush=True)
    measured, lines, status = measure(argv, args.max_rss_gib * GIB,
                                      os.path.join(folder, "compile.log"))
    record.update(measured)
    record["exit"] = status
    record["phases"], record["coarse_phases"] = phase_times(lines, measured.get("wall_s"))
    record["tail"] = [text for _, text in lines[-8:]]
    if os.path.exists(report_path):
        record["report"] = _summary_of(report_path)
    if status != 0:
        record["status"] = "killed" if status is None else "failed"
        return record
    record["status"] = "ok"
    if run.mode == "host-infer":
        _host_inference(args, run, out_prefix, folder, record)
        ran = record["inference_run"]
        if "killed" in ran:
            record["status"] = "killed"
        elif ran.get("exit", 0) != 0:
            record["status"] = "failed"
    if not args.keep_outputs:
        subprocess.run(["rm", "-rf", folder], check=False)
    return record


# ---------------------------------------------------------------------------------------------
# Records and the table.
# ---------------------------------------------------------------------------------------------

def remove_generated(cache, config_name):
    """The config's data file and graphs (a 7B model's 27 GB must not stay behind)."""
    for entry in os.listdir(cache):
        if entry == f"{config_name}.data" or (entry.startswith(f"{config_name}_b")
                                              and entry.endswith(".onnx")):
            os.remove(os.path.join(cache, entry))
    print(f"[{config_name}] generated files removed from {cache}", flush=True)


def _git(*argv, cwd=REPO):
    result = subprocess.run(["git", *argv], cwd=cwd, capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else None


def provenance(args):
    build_repo = os.path.dirname(os.path.dirname(os.path.abspath(args.build)))
    compiler = wait_for_compiler(os.path.join(args.build, "memopt-compile"))
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "bench_commit": _git("rev-parse", "HEAD"),
        "compiler_commit": _git("rev-parse", "HEAD", cwd=build_repo),
        "compiler_tree_dirty": bool(_git("status", "--porcelain", "--untracked-files=no",
                                         cwd=build_repo)),
        "compiler": compiler,
        "compiler_built": datetime.datetime.fromtimestamp(os.path.getmtime(compiler))
        .astimezone().isoformat(timespec="seconds"),
        "machine": {"host": socket.gethostname(), "cpus": os.cpu_count(),
                    "cpu": _cpu_model(), "memory_bytes": _meminfo("MemTotal"),
                    "system": platform.platform()},
    }


def _cpu_model():
    with open("/proc/cpuinfo") as stream:
        for line in stream:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def write_record(args, record, common):
    os.makedirs(args.results, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = os.path.join(args.results, f"{record['run']}-{stamp}.json")
    with open(path, "w") as stream:
        json.dump(dict(common, **record), stream, indent=1)
        stream.write("\n")
    return path


def _gib(value):
    return "" if value is None else f"{value / GIB:.2f}"


def _per_parameter(value, parameters):
    return "" if value is None else f"{value / parameters:.1f}"


def table(records):
    header = ("| run | parameters | weights GiB | status | wall s | peak RSS GiB | phases (s) "
              "| params / grads / opt. state / saved act. (bytes per parameter) |")
    lines = [header, "|" + "---|" * header.count(" | ") + "---|"]
    for record in records:
        training = record.get("report", {}).get("training") or {}
        parameters = record["parameters"]
        memory = " / ".join(_per_parameter(training.get(key), parameters) for key in
                            ("parameter_bytes", "gradient_bytes", "optimizer_state_bytes",
                             "saved_for_backward_bytes")) if training else ""
        phases = ", ".join(f"{name} {seconds:g}" for name, seconds in
                           record.get("coarse_phases", {}).items())
        status = record["status"]
        if record.get("reason") or record.get("killed"):
            status += f": {record.get('reason') or record.get('killed')}"
        ran = record.get("inference_run")
        if ran and "skipped" in ran:
            status += f" (the program's run skipped: {ran['skipped']})"
        elif ran and "killed" in ran:
            status += f" (the program's run killed after {ran['wall_s']} s: {ran['killed']})"
        elif ran:
            status += (f" (the program ran {ran.get('wall_s')} s, peak RSS "
                       f"{_gib(ran.get('peak_rss_bytes'))} GiB)")
        lines.append(f"| {record['run']} | {parameters / 1e6:,.0f} M | "
                     f"{_gib(record['weights_file_bytes'])} | {status} | "
                     f"{record.get('wall_s', '')} | {_gib(record.get('peak_rss_bytes'))} | "
                     f"{phases} | {memory} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="+", type=parse_run,
                        default=[parse_run(text) for text in DEFAULT_RUNS],
                        help="CONFIG[:MODE] (modes: " + ", ".join(MODES) + ")")
    parser.add_argument("--build", default=os.path.join(REPO, "build", "bin"),
                        help="folder of memopt-compile")
    parser.add_argument("--cache", default="/tmp/memopt-scale",
                        help="generated models and outputs (outside the repository)")
    parser.add_argument("--results", default=os.path.join(REPO, ".dev-bench",
                                                          "compile_scale", "raw"))
    parser.add_argument("--max-rss-gib", type=float, default=12.0,
                        help="skip runs predicted above it; kill runs that pass it")
    parser.add_argument("--rss-factor", type=float,
                        help="predicted compiler peak RSS per byte of fp32 weights (default: "
                             "RSS_PER_WEIGHT_BYTE, the pre-issue-25 compiler's, per mode)")
    parser.add_argument("--run-rss-factor", type=float,
                        help="the same for host-infer's program run (default "
                             f"{RUN_RSS_PER_WEIGHT_BYTE})")
    parser.add_argument("--keep-outputs", action="store_true",
                        help="keep each run's outputs (program, weights, logs) in the cache")
    parser.add_argument("--clean", action="store_true",
                        help="delete a config's generated graphs and weights after its last run")
    parser.add_argument("--no-write", action="store_true", help="print, write no JSON")
    parser.add_argument("--list", action="store_true", help="the configs and exit")
    args = parser.parse_args()
    if args.list:
        for name, shape in SHAPES.items():
            config = llama_graph.CONFIGS[name]
            print(f"{name:14} {llama_graph.parameter_count(config) / 1e6:9,.1f} M parameters "
                  f"{_gib(llama_graph.data_size(config)):>6} GiB  {shape[0]} x {shape[1]}")
        return 0
    if os.path.realpath(args.cache).startswith(os.path.realpath(REPO) + os.sep):
        parser.error("--cache must be outside the repository (generated models are large)")
    records = []
    for index, run in enumerate(args.runs):
        common = provenance(args)  # per run: the compiler may be rebuilt between runs
        record = execute(args, run)
        records.append(record)
        if record["status"] == "skipped":
            print(f"[{run.name}] skipped: {record['reason']}", flush=True)
        else:
            print(f"[{run.name}] {record['status']}: {record.get('wall_s')} s, peak RSS "
                  f"{_gib(record.get('peak_rss_bytes'))} GiB", flush=True)
            if not args.no_write:
                print(f"[{run.name}] {write_record(args, record, common)}", flush=True)
        if args.clean and all(later.config != run.config for later in args.runs[index + 1:]):
            remove_generated(args.cache, run.config)
    print()
    print(table(records))
    return 0 if all(r["status"] in ("ok", "skipped") for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
