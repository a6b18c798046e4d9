"""The host-side cost of a training step on the CUDA path, with the GPU's work taken away.

Runs the CUDA backend on the emulated driver with kernel execution replaced by nothing (no compile,
no run; copies still happen), so what remains is lazytensor's own per-step Python: building the graph
and autograd, planning, lowering to kernels, residency bookkeeping, launches. That is a floor under a
GPU step's time whatever the GPU does, and the figure to compare with PyTorch eager's per-op cost.
Two rows per config: the eager step, and the step wrapped in `lt.jit` (timed on replays after the
first, which lays out the device runner: no graph, autograd, planning or lowering; prepared launches over
scratch chunks, runtime/replay/device_runner.py).
"""
import gc
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def _no_kernel(ptrs, scalars):
    """A compiled kernel that does nothing."""


WARMUP, STEPS = 4, 30  # the first replay lays out the device runner: timed from the second on


class _NoKernels:
    """Stands in for compiled kernels: launching one does nothing."""

    def function(self, spec):
        return _no_kernel

    def launch(self, fn, spec, ptrs, scalars):
        pass


def main():
    from harness import header
    import lazytensor as lt
    from lazytensor_train.data import CharDataset, default_corpus
    from lazytensor_train.train import TrainConfig, build, train_step
    from lazytensor_train.models.gpt import CONFIGS
    data = CharDataset(default_corpus())
    print(header("CUDA path host overhead per training step (kernels replaced by no-ops)", "1"))
    print(f"| config | step | ms/step, median of {STEPS} (min-max) | kernels launched/step "
          f"| of which prepared launches | us per kernel |")
    print("|---|---|---|---|---|---|")
    for config, compiled in [(c, m) for c in ("tiny", "small") for m in (False, True)]:
        lt.set_device("cuda", driver="emulated", offload="policy", memory="4GiB")
        device = lt.runtime.devices.active_device()
        device.driver.function = _NoKernels().function
        device.driver.launch = _NoKernels().launch
        lt.manual_seed(0)
        model, opt, _ = build(TrainConfig(config=config, steps=100), data)
        params = list(model.parameters())
        step_fn = lt.jit(train_step) if compiled else train_step
        sizes = CONFIGS[config]
        times, kernels, prepared = [], [], []
        for step in range(WARMUP + STEPS):
            x, y = data.batch("train", sizes["batch_size"], sizes["block_size"])
            if step == WARMUP:
                gc.collect()  # the garbage of the steps before, collected before the timed ones
            before = lt.counters()
            t0 = time.perf_counter()
            step_fn(model, opt, params, x.to("cuda"), y.to("cuda"), 1.0).item()
            if step >= WARMUP:
                times.append(time.perf_counter() - t0)
                kernels.append(lt.counters()["kernels"] - before["kernels"])
                prepared.append(lt.counters()["prepared_kernels"] - before["prepared_kernels"])
        ms, k, p = statistics.median(times) * 1e3, statistics.median(kernels), statistics.median(prepared)
        lo, hi = min(times) * 1e3, max(times) * 1e3
        kind = "compiled (replay)" if compiled else "eager"
        print(f"| {config} | {kind} | {ms:.2f} ({lo:.2f}-{hi:.2f}) | {k:.0f} | {p:.0f} | {ms * 1e3 / k:.1f} |",
              flush=True)
    lt.set_device("cpu")


if __name__ == "__main__":
    main()
