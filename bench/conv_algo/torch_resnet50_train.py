"""PyTorch ResNet-50 b64 AMP (fp16, GradScaler) channels-last and TF32-default eager training
steps, SGD momentum: median of 20 steps and memory beyond parameters + grads + optimizer state."""
import statistics, torch, torchvision
torch.backends.cudnn.benchmark = True
for mode in ("amp_fp16", "default_fp32"):
    torch.manual_seed(0)
    m = torchvision.models.resnet50().cuda().train().to(memory_format=torch.channels_last)
    x = torch.randn(64, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (64,), device="cuda")
    opt = torch.optim.SGD(m.parameters(), lr=1e-3, momentum=0.9)
    scaler = torch.amp.GradScaler(enabled=mode == "amp_fp16")
    def step():
        with torch.autocast("cuda", torch.float16, enabled=mode == "amp_fp16"):
            loss = torch.nn.functional.cross_entropy(m(x), y)
        scaler.scale(loss).backward(); scaler.step(opt); scaler.update(); opt.zero_grad(set_to_none=False)
    for _ in range(8): step()
    torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    times = []
    for _ in range(20):
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record(); step(); b.record(); torch.cuda.synchronize(); times.append(a.elapsed_time(b))
    peak = torch.cuda.max_memory_allocated() - base
    print(f"torch resnet50_b64 {mode} eager channels_last: median {statistics.median(times):.2f} ms, "
          f"peak beyond steady state (params+grads+momentum) {peak / 2**20:.0f} MiB")
