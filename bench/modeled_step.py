"""A training step's modeled time on a GPU profile, with and without a memory budget.

The model is tests/user_gpt.py (nanoGPT as PyTorch users write it) at `--size` ("tiny", "small", or
"seed": 6 layers, 6 heads, 384 wide, block 256) and batch `--batch`, on the virtual device with every
kernel offloaded, eager and `lt.jit`. For each budget (fractions of the unlimited step's peak, `--budgets`)
one process runs `--step` steps and profiles the last one with `lt.profile(model=...)`: the device's
peak, the bytes copied each way, where AdamW ran, and the step's modeled time on `--profile`
(runtime/device_model.py: a model, not a measurement). Every figure is a count of bytes or a sum over
the model's rates, not a timing of this machine, except the "host kernels" part (kernels that ran on the
CPU because the budget sent them there), which is measured here.

    python bench/modeled_step.py [--size seed] [--batch 8] [--budgets 1,0.5,0.25] [--budgets-mb 385,192]
                                 [--profile h200] [--prefetch-window 0] [--recompute-ratio 1]

`--prefetch-window 0` turns prefetching off (runtime/prefetch.py: the steps it looks ahead), to see
what it gives; `--recompute-ratio` is `lt.set_memory_budget`'s (how much more kernel time than its
copies a value made again may cost: 2 trades kernel time for fewer bytes).
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import header  # noqa: E402

SEED = dict(n_layer=6, n_head=6, n_embd=384, block_size=256)
VOCAB = 65

STEP = r"""
import json, sys
import numpy as np
import lazytensor as lt
import user_gpt
from lazytensor.runtime import devices, prefetch

compiled, sizes, batch, step_no = sys.argv[1] == "1", json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
budget, profile_name, ratio = int(sys.argv[5]), sys.argv[6], float(sys.argv[8])
if int(sys.argv[7]) >= 0:
    prefetch.WINDOW = int(sys.argv[7])
lt.set_device("virtual", memory="16GB", offload="always")
if budget:
    lt.set_memory_budget(budget, recompute_ratio=ratio)
memory = devices.chain()[0].memory
lt.manual_seed(0)
gpt, optimizer, step = user_gpt.make(lt)
model = gpt(%d, sizes["n_layer"], sizes["n_head"], sizes["n_embd"], sizes["block_size"])
opt = optimizer(model)
fn = lt.jit(step) if compiled else step
rng = np.random.default_rng(0)
for i in range(step_no):
    x, y = (lt.tensor(rng.integers(0, %d, (batch, sizes["block_size"]))) for _ in range(2))
    if i < step_no - 1:
        fn(model, opt, x.to("virtual"), y.to("virtual")).item()
        continue
    remade = lt.counters()["remade"]
    with lt.profile(model=profile_name) as p, memory.watch_peak() as peak:
        fn(model, opt, x.to("virtual"), y.to("virtual")).item()
s, m = p.stats, p.stats["modeled"]
adamw = [k.backend for k in p.kernels if k.op == "adamw"]
print(json.dumps({"peak": peak[0], "up": s["upload_bytes"], "down": s["download_bytes"],
                  "evictions": s["evictions"], "modeled": m, "adamw_on_device": sum(b == "virtual" for b in adamw),
                  "adamw": len(adamw), "remade": lt.counters()["remade"] - remade}))
""" % (VOCAB, VOCAB)


def measure(compiled, sizes, batch, step_no, budget, profile, window=-1, ratio=1.0):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(HERE, "..", "tests"),
                                                       os.environ.get("PYTHONPATH", "")]))
    args = ["1" if compiled else "0", json.dumps(sizes), str(batch), str(step_no), str(budget), profile, str(window),
            str(ratio)]
    out = subprocess.run([sys.executable, "-c", STEP, *args], capture_output=True, text=True, env=env, cwd=HERE)
    if out.returncode:
        raise RuntimeError(f"a measuring process failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("tiny", "small", "seed"), default="seed")
    parser.add_argument("--layers", type=int, default=None, help="layers (default: the size's)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--step", type=int, default=4)
    parser.add_argument("--budgets", default="1,0.5,0.25", help="fractions of the unlimited step's peak")
    parser.add_argument("--budgets-mb", default="", help="budgets in MB (1e6 bytes), after the fractions")
    parser.add_argument("--profile", default="h200")
    parser.add_argument("--modes", default="eager,jit")
    parser.add_argument("--prefetch-window", type=int, default=-1, help="steps prefetching looks ahead (0: off)")
    parser.add_argument("--recompute-ratio", type=float, default=1.0, help="lt.set_memory_budget's recompute_ratio")
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    import user_gpt
    sizes = dict(SEED) if args.size == "seed" else {k: v for k, v in user_gpt.SIZES[args.size].items()
                                                     if k != "batch_size"}
    if args.layers:
        sizes["n_layer"] = args.layers
    shape = f"{sizes['n_layer']} layers x {sizes['n_embd']}, {sizes['n_head']} heads, block {sizes['block_size']}"
    print(header(f"A training step modeled on {args.profile} ({args.size}: {shape}; batch {args.batch}, "
                 f"step {args.step}; virtual device, offload always; recompute ratio {args.recompute_ratio:g})", 1))
    print("| step | budget | peak MB | up MB | down MB | evictions | values made again | AdamW on the device | "
          "modeled ms (device kernels + copies - copy time beside kernels + host kernels measured here) | "
          "modeled / unlimited |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for mode in args.modes.split(","):
        compiled = mode == "jit"
        unlimited = measure(compiled, sizes, args.batch, args.step, 0, args.profile, args.prefetch_window)
        budgets = [(f"{f:g} of the peak", int(unlimited["peak"] * f) if f < 1 else 0)
                   for f in (float(f) for f in args.budgets.split(",") if f)]
        budgets += [("", int(float(mb) * 1e6)) for mb in args.budgets_mb.split(",") if mb]
        for name, budget in budgets:
            r = unlimited if budget == 0 else measure(compiled, sizes, args.batch, args.step, budget, args.profile,
                                                      args.prefetch_window, args.recompute_ratio)
            m = r["modeled"]
            label = "none" if budget == 0 else f"{name} ({budget / 1e6:.0f} MB)" if name else f"{budget / 1e6:.0f} MB"
            print(f"| {'lt.jit' if compiled else 'eager'} | {label} | {r['peak'] / 1e6:.1f} | {r['up'] / 1e6:.1f} | "
                  f"{r['down'] / 1e6:.1f} | {r['evictions']} | {r['remade']} | "
                  f"{r['adamw_on_device']} of {r['adamw']} | "
                  f"{m['total_s'] * 1e3:.2f} ({m['device_kernel_s'] * 1e3:.2f} + {m['copy_s'] * 1e3:.2f} - "
                  f"{m['hidden_copy_s'] * 1e3:.2f} + {m['host_kernel_s'] * 1e3:.2f}) | "
                  f"{m['total_s'] / unlimited['modeled']['total_s']:.2f}x |")


if __name__ == "__main__":
    main()
