"""Device check for an NVIDIA GPU: one script, under 8 minutes including setup.

    python bench/device_check.py            # everything
    python bench/device_check.py --quick    # tests and one training-step round only

1. Setup: imports lazytensor from this checkout (installing it editable, without network, if needed);
   reports the GPU, driver, NVRTC, and which driver binding lazytensor uses (cuda-bindings or pycuda).
2. Every test that starts the CUDA backend (`pytest -m cuda`: bit-identity vs NumPy for the contract's op
   classes, tolerances for matmul and transcendentals, byte-identical RNG, deterministic scatter-add run
   twice, a training step's transfers, compiled replays vs eager steps, schedules), on the GPU, with
   LAZYTENSOR_TEST_CUDA_DRIVER set to the binding found.
3. Op micro-benchmarks (bench/ops.py's cases): lazytensor on the GPU vs NumPy vs PyTorch CUDA if
   installed; GPU timings after a synchronize, medians of several rounds after warm-up.
4. The GPT training step (tiny and small): lazytensor CUDA vs PyTorch CUDA (same weights, same batches)
   vs lazytensor on this machine's CPU, and the bytes moved each way per step after warm-up.
5. The modeled timeline (runtime/device_model.py, the "h200" profile) of one compiled step beside the
   kernels' device times measured with events: the model's error per op and in all.
6. Prefetching on the copy stream (runtime/prefetch.py): the user nanoGPT at the seed's size under half
   its unlimited peak, with the copy stream and without (prefetches queued on the compute stream):
   losses against the unlimited run's, ms per step, bytes moved, and the modeled time beside them.

The report (Markdown) goes to $OUT/device_check.md when OUT is set, else bench/results/.

The tests need pytest and hypothesis. On a machine without network, bring them as wheels: here,
`pip download pytest hypothesis -d .device_wheels` (the folder is git-ignored; pass it in the device
tool's `carry`), there, `pip install --no-index --find-links .device_wheels pytest hypothesis` first.
"""
import argparse
import contextlib
import datetime
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))


def _setup(lines):
    try:
        import lazytensor  # noqa: F401
    except ImportError:
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                               "--no-index", "-e", ROOT], capture_output=True, text=True)
        lines.append(f"- installed lazytensor editable: rc {done.returncode}")
    import lazytensor as lt
    from lazytensor.kernels.cuda import nvrtc
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True)
        lines.append(f"- GPU: {smi.stdout.strip() or smi.stderr.strip()}")
    except OSError:
        lines.append("- GPU: nvidia-smi not found")
    lines.append(f"- Python {platform.python_version()}, NumPy {__import__('numpy').__version__}, "
                 f"NVRTC {nvrtc.version() if nvrtc.available() else 'missing'}")
    for name in ("cuda.bindings", "pycuda", "torch", "cupy"):
        try:
            mod = __import__(name, fromlist=["x"])
            lines.append(f"- {name} {getattr(mod, '__version__', '')}")
        except ImportError:
            lines.append(f"- {name}: not installed")
    entry = next(e for e in lt.devices() if e["name"] == "cuda")
    lines.append(f"- lazytensor cuda: available={entry['available']} ({entry['reason']})")
    if not entry["available"]:
        raise SystemExit("\n".join(lines) + "\nthe CUDA backend is not available; nothing more to check")
    return lt, lt.runtime.devices.active_device() or lt.runtime.devices._open_cuda()[0]


def _builtin_checks(lines, lt):
    """Without pytest: the core of tests/test_cuda_backend.py in-process, GPU vs CPU bytes."""
    import numpy as np
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((257, 129)).astype(np.float32), rng.standard_normal((257, 129)).astype(np.float32)
    programs = {
        "arithmetic/broadcast/where": lambda x, y: [x * y - y[:, :1] / 3.0, lt.where(x > y, x, -y), lt.maximum(x, 0.5)],
        "reductions": lambda x, y: [x.sum(0), x.mean(1), x.var(1), x.amax(0), x.argmax(1)],
        "movement": lambda x, y: [x.T.contiguous(), x[::-2, 3:70], lt.cat([x, y], 1), x.tril()],
        "fused chain": lambda x, y: [((x - y) * 0.5 + x.mean()).sqrt().abs()],
        "fills": lambda x, y: [lt.rand(5000), lt.randn(777), lt.randint(0, 50, (999,))],
    }
    for name, program in programs.items():
        results = {}
        for where in ("cpu", "cuda"):
            lt.set_device(where, **({"offload": "always"} if where == "cuda" else {}))
            lt.manual_seed(3)
            results[where] = [t.numpy().copy() for t in program(lt.tensor(a), lt.tensor(b))]
        same = all(c.tobytes() == g.tobytes() for c, g in zip(results["cpu"], results["cuda"]))
        lines.append(f"- built-in check {name}: {'byte-identical' if same else 'DIFFERS'}")
    x32 = rng.standard_normal(100_000).astype(np.float32)
    for where in ("cpu", "cuda"):
        lt.set_device(where, **({"offload": "always"} if where == "cuda" else {}))
        results[where] = lt.tensor(x32).exp().numpy().copy()
    ulps = np.abs(results["cpu"].view(np.int32).astype(np.int64) - results["cuda"].view(np.int32).astype(np.int64))
    lines.append(f"- built-in check exp float32: max {ulps.max()} units in the last place")
    lt.set_device("cuda")


def _tests(lines, driver):
    try:
        import pytest  # noqa: F401
        import hypothesis  # noqa: F401
    except ImportError:
        import lazytensor as lt
        lines.append("- pytest/hypothesis not installed here: running the built-in checks instead")
        _builtin_checks(lines, lt)
        return
    env = dict(os.environ, LAZYTENSOR_TEST_CUDA_DRIVER=driver)
    t0 = time.perf_counter()
    # Every test that starts the CUDA backend (the `cuda` mark, tests/conftest.py): bit-identity against
    # NumPy, compiled replays against eager steps byte for byte, schedules, planned placement, in-place AdamW.
    workers = ["-n", str(min(8, os.cpu_count() or 1))] if _has("xdist") else []
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:benchmark", "-m", "cuda",
               "-rfs", *workers, "tests"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
        rc, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as late:  # report what ran: a hung test must not hide the rest
        rc, stdout, stderr = "timeout", _text(late.stdout), _text(late.stderr)
    with open(os.path.join(_out_dir(), "device_pytest.log"), "w") as f:
        f.write(stdout + "\n" + stderr)
    out = stdout.strip().splitlines()
    tail = out[-25:] if rc else [line for line in out if line.startswith("SKIPPED")] + out[-1:]
    lines.append(f"- pytest (driver {driver}) rc {rc} in {time.perf_counter() - t0:.0f} s:")
    lines += ["      " + line for line in tail + stderr.strip().splitlines()[-5:]]


def _text(output):
    return output.decode(errors="replace") if isinstance(output, bytes) else (output or "")


def _has(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


def _torch_cuda():
    """torch when it is installed with CUDA and sees a GPU, else None (the comparison is skipped)."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _median(fn, sync, rounds):
    fn()
    sync()
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def _ops(lines, lt, device, rounds):
    import numpy as np
    from ops import cases
    torch = _torch_cuda()
    lines.append("\n| op | lazytensor CUDA (us) | NumPy eager (us) | PyTorch CUDA (us) | ours / PyTorch |")
    lines.append("|---|---|---|---|---|")
    for name, (ours, numpy_fn, torch_fn, arrays) in cases(np.random.default_rng(0)).items():
        ts = [lt.tensor(a).to("cuda").realize() for a in arrays]
        res = {"ours": _median(lambda: ours(ts).realize(), device.synchronize, rounds)}
        if numpy_fn is not None:
            res["numpy"] = _median(lambda: numpy_fn(arrays), lambda: None, max(3, rounds // 5))
        if torch is not None:
            ps = [torch.from_numpy(a.copy()).cuda() for a in arrays]
            res["torch"] = _median(lambda: torch_fn(ps), torch.cuda.synchronize, rounds)
        cell = {k: f"{v * 1e6:,.0f}" for k, v in res.items()}
        ratio = f"{res['ours'] / res['torch']:.2f}x" if "torch" in res else "-"
        lines.append(f"| {name} | {cell['ours']} | {cell.get('numpy', '-')} | {cell.get('torch', '-')} | {ratio} |")


def _train(lines, lt, device, config, rounds, steps):
    from lazytensor_train.data import CharDataset, default_corpus
    from lazytensor_train.models.gpt import CONFIGS
    from lazytensor_train.train import TrainConfig, build, train_step
    data = CharDataset(default_corpus())
    sizes = CONFIGS[config]
    batches = [tuple(t.numpy() for t in data.batch("train", sizes["batch_size"], sizes["block_size"]))
               for _ in range(steps)]
    result = {}
    for where, compiled in (("cuda", False), ("cuda", True), ("cpu", False)):
        lt.set_device(where)
        lt.manual_seed(0)
        model, opt, _ = build(TrainConfig(config=config, steps=1000), data)
        params = list(model.parameters())
        step = lt.jit(train_step) if compiled else train_step  # warm-up below: eager, capture, replays

        def ours():
            for x, y in batches:
                step(model, opt, params, lt.tensor(x).to(where), lt.tensor(y).to(where), 1.0).item()
        sync = device.synchronize if where == "cuda" else (lambda: None)
        n = rounds if where == "cuda" else 1
        result[f"lazytensor {where}{' compiled' if compiled else ''}"] = _median(ours, sync, n) / steps
        if compiled:  # how many of a replay's kernels went out as prepared launches (runtime/replay/device_runner.py)
            lt.reset_counters()
            ours()
            prepared = f"{lt.counters()['prepared_kernels']} of {lt.counters()['kernels']} replayed kernels prepared"
        if where == "cuda" and not compiled:
            lt.clear_transfer_log()
            x, y = batches[0]
            train_step(model, opt, params, lt.tensor(x).to("cuda"), lt.tensor(y).to("cuda"), 1.0).item()
            log = lt.transfer_log()
            moved = {d: (sum(1 for r in log if r.direction == d), sum(r.nbytes for r in log if r.direction == d))
                     for d in ("h2d", "d2h")}
            twin_model = model
    torch = _torch_cuda()
    if torch is not None:
        from torch_gpt import twin_of
        twin = twin_of(twin_model)[0].cuda()
        topt = torch.optim.AdamW(twin.parameters(), lr=3e-3, betas=(0.9, 0.99), weight_decay=0.1)
        cuda_batches = [(torch.from_numpy(x.copy()).cuda(), torch.from_numpy(y.copy()).cuda()) for x, y in batches]

        def theirs():
            for x, y in cuda_batches:
                loss = twin(x, y)
                topt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(twin.parameters(), 1.0)
                topt.step()
                loss.item()
        result["pytorch cuda"] = _median(theirs, torch.cuda.synchronize, rounds) / steps
    lt.set_device("cuda")
    row = " | ".join(f"{k}: {v * 1e3:.2f} ms" for k, v in result.items())
    ratios = []
    if "pytorch cuda" in result:
        ratios.append(f"ours/PyTorch {result['lazytensor cuda'] / result['pytorch cuda']:.2f}x")
        ratios.append(f"compiled/PyTorch {result['lazytensor cuda compiled'] / result['pytorch cuda']:.2f}x")
    ratios.append(f"CPU/CUDA {result['lazytensor cpu'] / result['lazytensor cuda']:.1f}x")
    lines.append(f"- `{config}` step: {row}; {', '.join(ratios)}; per step after warm-up: "
                 f"{moved['h2d'][0]} uploads ({moved['h2d'][1]} B), {moved['d2h'][0]} downloads ({moved['d2h'][1]} B); "
                 f"{prepared}")


def _model_check(lines, lt, config):
    """The H200 profile's modeled time of one compiled training step (runtime/device_model.py) beside
    the device time of each kernel measured with events: per op and in all, and the model's error."""
    from lazytensor_train.data import CharDataset, default_corpus
    from lazytensor_train.models.gpt import CONFIGS
    from lazytensor_train.train import TrainConfig, build, train_step
    data = CharDataset(default_corpus())
    sizes = CONFIGS[config]
    x, y = (t.numpy() for t in data.batch("train", sizes["batch_size"], sizes["block_size"]))
    lt.manual_seed(0)
    model, opt, _ = build(TrainConfig(config=config, steps=1000), data)
    params = list(model.parameters())
    step = lt.jit(train_step)
    for _ in range(3):
        step(model, opt, params, lt.tensor(x).to("cuda"), lt.tensor(y).to("cuda"), 1.0).item()
    with lt.profile() as p:
        step(model, opt, params, lt.tensor(x).to("cuda"), lt.tensor(y).to("cuda"), 1.0).item()
    model_of = p.modeled("h200")
    from lazytensor.runtime import device_model
    profile = device_model.profile_named("h200")
    by_op = {}
    for k in p.kernels:
        if k.backend != "cuda":
            continue
        modeled, _ = device_model.kernel_seconds(profile, k.op, k.read_bytes, k.written_bytes, k.flops)
        entry = by_op.setdefault(k.op, [0, 0.0, 0.0])
        entry[0] += 1
        entry[1] += k.duration_s
        entry[2] += modeled
    measured = sum(v[1] for v in by_op.values())
    modeled = sum(v[2] for v in by_op.values())
    top = sorted(by_op.items(), key=lambda item: -item[1][1])[:8]
    lines.append(f"- `{config}` compiled step, device kernels: measured {measured * 1e3:.3f} ms (events per kernel), "
                 f"modeled on h200 {modeled * 1e3:.3f} ms: model / measured {modeled / measured:.2f}; "
                 f"whole modeled step with copies {model_of.total_s * 1e3:.3f} ms")
    lines.append("  - per op (launches, measured ms, modeled ms, modeled / measured): " + "; ".join(
        f"{op} {n}x {m * 1e3:.3f} / {d * 1e3:.3f} = {d / m:.2f}" for op, (n, m, d) in top))


def _prefetch_check(lines, lt, device, size="seed", steps=4):
    """The user nanoGPT (`size`: the seed's), eager, unlimited and under half its peak with prefetches on the copy
    stream and on the compute stream: losses, ms per step (wall, the loss read each step: the step's
    end is a host read), bytes moved and prefetched per step, the modeled time of the last step."""
    import numpy as np
    import user_gpt
    memory = device.memory
    beside = device.copies_beside

    def run(budget, copy_stream):
        device.copies_beside = copy_stream and beside
        lt.set_memory_budget(None)
        lt.manual_seed(0)
        model, opt, step, batch, block = user_gpt.built(lt, size)
        if budget is not None:
            lt.set_memory_budget(budget)
        rng = np.random.default_rng(0)
        losses, times, prof = [], [], None
        with memory.watch_peak() as peak:
            for i in range(steps):
                x, y = (lt.tensor(rng.integers(0, 65, (batch, block))).to("cuda") for _ in range(2))
                with lt.profile(model="h200") if i == steps - 1 else contextlib.nullcontext() as p:
                    t0 = time.perf_counter()
                    losses.append(step(model, opt, x, y).item())
                    times.append(time.perf_counter() - t0)
                prof = p or prof
        moved = {"h2d": 0, "d2h": 0, "prefetch": 0}
        for r in prof.transfers:
            moved[r.direction] += r.nbytes
            moved["prefetch"] += r.nbytes if r.reason == "prefetch" else 0
        return losses, times, peak[0], moved, prof.modeled("h200").total_s

    try:
        want, times, peak, _, modeled = run(None, True)
        lines.append(f"- {size} user GPT, eager, unlimited: peak {peak / 1e6:.1f} MB, "
                     f"{statistics.median(times[1:]) * 1e3:.1f} ms/step (modeled {modeled * 1e3:.1f})")
        for copy_stream in (True, False):
            losses, times, used, moved, modeled = run(peak // 2, copy_stream)
            lines.append(f"- under {peak // 2 / 1e6:.0f} MB, prefetches on the "
                         f"{'copy' if copy_stream and beside else 'compute'} stream: losses "
                         f"{'the unlimited run' if losses == want else f'DIFFER {losses} vs {want}'}; peak "
                         f"{used / 1e6:.1f} MB; {statistics.median(times[1:]) * 1e3:.1f} ms/step (modeled "
                         f"{modeled * 1e3:.1f}); up {moved['h2d'] / 1e6:.1f} MB ({moved['prefetch'] / 1e6:.1f} "
                         f"prefetched), down {moved['d2h'] / 1e6:.1f} MB")
    finally:
        device.copies_beside = beside
        lt.set_memory_budget(None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"## CUDA device check ({now})\n"]
    os.environ.setdefault("LAZYTENSOR_DEVICE", "cuda")
    lt, device = _setup(lines)
    driver = device.driver.kind
    lines.append(f"- lazytensor driver binding: {driver} ({device.driver.description})")
    sections = [("tests", lambda: _tests(lines, driver))]
    if not args.quick:
        sections.append(("ops", lambda: _ops(lines, lt, device, 20)))
    for config in ("tiny",) if args.quick else ("tiny", "small"):
        sections.append((f"train {config}", lambda c=config: _train(lines, lt, device, c, 1 if args.quick else 3, 3)))
    for config in ("tiny", "small"):
        sections.append((f"modeled timeline vs measured, {config}", lambda c=config: _model_check(lines, lt, c)))
    sections.append(("prefetching on the copy stream", lambda: _prefetch_check(lines, lt, device)))
    run_sections(lines, sections, t0)
    write_report(lines, "device_check.md")


def run_sections(lines, sections, t0):
    """Run each (title, fn) in turn, appending to the report; a failing section is reported, not fatal."""
    for title, run in sections:
        lines.append(f"\n### {title}")
        try:
            run()
        except Exception as exc:  # report and go on: one broken section must not hide the others
            lines.append(f"- FAILED: {type(exc).__name__}: {exc}")
        lines.append(f"- (elapsed {time.perf_counter() - t0:.0f} s)")
        print("\n".join(lines[-3:]), flush=True)


def _out_dir():
    out_dir = os.environ.get("OUT") or os.path.join(HERE, "results")
    os.makedirs(out_dir, exist_ok=True)
    return out_dir


def write_report(lines, filename):
    """The report to $OUT/filename when OUT is set, else bench/results/filename; also printed."""
    path = os.path.join(_out_dir(), filename)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"report written to {path}")


if __name__ == "__main__":
    main()
