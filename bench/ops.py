"""Op micro-benchmarks at transformer shapes: lazytensor (default host chain: numba + NumPy) against
NumPy eager and, where installed, PyTorch eager, interleaved round by round in one process.

    OMP_NUM_THREADS=1 python bench/ops.py [--rounds 15]

Each lazytensor timing builds the op on already-realized inputs and realizes it (graph building and
scheduling included); each figure is the median over rounds (min in parentheses), in microseconds.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import header, summary, timed  # noqa: E402

import lazytensor as lt  # noqa: E402
import lazytensor.nn.functional as F  # noqa: E402


def cases(rng):
    x15 = rng.normal(size=1_500_000).astype(np.float32)
    a = rng.normal(size=(4, 256, 256)).astype(np.float32)
    col = rng.normal(size=(4, 256, 1)).astype(np.float32)
    h = rng.normal(size=(16, 64, 256)).astype(np.float32)
    w = rng.normal(size=(256, 256)).astype(np.float32)
    q = rng.normal(size=(16, 4, 64, 64)).astype(np.float32)
    causal = np.where(np.triu(np.ones((64, 64), bool), 1), np.float32(-np.inf), q)  # as a causal mask leaves scores
    erf = np.frompyfunc(__import__("math").erf, 1, 1)
    out = {
        "erf 1.5M f32": (lambda t: t[0].erf(), lambda n: erf(n[0]).astype(np.float32), lambda p: p[0].erf(), [x15]),
        "gelu 1.5M f32": (lambda t: F.gelu(t[0]), None, lambda p: __import__("torch").nn.functional.gelu(p[0]), [x15]),
        "broadcast sub (4,256,256)-(4,256,1)": (lambda t: t[0] - t[1], lambda n: n[0] - n[1],
                                                lambda p: p[0] - p[1], [a, col]),
        "sum over last axis (4,256,256)": (lambda t: t[0].sum(-1), lambda n: n[0].sum(-1),
                                          lambda p: p[0].sum(-1), [a]),
        "axis-list transpose (4,256,256)->(2,0,1)": (lambda t: t[0].permute(2, 0, 1).contiguous(),
                                                    lambda n: np.ascontiguousarray(n[0].transpose(2, 0, 1)),
                                                    lambda p: p[0].permute(2, 0, 1).contiguous(), [a]),
        "softmax (16,4,64,64) last axis": (lambda t: t[0].softmax(-1), None, lambda p: p[0].softmax(-1), [q]),
        "causal softmax (16,4,64,64)": (lambda t: t[0].softmax(-1), None,
                                        lambda p: p[0].softmax(-1), [causal]),
        "layer_norm (16,64,256)": (lambda t: F.layer_norm(t[0], (256,)), None,
                                   lambda p: __import__("torch").nn.functional.layer_norm(p[0], (256,)), [h]),
        "batched matmul (16,64,256)@(256,256)": (lambda t: t[0] @ t[1], lambda n: n[0] @ n[1],
                                                lambda p: p[0] @ p[1], [h, w]),
    }
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    try:
        import torch
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    except ImportError:
        torch = None
    rng = np.random.default_rng(0)
    threads = os.environ.get("OMP_NUM_THREADS", "default")
    print(header("Op micro-benchmarks, median (min) microseconds", threads))
    print("| op | lazytensor | NumPy eager | PyTorch eager | lazytensor / PyTorch |")
    print("|---|---|---|---|---|")
    for name, (ours, numpy_fn, torch_fn, arrays) in cases(rng).items():
        ts = [lt.tensor(a).realize() for a in arrays]
        contenders = {"ours": lambda: ours(ts).realize()}
        if numpy_fn is not None:
            contenders["numpy"] = lambda: numpy_fn(arrays)
        if torch is not None:
            ps = [torch.from_numpy(a.copy()) for a in arrays]
            contenders["torch"] = lambda: torch_fn(ps)
        for fn in contenders.values():
            fn()  # warm up (compiles numba kernels)
        samples = {k: [] for k in contenders}
        for _ in range(args.rounds):
            for k, fn in contenders.items():
                samples[k].append(timed(fn))
        res = {k: summary(v) for k, v in samples.items()}

        def cell(k):
            if k not in res:
                return "-"
            return f"{res[k]['median'] * 1e6:,.0f} ({res[k]['min'] * 1e6:,.0f})"
        ratio = f"{res['ours']['median'] / res['torch']['median']:.2f}x" if "torch" in res else "-"
        print(f"| {name} | {cell('ours')} | {cell('numpy')} | {cell('torch')} | {ratio} |", flush=True)


if __name__ == "__main__":
    main()
