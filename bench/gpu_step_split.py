"""Where a GPU training step's time goes: the host issuing it, or the device running it.

    python bench/gpu_step_split.py [tiny small]

For the eager step and the `lt.jit` step on the CUDA backend, after warm-up, over 5 steps: the host's
time to issue them (the call returns once the step's launches are queued; the loss is realized on the
device, never read), the wall time once the device has finished (synchronized once at the end), and the
device's busy time between two events recorded around the steps. Then one profiled step per kind
(`lt.profile()`, device events per kernel): the kernels that take the most device time.
"""
import sys
import time

import lazytensor as lt


def _batches(data, sizes, n):
    return [tuple(t.numpy() for t in data.batch("train", sizes["batch_size"], sizes["block_size"])) for _ in range(n)]


def split(config, steps=5):
    from lazytensor_train.data import CharDataset, default_corpus
    from lazytensor_train.models.gpt import CONFIGS
    from lazytensor_train.train import TrainConfig, build, train_step
    data = CharDataset(default_corpus())
    batches = _batches(data, CONFIGS[config], steps)
    driver = lt.runtime.devices.active_device().driver
    for compiled in (False, True):
        lt.manual_seed(0)
        model, opt, _ = build(TrainConfig(config=config, steps=1000), data)
        params = list(model.parameters())
        step = lt.jit(train_step) if compiled else train_step

        def run():
            for x, y in batches:
                step(model, opt, params, lt.tensor(x).to("cuda"), lt.tensor(y).to("cuda"), 1.0).realize()
        for _ in range(2):
            run()
        driver.synchronize()
        start = driver.event()
        t0 = time.perf_counter()
        run()
        issued = time.perf_counter() - t0
        end = driver.event()
        driver.synchronize()
        wall = time.perf_counter() - t0
        busy = driver.elapsed_ms(start, end) / 1e3
        kind = "lt.jit" if compiled else "eager"
        print(f"| {config} | {kind} | {issued / steps * 1e3:.2f} | {wall / steps * 1e3:.2f} | "
              f"{busy / steps * 1e3:.2f} |")
        with lt.profile() as p:
            x, y = batches[0]
            step(model, opt, params, lt.tensor(x).to("cuda"), lt.tensor(y).to("cuda"), 1.0).realize()
        by_op = {}
        for k in p.kernels:
            total = by_op.setdefault((k.backend, k.op), [0, 0.0])
            total[0] += 1
            total[1] += k.duration_s
        top = sorted(by_op.items(), key=lambda item: -item[1][1])[:12]
        print(f"    profiled {kind} step: {len(p.kernels)} kernels, {sum(t for _, t in by_op.values()) * 1e3:.2f} ms: "
              + ", ".join(f"{op}@{backend} {n}x {t * 1e3:.2f}" for (backend, op), (n, t) in top))


def main():
    lt.set_device("cuda")
    print("| config | step | host issue ms/step | wall ms/step | device events ms/step |")
    print("|---|---|---|---|---|")
    for config in sys.argv[1:] or ("tiny", "small"):
        split(config)


if __name__ == "__main__":
    main()
