"""Where an eager training step's time goes on the CPU, in one process: the step's phases as the user writes them
(forward, zero_grad + backward, clip_grad_norm_, opt.step, loss.item()) and, across them, the time in
kernel launches, in realize's own work (ordering, fusion planning, backend choice, buffers) and outside
any realization (graph building, autograd, reads).

    python bench/eager_breakdown.py [--model user|cli] [--config tiny] [--threads 2] [--steps 100]

The figure behind the eager-step target: the compiled step runs the same kernels, so what an eager
step costs beyond it is the "outside" and "realize's own" columns. Launch time is measured around each
backend's launch call (the backend's Python around a kernel included), realize's own as the
realizations' time less their launches; the wrappers add ~0.5 us per call. One process, in-process
figures: compare runs of this script, not its figures with bench/train_step.py's.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "tests")]

import lazytensor as lt  # noqa: E402  (after the paths: tests/ holds the user model)
import user_gpt  # noqa: E402
from harness import header, thread_env  # noqa: E402
from lazytensor import evaluation  # noqa: E402
from lazytensor_train.data import CharDataset, default_corpus  # noqa: E402
from lazytensor_train.models import CONFIGS, GPT, GPTConfig  # noqa: E402
from lazytensor.runtime import hostio, scheduler  # noqa: E402
from lazytensor.runtime.backends import numba_backend, numpy_backend  # noqa: E402
PHASES = ("forward", "backward", "clip", "opt_step", "item")
PARTS = ("launches", "realize_own", "outside")


class _Clock:
    """Seconds spent in realizations and in backend launches since the last reset."""

    def __init__(self):
        self.realize = self.launch = 0.0
        self.launches = 0

    def reset(self):
        self.realize = self.launch = 0.0
        self.launches = 0


def _instrument(clock):
    """Wrap the engine's realize and every host backend's launch calls so `clock` adds up their time."""
    realize = scheduler.realize

    def timed_realize(roots):
        t0 = time.perf_counter()
        try:
            return realize(roots)
        finally:
            clock.realize += time.perf_counter() - t0

    for module, name in ((scheduler, "realize"), (evaluation, "_realize"), (hostio, "realize")):
        setattr(module, name, timed_realize)
    for cls in (numba_backend.NumbaBackend, numpy_backend.NumpyBackend):
        for name in ("launch", "launch_fused"):
            if name in vars(cls):
                setattr(cls, name, _timed_launch(vars(cls)[name], clock))
        if "prepared" in vars(cls):  # a replayed realization's calls (runtime/replay/repeats.py) that skip `launch`
            prepared = vars(cls)["prepared"]
            setattr(cls, "prepared", lambda self, node, dtypes=None, prepared=prepared:
                    _timed_launch(prepared(self, node, dtypes), clock))
        if "prepared_fused" in vars(cls):  # and its fused groups' calls, which skip `launch_fused`
            setattr(cls, "prepared_fused", _timed_prepared(vars(cls)["prepared_fused"], clock))


def _timed_prepared(prepared_fused, clock):
    def timed(self, recipe, root, shapes):
        call = prepared_fused(self, recipe, root, shapes)
        return None if call is None else _timed_launch(call, clock)
    return timed


def _timed_launch(launch, clock):
    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return launch(*args, **kwargs)
        finally:
            clock.launch += time.perf_counter() - t0
            clock.launches += 1
    return timed


def _model(kind, config):
    """(model, optimizer, the parameters clip_grad_norm_ gets, batch size, block size) as
    bench/train_step.py builds them (the user model's clip gets `model.parameters()`, a generator)."""
    data = CharDataset(default_corpus())
    lt.manual_seed(0)
    if kind == "cli":
        sizes = dict(CONFIGS[config])
        model = GPT(GPTConfig(vocab_size=data.vocab_size, **{k: v for k, v in sizes.items() if k != "batch_size"}))
        params = list(model.parameters())
        opt = lt.optim.AdamW([{"params": [p for p in params if p.ndim >= 2], "weight_decay": 0.1},
                              {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}],
                             lr=3e-3, betas=(0.9, 0.99))
        clip_params = params.copy
    else:
        sizes = user_gpt.SIZES[config]
        gpt, optimizer, _ = user_gpt.make(lt)
        model = gpt(data.vocab_size, sizes["n_layer"], sizes["n_head"], sizes["n_embd"], sizes["block_size"])
        opt = optimizer(model)
        clip_params = model.parameters
    batches = [data.batch("train", sizes["batch_size"], sizes["block_size"]) for _ in range(8)]
    return model, opt, clip_params, batches


def breakdown(kind="user", config="tiny", steps=100, warmup=10):
    """Per timed step: its phases and parts in seconds, the kernels it ran, the launch calls timed and
    the realizations replayed (lists, one per step; on the host backends every kernel is one launch
    call, a replayed one's prepared call included)."""
    lt.set_device("cpu")  # the host backends' launches are the ones timed
    clock = _Clock()
    _instrument(clock)
    model, opt, clip_params, batches = _model(kind, config)
    rows = {k: [] for k in PHASES + PARTS + ("step", "kernels", "launch_calls", "replayed")}
    for i in range(warmup + steps):
        x, y = batches[i % len(batches)]
        clock.reset()
        kernels, replayed = lt.counters()["kernels"], lt.counters()["replayed_realizations"]
        t = [time.perf_counter()]
        _, loss = model(x, y)
        t.append(time.perf_counter())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        t.append(time.perf_counter())
        lt.nn.utils.clip_grad_norm_(clip_params(), 1.0)
        t.append(time.perf_counter())
        opt.step()
        t.append(time.perf_counter())
        loss.item()
        t.append(time.perf_counter())
        if i < warmup:
            continue
        for name, a, b in zip(PHASES, t, t[1:]):
            rows[name].append(b - a)
        step = t[-1] - t[0]
        rows["step"].append(step)
        rows["launches"].append(clock.launch)
        rows["realize_own"].append(clock.realize - clock.launch)
        rows["outside"].append(step - clock.realize)
        rows["kernels"].append(lt.counters()["kernels"] - kernels)
        rows["launch_calls"].append(clock.launches)
        rows["replayed"].append(lt.counters()["replayed_realizations"] - replayed)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="user", choices=["cli", "user"])
    ap.add_argument("--config", default="tiny")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:  # the thread counts are read when the libraries load: set before this process started
        print(json.dumps(breakdown(args.model, args.config, args.steps, args.warmup)))
        return
    out = subprocess.run([sys.executable, __file__, "--worker", "--model", args.model, "--config", args.config,
                          "--steps", str(args.steps), "--warmup", str(args.warmup)],
                         capture_output=True, text=True, env=thread_env(args.threads))
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    rows = json.loads(out.stdout.strip().splitlines()[-1])
    print(header(f"Where an eager {args.model} {args.config} step's time goes (one process), ms", args.threads))
    print(f"Medians of {args.steps} steps after {args.warmup} warm-up steps (quartiles); "
          f"{statistics.median(rows['kernels']):.0f} kernels per step, "
          f"{statistics.median(rows['replayed']):.0f} of its realizations replayed (runtime/replay/repeats.py).\n")
    print("| part | ms | quartiles |")
    print("|---|---|---|")
    for name in ("step",) + PHASES + PARTS:
        q = statistics.quantiles([v * 1e3 for v in rows[name]], n=4)
        print(f"| {name} | {q[1]:.2f} | {q[0]:.2f}-{q[2]:.2f} |")


if __name__ == "__main__":
    main()
