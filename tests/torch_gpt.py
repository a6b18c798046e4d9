"""A PyTorch twin of lazytensor_train.models.GPT and a helper that copies weights into it (test-only code)."""
import math

import numpy as np
import torch
import torch.nn as tnn
import torch.nn.functional as TF


class TorchBlock(tnn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1, self.ln_2 = tnn.LayerNorm(C), tnn.LayerNorm(C)
        self.c_attn, self.attn_proj = tnn.Linear(C, 3 * C), tnn.Linear(C, C)
        self.c_fc, self.mlp_proj = tnn.Linear(C, 4 * C), tnn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.H))
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.attn_proj(y)
        return x + self.mlp_proj(TF.gelu(self.c_fc(self.ln_2(x))))


class TorchGPT(tnn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.wte = tnn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = tnn.Embedding(cfg.block_size, cfg.n_embd)
        self.h = tnn.ModuleList([TorchBlock(cfg.n_embd, cfg.n_head) for _ in range(cfg.n_layer)])
        self.ln_f = tnn.LayerNorm(cfg.n_embd)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.T  # tied head
        return TF.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1), ignore_index=-1)


# our parameter name -> the twin's
def _name_map(n_layer):
    m = {"wte.weight": "wte.weight", "wpe.weight": "wpe.weight", "ln_f.weight": "ln_f.weight",
         "ln_f.bias": "ln_f.bias"}
    for i in range(n_layer):
        for ours, theirs in (("ln_1", "ln_1"), ("ln_2", "ln_2"), ("attn.c_attn", "c_attn"),
                             ("attn.c_proj", "attn_proj"), ("mlp.c_fc", "c_fc"), ("mlp.c_proj", "mlp_proj")):
            for kind in ("weight", "bias"):
                m[f"h.{i}.{ours}.{kind}"] = f"h.{i}.{theirs}.{kind}"
    return m


def twin_of(model):
    """A TorchGPT holding exactly `model`'s weights; returns (twin, {our name: twin parameter})."""
    twin = TorchGPT(model.config)
    theirs = dict(twin.named_parameters())
    mapping = _name_map(model.config.n_layer)
    pairs = {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            t = theirs[mapping[name]]
            t.copy_(torch.from_numpy(np.array(p.numpy())))
            pairs[name] = t
    return twin, pairs
