"""Model builders shared by export_torchscript.py and export_dynamo.py.

The two text models are written from torch.nn primitives (no `transformers`), so the TorchScript
exporter of the distro's PyTorch 1.13 can export them. They are small configurations (2 layers,
hidden 256, 4 heads, vocabulary 8192, 128 tokens) of the real architectures:

* GPT-2 decoder: token + position embeddings (Gather), pre-LayerNorm blocks with multi-head
  causal self-attention (MatMul, scale, causal mask through Where, Softmax, MatMul), GELU MLP,
  residual Adds, final LayerNorm and an LM head tied to the token embedding.
* BERT encoder: token + position + token-type embeddings, embedding LayerNorm, post-LayerNorm
  blocks (bidirectional attention, GELU MLP), and the tanh pooler over the first token.

Vision models come from torchvision with weights=None (random initialisation).
"""

import math

import torch
from torch import nn

VOCAB = 8192
HIDDEN = 256
HEADS = 4
LAYERS = 2
SEQ = 128
VISION_MODELS = ["resnet50", "mobilenet_v3_large", "efficientnet_b0", "vit_b_16", "swin_t",
                 "convnext_tiny"]
TEXT_MODELS = ["gpt2_nn", "bert_nn"]


class SelfAttention(nn.Module):
    def __init__(self, hidden, heads, causal):
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.causal = causal

    def forward(self, x):
        batch, seq, hidden = x.shape
        q, k, v = self.qkv(x).split(hidden, dim=2)
        q = q.reshape(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        k = k.reshape(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        v = v.reshape(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        if self.causal:
            positions = torch.arange(seq, device=x.device)
            future = positions.unsqueeze(0) > positions.unsqueeze(1)
            scores = scores.masked_fill(future, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        context = torch.matmul(weights, v).transpose(1, 2).reshape(batch, seq, hidden)
        return self.proj(context)


class MLP(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.up = nn.Linear(hidden, 4 * hidden)
        self.act = nn.GELU()
        self.down = nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        return self.down(self.act(self.up(x)))


class GPT2Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(hidden)
        self.attn = SelfAttention(hidden, heads, causal=True)
        self.ln2 = nn.LayerNorm(hidden)
        self.mlp = MLP(hidden)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT2(nn.Module):
    def __init__(self, vocab=VOCAB, hidden=HIDDEN, heads=HEADS, layers=LAYERS, max_seq=SEQ):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(max_seq, hidden)
        self.blocks = nn.ModuleList([GPT2Block(hidden, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(hidden)

    def forward(self, input_ids):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        x = self.wte(input_ids) + self.wpe(positions)
        for block in self.blocks:
            x = block(x)
        return torch.matmul(self.ln_f(x), self.wte.weight.t())


class BertLayer(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.attn = SelfAttention(hidden, heads, causal=False)
        self.ln1 = nn.LayerNorm(hidden, eps=1e-12)
        self.mlp = MLP(hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x):
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.mlp(x))


class Bert(nn.Module):
    def __init__(self, vocab=VOCAB, hidden=HIDDEN, heads=HEADS, layers=LAYERS, max_seq=SEQ):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(max_seq, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.ln = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList([BertLayer(hidden, heads) for _ in range(layers)])
        self.pooler = nn.Linear(hidden, hidden)

    def forward(self, input_ids):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        token_types = torch.zeros_like(input_ids)
        x = self.word(input_ids) + self.position(positions) + self.token_type(token_types)
        x = self.ln(x)
        for layer in self.layers:
            x = layer(x)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return x, pooled


def build(name):
    """Returns (module in eval mode, example inputs tuple, input names, output names)."""
    torch.manual_seed(0)
    if name in VISION_MODELS:
        import torchvision

        model = getattr(torchvision.models, name)(weights=None)
        return model.eval(), (torch.randn(1, 3, 224, 224),), ["input"], ["output"]
    ids = torch.randint(0, VOCAB, (1, SEQ), dtype=torch.int64)
    if name == "gpt2_nn":
        return GPT2().eval(), (ids,), ["input_ids"], ["logits"]
    if name == "bert_nn":
        return Bert().eval(), (ids,), ["input_ids"], ["last_hidden_state", "pooled"]
    raise KeyError(name)
