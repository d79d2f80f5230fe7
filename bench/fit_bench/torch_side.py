"""The PyTorch side on the GPU: one trial = one configuration measured under a memory limit
(`torch.cuda.set_per_process_memory_fraction(budget / total)`), in one process per model (the
module, its optimizer state and the batch are built once; each trial resets the gradients, the
allocator's cache and its peak).

A step is the global batch: `accumulate` micro-batches of `micro_batch` samples, each
backpropagating loss / accumulate under autocast (bf16), then one optimizer step (fused AdamW or
SGD with momentum) -- PyTorch's gradient-accumulation recipe."""

import gc
import json
import os
import statistics
import time

from train_bench.configs import build_module, make_batch


class Toggle:
    """Per-block torch.utils.checkpoint that a trial switches on or off (non-reentrant, as
    train_bench's `checkpoint` mode)."""

    enabled = False


def wrap_blocks(module, model, toggle):
    import torch
    from torch.utils.checkpoint import checkpoint

    class Checkpointed(torch.nn.Module):
        def __init__(self, block):
            super().__init__()
            self.block = block

        def forward(self, *args, **kwargs):
            if toggle.enabled and torch.is_grad_enabled():
                return checkpoint(self.block, *args, use_reentrant=False, **kwargs)
            return self.block(*args, **kwargs)


    if model == "resnet50":
        containers = [module.layer1, module.layer2, module.layer3, module.layer4]
    elif model.startswith("gpt2"):
        containers = [module.inner.transformer.h]
    else:
        containers = [module.inner.model.layers]
    count = 0
    for container in containers:
        for i in range(len(container)):
            wrapper = Checkpointed(container[i])
            # What a model's layer loop may read from a block (no __getattr__ override:
            # torch.compile traces through these wrappers).
            for name in ("attention_type", "layer_idx", "is_sliding"):
                if hasattr(container[i], name) and not hasattr(wrapper, name):
                    setattr(wrapper, name, getattr(container[i], name))
            container[i] = wrapper
            count += 1
    return count


def is_oom(error):
    import torch

    return isinstance(error, torch.OutOfMemoryError) or "out of memory" in str(error).lower()


class Runner:
    """runner(trial, budget_bytes) for search.search: builds the model once."""

    def __init__(self, model, global_batch, size, classes, optimizer, precision="bf16",
                 runs=3, offload=None, offload_gradients=False, param_dtype=None, module=None):
        """offload="torchao": torchao's CPUOffloadOptimizer around AdamW (its update on the
        CPU); offload_gradients frees each gradient on the GPU once copied (torchao: not with
        accumulation, so such trials are refused); param_dtype="bf16" keeps the parameters (and
        so the CPU copies and AdamW state) in bf16. module: reuse one built earlier."""
        import torch

        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        torch._dynamo.config.cache_size_limit = 64
        self.torch = torch
        self.model, self.global_batch, self.runs = model, global_batch, runs
        self.low = {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
        self.total = torch.cuda.get_device_properties(0).total_memory
        self.channels_last = model == "resnet50"
        if module is None:
            self.toggle = Toggle()
            module = build_module(model, size, classes).cuda().train()
            if self.channels_last:
                module = module.to(memory_format=torch.channels_last)
            self.blocks = wrap_blocks(module, model, self.toggle)
        else:
            self.toggle, self.blocks = module.fit_bench_toggle, module.fit_bench_blocks
        module.fit_bench_toggle, module.fit_bench_blocks = self.toggle, self.blocks
        if param_dtype == "bf16":
            module = module.to(torch.bfloat16)
        self.module = module
        self.offload_gradients = offload_gradients
        x, y = make_batch(model, global_batch, size, classes)
        self.x = torch.from_numpy(x).cuda()
        if self.channels_last:
            self.x = self.x.contiguous(memory_format=torch.channels_last)
        self.y = torch.from_numpy(y).cuda()
        self.offload = offload
        if offload == "torchao":
            from torchao.optim import CPUOffloadOptimizer

            self.opt = CPUOffloadOptimizer(module.parameters(), torch.optim.AdamW,
                                           offload_gradients=offload_gradients, fused=True,
                                           lr=1e-4, weight_decay=0.01)
            self.optimizer_name = (f"torchao CPUOffloadOptimizer(AdamW, offload_gradients="
                                   f"{offload_gradients}), {param_dtype or 'f32'} parameters")
        else:
            kind = torch.optim.AdamW if optimizer == "adamw" else torch.optim.SGD
            options = (dict(lr=1e-4, weight_decay=0.01) if optimizer == "adamw" else
                       dict(lr=1e-3, momentum=0.9))
            try:  # fused: one multi-tensor kernel, as users run them at their best
                self.opt = kind(module.parameters(), fused=True, **options)
                fused = "fused=True"
            except Exception:  # noqa: BLE001 - this torch has no fused variant for it
                self.opt = kind(module.parameters(), **options)
                fused = "foreach"
            self.optimizer_name = f"{kind.__name__}({options}, {fused})"
        self.compiled = {}  # activation_memory_budget -> compiled loss
        self.compiled_budget = "none"

    def loss_fn(self, trial):
        import torch.nn.functional as F

        torch = self.torch
        module, low = self.module, self.low

        def plain_loss(x, y):
            with torch.autocast("cuda", dtype=low):
                logits = module(x)
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                                   y.reshape(-1))

        if trial["mode"] != "compile":
            return plain_loss
        amb = trial.get("activation_memory_budget")
        if amb != self.compiled_budget:  # the partitioner reads it when it compiles
            import torch._functorch.config as functorch_config

            torch._dynamo.reset()
            functorch_config.activation_memory_budget = 1.0 if amb is None else amb
            # torch.compile's default dynamic=None, as a user calls it: the first micro-batch
            # compiles static, a second size recompiles once with a dynamic batch.
            self.compiled = torch.compile(plain_loss)
            self.compiled_budget = amb
        return self.compiled

    def step(self, loss_fn, m, k):
        total = None
        for i in range(k):
            loss = loss_fn(self.x[i * m:(i + 1) * m], self.y[i * m:(i + 1) * m]) / k
            loss.backward()
            total = loss.detach() if total is None else total + loss.detach()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return total

    def __call__(self, trial, budget_bytes):
        torch = self.torch
        self.opt.zero_grad(set_to_none=True)
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.set_per_process_memory_fraction(min(1.0, budget_bytes / self.total))
        torch.cuda.reset_peak_memory_stats()
        self.toggle.enabled = bool(trial.get("checkpoint"))
        m, k = trial["micro_batch"], trial["accumulate"]
        if self.offload_gradients and k > 1:
            return {"status": "error", "error": "torchao's offload_gradients is not compatible "
                    "with gradient accumulation"}
        result = {}
        begin = time.time()
        try:
            loss_fn = self.loss_fn(trial)
            warm = 2 if trial["mode"] == "compile" else 1
            for _ in range(warm):
                first = float(self.step(loss_fn, m, k))
            torch.cuda.synchronize()
            result["warm_s"] = round(time.time() - begin, 1)
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            times = []
            for _ in range(self.runs):
                start.record()
                loss = self.step(loss_fn, m, k)
                stop.record()
                stop.synchronize()
                times.append(start.elapsed_time(stop))
            median = statistics.median(times)
            result.update(status="ran", median_ms=median, times_ms=times,
                          samples_per_s=self.global_batch / (median / 1000),
                          peak_bytes=torch.cuda.max_memory_allocated(),
                          peak_reserved_bytes=torch.cuda.max_memory_reserved(),
                          first_loss=first, last_loss=float(loss))
        except Exception as error:  # noqa: BLE001 - every failure is a recorded result
            result.update(status="oom" if is_oom(error) else "error",
                          error=f"{type(error).__name__}: {str(error)[:600]}",
                          peak_bytes=torch.cuda.max_memory_allocated())
        result["seconds"] = round(time.time() - begin, 1)
        self.opt.zero_grad(set_to_none=True)
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.set_per_process_memory_fraction(1.0)
        return result


    def release(self):
        """Drops the optimizer (its state) and the compiled loss; the module stays."""
        self.opt = self.compiled = None
        gc.collect()
        self.torch.cuda.empty_cache()


def save(path, data):
    """Written whole, then renamed: a child stopped at the deadline leaves the last complete
    file."""
    with open(path + ".tmp", "w") as handle:
        json.dump(data, handle, indent=1)
    os.replace(path + ".tmp", path)
