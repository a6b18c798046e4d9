"""Softmax, layer norm and GELU, forward and backward, against PyTorch's CPU kernels at the shapes of the
user nanoGPT's small and seed-size steps, one thread, each contender in a process of its own.

    python bench/row_kernels.py [--rounds 3] [--calls 30]

lazytensor: softmax, its gradient, layer norm (no affine part, as the node is) and its input gradient
are launched on the numba backend as the compiled step launches them (`NumbaBackend.launch` of the
node: the kernel and its row preparation); GELU forward is `F.gelu(x)` realized (one fused kernel, plus
~20-50 us of graph building and scheduling), its gradient `x.grad` after `F.gelu(x).backward(g)`
(one fused kernel from x and g; the forward is not realized: nothing reads it). PyTorch: `softmax`,
`_softmax_backward_data`, `layer_norm` without weight, `native_layer_norm_backward` for the input
gradient alone, `gelu`, `gelu_backward`. Processes alternate (lazytensor, PyTorch, ...) for `rounds`
rounds; each process times every case `calls` times after 3 warm-up calls and reports the median; the
table gives the median over rounds of those medians (its range), in microseconds.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import header, thread_env, timed  # noqa: E402

# (B, T, C, heads) of the user nanoGPT's small and seed sizes (tests/user_gpt.py)
SIZES = {"small": (32, 128, 128, 4), "seed": (8, 256, 384, 6)}
OPS = ("softmax", "softmax_grad", "layer_norm", "layer_norm_grad", "gelu", "gelu_grad")


def shapes(size):
    b, t, c, h = SIZES[size]
    return {"softmax": (b, h, t, t), "softmax_grad": (b, h, t, t), "layer_norm": (b * t, c),
            "layer_norm_grad": (b * t, c), "gelu": (b, t, 4 * c), "gelu_grad": (b, t, 4 * c)}


def _lazytensor_cases(arrays):
    import lazytensor as lt
    import lazytensor.nn.functional as F
    from lazytensor.runtime.backends.numba_backend import NumbaBackend
    from lazytensor.runtime.graph import Node
    backend = NumbaBackend()

    def node(op, x, **attrs):
        return Node(op, (), dict(attrs, dtype=x.dtype), x.shape, x.dtype)

    x, g = arrays
    x_t, g_t = lt.tensor(x).realize(), lt.tensor(g).realize()  # made once: lt.tensor copies its array
    leaf = lt.tensor(x, requires_grad=True)

    def gelu_grad():
        leaf.grad = None
        F.gelu(leaf).backward(g_t)
        return leaf.grad.realize()
    y = backend.launch(node("softmax", x, axis=x.ndim - 1), [x])
    return {
        "softmax": lambda: backend.launch(node("softmax", x, axis=x.ndim - 1), [x]),
        "softmax_grad": lambda: backend.launch(node("softmax_grad", x, axis=x.ndim - 1), [y, g]),
        "layer_norm": lambda: backend.launch(node("layer_norm", x, axes=(x.ndim - 1,), eps=1e-5), [x]),
        "layer_norm_grad": lambda: backend.launch(node("layer_norm_grad", x, axes=(x.ndim - 1,), eps=1e-5), [x, g]),
        "gelu": lambda: F.gelu(x_t).realize(),
        "gelu_grad": gelu_grad,
    }


def _pytorch_cases(arrays):
    import torch
    torch.set_num_threads(1)
    x, g = (torch.from_numpy(a) for a in arrays)
    y = torch.softmax(x, -1)
    c = x.shape[-1]
    mean = x.mean(-1, keepdim=True)
    rstd = torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-5)
    return {
        "softmax": lambda: torch.softmax(x, -1),
        "softmax_grad": lambda: torch._softmax_backward_data(g, y, -1, torch.float32),
        "layer_norm": lambda: torch.nn.functional.layer_norm(x, (c,)),
        "layer_norm_grad": lambda: torch.ops.aten.native_layer_norm_backward(
            g, x, (c,), mean, rstd, None, None, [True, False, False]),
        "gelu": lambda: torch.nn.functional.gelu(x),
        "gelu_grad": lambda: torch.ops.aten.gelu_backward(g, x),
    }


def worker(contender, size, calls):
    """In a fresh process: every op of `size`, median seconds of `calls` calls each; prints JSON."""
    import statistics
    import numpy as np
    out = {}
    for op, shape in shapes(size).items():
        rng = np.random.default_rng(0)
        arrays = [rng.standard_normal(shape).astype(np.float32) for _ in range(2)]
        if op.startswith("softmax"):
            arrays[0] *= 4
        fn = (_lazytensor_cases if contender == "lazytensor" else _pytorch_cases)(arrays)[op]
        for _ in range(3):
            fn()
        out[op] = statistics.median([timed(fn) for _ in range(calls)])
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--sizes", nargs="+", default=list(SIZES))
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker[0], args.worker[1], args.calls)
    print(header("Row kernels against PyTorch's, one thread, median microseconds", 1))
    print(f"`python bench/row_kernels.py --rounds {args.rounds} --calls {args.calls}`: median over rounds of each "
          "process's median (range over rounds)\n")
    print("| size | kernel | shape | lazytensor us | PyTorch us | lazytensor / PyTorch |")
    print("|---|---|---|---|---|---|")
    for size in args.sizes:
        results = {"lazytensor": [], "pytorch": []}
        for _ in range(args.rounds):
            for contender in results:
                command = [sys.executable, __file__, "--worker", contender, size, "--calls", str(args.calls)]
                run = subprocess.run(command, capture_output=True, text=True, env=thread_env(1), check=True)
                results[contender].append(json.loads(run.stdout.strip().splitlines()[-1]))
        for op in OPS:
            ours = sorted(r[op] * 1e6 for r in results["lazytensor"])
            theirs = sorted(r[op] * 1e6 for r in results["pytorch"])
            mid = len(ours) // 2
            print(f"| {size} | {op} | {shapes(size)[op]} | {ours[mid]:,.0f} ({ours[0]:,.0f}-{ours[-1]:,.0f}) | "
                  f"{theirs[mid]:,.0f} ({theirs[0]:,.0f}-{theirs[-1]:,.0f}) | {ours[mid] / theirs[mid]:.2f}x |",
                  flush=True)


if __name__ == "__main__":
    main()
