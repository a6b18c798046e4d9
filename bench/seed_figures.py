"""The design's headline measurements, re-measured here with one command: the seed system's operation
table at its sizes with the transfers included (inputs start on the host, the result is read back),
the round trip its thresholds are derived from, and a GPT training step at its model size with the
copies and bytes a run moves; our figures beside the seed's (theirs: NVIDIA GB10 and a SIMD CPU).

    python bench/seed_figures.py                       # cpu and virtual, and cuda when there is one
    python bench/seed_figures.py --devices cpu,cuda --batch 64 --copy-steps 200

Each device runs in a process of its own (alternating is pointless here: the table compares each
device with the seed's figure, not devices measured at once). A figure is the median of --rounds
timed calls after two warm-up calls, with the spread (min-max) beside it. Device timings end with the
host read, which waits for the device, so they are wall-clock times of the whole call, transfers
included. The virtual device is not acceleration: it rehearses a GPU run's copies on host memory, so
its times measure the bookkeeping and the copies, not a GPU.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import header  # noqa: E402

import lazytensor as lt  # noqa: E402
from lazytensor import optim  # noqa: E402
from lazytensor_train.models.gpt import GPT, GPTConfig  # noqa: E402
from lazytensor_train.train import train_step  # noqa: E402

# The seed's figures (us; CPU, device), from its notes; None where it gives none.
SEED_US = {
    "round trip (1 element up, add, down)": (None, 15),
    "erf 1.5M float64": (103_000, 900),
    "broadcast sub (6,256,256)-(6,256,1) f32": (660, 118),
    "sum over last axis (6,256,256) f32": (297, 70),
    "axis-list transpose (6,256,256)->(2,0,1) f32": (335, 75),
    "softmax (6,256,256) last axis f32": (1915, 402),
    "dropout mask 393216 f32 (rand > p)": (4000, 50),
    "randn 1M f32": (95_000, 2100),
    "GEMV 384x384 f32, matrix resident": (23, 10.7),
    "stacked products (16,256,64)@(16,64,256) f32": (None, None),
}
SEED_STEP = {"step_s": (0.79, 0.050), "copies_200": 6737, "bytes_200": 2.3e9,
             "per_call_copies_200": 37534, "per_call_bytes_200": 44e9}
SEED_MODEL = {"n_layer": 6, "n_head": 6, "n_embd": 384, "block_size": 256, "vocab_size": 65}


def _cases(rng):
    F = lt.nn.functional
    cube = rng.normal(size=(6, 256, 256)).astype(np.float32)  # 393216 elements: the seed's shape class
    col = rng.normal(size=(6, 256, 1)).astype(np.float32)
    x15 = rng.normal(size=1_500_000)
    vec = rng.normal(size=384).astype(np.float32)
    a = rng.normal(size=(16, 256, 64)).astype(np.float32)
    b = rng.normal(size=(16, 64, 256)).astype(np.float32)
    one = np.ones(1, np.float32)
    dev = lt.get_device()
    matrix = lt.tensor(rng.normal(size=(384, 384)).astype(np.float32))
    if dev != "cpu":
        matrix = matrix.to(dev)
    return {
        "round trip (1 element up, add, down)": lambda: (lt.tensor(one).to(dev) + 1).numpy() if dev != "cpu"
        else (lt.tensor(one) + 1).numpy(),
        "erf 1.5M float64": lambda: lt.tensor(x15).erf().numpy(),
        "broadcast sub (6,256,256)-(6,256,1) f32": lambda: (lt.tensor(cube) - lt.tensor(col)).numpy(),
        "sum over last axis (6,256,256) f32": lambda: lt.tensor(cube).sum(-1).numpy(),
        "axis-list transpose (6,256,256)->(2,0,1) f32": lambda: lt.tensor(cube).permute(2, 0, 1).contiguous().numpy(),
        "softmax (6,256,256) last axis f32": lambda: F.softmax(lt.tensor(cube), dim=-1).numpy(),
        "dropout mask 393216 f32 (rand > p)": lambda: (lt.rand(393216) > 0.1).numpy(),
        "randn 1M f32": lambda: lt.randn(1_000_000).numpy(),
        "GEMV 384x384 f32, matrix resident": lambda: (matrix @ lt.tensor(vec)).numpy(),
        "stacked products (16,256,64)@(16,64,256) f32": lambda: (lt.tensor(a) @ lt.tensor(b)).numpy(),
    }


def _time(fn, rounds):
    fn()
    fn()  # warm-up: kernels compiled, a GEMV's matrix offered twice, caches filled
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return samples


def _training(args):
    lt.manual_seed(0)
    dev = lt.get_device()
    model = GPT(GPTConfig(dropout=0.0, **SEED_MODEL))
    if dev != "cpu":
        model.to(dev)
    params = list(model.parameters())
    opt = optim.AdamW(params, lr=1e-3)
    rng = np.random.default_rng(1)
    T = SEED_MODEL["block_size"]

    def step():
        tokens = rng.integers(0, SEED_MODEL["vocab_size"], size=(args.batch, T + 1))
        x, y = lt.tensor(tokens[:, :-1]), lt.tensor(tokens[:, 1:])
        if dev != "cpu":
            x, y = x.to(dev), y.to(dev)
        return train_step(model, opt, params, x, y, 1.0).item()  # the loss read, as a training loop does
    samples = _time(step, args.step_rounds)
    lt.clear_transfer_log()
    for _ in range(args.copy_steps):
        step()
    stats = lt.residency_stats()
    return {"step_s": samples, "copy_steps": args.copy_steps,
            "copies": stats["uploads"] + stats["downloads"],
            "bytes": stats["upload_bytes"] + stats["download_bytes"],
            "parameters": sum(p.numel() for p in params)}


def _one(args):
    """Measure on one device (a child process); prints JSON."""
    if args.one == "virtual":
        lt.set_device("virtual", memory=args.virtual_memory)
    else:
        lt.set_device(args.one)
    out = {"device": lt.get_device(), "ops": {}}
    for name, fn in _cases(np.random.default_rng(0)).items():
        out["ops"][name] = _time(fn, args.rounds)
    if args.batch:
        out["train"] = _training(args)
    print(json.dumps(out))


def _available(name):
    return any(d["name"] == name and d["available"] for d in lt.devices())


def _fmt_us(samples):
    us = [s * 1e6 for s in samples]
    med = statistics.median(us)
    return f"{med:,.0f} ({min(us):,.0f}-{max(us):,.0f})" if med >= 100 else \
        f"{med:,.1f} ({min(us):,.1f}-{max(us):,.1f})"


def _seed(v):
    return "—" if v is None else f"{v:,}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--devices", default=None, help="comma-separated (default: cpu, virtual, and cuda if present)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--batch", type=int, default=64, help="training batch (the seed's notebook: 64); 0 skips it")
    ap.add_argument("--step-rounds", type=int, default=3, help="timed training steps (after two warm-up steps)")
    ap.add_argument("--copy-steps", type=int, default=200, help="steps whose copies and bytes are counted")
    ap.add_argument("--virtual-memory", default="8GB",
                    help="the virtual device's arena (its budget is a quarter): room for the step's values")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        return _one(args)
    devices = args.devices.split(",") if args.devices else \
        ["cpu", "virtual"] + (["cuda"] if _available("cuda") else [])
    results = {}
    for dev in devices:
        cmd = [sys.executable, os.path.abspath(__file__), "--one", dev, "--rounds", str(args.rounds),
               "--batch", str(args.batch), "--step-rounds", str(args.step_rounds),
               "--copy-steps", str(args.copy_steps), "--virtual-memory", args.virtual_memory]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"{dev}: failed\n{done.stderr[-2000:]}", file=sys.stderr)
            continue
        results[dev] = json.loads(done.stdout.strip().splitlines()[-1])
    threads = os.environ.get("OMP_NUM_THREADS", "default")
    print(header("The seed's operation table, re-measured (median (min-max) microseconds, transfers included)",
                 threads))
    cols = list(results)
    print("| op | seed CPU | seed GPU | " + " | ".join(f"ours: {d}" for d in cols) + " |")
    print("|---|---|---|" + "---|" * len(cols))
    for name, (cpu, gpu) in SEED_US.items():
        ours = [_fmt_us(results[d]["ops"][name]) for d in cols]
        print(f"| {name} | {_seed(cpu)} | {_seed(gpu)} | " + " | ".join(ours) + " |")
    trained = [d for d in cols if "train" in results[d]]
    if trained:
        t0 = results[trained[0]]["train"]
        print(f"\nGPT training step at the seed's model size ({SEED_MODEL}, "
              f"{t0['parameters']:,} parameters, batch {args.batch}, AdamW, clip 1.0, the loss read each step; "
              f"virtual arena {args.virtual_memory}):\n")
        print("| | seed CPU | seed GPU | " + " | ".join(f"ours: {d}" for d in trained) + " |")
        print("|---|---|---|" + "---|" * len(trained))
        print(f"| seconds per step, median (min-max) of {args.step_rounds} | {SEED_STEP['step_s'][0]} | "
              f"{SEED_STEP['step_s'][1]} | " + " | ".join(
                  "{:.3f} ({:.3f}-{:.3f})".format(statistics.median(results[d]["train"]["step_s"]),
                                                  min(results[d]["train"]["step_s"]), max(results[d]["train"]["step_s"]))
                  for d in trained) + " |")
        scale = 200 / args.copy_steps
        note = "" if args.copy_steps == 200 else f" (counted over {args.copy_steps} steps, x{scale:g})"
        print(f"| copies over 200 steps{note} | — | {SEED_STEP['copies_200']:,} (per-call: "
              f"{SEED_STEP['per_call_copies_200']:,}) | " + " | ".join(
                  f"{results[d]['train']['copies'] * scale:,.0f}" for d in trained) + " |")
        print(f"| bytes over 200 steps{note} | — | {SEED_STEP['bytes_200'] / 1e9:.1f} GB (per-call: "
              f"{SEED_STEP['per_call_bytes_200'] / 1e9:.0f} GB) | " + " | ".join(
                  f"{results[d]['train']['bytes'] * scale / 1e6:,.2f} MB" for d in trained) + " |")


if __name__ == "__main__":
    main()
