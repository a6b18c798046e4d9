"""Milliseconds per training step (forward, backward, clip, AdamW, loss read), each contender timed in a
process of its own: lazytensor eager, lazytensor compiled (the step wrapped in `lt.jit`: captured once,
then replayed) and PyTorch eager CPU, on the same weights and batches. The eager step replays its
repeated realization from the fourth step on (runtime/replay/repeats.py; the first step differs: it creates
the optimizer's state) and builds its backward pass from a recording from the third on
(lazytensor/backward_replay.py); `--contenders ... planned` adds the eager step planned and its
backward built by the rules at every step (LAZYTENSOR_REPLAY=0), and `--contenders ... inductor` PyTorch
with the model wrapped in `torch.compile` (TorchInductor's fused C++ kernels; clip and AdamW eager; the
first warm-up step compiles, which takes a minute or more: give it --warmup 3 at least).

    python bench/train_step.py [--models cli user] [--configs tiny small] [--threads 1 2]
                               [--rounds 5] [--steps 6] [--warmup 3]

Three models: `cli`, the GPT that `lazytensor train` trains (tied head; its PyTorch twin is
tests/torch_gpt.py); `user`, tests/user_gpt.py: one nanoGPT source written the way PyTorch users
write it, run unchanged on both frameworks, its attention by hand; and `nanogpt`, the same source with
its attention as nanoGPT writes it, `F.scaled_dot_product_attention(q, k, v, is_causal=True)` (PyTorch's
fused attention kernel). The lazytensor processes make no tuning call (no malloc setting):
they run as a user's script does. PyTorch is never imported into a lazytensor process nor the
reverse (both change process-wide state: thread pools, malloc). For each model, config and thread
count, the processes alternate (lazytensor, PyTorch, lazytensor, ...) for `rounds` rounds; each
process warms up, then times `steps` steps one by one and reports their median. The table gives the
median of those per-process medians, the smallest, and the spread (largest - smallest) / median; each
ratio to PyTorch is that of the medians, with the range of the per-round ratios (a round's process
against that round's PyTorch process, run the same minute: the host's slow minutes touch both).
Prints a Markdown table (paste it into bench/RESULTS.md).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from harness import thread_env  # bench/ is the script's folder, first on the path

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, "..", "tests")
CONTENDERS = ("lazytensor", "compiled", "pytorch")  # the default; "planned" and "inductor" on request
PYTORCH = ("pytorch", "inductor")


def prepare(model_kind, config, steps, path):
    """In a lazytensor process: the initial state (parameters and buffers by name), the batches, the sizes."""
    import numpy as np
    import lazytensor as lt
    from lazytensor_train.data import CharDataset, default_corpus
    from lazytensor_train.models import CONFIGS, GPT, GPTConfig
    data = CharDataset(default_corpus())
    lt.manual_seed(0)
    if model_kind == "cli":
        sizes = dict(CONFIGS[config], vocab_size=data.vocab_size)
        model = GPT(GPTConfig(**{k: v for k, v in sizes.items() if k != "batch_size"}))
    else:
        sys.path.insert(0, TESTS)
        import user_gpt
        sizes = dict(user_gpt.SIZES[config], vocab_size=data.vocab_size)
        gpt, _, _ = user_gpt.make(lt, flash=model_kind == "nanogpt")
        model = gpt(data.vocab_size, sizes["n_layer"], sizes["n_head"], sizes["n_embd"], sizes["block_size"])
    batches = [data.batch("train", sizes["batch_size"], sizes["block_size"]) for _ in range(steps)]
    arrays = {f"param/{name}": t.numpy() for name, t in model.state_dict().items()}
    arrays["x"] = np.stack([x.numpy() for x, _ in batches])
    arrays["y"] = np.stack([y.numpy() for _, y in batches])
    np.savez(path, sizes=json.dumps(sizes), **arrays)


def _lazytensor_step(model_kind, sizes, weights, compiled):
    import lazytensor as lt
    wrap = lt.jit if compiled else (lambda fn: fn)
    if model_kind == "cli":
        from lazytensor_train.models import GPT, GPTConfig
        from lazytensor_train.train import train_step
        model = GPT(GPTConfig(**{k: v for k, v in sizes.items() if k != "batch_size"}))
        model.load_state_dict(weights)
        params = list(model.parameters())
        decay = [p for p in params if p.ndim >= 2]
        no_decay = [p for p in params if p.ndim < 2]
        opt = lt.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                             lr=3e-3, betas=(0.9, 0.99))
        step = wrap(train_step)
        return lambda x, y: step(model, opt, params, lt.tensor(x), lt.tensor(y), 1.0).item()
    import user_gpt
    gpt, optimizer, step = user_gpt.make(lt, flash=model_kind == "nanogpt")
    model = gpt(sizes["vocab_size"], sizes["n_layer"], sizes["n_head"], sizes["n_embd"], sizes["block_size"])
    model.load_state_dict(weights)
    opt = optimizer(model)
    step = wrap(step)
    return lambda x, y: step(model, opt, lt.tensor(x), lt.tensor(y)).item()


def _pytorch_step(model_kind, sizes, weights, threads, inductor=False):
    """PyTorch's training step on the same weights; with `inductor`, the model runs through torch.compile."""
    import types
    import torch
    torch.set_num_threads(threads)
    tensors = {k: torch.from_numpy(v.copy()) for k, v in weights.items()}
    if model_kind == "cli":
        from torch_gpt import TorchGPT, _name_map
        eager_model = TorchGPT(types.SimpleNamespace(**sizes))
        mapping = _name_map(sizes["n_layer"])
        eager_model.load_state_dict({mapping[k]: v for k, v in tensors.items() if k in mapping})
        model = torch.compile(eager_model) if inductor else eager_model
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                lr=3e-3, betas=(0.9, 0.99))

        def step(x, y):
            loss = model(torch.from_numpy(x), torch.from_numpy(y))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            return loss.item()
        return step
    import user_gpt
    gpt, optimizer, step = user_gpt.make(torch, flash=model_kind == "nanogpt")
    eager_model = gpt(sizes["vocab_size"], sizes["n_layer"], sizes["n_head"], sizes["n_embd"], sizes["block_size"])
    eager_model.load_state_dict(tensors)
    opt = optimizer(eager_model)
    model = torch.compile(eager_model) if inductor else eager_model
    return lambda x, y: step(model, opt, torch.from_numpy(x), torch.from_numpy(y)).item()


def worker(contender, model_kind, path, warmup, threads):
    """In a fresh process: warm up on the first batches, then time each remaining step; prints seconds."""
    import numpy as np
    sys.path.insert(0, HERE)
    sys.path.insert(0, TESTS)
    data = np.load(path)
    sizes = json.loads(str(data["sizes"]))
    weights = {k[len("param/"):]: data[k] for k in data.files if k.startswith("param/")}
    if contender == "planned":
        os.environ["LAZYTENSOR_REPLAY"] = "0"
    if contender not in PYTORCH:
        step = _lazytensor_step(model_kind, sizes, weights, contender == "compiled")
    else:
        step = _pytorch_step(model_kind, sizes, weights, threads, inductor=contender == "inductor")
    xs, ys = data["x"], data["y"]
    times = []
    for i in range(len(xs)):
        t0 = time.perf_counter()
        step(xs[i], ys[i])
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    print(json.dumps(times))


def _run(args, threads):
    out = subprocess.run([sys.executable, __file__] + args, capture_output=True, text=True, env=thread_env(threads))
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _row(per_process):
    med = statistics.median(per_process)
    return med, min(per_process), (max(per_process) - min(per_process)) / med


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["cli", "user", "nanogpt"],
                    choices=["cli", "user", "nanogpt"])
    ap.add_argument("--configs", nargs="+", default=["tiny", "small"])
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--contenders", nargs="+", default=list(CONTENDERS), choices=CONTENDERS + ("planned", "inductor"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=6, help="timed steps per process")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--prepare", nargs=3, metavar=("MODEL", "CONFIG", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--worker", nargs=3, metavar=("CONTENDER", "MODEL", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.prepare:
        model_kind, config, path = args.prepare
        prepare(model_kind, config, args.warmup + args.steps, path)
        return
    if args.worker:
        contender, model_kind, path = args.worker
        worker(contender, model_kind, path, args.warmup, int(os.environ["OMP_NUM_THREADS"]))
        return
    sys.path.insert(0, HERE)
    from harness import header
    print(header("Training step, each contender in its own process (alternating), ms/step", args.threads))
    print("median of per-process medians (smallest; spread = (largest - smallest) / median), "
          f"{args.rounds} processes each, {args.steps} timed steps after {args.warmup} warm-up steps; "
          "ratios: of the medians (in brackets the smallest and largest ratio of one round's process to "
          "the PyTorch process of the same round)\n")
    names = " | ".join(f"{c} ms" for c in args.contenders)
    others = [c for c in args.contenders if c != "pytorch"] if "pytorch" in args.contenders else []
    ratio = "".join(f" | {c} / PyTorch" for c in others)
    print(f"| model | config | threads | {names}{ratio} |")
    print("|---|---|---|" + "---|" * (len(args.contenders) + len(others)))
    with tempfile.TemporaryDirectory() as tmp:
        for model_kind in args.models:
            for config in args.configs:
                path = os.path.join(tmp, f"{model_kind}-{config}.npz")
                subprocess.run([sys.executable, __file__, "--prepare", model_kind, config, path,
                                "--steps", str(args.steps), "--warmup", str(args.warmup)], check=True)
                for threads in args.threads:
                    medians = {c: [] for c in args.contenders}
                    for _ in range(args.rounds):
                        for c in args.contenders:
                            times = _run(["--worker", c, model_kind, path, "--warmup", str(args.warmup)], threads)
                            medians[c].append(statistics.median(times) * 1e3)
                    cells = []
                    for c in args.contenders:
                        med, low, spread = _row(medians[c])
                        cells.append(f"{med:.1f} ({low:.1f}; {spread:.0%})")
                    line = f"| {model_kind} | {config} | {threads} | " + " | ".join(cells)
                    theirs = statistics.median(medians["pytorch"]) if others else None
                    for c in others:
                        paired = [ours / pt for ours, pt in zip(medians[c], medians["pytorch"])]
                        line += (f" | {statistics.median(medians[c]) / theirs:.2f}x "
                                 f"({min(paired):.2f}-{max(paired):.2f})")
                    print(line + " |", flush=True)


if __name__ == "__main__":
    main()
