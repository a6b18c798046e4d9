"""A nanoGPT written the way PyTorch users write it, for PyTorch and lazytensor alike: `make(torch)` takes
the framework module (`torch` or `lazytensor`) and returns the model class, the optimizer factory and
the training step. Untied bias-free head, hand-written causal attention with a `tril` mask and
`masked_fill`, `split`/`view`/`transpose`, `F.cross_entropy`, `clip_grad_norm_(model.parameters(), 1.0)`,
AdamW with decay / no-decay groups. Nothing here is lazytensor-specific: that is the point.
`make(torch, flash=True)` writes the attention as nanoGPT does where PyTorch has it:
`F.scaled_dot_product_attention(q, k, v, is_causal=True)`.
"""
import math

SIZES = {"tiny": dict(n_layer=2, n_head=4, n_embd=64, block_size=64, batch_size=16),
         "small": dict(n_layer=4, n_head=4, n_embd=128, block_size=128, batch_size=32),
         "seed": dict(n_layer=6, n_head=6, n_embd=384, block_size=256, batch_size=8)}  # the seed's measured size


def make(torch, flash=False):
    nn, F = torch.nn, torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self, n_embd, n_head):
            super().__init__()
            self.n_embd, self.n_head = n_embd, n_head
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            if flash:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
                att = att.masked_fill(~mask, float("-inf"))
                att = F.softmax(att, dim=-1)
                y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class MLP(nn.Module):
        def __init__(self, n_embd):
            super().__init__()
            self.c_fc = nn.Linear(n_embd, 4 * n_embd)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * n_embd, n_embd)

        def forward(self, x):
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self, n_embd, n_head):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.attn = CausalSelfAttention(n_embd, n_head)
            self.ln_2 = nn.LayerNorm(n_embd)
            self.mlp = MLP(n_embd)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self, vocab_size, n_layer, n_head, n_embd, block_size):
            super().__init__()
            self.wte = nn.Embedding(vocab_size, n_embd)
            self.wpe = nn.Embedding(block_size, n_embd)
            self.h = nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

        def forward(self, idx, targets=None):
            b, t = idx.size()
            pos = torch.arange(0, t, dtype=torch.long)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            loss = None
            if targets is not None:
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
            return logits, loss

    def optimizer(model, lr=3e-3, weight_decay=0.1):
        decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
        no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))

    def train_step(model, opt, x, y):
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    return GPT, optimizer, train_step


def built(torch, size, vocab=65):
    """(model, optimizer, training step, batch size, block size) at `size` of SIZES, the model made now
    (seed the framework first)."""
    gpt, optimizer, step = make(torch)
    sizes = dict(SIZES[size])
    batch = sizes.pop("batch_size")
    model = gpt(vocab, **sizes)
    return model, optimizer(model), step, batch, sizes["block_size"]
