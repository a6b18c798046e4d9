"""Device check for Apple silicon (Metal through metalcompute), in the format of bench/device_check.py.

    pip install -e '.[metal,test]' && python bench/device_check_metal.py

1. Setup: macOS, chip, metalcompute version, what lazytensor reports for Metal.
2. tests/test_metal_backend.py on the GPU (LAZYTENSOR_TEST_METAL=real): float32 copies, arithmetic and
   comparisons bit-identical to the CPU, compensated sums within Kahan's bound, index copies and seeded
   fills byte-identical. Apple's compiler always uses fast math, so a failure here is a finding to
   report (which op, which inputs), not something to paper over.
3. Op micro-benchmarks: lazytensor with Metal vs NumPy vs PyTorch MPS if installed (each Metal call
   waits for its command buffer, so wall-clock medians after warm-up are device-complete).
4. The GPT training step (tiny): Metal vs CPU, and what moved.

This project's CI has never run this script: there is no Apple hardware in it. The report goes to
$OUT/device_check_metal.md when OUT is set, else bench/results/.
"""
import argparse
import datetime
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from device_check import _median, run_sections, write_report  # noqa: E402


def _setup(lines):
    import lazytensor as lt
    lines.append(f"- macOS {platform.mac_ver()[0] or '-'} on {platform.machine()}, Python {platform.python_version()}")
    try:
        import metalcompute
        lines.append(f"- metalcompute {getattr(metalcompute, '__version__', '(version unknown)')}")
    except ImportError:
        lines.append("- metalcompute: not installed (pip install 'lazytensor[metal]')")
    entry = next(e for e in lt.devices() if e["name"] == "metal")
    lines.append(f"- lazytensor metal: available={entry['available']} ({entry['reason']})")
    if not entry["available"]:
        raise SystemExit("\n".join(lines) + "\nthe Metal backend is not available; nothing more to check")
    return lt


def _tests(lines):
    env = dict(os.environ, LAZYTENSOR_TEST_METAL="real")
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/test_metal_backend.py", "tests/test_kernel_sources.py"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    tail = done.stdout.strip().splitlines()[-25:] if done.returncode else done.stdout.strip().splitlines()[-1:]
    lines.append(f"- pytest (real Metal) rc {done.returncode} in {time.perf_counter() - t0:.0f} s:")
    lines += ["      " + line for line in tail]


def _ops(lines, lt, rounds):
    import numpy as np
    from ops import cases
    try:
        import torch
        mps = torch if torch.backends.mps.is_available() else None
    except ImportError:
        mps = None
    lines.append("\n| op | lazytensor Metal (us) | NumPy eager (us) | PyTorch MPS (us) | ours / PyTorch |")
    lines.append("|---|---|---|---|---|")
    for name, (ours, numpy_fn, torch_fn, arrays) in cases(np.random.default_rng(0)).items():
        ts = [lt.tensor(a) for a in arrays]
        res = {"ours": _median(lambda: ours(ts).realize(), lambda: None, rounds)}
        if numpy_fn is not None:
            res["numpy"] = _median(lambda: numpy_fn(arrays), lambda: None, max(3, rounds // 5))
        if mps is not None:
            ps = [mps.from_numpy(a.copy()).to("mps") for a in arrays]
            res["torch"] = _median(lambda: torch_fn(ps), mps.mps.synchronize, rounds)
        cell = {k: f"{v * 1e6:,.0f}" for k, v in res.items()}
        ratio = f"{res['ours'] / res['torch']:.2f}x" if "torch" in res else "-"
        lines.append(f"| {name} | {cell['ours']} | {cell.get('numpy', '-')} | {cell.get('torch', '-')} | {ratio} |")


def _train(lines, lt):
    from lazytensor_train.data import CharDataset, default_corpus
    from lazytensor_train.train import TrainConfig, build, train_step
    data = CharDataset(default_corpus())
    batches = [data.batch("train", 16, 64) for _ in range(3)]
    times = {}
    for where in ("metal", "cpu"):
        lt.set_device(where)
        lt.manual_seed(0)
        model, opt, _ = build(TrainConfig(config="tiny", steps=100), data)
        params = list(model.parameters())
        run = lambda: [train_step(model, opt, params, x, y, 1.0).item() for x, y in batches]  # noqa: E731
        times[where] = _median(run, lambda: None, 3) / len(batches)
    lines.append(f"- `tiny` step: Metal {times['metal'] * 1e3:.1f} ms, CPU {times['cpu'] * 1e3:.1f} ms "
                 f"(CPU/Metal {times['cpu'] / times['metal']:.2f}x)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.parse_args()
    t0 = time.perf_counter()
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"## Metal device check ({now})\n"]
    os.environ.setdefault("LAZYTENSOR_DEVICE", "metal")
    lt = _setup(lines)
    run_sections(lines, [("tests", lambda: _tests(lines)), ("ops", lambda: _ops(lines, lt, 20)),
                         ("train tiny", lambda: _train(lines, lt))], t0)
    write_report(lines, "device_check_metal.md")

if __name__ == "__main__":
    main()
