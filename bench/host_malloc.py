"""Host memory and the training step's speed: median ms per step of the CLI's GPT as a user's script
runs it (the CPU kernels' result cache on, malloc left alone), with the cache off
(LAZYTENSOR_HOST_CACHE=0: every large result from glibc, as before the cache), and with glibc's malloc
thresholds raised (`lt.tune_host_malloc()`, the cache on). Also the minor page faults per step, which
say where the time goes. Each run in a process of its own, the processes alternated.

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
import json, resource, sys, time
import lazytensor as lt
config, steps, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if mode == "tuned":
    assert lt.tune_host_malloc()
from lazytensor_train.data import CharDataset, default_corpus
from lazytensor_train.models.gpt import CONFIGS
from lazytensor_train.train import TrainConfig, build, train_step
data = CharDataset(default_corpus())
lt.manual_seed(0)
model, opt, _ = build(TrainConfig(config=config), data)
params = list(model.parameters())
b, t = CONFIGS[config]["batch_size"], CONFIGS[config]["block_size"]
times, faults = [], []
for i in range(steps + 5):  # five warm-up steps
    x, y = data.batch("train", b, t)
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.perf_counter()
    train_step(model, opt, params, x, y, 1.0).item()
    times.append(time.perf_counter() - t0)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
print(json.dumps([statistics.median(times[5:]) * 1e3, statistics.median(faults[5:])]))
""".replace("import json,", "import json, statistics,")

MODES = ("user", "no cache", "tuned")


def one(config, steps, mode, threads):
    env = {k: v for k, v in os.environ.items() if k not in ("LAZYTENSOR_MALLOC", "LAZYTENSOR_HOST_CACHE")}
    env["LAZYTENSOR_NUM_THREADS"] = str(threads)
    if mode == "no cache":
        env["LAZYTENSOR_HOST_CACHE"] = "0"
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
    print(header("Host memory: the kernels' result cache, without it, and with malloc tuned; median ms/step "
                 "(min-max) and page faults/step", [args.threads]))
    print("| config | as a user runs it | cache off | malloc tuned | cache off / user | tuned / user |")
    print("|---|---|---|---|---|---|")
    for config in args.configs:
        runs = {mode: [] for mode in MODES}
        for _ in range(args.rounds):
            for mode in MODES:
                runs[mode].append(one(config, args.steps, mode, args.threads))
        ms = {mode: statistics.median(r[0] for r in runs[mode]) for mode in MODES}
        cells = [f"{ms[m]:.1f} ({min(r[0] for r in runs[m]):.1f}-{max(r[0] for r in runs[m]):.1f}), "
                 f"{statistics.median(r[1] for r in runs[m]):.0f} faults" for m in MODES]
        print(f"| {config} | " + " | ".join(cells) + f" | {ms['no cache'] / ms['user']:.2f}x | "
              f"{ms['tuned'] / ms['user']:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
