"""The host-side cost of a training step on the CUDA path, with the GPU's work taken away.

Runs the CUDA backend on the emulated driver with kernel execution replaced by nothing (no compile,
no run; copies still happen), so what remains is lazytensor's own per-step Python: building the graph
and autograd, planning, lowering to kernels, residency bookkeeping, launches. That is a floor under a
GPU step's time whatever the GPU does, and the figure to compare with PyTorch eager's per-op cost.
Two rows per config: the eager step, and the step wrapped in `lt.jit` (timed on replays after the
first, which lays out the launch plan: no graph, autograd, planning or lowering; prepared launches over
scratch chunks, runtime/launch_plan.py).
"""
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


class _NoKernels:
    """Stands in for compiled kernels: launching one does nothing."""

    def function(self, spec):
        return None

    def launch(self, fn, spec, ptrs, scalars):
        pass


def main():
    from harness import header
    import lazytensor as lt
    from lazytensor.data import CharDataset, default_corpus
    from lazytensor.train import TrainConfig, build, train_step
    data = CharDataset(default_corpus())
    print(header("CUDA path host overhead per training step (kernels replaced by no-ops)", "1"))
    print("| config | step | ms/step | kernels launched/step | of which prepared launches | us per kernel |")
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
        sizes = lt.models.CONFIGS[config]
        times, kernels, prepared = [], [], []
        for step in range(13):
            x, y = data.batch("train", sizes["batch_size"], sizes["block_size"])
            before = lt.counters()
            t0 = time.perf_counter()
            step_fn(model, opt, params, x.to("cuda"), y.to("cuda"), 1.0).item()
            if step >= 3:
                times.append(time.perf_counter() - t0)
                kernels.append(lt.counters()["kernels"] - before["kernels"])
                prepared.append(lt.counters()["prepared_kernels"] - before["prepared_kernels"])
        ms, k, p = statistics.median(times) * 1e3, statistics.median(kernels), statistics.median(prepared)
        kind = "compiled (replay)" if compiled else "eager"
        print(f"| {config} | {kind} | {ms:.1f} | {k:.0f} | {p:.0f} | {ms * 1e3 / k:.0f} |", flush=True)
    lt.set_device("cpu")


if __name__ == "__main__":
    main()
