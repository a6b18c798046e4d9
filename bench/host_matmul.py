"""GFLOP/s of the float32 products of a training step, NumPy's BLAS (`a @ b`) against BLIS
(kernels/cpu/gemm.py), on one thread, each library timed in a process of its own (alternating).

    python bench/host_matmul.py [--rounds 3] [--calls 20]

The products are those of a Linear layer in the two configs of `lazytensor train`: the forward
x @ W.T, the weight gradient g.T @ x (a transposed operand, long inner dimension) and the input
gradient g @ W, with rows = batch * block. Each process times every shape (a warm-up call, then the
median of `calls` calls) and prints them; the table gives, per shape, the median over rounds and the
range. The bounds in kernels/cpu/gemm.py (BLIS from 2^18 to 2^25 multiply-adds) come from this table;
which library a machine uses inside them is measured there, once per machine.
Prints a Markdown table (paste it into bench/RESULTS.md).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CONTENDERS = ("numpy", "blis")
# (rows, in, out): tiny (16 x 64 tokens, n_embd 64) and small (32 x 128 tokens, n_embd 128)
LAYERS = [(1024, 64, 192), (1024, 64, 256), (1024, 256, 64), (1024, 64, 64),
          (4096, 128, 384), (4096, 128, 512), (4096, 512, 128)]
PRODUCTS = ("forward x @ W.T", "weight gradient g.T @ x", "input gradient g @ W")


def _operands(rows, n_in, n_out):
    """The three products of one Linear layer, as {product: (a, b)} (C-ordered arrays and their views)."""
    import numpy as np
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, n_in), dtype=np.float32)
    w = rng.standard_normal((n_out, n_in), dtype=np.float32)
    g = rng.standard_normal((rows, n_out), dtype=np.float32)
    return dict(zip(PRODUCTS, ((x, w.T), (g.T, x), (g, w))))


def worker(contender, calls):
    """In a fresh process: GFLOP/s of every (layer, product), as JSON."""
    import numpy as np
    from threadpoolctl import threadpool_limits
    from lazytensor.kernels.cpu import gemm
    out = {}
    with threadpool_limits(1):
        for layer in LAYERS:
            for product, (a, b) in _operands(*layer).items():
                dest = np.empty((a.shape[0], b.shape[1]), np.float32)
                fn = (lambda: np.matmul(a, b, out=dest)) if contender == "numpy" else \
                    (lambda: gemm.matmul_into(a, b, dest))
                fn()
                times = []
                for _ in range(calls):
                    t0 = time.perf_counter()
                    fn()
                    times.append(time.perf_counter() - t0)
                flops = 2.0 * a.shape[0] * a.shape[1] * b.shape[1]
                out[f"{layer}|{product}"] = flops / statistics.median(times) / 1e9
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--worker", choices=CONTENDERS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.calls)
        return
    sys.path.insert(0, HERE)
    from harness import header
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", LAZYTENSOR_NUM_THREADS="1")
    runs = {c: [] for c in CONTENDERS}
    for _ in range(args.rounds):
        for c in CONTENDERS:
            out = subprocess.run([sys.executable, __file__, "--worker", c, "--calls", str(args.calls)],
                                 capture_output=True, text=True, env=env, check=True)
            runs[c].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(header("float32 products of a training step: NumPy's BLAS vs BLIS, GFLOP/s (one thread)", 1))
    print(f"median (min-max) over {args.rounds} processes each, alternating; each process: the median of "
          f"{args.calls} calls per product after a warm-up call\n")
    print("| rows, in, out | product | million multiply-adds | NumPy | BLIS | BLIS / NumPy |")
    print("|---|---|---|---|---|---|")
    for layer in LAYERS:
        for product in PRODUCTS:
            key = f"{layer}|{product}"
            cells = []
            for c in CONTENDERS:
                values = [r[key] for r in runs[c]]
                cells.append((statistics.median(values), min(values), max(values)))
            macs = layer[0] * layer[1] * layer[2]
            (n, n_lo, n_hi), (b, b_lo, b_hi) = cells
            print(f"| {layer} | {product} | {macs / 1e6:.1f} | {n:.0f} ({n_lo:.0f}-{n_hi:.0f}) | "
                  f"{b:.0f} ({b_lo:.0f}-{b_hi:.0f}) | {b / n:.2f} |")


if __name__ == "__main__":
    main()
