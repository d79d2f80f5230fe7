"""The PyTorch side's configuration search, without torch: a trial is a dict, the runner that
measures it is passed in (the device's torch runner, or a fake one in the tests).

What a user reaches by hand (issue 27): AMP autocast, a fused optimizer, gradient accumulation
to the global batch, per-block torch.utils.checkpoint on or off, torch.compile with and without
`activation_memory_budget`, and the largest micro-batch dividing the global batch that runs --
found the way accelerate's `find_executable_batch_size` finds it (large to small, an OOM ->
the next), but cheaply: eager first to find the largest micro-batch with and without
checkpointing, then torch.compile only at those sizes. Budgets are searched smallest first; a
trial that ran under a smaller budget runs under a larger one (the allocator's limit only
grows): its measurement is reused (`measured_under`), not repeated.
"""


def divisors_desc(n):
    return [d for d in range(n, 0, -1) if n % d == 0]


def trial_key(trial):
    """A short name: m16x2.eager.ckpt, m8x4.compile.amb0.5."""
    text = f"m{trial['micro_batch']}x{trial['accumulate']}.{trial['mode']}"
    if trial.get("checkpoint"):
        text += ".ckpt"
    if trial.get("activation_memory_budget") is not None:
        text += f".amb{trial['activation_memory_budget']:g}"
    return text


def make_trial(global_batch, micro_batch, mode="eager", checkpoint=False, budget=None):
    return {"micro_batch": micro_batch, "accumulate": global_batch // micro_batch, "mode": mode,
            "checkpoint": checkpoint, "activation_memory_budget": budget}


def largest_running(run, global_batch, checkpoint, record, above=None):
    """Walks the divisors from the global batch down; returns the first micro-batch whose eager
    trial ran (None when none did). With `above`, only micro-batches above it are tried."""
    for m in divisors_desc(global_batch):
        if above is not None and m <= above:
            return None
        result = record(make_trial(global_batch, m, "eager", checkpoint), run)
        if result.get("status") == "ran":
            return m
        if result.get("status") == "deadline":
            return None
    return None


def search(run, global_batch, budgets, compile_budgets=(None, 0.5), out_of_time=lambda: False):
    """run(trial, budget_bytes) -> {"status": "ran"|"oom"|"error"|"deadline", "samples_per_s",
    "peak_bytes", ...}. Returns {budget: {"tried": {key: result}, "best": key or None}}: every
    trial tried under each budget and the fastest that ran."""
    results = {b: {"tried": {}, "best": None} for b in budgets}
    found = {}  # budget -> {"off": m, "on": m}

    ran_under = {}  # trial key -> (budget, result): a trial that ran runs under larger budgets

    def recorder(budget):
        def record(trial, runner):
            key = trial_key(trial)
            if key in ran_under:
                result = dict(ran_under[key][1], measured_under=ran_under[key][0])
            elif out_of_time():
                result = {"status": "deadline"}
            else:
                result = dict(runner(trial, budget))
                if result.get("status") == "ran":
                    ran_under[key] = (budget, result)
            result["trial"] = trial
            results[budget]["tried"][key] = result
            return result
        return record

    for budget in sorted(budgets):  # eager: the largest micro-batch, checkpointing off and on
        record = recorder(budget)
        off = largest_running(run, global_batch, False, record)
        # Checkpointing only helps above what runs without it (it adds a forward).
        on = None
        if off != global_batch:
            on = largest_running(run, global_batch, True, record, above=off)
        found[budget] = {"off": off, "on": on}
    # torch.compile grouped by activation_memory_budget (one compiled function serves every
    # budget at the same micro-batch): without it at the largest eager micro-batch, with it at
    # the largest checkpointed one (its own recomputation may make that fit) or the eager one.
    for amb in compile_budgets:
        for budget in sorted(budgets):
            sizes = found[budget]
            m = sizes["off"] if amb is None else (sizes["on"] or sizes["off"])
            if m is None:
                continue
            recorder(budget)(make_trial(global_batch, m, "compile", False, amb), run)
    for budget in budgets:
        ran = {k: r for k, r in results[budget]["tried"].items() if r.get("status") == "ran"}
        if ran:
            results[budget]["best"] = max(ran, key=lambda k: ran[k].get("samples_per_s", 0))
    return results
