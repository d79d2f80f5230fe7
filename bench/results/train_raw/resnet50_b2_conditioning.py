# Run in /tmp/tb after: resnet50_b2_64px.sgd.host --random-weights 1 --input input=rx.npy --input labels=ry.npy --steps 1 --save-state st_r
# (rx/ry from train_bench.make_batch("resnet50", 2, 64, 1000)); torch 2.11 CPU. Output: resnet50_b2_conditioning.json
# Conditioning of ResNet-50 b2@64px gradients: PyTorch f32 vs f64 on memopt's weights.
import numpy as np, torch, torchvision, glob, os, json
torch.manual_seed(0)
lr = 0.001
def load(dtype):
    m = torchvision.models.resnet50(weights=None).train().to(dtype)
    sd = m.state_dict()
    for k in list(sd):
        f = f"st_r/{k}.npy"
        if k.endswith(("weight", "bias")) and os.path.exists(f):
            p = np.load(f).astype(np.float64) + lr * np.load(f"st_r/{k}.momentum_buffer.npy").astype(np.float64)
            sd[k] = torch.from_numpy(p).to(dtype)
    m.load_state_dict(sd)
    return m
x = torch.from_numpy(np.load("rx.npy")); y = torch.from_numpy(np.load("ry.npy"))
grads, losses = {}, {}
for dt in (torch.float32, torch.float64):
    m = load(dt); loss = torch.nn.functional.cross_entropy(m(x.to(dt)), y); loss.backward()
    losses[str(dt)] = float(loss)
    grads[dt] = {n: p.grad.double().numpy() for n, p in m.named_parameters()}
host = {n: np.load(f"st_r/{n}.momentum_buffer.npy").astype(np.float64) for n in grads[torch.float64]}
def rel(a, b):
    num = sum(float(np.sum((a[k]-b[k])**2)) for k in b); den = sum(float(np.sum(b[k]**2)) for k in b)
    worst = max(b, key=lambda k: np.linalg.norm(a[k]-b[k]) / max(np.linalg.norm(b[k]), 1e-30))
    return (num/den)**0.5, worst, float(np.linalg.norm(a[worst]-b[worst]) / np.linalg.norm(b[worst]))
r = {"losses": losses,
     "torch_f32_vs_f64": rel(grads[torch.float32], grads[torch.float64]),
     "memopt_host_vs_torch_f64": rel(host, grads[torch.float64]),
     "torch_f32_bn_bias_layer4.1.bn2": float(np.linalg.norm(grads[torch.float32]['layer4.1.bn2.bias']-grads[torch.float64]['layer4.1.bn2.bias'])/np.linalg.norm(grads[torch.float64]['layer4.1.bn2.bias']))}
print(json.dumps(r, indent=1))
