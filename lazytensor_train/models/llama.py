"""A Llama-style decoder written the way PyTorch users write it, for PyTorch and lazytensor alike:
`make(torch)` takes the framework module and returns the model class, the optimizer and schedule
factory, the training step and a sampler. `lazytensor train --model llama` trains `make(lazytensor)`'s
model; tests/test_llama_vs_torch.py trains both side by side. RMSNorm, rotary position embeddings (sin/cos tables, the
rotated halves joined with `cat`), a SwiGLU MLP (`silu`), no biases, tied embeddings, AdamW with a
cosine schedule; sampling with temperature, `topk` and `multinomial`. Nothing here is
lazytensor-specific."""
import math


def make(torch):
    nn, F = torch.nn, torch.nn.functional

    def rotary_tables(head_dim, block_size, base=10000.0):
        inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        angles = torch.outer(torch.arange(block_size, dtype=torch.float32), inv)
        return torch.cos(angles), torch.sin(angles)

    def rotate(x, cos, sin):
        half = x.size(-1) // 2
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)

    class Attention(nn.Module):
        def __init__(self, dim, n_head):
            super().__init__()
            self.n_head = n_head
            self.wq = nn.Linear(dim, dim, bias=False)
            self.wk = nn.Linear(dim, dim, bias=False)
            self.wv = nn.Linear(dim, dim, bias=False)
            self.wo = nn.Linear(dim, dim, bias=False)

        def forward(self, x, cos, sin):
            B, T, C = x.shape
            hd = C // self.n_head
            q = self.wq(x).view(B, T, self.n_head, hd).transpose(1, 2)
            k = self.wk(x).view(B, T, self.n_head, hd).transpose(1, 2)
            v = self.wv(x).view(B, T, self.n_head, hd).transpose(1, 2)
            q, k = rotate(q, cos[:T], sin[:T]), rotate(k, cos[:T], sin[:T])
            att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
            mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
            att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
            return self.wo((att @ v).transpose(1, 2).contiguous().view(B, T, C))

    class SwiGLU(nn.Module):
        def __init__(self, dim, hidden):
            super().__init__()
            self.w1 = nn.Linear(dim, hidden, bias=False)
            self.w2 = nn.Linear(hidden, dim, bias=False)
            self.w3 = nn.Linear(dim, hidden, bias=False)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class Block(nn.Module):
        def __init__(self, dim, n_head):
            super().__init__()
            self.attention_norm = nn.RMSNorm(dim, eps=1e-5)
            self.attention = Attention(dim, n_head)
            self.ffn_norm = nn.RMSNorm(dim, eps=1e-5)
            self.feed_forward = SwiGLU(dim, 4 * dim)

        def forward(self, x, cos, sin):
            x = x + self.attention(self.attention_norm(x), cos, sin)
            return x + self.feed_forward(self.ffn_norm(x))

    class Llama(nn.Module):
        def __init__(self, vocab_size, n_layer, n_head, dim, block_size):
            super().__init__()
            self.block_size = block_size
            self.tok_embeddings = nn.Embedding(vocab_size, dim)
            self.layers = nn.ModuleList([Block(dim, n_head) for _ in range(n_layer)])
            self.norm = nn.RMSNorm(dim, eps=1e-5)
            cos, sin = rotary_tables(dim // n_head, block_size)
            self.register_buffer("cos", cos)
            self.register_buffer("sin", sin)

        def forward(self, idx, targets=None):
            x = self.tok_embeddings(idx)
            for layer in self.layers:
                x = layer(x, self.cos, self.sin)
            logits = F.linear(self.norm(x), self.tok_embeddings.weight)  # tied: the embedding is the head
            if targets is None:
                return logits, None
            return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    def optimizer(model, steps, lr=3e-3):
        decay = [p for p in model.parameters() if p.dim() >= 2]
        other = [p for p in model.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                                lr=lr, betas=(0.9, 0.95))
        return opt, torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps, eta_min=lr / 10)

    def train_step(model, opt, x, y):
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    def sample(model, idx, new_tokens, temperature=0.8, top_k=5):
        with torch.no_grad():
            for _ in range(new_tokens):
                logits, _ = model(idx if idx.size(1) <= model.block_size else idx[:, -model.block_size:])
                logits = logits[:, -1, :] / temperature
                if top_k is not None:
                    v, _ = torch.topk(logits, top_k)
                    logits = logits.masked_fill(logits < v[:, [-1]], float("-inf"))
                nxt = torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)
                idx = torch.cat((idx, nxt), dim=1)
        return idx

    return Llama, optimizer, train_step, sample
