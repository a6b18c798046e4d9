"""Median milliseconds per GPT training step (forward, backward, clip, AdamW) for the `tiny` and `small`
configs: lazytensor and, where installed, PyTorch eager CPU on the same model, weights and batches,
interleaved round by round in one process per thread count.

    python bench/train_step.py [--configs tiny small] [--threads 1 2] [--rounds 7] [--steps 5]

Prints a Markdown table (paste it into bench/RESULTS.md).
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def worker(config, rounds, steps):
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    from harness import summary, timed
    import lazytensor as lt
    lt.tune_host_malloc()  # as `lazytensor train` does (process-wide: the PyTorch twin gets it too)
    from lazytensor.data import CharDataset, default_corpus
    from lazytensor.train import TrainConfig, build, train_step

    data = CharDataset(default_corpus())
    cfg = TrainConfig(config=config, steps=rounds * steps + 10)
    lt.manual_seed(0)
    model, opt, _ = build(cfg, data)
    params = list(model.parameters())
    sizes = lt.models.CONFIGS[config]
    batches = [tuple(t.numpy() for t in data.batch("train", sizes["batch_size"], sizes["block_size"]))
               for _ in range(steps)]

    def ours():
        for x, y in batches:
            train_step(model, opt, params, lt.tensor(x), lt.tensor(y), 1.0).item()

    contenders = {"lazytensor": ours}
    try:
        import torch
        from torch_gpt import twin_of
        torch.set_num_threads(int(os.environ["BENCH_THREADS"]))
        twin, _ = twin_of(model)
        topt = torch.optim.AdamW(twin.parameters(), lr=3e-3, betas=(0.9, 0.99), weight_decay=0.1)

        def theirs():
            for x, y in batches:
                loss = twin(torch.from_numpy(x), torch.from_numpy(y))
                topt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(twin.parameters(), 1.0)
                topt.step()
                loss.item()
        contenders["pytorch"] = theirs
    except ImportError:
        pass
    for fn in contenders.values():  # warm up
        fn()
    samples = {name: [] for name in contenders}
    for _ in range(rounds):  # interleaved, so a disturbance hits both
        for name, fn in contenders.items():
            samples[name].append(timed(fn) / steps)
    print(json.dumps({name: summary(s) for name, s in samples.items()}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", nargs="+", default=["tiny", "small"])
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--worker", default=None)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.rounds, args.steps)
        return
    sys.path.insert(0, HERE)
    from harness import header
    print(header("Training step (forward + backward + clip + AdamW), median ms/step", args.threads))
    print("| config | threads | lazytensor ms | PyTorch ms | lazytensor / PyTorch |")
    print("|---|---|---|---|---|")
    for config in args.configs:
        for threads in args.threads:
            env = dict(os.environ, BENCH_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
                       OPENBLAS_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), NUMBA_NUM_THREADS=str(threads))
            out = subprocess.run([sys.executable, __file__, "--worker", config, "--rounds", str(args.rounds),
                                  "--steps", str(args.steps)], capture_output=True, text=True, env=env, check=True)
            res = json.loads(out.stdout.strip().splitlines()[-1])
            ours = res["lazytensor"]["median"] * 1e3
            if "pytorch" in res:
                theirs = res["pytorch"]["median"] * 1e3
                print(f"| {config} | {threads} | {ours:.1f} | {theirs:.1f} | {ours / theirs:.2f}x |", flush=True)
            else:
                print(f"| {config} | {threads} | {ours:.1f} | not installed | - |", flush=True)


if __name__ == "__main__":
    main()
