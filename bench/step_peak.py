"""Memory a training step holds at its peak: lazytensor's device memory (eager and `lt.jit`, on the
virtual device and the emulated CUDA driver, offload always: every kernel on the device) beside
PyTorch's CPU tensors for the same model.

The model is tests/user_gpt.py (written as PyTorch users write nanoGPT) at `--size` ("tiny", "small",
or "seed": 6 layers, 6 heads, 384 wide, block 256, vocab 65, as the seed measured) with `--layers` to
make it deeper, batch `--batch`. lazytensor's figure is the device's peak resident bytes (size classes
included) during the `--step`-th step, loss read included, and what the device holds after it with the
block cache (resident + cached: PyTorch's CUDA "reserved"); PyTorch's is the peak of the bytes its
tensors hold during that step (the profiler's memory timeline: every allocation and free, with what
existed before the step), its allocator's own caching left out as ours is. Each (contender, device,
mode) runs in a process of its own. Peaks are counts of bytes, not timings: one run gives them.

    python bench/step_peak.py [--size seed] [--layers 12] [--batch 8] [--step 4]
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

LAZYTENSOR = r"""
import json, sys
import numpy as np
import lazytensor as lt
import user_gpt
from lazytensor.runtime import devices

device, compiled, sizes = sys.argv[1], sys.argv[2] == "1", json.loads(sys.argv[3])
batch, step_no = int(sys.argv[4]), int(sys.argv[5])
if device == "cuda":
    lt.set_device("cuda", driver="emulated", memory="16GB", offload="always")
else:
    lt.set_device("virtual", memory="16GB", offload="always")
memory = devices.chain()[0].memory
lt.manual_seed(0)
gpt, optimizer, step = user_gpt.make(lt)
model = gpt(%d, sizes["n_layer"], sizes["n_head"], sizes["n_embd"], sizes["block_size"])
opt = optimizer(model)
fn = lt.jit(step) if compiled else step
rng = np.random.default_rng(0)
for i in range(step_no):
    x, y = (lt.tensor(rng.integers(0, %d, (batch, sizes["block_size"]))).to(device) for _ in range(2))
    with memory.watch_peak() as peak:
        fn(model, opt, x, y).item()
print(json.dumps({"peak": peak[0], "held": memory.resident_bytes + memory.cached_bytes,
                  "params": sum(p.numpy().nbytes for p in model.parameters())}))
""" % (VOCAB, VOCAB)

PYTORCH = r"""
import json, sys
import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile
from torch.profiler._memory_profiler import Action, MemoryProfile
import user_gpt

sizes, batch, step_no = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.manual_seed(0)
gpt, optimizer, step = user_gpt.make(torch)
model = gpt(%d, sizes["n_layer"], sizes["n_head"], sizes["n_embd"], sizes["block_size"])
opt = optimizer(model)
rng = np.random.default_rng(0)
for i in range(step_no):
    x, y = (torch.tensor(rng.integers(0, %d, (batch, sizes["block_size"]))) for _ in range(2))
    if i < step_no - 1:
        step(model, opt, x, y).item()
        continue
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof:
        step(model, opt, x, y).item()
held = peak = 0
for _, action, _, size in MemoryProfile(prof.profiler.kineto_results).timeline:
    if action in (Action.PREEXISTING, Action.CREATE):
        held += size
    elif action == Action.DESTROY:
        held -= size
    peak = max(peak, held)
print(json.dumps({"peak": peak}))
""" % (VOCAB, VOCAB)


def _run(code, args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(HERE, "..", "tests"),
                                                       os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=HERE)
    if out.returncode:
        raise RuntimeError(f"a measuring process failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def lazytensor_peak(device, compiled, sizes, batch, step_no):
    return _run(LAZYTENSOR, [device, "1" if compiled else "0", json.dumps(sizes), str(batch), str(step_no)])


def pytorch_peak(sizes, batch, step_no):
    return _run(PYTORCH, [json.dumps(sizes), str(batch), str(step_no)])["peak"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("tiny", "small", "seed"), default="seed")
    parser.add_argument("--layers", type=int, default=None, help="layers (default: the size's)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--step", type=int, default=4)
    parser.add_argument("--devices", default="virtual,cuda",
                        help="lazytensor's devices, of virtual and cuda (the emulated driver runs kernels as "
                             "C on the CPU: slow at the seed size)")
    parser.add_argument("--no-torch", action="store_true", help="leave PyTorch out")
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    import user_gpt
    sizes = dict(SEED) if args.size == "seed" else {k: v for k, v in user_gpt.SIZES[args.size].items()
                                                     if k != "batch_size"}
    if args.layers:
        sizes["n_layer"] = args.layers
    shape = f"{sizes['n_layer']} layers x {sizes['n_embd']}, {sizes['n_head']} heads, block {sizes['block_size']}"
    print(header(f"Memory at a training step's peak ({args.size}: {shape}; batch {args.batch}, step {args.step})", 1))
    torch_mb = None if args.no_torch else pytorch_peak(sizes, args.batch, args.step) / 1e6
    print("| lazytensor on | eager MB | lt.jit MB | held with the cache, eager / lt.jit MB | parameters MB "
          "| PyTorch CPU MB |")
    print("|---|---|---|---|---|---|")
    names = {"virtual": "virtual, offload always", "cuda": "emulated CUDA, offload always"}
    for device in args.devices.split(","):
        name = names[device]
        eager = lazytensor_peak(device, False, sizes, args.batch, args.step)
        compiled = lazytensor_peak(device, True, sizes, args.batch, args.step)
        theirs = "-" if torch_mb is None else f"{torch_mb:.1f}"
        print(f"| {name} | {eager['peak'] / 1e6:.1f} | {compiled['peak'] / 1e6:.1f} | "
              f"{eager['held'] / 1e6:.1f} / {compiled['held'] / 1e6:.1f} | {eager['params'] / 1e6:.1f} | {theirs} |")


if __name__ == "__main__":
    main()
