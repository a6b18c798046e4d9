"""Data-parallel training on one machine: 2 MPI ranks of 1 thread each against 1 process of 2 threads,
the same global batch (each rank takes its half), the CLI's GPT, eager steps (forward, backward with
the gradients averaged over ranks, clip, AdamW). Prints tokens/s (median and spread over the timed
steps, each contender's runs alternated), and per step the bytes each rank's gradient buckets hold,
what MPI moves for them, and the time spent in collectives.

    python bench/distributed_step.py [--config small] [--steps 12] [--rounds 2]

Needs mpi4py and mpiexec (pip install 'lazytensor[mpi]').
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import header  # noqa: E402

import lazytensor as lt  # noqa: E402
import lazytensor.distributed as dist  # noqa: E402
from lazytensor import optim  # noqa: E402
from lazytensor_train.data import CharDataset, default_corpus  # noqa: E402
from lazytensor_train.models.gpt import CONFIGS, GPT, GPTConfig  # noqa: E402
from lazytensor_train.train import train_step  # noqa: E402


def worker(args):
    """One contender: under mpiexec a rank of the data-parallel run, alone the one-process run."""
    dist.init()
    rank, size = dist.rank(), dist.world_size()
    sizes = dict(CONFIGS[args.config])
    batch = sizes.pop("batch_size") * 2 // size  # the same global batch for every contender
    block = sizes["block_size"]
    data = CharDataset(default_corpus())
    lt.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=data.vocab_size, **sizes))
    ddp = dist.DistributedDataParallel(model)
    params = list(model.parameters())
    opt = optim.AdamW(params, lr=1e-3)
    times, comm = [], []
    for step in range(args.steps + 2):
        x, y = data.batch("train", batch * size, block)  # every rank draws the global batch, takes its part
        x, y = x[rank * batch:(rank + 1) * batch], y[rank * batch:(rank + 1) * batch]
        c0, t0 = ddp.comm_seconds, time.perf_counter()
        train_step(ddp, opt, params, x, y, 1.0).item()
        if step >= 2:  # two warm-up steps
            times.append(time.perf_counter() - t0)
            comm.append(ddp.comm_seconds - c0)
    bucket_bytes = sum(p.numel() * p.dtype.np.itemsize for b in ddp.buckets for p in b)
    if rank == 0:
        print(json.dumps({"size": size, "threads": lt.get_num_threads(), "mpi": dist.library(),
                          "batch": batch * size, "block": block, "times": times, "comm": comm,
                          "bucket_bytes": bucket_bytes, "buckets": len(ddp.buckets),
                          "params": sum(p.numel() for p in params)}))


def _run(cmd, env):
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", choices=sorted(CONFIGS), default="tiny")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=2, help="runs of each contender, alternated")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    me = [sys.executable, os.path.abspath(__file__), "--worker", "--config", args.config, "--steps", str(args.steps)]
    contenders = {
        "2 ranks x 1 thread": ([mpiexec, "-n", "2"] + me, {"LAZYTENSOR_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}),
        "1 process x 2 threads": (me, {"LAZYTENSOR_NUM_THREADS": "2", "OMP_NUM_THREADS": "2"}),
    }
    runs = {name: [] for name in contenders}
    for _ in range(args.rounds):
        for name, (cmd, env) in contenders.items():
            runs[name].append(_run(cmd, {**os.environ, **env}))
    print(header(f"Data-parallel training, {args.config} GPT, eager steps: 2 MPI ranks vs 1 process", "see rows"))
    first = runs["2 ranks x 1 thread"][0]
    print(f"Global batch {first['batch']} x {first['block']} tokens, {first['params']:,} parameters; "
          f"{args.steps} timed steps per run after 2 warm-up steps, {args.rounds} runs each, alternated. "
          f"MPI: {first['mpi']}.\n")
    print("| contender | tokens/s, median (min-max) | ms/step, median | in collectives (waiting for the other "
          "rank included), ms/step (share) |")
    print("|---|---|---|---|")
    for name, results in runs.items():
        times = [t for r in results for t in r["times"]]
        comm = [c for r in results for c in r["comm"]]
        tokens = first["batch"] * first["block"]
        rates = [tokens / t for t in times]
        med = statistics.median(times)
        share = f"{1e3 * statistics.median(comm):.2f} ({statistics.median(comm) / med:.1%})" if any(comm) else "—"
        print(f"| {name} | {statistics.median(rates):,.0f} ({min(rates):,.0f}-{max(rates):,.0f}) | "
              f"{1e3 * med:.1f} | {share} |")
    b = first["bucket_bytes"]
    moved = 2 * (first["size"] - 1) / first["size"] * b
    print(f"\nPer step and rank: {first['buckets']} gradient bucket(s) of {b:,} bytes in all (float32 gradients); "
          f"the fixed-order all-reduce sends and receives {moved:,.0f} bytes each way (2(N-1)/N of it).")


if __name__ == "__main__":
    main()
