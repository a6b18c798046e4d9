"""The training job behind `lazytensor train`: a char-level GPT on a text, with progress, evaluation,
a sample, the transfer summary and residency stats, and optional loss-curve PNG and checkpoint."""
import dataclasses
import sys
import time

import numpy as np

from . import autograd, checkpoint, nn, optim
from .data import CharDataset, default_corpus
from .device_api import get_device, profile, residency_stats, set_device, set_memory_budget
from .evaluation import realize
from .models.gpt import CONFIGS, GPT, GPTConfig
from .random import manual_seed


@dataclasses.dataclass
class TrainConfig:
    config: str = "tiny"
    steps: int = 300
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup: int = 20
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    seed: int = 1337
    device: str = None
    budget: str = None
    dropout: float = 0.0
    text: str = None
    log_every: int = 25
    eval_iters: int = 10
    sample_chars: int = 200
    png: str = None
    checkpoint: str = None
    resume: str = None


def train_step(model, opt, params, x, y, grad_clip):
    """One step: forward, backward, clip, AdamW update (realized). Returns the loss, still lazy/resident."""
    _, loss = model(x, y)
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(params, grad_clip)
    opt.step()
    return loss


def build(cfg, data):
    """The model (on the active device), its optimizer with decay/no-decay groups, and the schedule."""
    sizes = dict(CONFIGS[cfg.config])
    sizes.pop("batch_size")
    model = GPT(GPTConfig(vocab_size=data.vocab_size, dropout=cfg.dropout, **sizes))
    if get_device() != "cpu":
        model.to(get_device())
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    opt = optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                       {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.99))
    sched = optim.CosineWarmupLR(opt, cfg.warmup, cfg.steps, min_lr=cfg.lr * cfg.min_lr_ratio)
    return model, opt, sched


def evaluate(model, data, batch_size, block_size, iters):
    """Mean loss over `iters` seeded batches of each split (no gradients, eval mode)."""
    model.eval()
    out = {}
    with autograd.no_grad():
        for split in ("train", "val"):
            losses = [model(*data.batch(split, batch_size, block_size))[1] for _ in range(iters)]
            realize(*losses)
            out[split] = float(np.mean([loss.item() for loss in losses]))
    model.train()
    return out


def run(cfg, out=sys.stdout):
    """Train, report, and return a dict of what happened (losses, timings, stats)."""
    if cfg.config not in CONFIGS:
        raise ValueError(f"unknown config {cfg.config!r}; choose one of {sorted(CONFIGS)}")
    if cfg.device is not None:
        set_device(cfg.device)
    if cfg.budget is not None:
        set_memory_budget(cfg.budget)
    manual_seed(cfg.seed)
    if cfg.text:
        with open(cfg.text, encoding="utf-8") as f:
            text = f.read()
    else:
        text = default_corpus()
    data = CharDataset(text)
    batch_size, block = CONFIGS[cfg.config]["batch_size"], CONFIGS[cfg.config]["block_size"]
    device = get_device()
    model, opt, sched = build(cfg, data)
    start_step = 0
    if cfg.resume:
        meta = checkpoint.load(cfg.resume, model, opt)
        start_step = int(meta.get("step", 0))
        sched.last_step = start_step
        sched._apply()
    params = list(model.parameters())
    print(f"lazytensor train: config {cfg.config} ({model.num_parameters():,} parameters, "
          f"{len(data.train):,} training chars, vocab {data.vocab_size}), device {device}, "
          f"{cfg.steps} steps, batch {batch_size} x {block}", file=out)
    history = {"steps": [], "loss": []}
    step_times = []
    with profile() as prof:
        window_start, window_steps = time.perf_counter(), 0
        for step in range(start_step, cfg.steps):
            t0 = time.perf_counter()
            x, y = data.batch("train", batch_size, block)
            if device != "cpu":
                x.to(device)
                y.to(device)
            loss = train_step(model, opt, params, x, y, cfg.grad_clip)
            sched.step()
            step_times.append(time.perf_counter() - t0)
            window_steps += 1
            if step % cfg.log_every == 0 or step == cfg.steps - 1:
                value = loss.item()  # the only host read of the step, every log_every steps
                history["steps"].append(step)
                history["loss"].append(value)
                elapsed = time.perf_counter() - window_start
                ms = 1e3 * elapsed / window_steps
                print(f"step {step:5d} | loss {value:.4f} | {batch_size * block * window_steps / elapsed:9,.0f} "
                      f"tok/s | {ms:7.1f} ms/step | lr {sched.get_last_lr()[0]:.2e}", file=out, flush=True)
                window_start, window_steps = time.perf_counter(), 0
    losses = evaluate(model, data, batch_size, block, cfg.eval_iters)
    unigram = data.unigram_loss("val")
    print(f"\nfinal loss: train {losses['train']:.4f}, val {losses['val']:.4f} "
          f"(unigram baseline on val: {unigram:.4f} nats/char)", file=out)
    sample = ""
    if cfg.sample_chars:
        prompt = data.batch("val", 1, 8)[0]
        ids = model.generate(prompt, cfg.sample_chars, temperature=0.8).numpy()[0]
        sample = data.decode(ids)
        print("\nsample:\n" + sample + "\n", file=out)
    print("transfers during training (loss read every "
          f"{cfg.log_every} steps):", file=out)
    prof.summary(file=out)
    stats = residency_stats()
    print("residency stats:", {k: v for k, v in stats.items() if k != "devices"}, file=out)
    for name, d in stats["devices"].items():
        print(f"  {name}: {d}", file=out)
    if cfg.png:
        from .plot import loss_curve
        loss_curve(cfg.png, {"train loss": (history["steps"], history["loss"]),
                             "val loss": ([cfg.steps - 1], [losses["val"]])})
        print(f"loss curve written to {cfg.png}", file=out)
    if cfg.checkpoint:
        checkpoint.save(cfg.checkpoint, model, opt, meta={"step": cfg.steps, "config": cfg.config,
                                                          "vocab": "".join(data.chars)})
        print(f"checkpoint written to {cfg.checkpoint}", file=out)
    median_ms = 1e3 * float(np.median(step_times[1:] if len(step_times) > 1 else step_times)) if step_times else 0.0
    return {"history": history, "final": losses, "unigram_val": unigram, "sample": sample,
            "median_step_ms": median_ms, "transfers": prof.transfers, "profile": prof, "model": model}
