"""Before and after a change: the same timings from two checkouts of lazytensor, their processes alternated.

    python bench/compare_trees.py --before PYTHON:TREE --after PYTHON:TREE [--rounds 5]
                                  [--configs tiny small] [--threads 1] [--contenders lazytensor compiled planned]
                                  [--overhead-rounds 3]

PYTHON is an interpreter whose `import lazytensor` loads TREE (a virtual environment with TREE installed
in editable mode). For each config and thread count, each round runs every contender of
bench/train_step.py (lazytensor eager, `lt.jit`, and the eager step planned at every step with replays
off) once from each tree, in a process of its own, the tree going first alternating between rounds;
then bench/gpu_host_overhead.py (the CUDA path's host work per step, kernels replaced by nothing) runs
`overhead-rounds` times from each tree, alternated. The batches and initial weights come from the
after tree (both trees must compute the same bytes; check that separately). Prints one Markdown table:
per row the median of the per-process medians from each tree, the smallest, the spread (largest -
smallest) / median, and after / before (in brackets the smallest and largest ratio of one round's pair).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile

from harness import header, thread_env  # bench/ is the script's folder, first on the path


def _tree(spec):
    python, tree = spec.split(":", 1)
    return python, os.path.abspath(tree)


def _step_times(tree, contender, path, warmup, threads):
    python, root = tree
    out = subprocess.run([python, os.path.join(root, "bench", "train_step.py"), "--worker", contender, "cli", path,
                          "--warmup", str(warmup)], capture_output=True, text=True, env=thread_env(threads))
    if out.returncode != 0:
        raise RuntimeError(f"{root}: {contender} failed:\n{out.stderr[-3000:]}")
    return statistics.median(json.loads(out.stdout.strip().splitlines()[-1])) * 1e3


def _overhead_rows(tree):
    """{(config, step kind): ms} from one run of bench/gpu_host_overhead.py."""
    python, root = tree
    out = subprocess.run([python, os.path.join(root, "bench", "gpu_host_overhead.py")], capture_output=True,
                         text=True, env=thread_env(1))
    if out.returncode != 0:
        raise RuntimeError(f"{root}: gpu_host_overhead failed:\n{out.stderr[-3000:]}")
    rows = {}
    for line in out.stdout.splitlines():
        m = re.match(r"\| (\w+) \| ([^|]+?) \| ([0-9.]+) ", line)
        if m:
            rows[(m.group(1), m.group(2))] = float(m.group(3))
    return rows


def _cells(before, after):
    def one(values):
        med = statistics.median(values)
        return f"{med:.2f} ({min(values):.2f}; {(max(values) - min(values)) / med:.0%})"
    ratios = [a / b for a, b in zip(after, before)]
    return (f"{one(before)} | {one(after)} | {statistics.median(after) / statistics.median(before):.3f} "
            f"({min(ratios):.3f}-{max(ratios):.3f})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--configs", nargs="+", default=["tiny", "small"])
    ap.add_argument("--threads", nargs="+", type=int, default=[1])
    ap.add_argument("--contenders", nargs="+", default=["lazytensor", "compiled", "planned"])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--overhead-rounds", type=int, default=3)
    args = ap.parse_args()
    before, after = _tree(args.before), _tree(args.after)
    print(header("Before and after: ms per training step, each tree's process alternated", args.threads))
    print(f"before: {before[1]}; after: {after[1]}; {args.rounds} processes each, {args.steps} timed steps after "
          f"{args.warmup} warm-up steps (bench/train_step.py's `cli` model); host overhead: "
          f"{args.overhead_rounds} runs each of bench/gpu_host_overhead.py\n")
    print("| what | config | threads | before ms | after ms | after / before |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for config in args.configs if args.rounds else ():  # --rounds 0: the host-work rows only
            path = os.path.join(tmp, f"cli-{config}.npz")
            subprocess.run([after[0], os.path.join(after[1], "bench", "train_step.py"), "--prepare", "cli", config,
                            path, "--steps", str(args.steps), "--warmup", str(args.warmup)], check=True)
            for threads in args.threads:
                times = {(c, which): [] for c in args.contenders for which in ("before", "after")}
                for r in range(args.rounds):
                    for c in args.contenders:
                        order = [("before", before), ("after", after)]
                        for which, tree in (order if r % 2 == 0 else order[::-1]):
                            times[(c, which)].append(_step_times(tree, c, path, args.warmup, threads))
                for c in args.contenders:
                    print(f"| train step: {c} | {config} | {threads} | "
                          f"{_cells(times[(c, 'before')], times[(c, 'after')])} |", flush=True)
    runs = {"before": [], "after": []}
    for r in range(args.overhead_rounds):
        order = [("before", before), ("after", after)]
        for which, tree in (order if r % 2 == 0 else order[::-1]):
            runs[which].append(_overhead_rows(tree))
    for key in runs["after"][0]:
        print(f"| CUDA host work: {key[1]} | {key[0]} | 1 | "
              f"{_cells([run[key] for run in runs['before']], [run[key] for run in runs['after']])} |")


if __name__ == "__main__":
    main()
