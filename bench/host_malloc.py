"""What `lt.tune_host_malloc()` buys: median ms per training step with glibc's malloc left alone and
with its thresholds raised, each in a process of its own, the processes alternated.

    python bench/host_malloc.py [--configs tiny small] [--rounds 4] [--steps 20] [--threads 2]

Prints a Markdown table (paste it into bench/RESULTS.md).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import header  # noqa: E402

CHILD = r"""
import json, sys, time
import lazytensor as lt
config, steps, tuned = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "tuned"
if tuned:
    assert lt.tune_host_malloc()
from lazytensor_train.data import CharDataset, default_corpus
from lazytensor_train.models.gpt import CONFIGS
from lazytensor_train.train import TrainConfig, build, train_step
data = CharDataset(default_corpus())
lt.manual_seed(0)
model, opt, _ = build(TrainConfig(config=config), data)
params = list(model.parameters())
b, t = CONFIGS[config]["batch_size"], CONFIGS[config]["block_size"]
times = []
for i in range(steps + 5):  # five warm-up steps
    x, y = data.batch("train", b, t)
    t0 = time.perf_counter()
    train_step(model, opt, params, x, y, 1.0).item()
    times.append(time.perf_counter() - t0)
print(json.dumps(sorted(times[5:])[len(times[5:]) // 2] * 1e3))
"""


def one(config, steps, mode, threads):
    env = {k: v for k, v in os.environ.items() if k != "LAZYTENSOR_MALLOC"}
    env["LAZYTENSOR_NUM_THREADS"] = str(threads)
    out = subprocess.run([sys.executable, "-c", CHILD, config, str(steps), mode], capture_output=True, text=True,
                         env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", nargs="+", default=["tiny", "small"])
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    print(header("glibc malloc left alone vs tuned (lt.tune_host_malloc), median ms/step", [args.threads]))
    print("| config | malloc default ms (min-max) | tuned ms (min-max) | tuned / default |")
    print("|---|---|---|---|")
    for config in args.configs:
        runs = {"default": [], "tuned": []}
        for _ in range(args.rounds):
            for mode in ("default", "tuned"):
                runs[mode].append(one(config, args.steps, mode, args.threads))
        d, t = statistics.median(runs["default"]), statistics.median(runs["tuned"])
        print(f"| {config} | {d:.1f} ({min(runs['default']):.1f}-{max(runs['default']):.1f}) | "
              f"{t:.1f} ({min(runs['tuned']):.1f}-{max(runs['tuned']):.1f}) | {t / d:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
