"""A nanoGPT-style character-level decoder: token and position embeddings, pre-LayerNorm blocks of
causal multi-head attention and a GELU MLP, a final LayerNorm and a (tied or untied) output head."""
import dataclasses
import math

import numpy as np

from lazytensor import arange, float64, int64, nn, no_grad, rand, tensor
from lazytensor.nn import functional as F


@dataclasses.dataclass
class GPTConfig:
    vocab_size: int = 96
    block_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    dropout: float = 0.0
    bias: bool = True
    tie_weights: bool = True

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise ValueError(f"GPTConfig: n_embd {self.n_embd} must be divisible by n_head {self.n_head}")


# Model sizes of the `lazytensor train` configs (batch size is the trainer's).
CONFIGS = {
    "tiny": {"n_layer": 2, "n_head": 4, "n_embd": 64, "block_size": 64, "batch_size": 16},
    "small": {"n_layer": 4, "n_head": 4, "n_embd": 128, "block_size": 128, "batch_size": 32},
}


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head = cfg.n_head
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.dropout = cfg.dropout
        self.resid_dropout = nn.Dropout(cfg.dropout)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.reshape(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.dropout,
                                           training=self.training)
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """forward(idx (B, T) int64, targets=None) -> (logits (B, T, vocab), loss or None)."""

    def __init__(self, cfg):
        super().__init__()
        self.config = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.h = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        if cfg.tie_weights:
            self.lm_head.weight = self.wte.weight
        self.register_buffer("positions", arange(cfg.block_size).realize())
        self._init_weights()

    def _init_weights(self):
        """nanoGPT's scheme: N(0, 0.02) for linear and embedding weights, zero biases, and the residual
        projections scaled by 1/sqrt(2 * n_layer)."""
        proj_std = 0.02 / math.sqrt(2 * self.config.n_layer)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, proj_std)
            elif name.endswith(".bias") and "ln_" not in name:
                nn.init.zeros_(p)
            elif name.endswith(".weight") and "ln_" not in name:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"GPT: sequence length {T} exceeds block_size {self.config.block_size}")
        x = self.drop(self.wte(idx) + self.wpe(self.positions[:T]))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1), ignore_index=-1)
        return logits, loss

    @no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, greedy=False):
        """Extend the (B, T) prompt by sampling one token at a time (reads each new token on the host)."""
        was_training = self.training
        self.eval()
        tokens = np.asarray(idx.numpy(), dtype=np.int64)
        for _ in range(max_new_tokens):
            ctx = tensor(tokens[:, -self.config.block_size:], dtype=int64)
            logits, _ = self(ctx)
            logits = logits[:, -1, :] / max(temperature, 1e-8)
            if greedy:
                nxt = logits.argmax(dim=-1).numpy()
            else:
                if top_k is not None:
                    kth = np.sort(logits.numpy(), axis=-1)[:, -min(top_k, logits.shape[-1])]
                    logits = logits.masked_fill(logits < tensor(kth[:, None]), float("-inf"))
                probs = F.softmax(logits, dim=-1).numpy().astype(np.float64)
                u = rand(probs.shape[0], dtype=float64).numpy()
                cdf = np.cumsum(probs, axis=-1)
                nxt = np.minimum((cdf < (u * cdf[:, -1])[:, None]).sum(-1), probs.shape[-1] - 1)
            tokens = np.concatenate([tokens, nxt[:, None].astype(np.int64)], axis=1)
        self.train(was_training)
        return tensor(tokens)
