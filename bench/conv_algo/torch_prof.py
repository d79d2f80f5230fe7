"""Which cuDNN kernels PyTorch runs for ResNet-50 fp16 channels-last (inference b32, training b64)."""
import torch, torchvision
from torch.profiler import profile, ProfilerActivity
torch.backends.cudnn.benchmark = True
def top(prof, n=14):
    rows = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            r = rows.setdefault(e.name[:110], [0, 0.0]); r[0] += 1; r[1] += e.device_time_total / 1000
    for name, (c, ms) in sorted(rows.items(), key=lambda kv: -kv[1][1])[:n]:
        print(f"  {c:4d} {ms:8.3f} ms  {name}")
m = torchvision.models.resnet50().cuda().eval().to(memory_format=torch.channels_last)
x = torch.randn(32, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
with torch.inference_mode(), torch.autocast("cuda", torch.float16):
    for _ in range(5): m(x)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        m(x); torch.cuda.synchronize()
print("torch resnet50 b32 fp16 cl inference, one call:"); top(prof)
m.train()
x = torch.randn(64, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
y = torch.randint(0, 1000, (64,), device="cuda")
opt = torch.optim.SGD(m.parameters(), lr=1e-3, momentum=0.9)
scaler = torch.amp.GradScaler()
def step():
    with torch.autocast("cuda", torch.float16):
        loss = torch.nn.functional.cross_entropy(m(x), y)
    scaler.scale(loss).backward(); scaler.step(opt); scaler.update(); opt.zero_grad(set_to_none=True)
for _ in range(5): step()
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    step(); torch.cuda.synchronize()
print("torch resnet50 b64 AMP cl training, one step:"); top(prof, 20)
