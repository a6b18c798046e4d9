"""Small work against PyTorch eager: what a realization costs when its kernels cost little, each program
written once for both frameworks the way their users write it, each contender in a process of its own
(alternating, lazytensor then PyTorch, for --rounds rounds), one thread unless --threads says otherwise.

    python bench/host_work.py [--programs four_op chain20 mlp_step generate generate_growing]
                              [--rounds 3] [--threads 1]

Programs (float32; the lazytensor processes make no tuning call):
- four_op: `float((a * b + c).tanh().sum())` on 64x64 inputs: four ops realized and read (us per read).
- chain20: twenty elementwise ops on a 64x64 value (`y = y * 0.999 + 0.001` ten times), then
  `float(y.sum())` (us per read).
- mlp_step: a regression MLP's training step as a newcomer writes it: 1-256-256-1 with Tanh and ReLU,
  `F.mse_loss`, `backward`, `clip_grad_norm_(model.parameters(), 1.0)`, AdamW, `loss.item()`, batch 128
  (ms per step).
- generate: token-by-token sampling from tests/user_gpt.py's nanoGPT at its tiny size (2 layers, 4
  heads, 64 wide, block 64) in eval mode under `no_grad`, the context already full: `model(idx[:,
  -block:])`, softmax of the last logits, `multinomial`, `cat`; 64 tokens, then `idx.tolist()`
  (tokens per second).
- generate_growing: the same from a one-token context, 63 tokens (each step one position longer).

Each process runs its program's warm-up, then times `--repeats` runs one by one and reports their median;
the table gives the median over processes with its range, and the ratio lazytensor / PyTorch of the medians
(for tokens/s: PyTorch / lazytensor, so below 1 means slower than PyTorch everywhere).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, "..", "tests")
PROGRAMS = ("four_op", "chain20", "mlp_step", "generate", "generate_growing")
UNITS = {"four_op": "us/read", "chain20": "us/read", "mlp_step": "ms/step", "generate": "tokens/s",
         "generate_growing": "tokens/s"}


def _four_op(fw):
    fw.manual_seed(0)
    a, b, c = fw.randn(64, 64), fw.randn(64, 64), fw.randn(64, 64)
    return lambda: float((a * b + c).tanh().sum()), 1e6, 2000


def _chain20(fw):
    fw.manual_seed(0)
    x = fw.randn(64, 64)

    def run():
        y = x
        for _ in range(10):
            y = y * 0.999 + 0.001
        return float(y.sum())
    return run, 1e6, 1000


def _mlp_step(fw):
    nn, F = fw.nn, fw.nn.functional
    fw.manual_seed(0)
    model = nn.Sequential(nn.Linear(1, 256), nn.Tanh(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1))
    opt = fw.optim.AdamW(model.parameters(), lr=1e-3)
    x = fw.linspace(-3, 3, 128).reshape(128, 1)
    y = fw.sin(x)

    def step():
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()
    return step, 1e3, 200


def _generator(fw, full):
    sys.path.insert(0, TESTS)
    import user_gpt
    F = fw.nn.functional
    fw.manual_seed(0)
    gpt, _, _ = user_gpt.make(fw)
    sizes = dict(user_gpt.SIZES["tiny"])
    sizes.pop("batch_size")
    block = sizes["block_size"]
    model = gpt(65, **sizes)
    model.eval()
    start = fw.randint(0, 65, (1, block if full else 1))
    tokens = 64 if full else block - 1

    def generate():
        idx = start
        with fw.no_grad():
            for _ in range(tokens):
                logits, _ = model(idx[:, -block:])
                probs = F.softmax(logits[:, -1, :], dim=-1)
                nxt = fw.multinomial(probs, num_samples=1)
                idx = fw.cat((idx, nxt), dim=1)
        idx.tolist()
    return generate, tokens, 3


def worker(framework, program, repeats):
    if framework == "pytorch":
        import torch as fw
        fw.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    else:
        import lazytensor as fw
    if program.startswith("generate"):
        run, tokens, warm = _generator(fw, program == "generate")
    else:
        run, scale, warm = {"four_op": _four_op, "chain20": _chain20, "mlp_step": _mlp_step}[program](fw)
    for _ in range(warm):
        run()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    t = statistics.median(times)
    print(json.dumps(tokens / t if program.startswith("generate") else t * scale))


def _run(framework, program, repeats, threads):
    sys.path.insert(0, HERE)
    from harness import thread_env
    out = subprocess.run([sys.executable, __file__, "--worker", framework, program, "--repeats", str(repeats)],
                         capture_output=True, text=True, env=thread_env(threads))
    if out.returncode != 0:
        raise RuntimeError(f"{framework} {program} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", nargs="+", default=list(PROGRAMS), choices=PROGRAMS)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=None, help="timed runs per process (default per program)")
    ap.add_argument("--worker", nargs=2, metavar=("FRAMEWORK", "PROGRAM"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    defaults = {"four_op": 2000, "chain20": 1000, "mlp_step": 200, "generate": 5, "generate_growing": 5}
    if args.worker:
        worker(*args.worker, args.repeats or defaults[args.worker[1]])
        return
    sys.path.insert(0, HERE)
    from harness import header
    print(header("Small work against PyTorch eager, each contender in its own process (alternating)",
                 [args.threads]))
    print(f"median over {args.rounds} processes (range); each process: the median of its timed runs\n")
    print("| program | unit | lazytensor | PyTorch | lazytensor / PyTorch (time) |")
    print("|---|---|---|---|---|")
    for program in args.programs:
        runs = {"lazytensor": [], "pytorch": []}
        for _ in range(args.rounds):
            for framework in runs:
                runs[framework].append(_run(framework, program, args.repeats or defaults[program], args.threads))
        med = {f: statistics.median(v) for f, v in runs.items()}
        ratio = med["pytorch"] / med["lazytensor"] if program.startswith("generate") else \
            med["lazytensor"] / med["pytorch"]
        cells = [f"{med[f]:.1f} ({min(runs[f]):.1f}-{max(runs[f]):.1f})" for f in runs]
        print(f"| {program} | {UNITS[program]} | " + " | ".join(cells) + f" | {ratio:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
