"""conv2d forward + backward at a small CNN's sizes (pytorch/examples' MNIST net: conv 1->32 and 32->64,
3x3, on 28x28 images, batch 64), lazytensor against PyTorch CPU: each contender in a process of its
own, processes alternated, medians per process, the ratio per round and its range.

    python bench/conv2d_step.py [--rounds 5] [--threads 1 2] [--steps 10] [--warmup 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import header, thread_env, timed  # noqa: E402

LAYERS = {"conv1 1->32 on 28x28": ((64, 1, 28, 28), (32, 1, 3, 3)),
          "conv2 32->64 on 26x26": ((64, 32, 26, 26), (64, 32, 3, 3))}


def worker(contender, layer, warmup, steps, threads):
    xs, ws = LAYERS[layer]
    rs = np.random.default_rng(0)
    x, w, b = (rs.standard_normal(s).astype(np.float32) for s in (xs, ws, ws[:1]))
    g = rs.standard_normal((xs[0], ws[0], xs[2] - 2, xs[3] - 2)).astype(np.float32)
    if contender == "pytorch":
        import torch
        torch.set_num_threads(threads)
        tx, tw, tb, tg = (torch.tensor(a, requires_grad=a is not g) for a in (x, w, b, g))

        def step():
            out = torch.nn.functional.conv2d(tx, tw, tb)
            out.backward(tg)
            tx.grad = tw.grad = tb.grad = None
    else:
        import lazytensor as lt
        lt.set_num_threads(threads)
        lx, lw, lb, lg = (lt.tensor(a, requires_grad=a is not g) for a in (x, w, b, g))

        def step():
            out = lt.nn.functional.conv2d(lx, lw, lb)
            out.backward(lg)
            lt.realize(out, lx.grad, lw.grad, lb.grad)  # the output too: PyTorch computes it, a network reads it
            lx.grad = lw.grad = lb.grad = None
    for _ in range(warmup):
        step()
    return statistics.median(timed(step) for _ in range(steps)) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        contender, layer, threads = args.worker
        print(json.dumps(worker(contender, layer, args.warmup, args.steps, int(threads))))
        return
    print(header("conv2d forward + backward against PyTorch CPU", args.threads))
    print("| layer | threads | PyTorch ms | lazytensor ms | ratio per round, median (range) |")
    print("|---|---|---|---|---|")
    for layer in LAYERS:
        for threads in args.threads:
            ms = {"pytorch": [], "lazytensor": []}
            for r in range(args.rounds):
                order = ("pytorch", "lazytensor") if r % 2 == 0 else ("lazytensor", "pytorch")
                for contender in order:
                    out = subprocess.run([sys.executable, __file__, "--worker", contender, layer, str(threads),
                                          "--steps", str(args.steps), "--warmup", str(args.warmup)],
                                         capture_output=True, text=True, env=thread_env(threads), check=True)
                    ms[contender].append(json.loads(out.stdout.strip().splitlines()[-1]))
            ratios = [a / b for a, b in zip(ms["lazytensor"], ms["pytorch"])]
            print(f"| {layer} | {threads} | {statistics.median(ms['pytorch']):.2f} | "
                  f"{statistics.median(ms['lazytensor']):.2f} | {statistics.median(ratios):.2f}x "
                  f"({min(ratios):.2f}-{max(ratios):.2f}) |", flush=True)


if __name__ == "__main__":
    main()
