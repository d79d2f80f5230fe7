#!/usr/bin/env python3
"""GPU benchmark of issue 12: fast precisions (TF32, fp16 channels-last) on today's models.

The second suite of bench/gpu_bench.py (whose helpers it uses): ten models at their realistic
batch, memopt's programs in fp32 (strict), TF32 and fp16 against PyTorch 2.11 as users run it at
its fastest, on the same GPU.

  vision (32 x 3 x 224 x 224): torchvision resnet18, resnet50, mobilenet_v2,
      mobilenet_v3_large, efficientnet_b0, convnext_tiny, swin_t (weights=None, eval)
  text (8 x 512 token ids): transformers 5.x GPT-2 small (GPT2LMHeadModel, logits), BERT-base
      (BertModel, last_hidden_state), a small Llama (LlamaForCausalLM: 12 layers, hidden 768,
      12 heads, 4 key/value heads, MLP 2048, vocabulary 32000, logits), all with transformers'
      default attention (SDPA), use_cache off.

PyTorch modes: `eager_fp32` (default settings: cuDNN may use TF32, matmuls may not; the faster of
NCHW and channels_last for the conv nets), `eager_fp16` (torch.autocast fp16, channels_last for
the conv nets), `compile_fp16` (torch.compile default mode, dynamic=False, the same autocast and
memory format); cudnn.benchmark on, inference_mode. Latency: CUDA events around each call, 10
warm-up calls, median of `--runs`. Memory beyond weights: max_memory_allocated over one call
minus parameter and buffer bytes (gpu_bench.py's definition).

memopt programs (prepare): fp32 (NCHW), tf32 and fp16 with --layout auto, plus the other layout
for two conv nets in tf32 and fp16 (the layout's effect). Each runs with --random-weights 1
--bench RUNS (CUDA graph replays); the same source is linked against the host backend and run on
the device's CPU (niced, during the GPU runs: a graph replay needs one CPU thread) with the same
seed and input, and the CUDA output is compared with it (relative L2). For TF32 that is the TF32
error: the host computes in double and matches onnxruntime's float32 to about 1e-6 on the zoo
(python/tests).

Steps:
  call1   (device)  exports the ten graphs with torch.onnx (dynamo) into OUT/graphs.tar.gz,
                    builds the runtime and runs scripts/gpu_check.sh's kernel suite (CUDA vs
                    host), times cuDNN convolutions in both layouts and three math modes
                    (the layout policy's evidence), and measures PyTorch (torch.json)
  prepare (here)    fills weights, memopt-compile --emit source for every program variant
  call2   (device)  builds and runs the memopt programs (CUDA timings, host checks)
  report  (here)    the tables of docs/gpu-benchmark.md's issue-12 section, precision_gpu.json
                    (recorded by bench/run.py's suite `gpu_precision`)

Run behind docs/gpu-benchmark.md (carry folder /work/main/.dev-layout):
    python3 bench/gpu_bench_precision.py prepare --src-only --dest /work/main/.dev-layout
    # device: cd .dev-layout && python3 src/bench/gpu_bench_precision.py call1 --out $OUT
    python3 bench/gpu_bench_precision.py prepare --graphs graphs.tar.gz --dest /work/main/.dev-layout
    # device: cd .dev-layout && python3 src/bench/gpu_bench_precision.py call2 --out $OUT
    python3 bench/gpu_bench_precision.py report --raw RAW
    # RAW: the run behind docs/ was bench/results/precision_gpu_raw at commit d9a817f

Issue 26 (`--issue 26`; bench/run.py's suite `issue26`, docs/gpu-benchmark.md "Issue 26
benchmarks"): fp16 and bf16 (`--layout auto`, `--output-precision low` since autocast returns
its outputs in the low type, plus ConvNeXt-T and EfficientNetV2-S forced
channels-last in fp16) against torch.compile + autocast of the same precision, timed in the
same call as memopt's programs: GPT-2, BERT-base, llama_small and qwen2_small (transformers'
Qwen2: 12 layers, 768, 12 heads, 2 key/value heads, q/k/v bias, MLP 2048, vocabulary 32000) at
8 x 512 (issue 12's cases) and 8 x 2048 (`MODEL_s2048`, GPT-2 and BERT with 2048 positions),
and vit_b_16, swin_t, convnext_tiny, efficientnet_v2_s (300 x 300) at batch 32; no host checks
unless `call2 --host` (the kernel suite runs with attention_sdpa instead). The training half is
bench/train_bench.py's (ViT-B/16 b32, GPT-2 8 x 512, GPT-2 medium 4 x 1024, ResNet-50 b64; SGD
with momentum, AMP fp16 / bf16, PyTorch's ResNet-50 channels-last). Three device calls, each
under the run tool's 10 minutes (the 24 cold torch.compile compiles of the inference half and
the 8 of the training half do not fit one call together); the third right after the second,
on the machine it leaves warm. Carry folder .dev-bench (the suite's folder .dev-bench/issue26):

    python3 bench/run.py prepare --suite issue26 --step sources
    # device call 1 (exports on the CPU, benchmark 3 and the kernel suite on the GPU):
    #   python3 bench/run.py device --suite issue26 --step export &
    #   python3 bench/run.py device --suite attention_sdpa; wait
    python3 bench/run.py unpack --suite issue26 FILES && \
        python3 bench/run.py unpack --suite attention_sdpa FILES
    python3 bench/run.py prepare --suite issue26 --step compile --build /work/main/build
    # device call 2: python3 bench/run.py device --suite issue26 --step infer
    # device call 3, at once: python3 bench/run.py device --suite issue26 --step train
    python3 bench/run.py unpack --suite issue26 FILES        # after each of calls 2 and 3
    python3 bench/run.py prepare --suite issue26 --step tool-report
    python3 bench/run.py report --suite issue26 --raw .dev-bench/issue26/raw
    python3 bench/run.py report --suite attention_sdpa --raw .dev-bench/attention_sdpa/raw

(FILES: the folder the run tool's reply names.) `report --issue 26` writes issue26.json and
the tables (gpu_bench_issue26.py); it merges several `--raw` folders, so cases a call left at
its deadline can be measured by another call (`call2 --issue 26 --only CONFIG...`, on the
machine the call left warm: Inductor's cache is in /tmp there) and reported together.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpu_bench  # noqa: E402

REPO = gpu_bench.REPO
VISION = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0",
          "convnext_tiny", "swin_t"]
CONVNETS = VISION[:5] + ["convnext_tiny"]  # swin_t has one convolution (the patch embedding)
TEXT = ["gpt2", "bert_base", "llama_small"]
MODELS = VISION + TEXT
BATCH = {"vision": 32, "text": 8}
SEQ = 512
SEED = 1
OUTPUT = {"gpt2": "logits", "bert_base": "last_hidden_state", "llama_small": "logits",
          "qwen2_small": "logits"}
VOCAB = {"gpt2": 50257, "bert_base": 30522, "llama_small": 32000, "qwen2_small": 32000}
# memopt variants: (precision, layout). auto is the default; the forced ones show its effect.
VARIANTS = [("fp32", "auto"), ("tf32", "auto"), ("fp16", "auto")]
LAYOUT_AB = {m: [("tf32", "nhwc")] for m in VISION}
for _model in ("resnet50", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0",
               "convnext_tiny"):
    LAYOUT_AB[_model].append(("fp16", "nchw"))

# Issue 26's inference benchmark: fp16 and bf16 against torch.compile + autocast of the same
# precision, transformers at 8 x 512 and 8 x 2048 tokens, vision nets at batch 32. Its 512-token
# cases are issue 12's (same names, graphs and inputs); the 2048-token ones are `MODEL_s2048`
# (GPT-2 and BERT get 2048 positions, the minimum for that length). qwen2_small: transformers'
# Qwen2 (q/k/v projections with bias) at llama_small's size with 2 key/value heads.
VISION26 = ["vit_b_16", "swin_t", "convnext_tiny", "efficientnet_v2_s"]
TEXT26 = ["gpt2", "bert_base", "llama_small", "qwen2_small"]
SEQS26 = (512, 2048)
IMAGE_SIZE = {"efficientnet_v2_s": 300}  # 224 otherwise
VARIANTS26 = [("fp16", "auto"), ("bf16", "auto")]
# The grouped-convolution nets, forced channels-last too (issue 26, item 4: today's `auto`
# keeps them NCHW).
LAYOUT_AB26 = {"convnext_tiny": [("fp16", "nhwc")], "efficientnet_v2_s": [("fp16", "nhwc")]}


def text_case(model, seq):
    """A text case's key: the model at 512 tokens (issue 12's name), MODEL_sSEQ otherwise."""
    return model if seq == SEQ else f"{model}_s{seq}"


# case -> the model it runs, its family, batch and size (image side or sequence length).
CASES = {}
for _model in VISION + VISION26:
    CASES[_model] = {"model": _model, "family": "vision", "batch": BATCH["vision"],
                     "size": IMAGE_SIZE.get(_model, 224)}
for _model in TEXT + TEXT26:
    for _seq in SEQS26:
        CASES[text_case(_model, _seq)] = {"model": _model, "family": "text",
                                          "batch": BATCH["text"], "size": _seq}
# A profile: the cases a run covers, memopt's program variants and the PyTorch modes timed.
PROFILES = {
    "issue12": {"cases": MODELS, "variants": lambda case: VARIANTS + LAYOUT_AB.get(case, []),
                "torch_modes": ["eager_fp32", "eager_fp16", "compile_fp16"]},
    "issue26": {"cases": VISION26 + [text_case(m, s) for s in SEQS26 for m in TEXT26],
                "variants": lambda case: VARIANTS26 + LAYOUT_AB26.get(case, []),
                "torch_modes": ["compile_fp16", "compile_bf16"]},
}
# The modes torch-one knows: eager or torch.compile, under autocast of the named precision
# (fp32: none; conv nets channels-last under autocast, eager fp32 in both formats).
TORCH_MODES = [f"{kind}_{p}" for kind in ("eager", "compile") for p in ("fp32", "fp16", "bf16")]


def profile_cases(profile):
    return list(PROFILES[profile]["cases"])


def base_model(case):
    return CASES[case]["model"]


def family(model):
    return CASES[model]["family"]


def config_name(model):
    case = CASES[model]
    name = f"{case['model']}_b{case['batch']}"
    return name if case["family"] == "vision" or case["size"] == SEQ else \
        f"{name}_s{case['size']}"


def input_spec(model):
    case = CASES[model]
    if case["family"] == "vision":
        return "input", (case["batch"], 3, case["size"], case["size"]), "float32"
    return "input_ids", (case["batch"], case["size"]), "int64"


def output_name(model):
    return OUTPUT.get(base_model(model), "logits")


def make_input(model):
    import numpy as np

    name, shape, dtype = input_spec(model)
    rng = np.random.default_rng(SEED)
    if dtype == "float32":
        return name, rng.standard_normal(shape).astype(np.float32)
    return name, rng.integers(0, VOCAB[base_model(model)], size=shape, dtype=np.int64)


def variants(model, profile="issue12"):
    return PROFILES[profile]["variants"](model)


def program_name(model, precision, layout):
    return f"{config_name(model)}_{precision}_{layout}"


# ----------------------------------------------------------------------------------------------
# PyTorch side (device)


def build_torch_model(case):
    import torch

    torch.manual_seed(0)
    model, seq = base_model(case), CASES[case]["size"]
    if family(case) == "vision":
        import torchvision

        return getattr(torchvision.models, model)(weights=None).eval()
    import transformers

    if model == "gpt2":  # 1024 positions by default; 2048 tokens need as many
        inner = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_positions=max(1024, seq)))
    elif model == "bert_base":
        inner = transformers.BertModel(transformers.BertConfig(
            max_position_embeddings=max(512, seq)), add_pooling_layer=False)
    elif model == "qwen2_small":  # Qwen2's attention has q/k/v biases
        inner = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(
            hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
            num_attention_heads=12, num_key_value_heads=2, vocab_size=VOCAB[model],
            max_position_embeddings=seq))
    else:
        inner = transformers.LlamaForCausalLM(transformers.LlamaConfig(
            hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
            num_attention_heads=12, num_key_value_heads=4, vocab_size=32000,
            max_position_embeddings=seq))
    field = OUTPUT[model]

    class Wrapped(torch.nn.Module):
        """Plain tensor in, plain tensor out (no cache, no ModelOutput)."""

        def __init__(self):
            super().__init__()
            self.inner = inner
            self.attn_implementation = inner.config._attn_implementation

        def forward(self, input_ids):
            kwargs = {} if model == "bert_base" else {"use_cache": False}
            return getattr(self.inner(input_ids=input_ids, return_dict=True, **kwargs), field)

    return Wrapped().eval()


def export_one(model, work):
    import onnx
    import torch

    sys.path.insert(0, os.path.join(REPO, "python", "models"))
    import export_common

    torch.set_num_threads(2)
    module = build_torch_model(model)
    input_name, array = make_input(model)
    name = config_name(model)
    scratch = tempfile.mkdtemp(prefix=f"export_{name}_")
    tmp = os.path.join(scratch, f"{name}.onnx")
    output = output_name(model)
    with torch.no_grad():
        torch.onnx.export(module, (torch.from_numpy(array),), tmp, dynamo=True,
                          external_data=True, input_names=[input_name], output_names=[output])
    proto = onnx.load(tmp)
    graph_bytes, data_bytes = export_common.save_with_external_data(
        proto, os.path.join(work, f"{name}.onnx"))
    shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps({"name": name, "graph_bytes": graph_bytes, "data_bytes": data_bytes,
                      "nodes": len(proto.graph.node), "ops": export_common.op_types(proto)}))


def time_call(fn, x, runs):
    import torch

    for _ in range(10):
        fn(x)
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(runs):
        start.record()
        fn(x)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return {"median_ms": statistics.median(times), "min_ms": min(times), "runs": runs}


def torch_one(model, runs, out_path, modes, warm_only=False, hold=None):
    """One model, every PyTorch mode, in this process (a child of call1). `warm_only`:
    compile and call once (fills Inductor's on-disk caches for the measured run). `hold`
    (a path prefix): compile and call every mode once, create HOLD.ready, wait for HOLD.go,
    then measure them all (HeldTorch, issue 26's call2)."""
    import gc

    import torch

    torch.backends.cudnn.benchmark = True
    # PyTorch's defaults, stated: cuDNN convolutions may use TF32, matmuls may not.
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch._dynamo.config.cache_size_limit = 64
    module = build_torch_model(model).cuda()
    weight_bytes = sum(t.numel() * t.element_size()
                       for t in list(module.parameters()) + list(module.buffers()))
    _, array = make_input(model)
    x = torch.from_numpy(array).cuda()
    result = {"model": model, "config": config_name(model), "weight_bytes": weight_bytes,
              "modes": {}, "environment": gpu_bench.torch_environment()}
    if family(model) == "text":
        result["attn_implementation"] = module.attn_implementation
    conv = family(model) == "vision"

    def measure(fn, xin):
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        y = fn(xin)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        del y
        entry = time_call(fn, xin, runs)
        entry["peak_beyond_weights_bytes"] = peak - weight_bytes
        return entry

    # (key, compiled, autocast dtype or None, channels_last), in the order `modes` names them.
    low = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}
    plans = []
    for mode in modes:
        kind, precision = mode.split("_", 1)
        plans.append((mode, kind == "compile", low[precision],
                      conv and precision != "fp32"))
        if mode == "eager_fp32" and conv:
            plans.append(("eager_fp32_channels_last", False, None, True))
    held = []  # hold: (key, call, input, channels_last, first call seconds), measured later
    for key, compiled, autocast, channels_last in plans:
        try:
            begin = time.time()
            mod = module.to(memory_format=torch.channels_last) if channels_last else \
                module.to(memory_format=torch.contiguous_format)
            xin = x.to(memory_format=torch.channels_last) if channels_last else x
            fn = torch.compile(mod, dynamic=False) if compiled else mod

            def call(inp, fn=fn, autocast=autocast):
                with torch.inference_mode(), torch.autocast(
                        "cuda", autocast or torch.float16, enabled=autocast is not None):
                    return fn(inp)

            call(xin)
            torch.cuda.synchronize()
            first = time.time() - begin
            if warm_only:
                print(f"torch {model} {key}: compiled in {first:.1f} s", flush=True)
                continue
            if hold:
                held.append((key, call, xin, channels_last, first))
                print(f"torch {model} {key}: compiled in {first:.1f} s, held", flush=True)
                continue  # no dynamo reset: the compiled code is measured later
            result["modes"][key] = entry = measure(call, xin)
            entry["first_call_s"] = round(first, 1)
            print(f"torch {model} {key}: {entry['median_ms']:.3f} ms, beyond weights "
                  f"{entry['peak_beyond_weights_bytes'] / 2**20:.1f} MiB, first call "
                  f"{first:.1f} s", flush=True)
        except Exception as error:  # noqa: BLE001 - recorded per mode
            result["modes"][key] = {"error": f"{type(error).__name__}: {str(error)[:1500]}"}
            print(f"torch {model} {key}: FAILED {str(error)[:300]}", flush=True)
        torch._dynamo.reset()
        torch.cuda.empty_cache()
        with open(out_path, "w") as handle:
            json.dump(result, handle, indent=1)
    if not hold:
        return
    # Compiled and idle (the allocator's cache given back) until the parent says go: the GPU
    # is memopt's meanwhile. Then every held mode is measured, one after the other.
    torch.cuda.empty_cache()
    with open(out_path, "w") as handle:
        json.dump(result, handle, indent=1)
    open(hold + ".ready", "w").close()
    while not os.path.exists(hold + ".go"):
        time.sleep(0.2)
    for key, call, xin, channels_last, first in held:
        try:
            module.to(memory_format=torch.channels_last if channels_last else
                      torch.contiguous_format)
            result["modes"][key] = entry = measure(call, xin)
            entry["first_call_s"] = round(first, 1)
            print(f"torch {model} {key}: {entry['median_ms']:.3f} ms, beyond weights "
                  f"{entry['peak_beyond_weights_bytes'] / 2**20:.1f} MiB", flush=True)
        except Exception as error:  # noqa: BLE001 - recorded per mode
            result["modes"][key] = {"error": f"{type(error).__name__}: {str(error)[:1500]}"}
            print(f"torch {model} {key}: FAILED {str(error)[:300]}", flush=True)
        with open(out_path, "w") as handle:
            json.dump(result, handle, indent=1)


class HeldTorch(gpu_bench.HeldProcesses):
    """PyTorch's side of a call that times memopt too (issue 26): one `torch-one --hold`
    process per case compiles its modes (`limit` compiling at a time, beside the memopt
    builds), says it is ready and waits; `join_compiles` waits until every process is ready
    (stopping those still compiling at the cap), so that memopt's runs have the GPU alone; then
    `measure` lets each process time its compiled modes in turn. torch.compile's code is timed
    in the process that compiled it, with no second (cached) compile."""

    def __init__(self, cases, modes, runs, work, say, limit, cap, command=None):
        """command(case, out, hold): a process's command line (default: torch-one)."""
        command = command or (lambda c, out, hold: [
            sys.executable, os.path.abspath(__file__), "torch-one", c, "--out", out,
            "--runs", str(runs), "--modes", *modes, "--hold", hold])
        super().__init__(cases, command, os.path.join(work, "torch_held"), say, limit, cap)

    def measure(self, seconds, results_path, extra=None):
        """Each ready process times its modes, one at a time, until `seconds` have passed;
        writes {"configs": {case: torch-one's result}} + `extra` to `results_path`."""
        stop, results = time.time() + seconds, {}
        for case in self.keys:
            self.release(case, stop)
            if os.path.exists(self.path(case, ".json")):
                results[case] = json.load(open(self.path(case, ".json")))
            else:
                results[case] = {"error": "no result", "modes": {}}
            for key, entry in results[case].get("modes", {}).items():
                self.say(f"torch {case} {key}: " + (
                    f"{entry['median_ms']:.3f} ms, "
                    f"{entry['peak_beyond_weights_bytes'] / 2**20:.1f} MiB"
                    if "median_ms" in entry else entry.get("error", "?")[:200]))
            with open(results_path, "w") as handle:
                json.dump(dict({"configs": results}, **(extra or {})), handle, indent=1)
        return results


def conv_microbench(out_path, runs=15):
    """cuDNN (through PyTorch, cudnn.benchmark) on the conv nets' typical convolutions at batch
    32: NCHW vs channels_last in f32 (FMA), TF32 and f16. The layout policy's evidence."""
    import torch

    torch.backends.cudnn.benchmark = True
    shapes = [  # name, C in, C out, H, kernel, stride, groups
        ("resnet_3x3_64_56", 64, 64, 56, 3, 1, 1),
        ("resnet_1x1_256to64_56", 256, 64, 56, 1, 1, 1),
        ("resnet_3x3_s2_128_56", 128, 128, 56, 3, 2, 1),
        ("stem_7x7_s2_3to64_224", 3, 64, 224, 7, 2, 1),
        ("depthwise_3x3_144_56", 144, 144, 56, 3, 1, 144),
        ("pointwise_1x1_144to24_56", 144, 24, 56, 1, 1, 1),
    ]
    results = {}
    for name, cin, cout, size, k, stride, groups in shapes:
        for mode in ("fp32", "tf32", "fp16"):
            torch.backends.cudnn.allow_tf32 = mode == "tf32"
            dtype = torch.float16 if mode == "fp16" else torch.float32
            for layout in ("nchw", "nhwc"):
                fmt = torch.channels_last if layout == "nhwc" else torch.contiguous_format
                conv = torch.nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups).cuda()
                conv = conv.to(dtype=dtype, memory_format=fmt)
                x = torch.randn(32, cin, size, size, device="cuda", dtype=dtype)
                x = x.to(memory_format=fmt)
                with torch.inference_mode():
                    entry = time_call(conv, x, runs)
                results[f"{name}/{mode}/{layout}"] = entry["median_ms"]
        row = {m: (results[f"{name}/{m}/nchw"], results[f"{name}/{m}/nhwc"])
               for m in ("fp32", "tf32", "fp16")}
        print(f"conv {name}: " + ", ".join(f"{m} nchw {a:.3f} nhwc {b:.3f} ms"
                                           for m, (a, b) in row.items()), flush=True)
    with open(out_path, "w") as handle:
        json.dump(results, handle, indent=1)
    return results


def cmd_call1(args):
    """Exports, kernel suite, conv micro-benchmark, PyTorch baselines (see the docstring).
    Issue 26 (`--profile issue26 --no-torch --skip-gpu-check --no-conv-micro --train-configs
    ...`): the exports alone, the inference graphs and train_bench's training graphs (PyTorch
    is timed in the calls that time memopt; the kernel suite runs with attention_sdpa)."""
    begin = time.time()
    root = os.getcwd()
    src = os.path.join(root, "src")
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    say = gpu_bench.log_to(os.path.join(out, "call1_log.txt"))
    say(f"start: {time.strftime('%H:%M:%S')} profile {args.profile}")
    models = args.models or profile_cases(args.profile)
    work = tempfile.mkdtemp(prefix="exports_")
    train_work = os.path.join(work, "train")
    os.makedirs(train_work)
    # A. In the background: exports (CPU) and the runtime build + kernel suite.
    check = None
    if not args.skip_gpu_check:
        env = dict(os.environ, JOBS="12", CUDA_ARCH="90", SKIP_PERF="1", SKIP_EXAMPLE="1")
        check_log = open(os.path.join(out, "gpu_check_log.txt"), "w")
        check = subprocess.Popen(["bash", os.path.join(src, "scripts", "gpu_check.sh"),
                                  "/tmp/rt-check"], stdout=check_log, stderr=subprocess.STDOUT,
                                 env=env)
    exports = {}
    export_jobs = [(m, [sys.executable, os.path.abspath(__file__), "export-one", m, work])
                   for m in models]
    # train_bench's graphs (bench/train_bench/configs.py BENCH), exported as its `export` does.
    train_script = os.path.join(HERE, "train_bench.py")
    sys.path.insert(0, HERE)
    from train_bench.configs import BENCH as TRAIN_BENCH

    for name in args.train_configs:
        model, batch, size, classes = TRAIN_BENCH[name]
        export_jobs.append((f"train:{name}", [sys.executable, train_script, "export-one", name,
                                              model, str(batch), str(size), str(classes),
                                              train_work]))
    exported, train_exported = [], []

    def export_done(model, code, text, seconds):
        if code == 0:
            info = json.loads(text.strip().splitlines()[-1])
            exports[model] = dict(info, seconds=round(seconds, 1))
            (train_exported if model.startswith("train:") else exported).append(info["name"])
            say(f"export {model}: {info['nodes']} nodes in {seconds:.0f} s, ops "
                f"{','.join(info['ops'])}")
        else:
            exports[model] = {"error": (text or "")[-3000:]}
            say(f"export {model} FAILED ({code}): {(text or '')[-1500:]}")

    import threading

    export_thread = threading.Thread(target=gpu_bench.run_parallel, args=(
        export_jobs, args.export_jobs, begin + args.export_cap_s, export_done, say))
    export_thread.start()
    # torch.compile's cold compiles, 4 at a time, fill Inductor's caches for phase C.
    warm_thread = None
    if not args.no_torch:
        warm_jobs = [(m, [sys.executable, os.path.abspath(__file__), "torch-one", m, "--out",
                          os.devnull, "--modes", "compile_fp16", "--warm-only"])
                     for m in models]

        def warm_done(model, code, text, seconds):
            say(f"torch.compile warm-up {model}: exit {code} in {seconds:.0f} s "
                f"{(text or '').strip().splitlines()[-1][:200] if text else ''}")

        warm_thread = threading.Thread(target=gpu_bench.run_parallel, args=(
            warm_jobs, 4, begin + args.warm_cap_s, warm_done, say))
        warm_thread.start()
    # B. Kernel suite result, then the conv micro-benchmark (GPU otherwise idle).
    if check is not None:
        check.wait()
        check_log.close()
        text = open(os.path.join(out, "gpu_check_log.txt")).read()
        say(f"gpu_check: exit {check.returncode}, {text.count('FAIL ')} failing cases "
            f"({time.time() - begin:.0f} s)")
        for line in text.splitlines():
            if line.startswith("FAIL"):
                say("  " + line[:300])
    if not args.no_conv_micro:
        conv_microbench(os.path.join(out, "conv_layouts.json"))
        say(f"conv micro-benchmark done ({time.time() - begin:.0f} s)")
    export_thread.join()
    if warm_thread is not None:
        warm_thread.join()
    with tarfile.open(os.path.join(out, "graphs.tar.gz"), "w:gz") as tar:
        for name in exported:
            tar.add(os.path.join(work, f"{name}.onnx"), arcname=f"{name}.onnx")
    if args.train_configs:  # graphs only: `prepare` fills the weights here
        with tarfile.open(os.path.join(out, "train_graphs.tar.gz"), "w:gz") as tar:
            for name in train_exported:
                tar.add(os.path.join(train_work, f"{name}.onnx"), arcname=f"{name}.onnx")
    with open(os.path.join(out, "exports.json"), "w") as handle:
        json.dump({"profile": args.profile, "exports": exports}, handle, indent=1)
    say(f"exported {len(exported)} + {len(train_exported)} graphs "
        f"({time.time() - begin:.0f} s)")
    if args.no_torch:
        say(f"call1 done in {time.time() - begin:.0f} s")
        return 0 if len(exported) + len(train_exported) == len(export_jobs) else 1
    # C. PyTorch, one child process per model, until the deadline.
    results_path = os.path.join(out, "torch.json")
    run_torch(models, args.runs, None, args.deadline_s - (time.time() - begin), work,
              results_path, say, extra={"exports": exports,
                                        "gpu_check_exit": check.returncode if check else None})
    say(f"call1 done in {time.time() - begin:.0f} s")
    return 0


def run_torch(models, runs, modes, seconds, work, results_path, say, extra=None):
    """PyTorch's timings, one child process per model (torch-one), into `results_path`
    ({"configs": {model: torch-one's result}} + `extra`) until `seconds` have passed."""
    stop = time.time() + seconds
    torch_results = {}
    for model in models:
        left = stop - time.time()
        if left < 20:
            torch_results[model] = {"error": "deadline"}
            continue
        part = os.path.join(work, f"torch_{model}.json")
        command = [sys.executable, os.path.abspath(__file__), "torch-one", model, "--out", part,
                   "--runs", str(runs)] + (["--modes", *modes] if modes else [])
        try:
            subprocess.run(command, timeout=left)
        except subprocess.TimeoutExpired:
            say(f"torch {model}: killed at the deadline")
        if os.path.exists(part):
            torch_results[model] = json.load(open(part))
            for key, entry in torch_results[model]["modes"].items():
                say(f"torch {model} {key}: " + (f"{entry['median_ms']:.3f} ms, "
                    f"{entry['peak_beyond_weights_bytes'] / 2**20:.1f} MiB"
                    if "median_ms" in entry else entry.get("error", "?")[:200]))
        with open(results_path, "w") as handle:
            json.dump(dict({"configs": torch_results}, **(extra or {})), handle, indent=1)
    return torch_results


# ----------------------------------------------------------------------------------------------
# memopt side: prepare (here)


def cmd_prepare(args):
    sys.path.insert(0, os.path.join(REPO, "python", "models"))
    dest = os.path.abspath(args.dest)
    os.makedirs(dest, exist_ok=True)
    gpu_bench.copy_source_tree(dest)
    if args.src_only:
        print(f"copied the source tree to {dest}/src")
        return 0
    import fill_weights

    programs = os.path.join(dest, "programs")
    summary_path = os.path.join(dest, "prepare.json")
    summary = {}
    if args.only and os.path.exists(summary_path):  # adds to an earlier prepare's programs
        summary = json.load(open(summary_path))
    else:
        shutil.rmtree(programs, ignore_errors=True)
    os.makedirs(programs, exist_ok=True)
    compile_bin = os.path.join(os.path.abspath(args.build), "bin", "memopt-compile")
    scratch = tempfile.mkdtemp(prefix="precision_prepare_")
    with tarfile.open(args.graphs) as tar:
        tar.extractall(os.path.join(scratch, "graphs"), filter="data")
    for model in args.only or profile_cases(args.profile):
        graph = os.path.join(scratch, "graphs", f"{config_name(model)}.onnx")
        if not os.path.exists(graph):
            summary[config_name(model)] = {"error": "graph not exported"}
            continue
        filled = os.path.join(scratch, "filled", model)
        os.makedirs(filled, exist_ok=True)
        fill_weights.fill(graph, filled, log=open(os.devnull, "w"))
        for precision, layout in variants(model, args.profile):
            name = program_name(model, precision, layout)
            out = os.path.join(scratch, "out", name)
            os.makedirs(out, exist_ok=True)
            command = [compile_bin, os.path.join(filled, f"{config_name(model)}.onnx"), "-o",
                       os.path.join(out, name), "--target", "cuda", "--emit", "source",
                       "--arch", "sm_90", "--precision", precision, "--layout", layout,
                       "--report", os.path.join(out, "report.json")]
            if args.profile == "issue26":
                # Outputs in the low type, as autocast returns them (docs/mixed-precision.md,
                # "Outputs stored in f32"): a decoder's logits at half the bytes.
                command += ["--output-precision", "low"]
            begin = time.time()
            proc = subprocess.run(command, capture_output=True, text=True)
            seconds = time.time() - begin
            if proc.returncode != 0:
                summary[name] = {"error": (proc.stderr or proc.stdout)[-2000:]}
                print(f"{name}: FAILED\n{summary[name]['error']}")
                continue
            shutil.copy(os.path.join(out, f"{name}.cu"), programs)
            layout_line = next((line for line in proc.stdout.splitlines()
                                if line.startswith("[layout]")), "")
            summary[name] = {"case": model, "compile_s": round(seconds, 1),
                             "report": json.load(open(os.path.join(out, "report.json"))),
                             "layout_line": layout_line,
                             "command": "memopt-compile GRAPH.onnx " + " ".join(command[3:])}
            print(f"{name}: ok in {seconds:.1f} s {layout_line}")
            shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(filled, ignore_errors=True)
    shutil.rmtree(scratch, ignore_errors=True)
    with open(summary_path, "w") as handle:
        json.dump(summary, handle, indent=1)
    failed = sorted(n for n, e in summary.items() if "error" in e)
    if failed:
        print(f"not compiled: {', '.join(failed)}")
    return 1 if failed else 0


# ----------------------------------------------------------------------------------------------
# memopt side: call2 (device)


def target_ms(torch_entry, program):
    """The PyTorch latency a program is held to: torch.compile + autocast for fp16 / bf16, the
    faster default-fp32 eager run (NCHW or channels_last) for TF32; None for strict fp32."""
    modes = torch_entry.get("modes", {})
    for low in ("fp16", "bf16"):
        if f"_{low}_" in program:
            return modes.get(f"compile_{low}", {}).get("median_ms")
    if "_tf32_" in program:
        times = [modes.get(k, {}).get("median_ms")
                 for k in ("eager_fp32", "eager_fp32_channels_last")]
        times = [t for t in times if t]
        return min(times) if times else None
    return None


def cmd_call2(args):
    """Builds the runtime (CUDA and host) and every program; runs the CUDA programs one at a
    time (--bench) while the host programs run niced on the other cores; compares outputs."""
    import numpy as np

    begin = time.time()
    root = os.getcwd()
    src = os.path.join(root, "src")
    include = os.path.join(src, "include")
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    say = gpu_bench.log_to(os.path.join(out, "call2_log.txt"))
    work = args.work
    os.makedirs(work, exist_ok=True)
    results = {"programs": {}, "phases": {}}

    def save():
        with open(os.path.join(out, "memopt.json"), "w") as handle:
            json.dump(results, handle, indent=1)

    # The default programs first (fp16, TF32), then the layout comparisons and strict fp32.
    order = ["_fp16_auto", "_bf16_auto", "_tf32_auto", "_tf32_nhwc", "_fp32_auto", "_fp16_nchw",
             "_fp16_nhwc"]
    names = sorted((f[:-3] for f in os.listdir(os.path.join(root, "programs"))
                    if f.endswith(".cu")),
                   key=lambda n: (next((i for i, o in enumerate(order) if n.endswith(o)),
                                       len(order)), n))
    if args.only:
        names = [n for n in names if any(n.startswith(o) for o in args.only)]
    cases = profile_cases(args.profile)
    model_of = {program_name(m, p, l): m for m in cases for p, l in variants(m, args.profile)}
    names = [n for n in names if n in model_of]
    # Host checks: issue 12's default; issue 26's on request (its 2048-token programs take the
    # host minutes, and its CPU time goes to torch.compile in the same call).
    host_on = not args.no_host and (args.profile == "issue12" or args.host)
    host_wanted = [n for n in names if "_fp32_" not in n] if host_on else []
    # PyTorch in the same call (issue 26): torch.compile's cold compiles start now, beside the
    # builds, in processes that hold their compiled modes; they are timed after memopt's runs.
    torch_modes = args.torch_modes or PROFILES[args.profile]["torch_modes"]
    torch_here = args.torch if args.torch is not None else args.profile == "issue26"
    torch_cases = [m for m in cases if any(model_of.get(n) == m for n in names)]
    held = HeldTorch(torch_cases, torch_modes, args.runs, work, say, args.compile_jobs,
                     args.compile_cap_s) if torch_here else None
    for n in names:
        results["programs"][n] = {"model": model_of.get(n)}
    # Runtime libraries: CUDA (cuDNN from the PyTorch wheel) and host.
    cudnn_include, cudnn_lib = gpu_bench.cudnn_paths()
    rt, rt_host = os.path.join(work, "rt"), os.path.join(work, "rt-host")
    extra = []
    link_dir = os.path.join(rt, "cudnn-lib")
    if cudnn_lib:
        os.makedirs(link_dir, exist_ok=True)
        found = sorted(f for f in os.listdir(cudnn_lib) if f.startswith("libcudnn.so"))
        if not os.path.exists(os.path.join(link_dir, "libcudnn.so")):
            os.symlink(os.path.join(cudnn_lib, found[0]), os.path.join(link_dir, "libcudnn.so"))
        extra = [f"-DMEMOPT_CUDNN_INCLUDE={cudnn_include}",
                 f"-DMEMOPT_CUDNN_LIBRARY={os.path.join(link_dir, 'libcudnn.so')}"]
        os.environ["LD_LIBRARY_PATH"] = cudnn_lib + ":" + os.environ.get("LD_LIBRARY_PATH", "")
    builds = [
        ("rt-cuda", f"cmake -S {src}/lib/Runtime -B {rt} -G Ninja -DCMAKE_BUILD_TYPE=Release "
                    f"-DMEMOPT_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 {' '.join(extra)} "
                    f">/dev/null && cmake --build {rt} -j 8 --target memopt_runtime_main "
                    "memopt_runtime_cuda"),
        ("rt-host", f"cmake -S {src}/lib/Runtime -B {rt_host} -G Ninja "
                    "-DCMAKE_BUILD_TYPE=Release -DMEMOPT_ENABLE_CUDA=OFF >/dev/null && "
                    f"cmake --build {rt_host} -j 4 --target memopt_runtime_main "
                    "memopt_runtime_host")][:2 if host_wanted else 1]
    source = lambda n: os.path.join(root, "programs", f"{n}.cu")  # noqa: E731
    jobs = [((b, "build"), ["bash", "-c", c]) for b, c in builds]
    jobs += [((n, "cuda.o"), ["nvcc", "-std=c++17", "-O1", "-arch=sm_90", "-c", source(n),
                              f"-I{include}", "-o", os.path.join(work, f"{n}.cuda.o")])
             for n in names]
    jobs += [((n, "host.o"), ["g++", "-std=c++17", "-O1", "-x", "c++", "-c", source(n),
                              f"-I{include}", "-o", os.path.join(work, f"{n}.host.o")])
             for n in host_wanted]

    def build_done(key, code, text, seconds):
        if code != 0:
            target = results["programs"].get(key[0], results)
            target.setdefault("build_error", {})
            if isinstance(target["build_error"], dict):
                target["build_error"][key[1]] = (text or "")[-2000:]
            say(f"{key}: build FAILED\n{(text or '')[-1500:]}")

    gpu_bench.run_parallel(jobs, 16, begin + 330, build_done, say)
    results["phases"]["objects_s"] = round(time.time() - begin, 1)
    # Whether the runtime has cuDNN's fused attention (cudnn-frontend's headers carried in
    # src/third_party/): without them every attention runs memopt's kernels.
    cache = os.path.join(rt, "CMakeCache.txt")
    frontend = ""
    if os.path.exists(cache):
        for line in open(cache):
            if line.startswith("MEMOPT_CUDNN_FRONTEND_INCLUDE:"):
                frontend = line.split("=", 1)[1].strip()
    results["runtime_cudnn_frontend"] = frontend or None
    say(f"runtime cudnn-frontend: {frontend or 'NONE (memopt attention kernels only)'}")
    lib = lambda d, n: os.path.join(d, f"libmemopt_runtime_{n}.a")  # noqa: E731
    links = [((n, "cuda"), ["nvcc", "-arch=sm_90", f"-L{link_dir}",
                            os.path.join(work, f"{n}.cuda.o"), lib(rt, "main"),
                            lib(rt, "driver"), lib(rt, "cuda"), lib(rt, "common"),
                            "-lcublasLt", "-lcudnn", "-o", os.path.join(work, f"{n}.cuda")])
             for n in names]
    links += [((n, "host"), ["g++", os.path.join(work, f"{n}.host.o"), lib(rt_host, "main"),
                             lib(rt_host, "driver"), lib(rt_host, "host"),
                             lib(rt_host, "common"), "-lpthread", "-o",
                             os.path.join(work, f"{n}.host")]) for n in host_wanted]
    gpu_bench.run_parallel(links, 16, begin + 360, build_done, say)
    results["phases"]["linked_s"] = round(time.time() - begin, 1)
    save()
    if held is not None:  # their first calls would disturb the timings
        held.join_compiles()
        results["phases"]["torch_compiled_s"] = round(time.time() - begin, 1)
    inputs = {}
    for model in torch_cases or cases:
        input_file = os.path.join(work, f"{config_name(model)}.input.npy")
        np.save(input_file, make_input(model)[1])
        inputs[model] = f"{input_spec(model)[0]}={input_file}"

    def io(name, kind):
        folder = os.path.join(work, "outputs", name, kind)
        os.makedirs(folder, exist_ok=True)
        return ["--random-weights", str(SEED), "--input", inputs[model_of[name]],
                "--output-dir", folder]

    # Host runs: niced, in the background, 3 at a time with 4 threads each.
    host_queue = [n for n in host_wanted if os.path.exists(os.path.join(work, f"{n}.host"))]
    host_running, host_done = [], {}
    env = dict(os.environ, MEMOPT_HOST_THREADS="4")

    def pump_host():
        for item in list(host_running):
            name, proc, started = item
            if proc.poll() is None:
                continue
            host_running.remove(item)
            host_done[name] = (proc.returncode, round(time.time() - started, 1),
                               proc.stdout.read()[-1500:])
        while host_queue and len(host_running) < 3:
            name = host_queue.pop(0)
            proc = subprocess.Popen(["nice", "-n", "19", os.path.join(work, f"{name}.host")] +
                                    io(name, "host"), stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, env=env)
            host_running.append((name, proc, time.time()))

    pump_host()
    # CUDA runs, one at a time.
    for name in names:
        entry = results["programs"][name]
        exe = os.path.join(work, f"{name}.cuda")
        pump_host()
        if not os.path.exists(exe) or time.time() - begin > args.deadline_s - 60 - (
                args.torch_reserve_s if held is not None else 0):
            entry.setdefault("cuda_error", "not built" if not os.path.exists(exe) else
                             "deadline")
            continue
        started = time.time()
        try:
            proc = subprocess.run([exe] + io(name, "cuda") + ["--bench", str(args.runs)],
                                  capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            entry["cuda_error"] = "timeout (120 s)"
            say(f"{name}: cuda run timed out")
            continue
        entry["cuda_wall_s"] = round(time.time() - started, 1)
        if proc.returncode != 0:
            entry["cuda_error"] = (proc.stderr + proc.stdout)[-2000:]
            say(f"{name}: cuda FAILED {entry['cuda_error'][-600:]}")
            continue
        entry["memopt"] = m = gpu_bench.parse_bench(proc.stdout)
        say(f"memopt {name}: {m.get('median_ms', float('nan')):.3f} ms, beyond weights "
            f"{m.get('beyond_weights_bytes', 0) / 2**20:.1f} MiB (arena "
            f"{m.get('arena_bytes', 0) / 2**20:.1f} MiB) [{time.time() - begin:.0f} s]")
        save()
    results["phases"]["cuda_runs_s"] = round(time.time() - begin, 1)
    torch_path = os.path.join(root, "torch.json")
    if held is not None:  # PyTorch on the same GPU, after memopt
        torch_path = os.path.join(out, "torch.json")
        left = args.deadline_s - (time.time() - begin) - args.profile_reserve_s
        held.measure(left, torch_path, extra={"profile": args.profile, "modes": torch_modes})
        results["phases"]["torch_s"] = round(time.time() - begin, 1)
        save()
    # Kernel profiles of the programs that miss their target by the most (fp16 against
    # torch.compile + autocast, TF32 against eager fp32), one graph replay each under Nsight
    # Compute (MEMOPT_PROFILE_REPLAY: the profiler sees that replay alone).
    if os.path.exists(torch_path) and args.profiles > 0:
        baselines = json.load(open(torch_path))["configs"]
        misses = []
        for name in names:
            m = results["programs"][name].get("memopt", {})
            model = model_of.get(name)
            target = target_ms(baselines.get(model, {}), name)
            if "median_ms" in m and target:
                misses.append((m["median_ms"] / target, name))
        os.environ["MEMOPT_PROFILE_REPLAY"] = "1"
        ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
        chosen = sorted(misses, reverse=True)[:args.profiles]
        if args.profile_names:
            chosen = [(r, n) for r, n in sorted(misses, reverse=True)
                      if n in args.profile_names]
        for ratio, name in chosen:
            if ratio <= 1.0 or time.time() - begin > args.deadline_s - 60:
                break
            pump_host()
            profile = gpu_bench.ncu_kernels(
                ["--profile-from-start", "off", os.path.join(work, f"{name}.cuda")] +
                io(name, "ncu") + ["--bench", "1"], ncu,
                os.path.join(work, f"{name}.ncu.csv"), timeout_s=args.profile_timeout_s)
            profile["ratio_to_target"] = round(ratio, 3)
            results["programs"][name]["ncu_profile"] = profile
            say(f"ncu {name} ({ratio:.2f}x its target): {profile.get('kernels')} kernels, "
                f"{profile.get('total_ms', float('nan')):.2f} ms")
            for row in profile.get("top", [])[:6]:
                say(f"    {row['ms']:8.3f} ms  x{row['calls']:<4d} {row['name']}")
            save()
        os.environ.pop("MEMOPT_PROFILE_REPLAY", None)
    # Wait for the host runs until the deadline, then compare.
    while (host_queue or host_running) and time.time() - begin < args.deadline_s:
        pump_host()
        time.sleep(0.5)
    for _, proc, _ in host_running:
        proc.kill()
    for name in host_wanted:
        entry = results["programs"][name]
        model = model_of[name]
        file = output_name(model) + ".npy"
        if name not in host_done:
            entry["host_check"] = {"error": "host run unfinished at the deadline"}
            continue
        code, seconds, text = host_done[name]
        if code != 0:
            entry["host_check"] = {"error": f"host run failed: {text}"}
            continue
        try:
            entry["host_check"] = gpu_bench.compare_outputs(
                os.path.join(work, "outputs", name, "cuda", file),
                os.path.join(work, "outputs", name, "host", file))
        except Exception as error:  # noqa: BLE001 - recorded
            entry["host_check"] = {"error": str(error)[:500]}
        entry["host_check"]["host_s"] = seconds
        say(f"{name}: CUDA vs host rel L2 "
            f"{entry['host_check'].get('rel_l2', float('nan')):.2e} (host {seconds} s)")
    results["phases"]["total_s"] = round(time.time() - begin, 1)
    save()
    return 0


# ----------------------------------------------------------------------------------------------
# report (here)


def final_layout(model, precision):
    """The layout memopt-layout's `auto` gives this model (docs/layout.md): channels-last for
    f16 / TF32 convolutions when none is grouped; transformers have no convolution."""
    if model in TEXT or precision == "fp32":
        return "nchw"
    return "nchw" if model in ("mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0",
                               "convnext_tiny") else "nhwc"


def cmd_report(args):
    raw = args.raw
    torch_res = json.load(open(os.path.join(raw, "torch.json")))["configs"]
    runs = {}
    for name in ("memopt.json", "memopt_call3.json"):
        path = os.path.join(raw, name)
        if os.path.exists(path):
            for program, entry in json.load(open(path))["programs"].items():
                if "memopt" in entry or program not in runs:
                    previous = runs.get(program, {})
                    merged = dict(entry)
                    if "host_check" in previous and "host_check" not in merged:
                        merged["host_check"] = previous["host_check"]
                    runs[program] = merged
    micro = json.load(open(os.path.join(raw, "conv_layouts.json")))

    def program(model, precision, layout):
        """The measured program for (precision, layout): compiled with the layout forced, or
        with auto when auto gave that layout when it ran."""
        forced = runs.get(program_name(model, precision, layout), {})
        if "memopt" in forced:
            return forced
        old_auto = {"fp32": "nchw", "tf32": "nchw",
                    "fp16": "nchw" if model in TEXT else "nhwc"}[precision]
        if layout == old_auto or model in TEXT:
            return runs.get(program_name(model, precision, "auto"), {})
        return {}

    def ms(entry):
        return entry.get("memopt", {}).get("median_ms") if entry else None

    def fmt(value, digits=2):
        return f"{value:.{digits}f}" if isinstance(value, (int, float)) else "—"

    def torch_ms(model, key):
        return torch_res.get(model, {}).get("modes", {}).get(key, {}).get("median_ms")

    def torch_mem(model, key):
        b = torch_res.get(model, {}).get("modes", {}).get(key, {}).get(
            "peak_beyond_weights_bytes")
        return b / 2**20 if b is not None else None

    def eager32(model):
        keys = ["eager_fp32", "eager_fp32_channels_last"]
        found = [(torch_ms(model, k), k) for k in keys if torch_ms(model, k)]
        return min(found) if found else (None, None)

    rows, mem_rows, layout_rows, error_rows, summary = [], [], [], [], {}
    for model in MODELS:
        p32 = program(model, "fp32", "nchw")
        p_tf = program(model, "tf32", final_layout(model, "tf32"))
        p16 = program(model, "fp16", final_layout(model, "fp16"))
        e32, e32_key = eager32(model)
        c16 = torch_ms(model, "compile_fp16")
        r16 = ms(p16) / c16 if ms(p16) and c16 else None
        rtf = ms(p_tf) / e32 if ms(p_tf) and e32 else None
        b16 = (p16.get("memopt", {}).get("beyond_weights_bytes") or 0) / 2**20
        btf = (p_tf.get("memopt", {}).get("beyond_weights_bytes") or 0) / 2**20
        t16 = min(v for v in (torch_mem(model, "eager_fp16"), torch_mem(model, "compile_fp16"))
                  if v is not None)
        t32 = torch_mem(model, e32_key) if e32_key else None
        summary[model] = {"fp16_over_compile": r16, "tf32_over_eager": rtf,
                          "fp16_memory_ok": b16 < t16, "tf32_memory_ok": t32 and btf < t32}
        shown = (lambda p: f" ({final_layout(model, p)})") if model in VISION else \
            (lambda p: "")
        rows.append(
            f"| {model} | {fmt(ms(p32))} | {fmt(ms(p_tf))}{shown('tf32')} | "
            f"{fmt(ms(p16))}{shown('fp16')} | {fmt(e32)}"
            f"{' (cl)' if e32_key == 'eager_fp32_channels_last' else ''} | "
            f"{fmt(torch_ms(model, 'eager_fp16'))} | {fmt(c16)} | {fmt(r16)} | {fmt(rtf)} |")
        mem_rows.append(
            f"| {model} | {fmt(btf, 1)} | {fmt(b16, 1)} | {fmt(t32, 1)} | "
            f"{fmt(torch_mem(model, 'eager_fp16'), 1)} | {fmt(torch_mem(model, 'compile_fp16'), 1)} "
            f"| {'yes' if summary[model]['tf32_memory_ok'] else 'no'} | "
            f"{'yes' if summary[model]['fp16_memory_ok'] else 'no'} |")
        if model in VISION:
            cells = [fmt(ms(program(model, p, l))) for p in ("tf32", "fp16")
                     for l in ("nchw", "nhwc")]
            layout_rows.append(f"| {model} | " + " | ".join(cells) + " |")
        checks = []
        for precision, entry in (("tf32", p_tf), ("fp16", p16)):
            check = entry.get("host_check", {}) if entry else {}
            checks.append(f"{check['rel_l2']:.1e}" if "rel_l2" in check else
                          "not run" if not check else "failed")
        error_rows.append(f"| {model} | " + " | ".join(checks) + " |")
    micro_rows = []
    for key in sorted({k.split("/")[0] for k in micro}):
        cells = [f"{micro[f'{key}/{m}/nchw']:.3f} / {micro[f'{key}/{m}/nhwc']:.3f}"
                 for m in ("fp32", "tf32", "fp16")]
        micro_rows.append(f"| {key} | " + " | ".join(cells) + " |")
    profiles = []
    for name, entry in sorted(runs.items()):
        prof = entry.get("ncu_profile")
        if not prof or "top" not in prof:
            continue
        profiles.append(f"**{name}** ({prof.get('ratio_to_target')}x its target; "
                        f"{prof['kernels']} kernels, {prof['total_ms']:.2f} ms in one replay):\n")
        profiles.append("| kernel | calls | ms |\n| --- | ---: | ---: |")
        profiles += [f"| `{k['name'][:100]}` | {k['calls']} | {k['ms']:.3f} |"
                     for k in prof["top"][:6]]
        profiles.append("")
    env = next((v.get("environment") for v in torch_res.values() if v.get("environment")), {})
    tables = {
        "@ENV12@": ", ".join(f"{k} {v}" for k, v in env.items()),
        "@LATENCY12@": "| model | memopt fp32 | memopt tf32 | memopt fp16 | eager fp32 | "
                       "eager fp16 | compile fp16 | fp16 / compile | tf32 / eager fp32 |\n"
                       "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n" +
                       "\n".join(rows),
        "@MEMORY12@": "| model | memopt tf32 | memopt fp16 | eager fp32 | eager fp16 | "
                      "compile fp16 | tf32 below eager fp32 | fp16 below PyTorch fp16 |\n"
                      "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |\n" +
                      "\n".join(mem_rows),
        "@LAYOUT12@": "| model | tf32 NCHW | tf32 NHWC | fp16 NCHW | fp16 NHWC |\n"
                      "| --- | ---: | ---: | ---: | ---: |\n" + "\n".join(layout_rows),
        "@ERRORS12@": "| model | TF32 CUDA vs host | fp16 CUDA vs host |\n| --- | ---: | ---: |\n" +
                      "\n".join(error_rows),
        "@MICRO12@": "| convolution (batch 32) | f32 NCHW / NHWC ms | TF32 | f16 |\n"
                     "| --- | ---: | ---: | ---: |\n" + "\n".join(micro_rows),
        "@PROFILES12@": "\n".join(profiles),
    }
    with open(args.json_out, "w") as handle:
        json.dump({"environment": env, "torch": torch_res, "memopt": runs,
                   "conv_layouts": micro, "summary": summary}, handle, indent=1)
    for key, value in tables.items():
        print(f"{key}\n{value}\n")
    if args.template:
        text = open(args.template).read()
        for key, value in tables.items():
            text = text.replace(key, value)
        write_section(args.doc_out, text)
    return 0


BEGIN, END = "<!-- precision-suite", "<!-- /precision-suite -->"


def section_of(text):
    """The issue-12 section of docs/gpu-benchmark.md (between its markers), or None."""
    if BEGIN not in text or END not in text:
        return None
    return text[text.index(BEGIN):text.index(END) + len(END)]


def write_section(path, section):
    """Puts `section` into the doc at `path`: in place of the old one, else before the first
    results section (bench/gpu_bench.py's report keeps it when it rewrites the rest)."""
    text = open(path).read() if os.path.exists(path) else ""
    old = section_of(text)
    if old is not None:
        text = text.replace(old, section.strip())
    elif "\n## " in text:
        at = text.index("\n## ") + 1
        text = text[:at] + section.strip() + "\n\n" + text[at:]
    else:
        text += "\n" + section
    with open(path, "w") as handle:
        handle.write(text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def issue(p):
        p.add_argument("--issue", default="12", choices=["12", "26"],
                       help="the cases, memopt variants and PyTorch modes of issue 12's suite "
                            "or of issue 26's benchmark (see the docstring)")

    p = sub.add_parser("call1")
    issue(p)
    p.add_argument("--out", required=True)
    p.add_argument("--models", nargs="*", help="cases (default: the issue's)")
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--export-cap-s", type=float, default=300)
    p.add_argument("--export-jobs", type=int, default=5)
    p.add_argument("--warm-cap-s", type=float, default=330)
    p.add_argument("--deadline-s", type=float, default=540)
    p.add_argument("--no-torch", action="store_true", help="exports only: no PyTorch timings")
    p.add_argument("--skip-gpu-check", action="store_true")
    p.add_argument("--no-conv-micro", action="store_true")
    p.add_argument("--train-configs", nargs="*", default=[],
                   help="also export these train_bench configurations (their graphs come "
                        "back as train_graphs.tar.gz)")
    p = sub.add_parser("export-one")
    p.add_argument("model")
    p.add_argument("work")
    p = sub.add_parser("torch-one")
    p.add_argument("model")
    p.add_argument("--out", required=True)
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--modes", nargs="*", default=["eager_fp32", "eager_fp16", "compile_fp16"],
                   choices=TORCH_MODES)
    p.add_argument("--warm-only", action="store_true")
    p.add_argument("--hold", metavar="PREFIX",
                   help="compile, then wait for PREFIX.go before measuring (see HeldTorch)")
    p = sub.add_parser("prepare")
    issue(p)
    p.add_argument("--graphs")
    p.add_argument("--dest", required=True)
    p.add_argument("--build", default=os.path.join(REPO, "build"))
    p.add_argument("--src-only", action="store_true")
    p.add_argument("--only", nargs="*", help="these cases only, added to DEST's programs")
    p = sub.add_parser("call2")
    issue(p)
    p.add_argument("--out", required=True)
    p.add_argument("--work", default="/tmp/precision_bench")
    p.add_argument("--only", nargs="*")
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--deadline-s", type=float, default=560)
    p.add_argument("--profiles", type=int, default=4,
                   help="Nsight Compute profiles of the programs furthest from their target")
    p.add_argument("--profile-names", nargs="*",
                   help="profile these programs (when they miss their target) instead")
    p.add_argument("--no-host", action="store_true", help="no host runs and checks")
    p.add_argument("--host", action="store_true",
                   help="issue 26: host runs and checks too (issue 12 has them by default)")
    p.add_argument("--profile-timeout-s", type=float, default=60)
    p.add_argument("--torch", dest="torch", action="store_true", default=None,
                   help="time PyTorch in this call after memopt (issue 26's default)")
    p.add_argument("--skip-torch", dest="torch", action="store_false")
    p.add_argument("--torch-modes", nargs="*", choices=TORCH_MODES,
                   help="default: the issue's (issue 26: compile_fp16 compile_bf16)")
    p.add_argument("--compile-jobs", type=int, default=5,
                   help="PyTorch processes compiling at a time (beside the memopt builds)")
    p.add_argument("--compile-cap-s", type=float, default=300,
                   help="PyTorch processes still compiling then are stopped (their cases "
                        "unmeasured); memopt's runs start after that at the latest")
    p.add_argument("--torch-reserve-s", type=float, default=90,
                   help="memopt's runs stop this long before the deadline's last minute when "
                        "PyTorch is timed after them")
    p.add_argument("--profile-reserve-s", type=float, default=30,
                   help="seconds left for Nsight Compute profiles after PyTorch's timings")
    p = sub.add_parser("report")
    issue(p)
    p.add_argument("--raw", nargs="+",
                   default=[os.path.join(REPO, ".dev-bench", "gpu_precision", "raw")],
                   help="issue 12: one folder; issue 26: the folders of the inference call(s)")
    p.add_argument("--train-json", nargs="*", default=[],
                   help="issue 26: train_bench's device.json of each training precision")
    p.add_argument("--train-log", nargs="*", default=[], metavar="PRECISION=FILE",
                   help="issue 26: train_bench device's printed output of a precision whose "
                        "device.json did not come back (its summary table, MiB figures)")
    p.add_argument("--train-prepare-json", help="issue 26: train_bench's prepare.json")
    p.add_argument("--json-out")
    p.add_argument("--md-out", help="issue 26: the tables as Markdown (default: printed only)")
    p.add_argument("--template", help="a Markdown file with the @...12@ placeholders")
    p.add_argument("--doc-out")
    args = parser.parse_args(argv)
    args.profile = "issue" + getattr(args, "issue", "12")
    if args.command == "export-one":
        return export_one(args.model, args.work) or 0
    if args.command == "torch-one":
        return torch_one(args.model, args.runs, args.out, args.modes, args.warm_only,
                         args.hold) or 0
    if args.command == "report":
        if args.profile == "issue26":
            import gpu_bench_issue26

            import types

            return gpu_bench_issue26.report(args, types.SimpleNamespace(
                profile_cases=profile_cases, config_name=config_name,
                program_name=program_name, LAYOUT_AB26=LAYOUT_AB26))
        args.raw = args.raw[0]
        args.json_out = args.json_out or os.path.join(args.raw, "precision_gpu.json")
    return {"call1": cmd_call1, "prepare": cmd_prepare, "call2": cmd_call2,
            "report": cmd_report}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
