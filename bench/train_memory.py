"""Resident memory of a long `lazytensor train` run: does RSS stay flat after warm-up?

Runs the training job itself (`lazytensor_train.train.run`, with its profile, transfer log and periodic
validation) for --steps steps, once per device, each in a process of its own, and samples the process's
RSS every --every steps. Prints a markdown table: RSS after warm-up, at the end, and the growth per 1000
steps fitted over the post-warm-up samples.

    python bench/train_memory.py --steps 1500 --every 100 --devices cpu virtual
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import header  # noqa: E402

CHILD = r"""
import io, json, sys
import lazytensor as lt
from lazytensor_train.train import TrainConfig, run

steps, every, device, budget = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
samples = []

def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2 ** 20

class Sampler(io.StringIO):
    # the job prints one progress line per logged step: sample RSS then
    def write(self, text):
        if text.startswith("step ") and "| loss" in text:
            samples.append((int(text.split()[1]), rss_mb()))
        return len(text)

run(TrainConfig(steps=steps, log_every=every, eval_every=max(every * 5, 100), eval_iters=2, sample_chars=0,
                device=device, budget=None if budget == "-" else budget, progress=False), out=Sampler())
print(json.dumps(samples))
"""


def measure(steps, every, device, budget):
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-c", CHILD, str(steps), str(every), device, budget],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--every", type=int, default=100)
    p.add_argument("--warmup", type=int, default=200, help="steps before RSS counts as warmed up")
    p.add_argument("--devices", nargs="+", default=["cpu", "virtual"])
    p.add_argument("--budget", default="1MB", help="virtual device budget (a small one evicts every step)")
    args = p.parse_args()
    print(header(f"Training memory: RSS over {args.steps} tiny steps", "default"))
    print("| device | budget | RSS at step %d (MB) | RSS at the end (MB) | growth per 1000 steps (MB) |"
          % args.warmup)
    print("|---|---|---|---|---|")
    for device in args.devices:
        budget = args.budget if device != "cpu" else "-"
        samples = measure(args.steps, args.every, device, budget)
        steps = np.array([s for s, _ in samples if s >= args.warmup], float)
        rss = np.array([r for s, r in samples if s >= args.warmup])
        slope = np.polyfit(steps, rss, 1)[0] * 1000 if len(steps) > 1 else float("nan")
        print(f"| {device} | {budget} | {rss[0]:.0f} | {rss[-1]:.0f} | {slope:+.1f} |", flush=True)
        print("samples (step, MB): " + ", ".join(f"{s}:{r:.0f}" for s, r in samples), file=sys.stderr)


if __name__ == "__main__":
    main()
