"""Device memory a training step holds at its peak: eager and `lt.jit`, on the virtual device and the
emulated CUDA driver, offload always (every kernel on the device).

The model is tests/user_gpt.py (written as PyTorch users write nanoGPT) at the tiny config's sizes and
the batch `--batch`; the figure is the device's peak resident bytes during the `--step`-th step (loss
read included), each (device, mode) in a process of its own. Peaks are counts of bytes, not timings:
one run gives them.

    python bench/step_peak.py [--batch 8] [--step 4]
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import header  # noqa: E402

CHILD = r"""
import json, sys
import numpy as np
import lazytensor as lt
import user_gpt
from lazytensor.runtime import devices

device, compiled, batch, step_no = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]), int(sys.argv[4])
if device == "cuda":
    lt.set_device("cuda", driver="emulated", memory="1GB", offload="always")
else:
    lt.set_device("virtual", memory="1GB", offload="always")
memory = devices.chain()[0].memory
sizes = user_gpt.SIZES["tiny"]
lt.manual_seed(0)
gpt, optimizer, step = user_gpt.make(lt)
model = gpt(65, sizes["n_layer"], sizes["n_head"], sizes["n_embd"], sizes["block_size"])
opt = optimizer(model)
fn = lt.jit(step) if compiled else step
rng = np.random.default_rng(0)
for i in range(step_no):
    x, y = (lt.tensor(rng.integers(0, 65, (batch, sizes["block_size"]))).to(device) for _ in range(2))
    with memory.watch_peak() as peak:
        fn(model, opt, x, y).item()
print(json.dumps({"peak": peak[0], "params": sum(p.numpy().nbytes for p in model.parameters())}))
"""


def measure(device, compiled, batch, step_no):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(HERE, "..", "tests"),
                                                       os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", CHILD, device, "1" if compiled else "0", str(batch), str(step_no)],
                         capture_output=True, text=True, env=env, cwd=HERE)
    if out.returncode:
        raise RuntimeError(f"the {device} {'lt.jit' if compiled else 'eager'} process failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--step", type=int, default=4)
    args = parser.parse_args()
    print(header(f"Device memory at a training step's peak (step {args.step}, batch {args.batch})", 1))
    print("| device | eager MB | lt.jit MB | parameters MB |")
    print("|---|---|---|---|")
    for device, name in (("virtual", "virtual, offload always"), ("cuda", "emulated CUDA, offload always")):
        eager = measure(device, False, args.batch, args.step)
        compiled = measure(device, True, args.batch, args.step)
        print(f"| {name} | {eager['peak'] / 1e6:.2f} | {compiled['peak'] / 1e6:.2f} | {eager['params'] / 1e6:.2f} |")


if __name__ == "__main__":
    main()
