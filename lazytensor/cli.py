"""The `lazytensor` command. `lazytensor demo` builds a small graph, prints it, then realizes it."""
import argparse
import sys


def demo(out=sys.stdout):
    """Build an attention-like graph, show that nothing ran, print its DOT text, then realize it."""
    import lazytensor as lt

    lt.reset_counters()
    x = lt.arange(12, dtype=lt.float32).reshape(3, 4) / 10
    w = lt.linspace(-1, 1, 8).reshape(4, 2)
    scores = (x @ w).tanh()
    probs = lt.softmax(scores, dim=-1)
    total = probs.sum(dim=0)
    c = lt.counters()
    print(f"built {len(lt.graph(total))} nodes; kernels run so far: {c['kernels']}", file=out)
    print(lt.graph(total).to_dot(), file=out)
    print("softmax(tanh(x @ w)).sum(0) =", total, file=out)
    c = lt.counters()
    print(f"after printing: {c['realizations']} realization, {c['kernels']} kernels, "
          f"host reads {c['host_reads_by_trigger']}", file=out)


def _train_parser(sub):
    from .train import TrainConfig
    d = TrainConfig()
    p = sub.add_parser("train", help="train the char-level GPT (default: tiny config on CPython's pydoc text)")
    p.add_argument("--config", default=d.config, choices=["tiny", "small"])
    p.add_argument("--steps", type=int, default=d.steps)
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--device", default=d.device, help="auto, cpu, virtual, cuda, metal (default: LAZYTENSOR_DEVICE)")
    p.add_argument("--budget", default=d.budget, help="device memory budget, e.g. 512MB")
    p.add_argument("--dropout", type=float, default=d.dropout)
    p.add_argument("--text", default=d.text, help="train on this UTF-8 text file instead of the built-in corpus")
    p.add_argument("--log-every", type=int, default=d.log_every, help="read the loss every N steps")
    p.add_argument("--eval-iters", type=int, default=d.eval_iters)
    p.add_argument("--sample-chars", type=int, default=d.sample_chars)
    p.add_argument("--png", default=None, help="write the loss curve to this PNG file")
    p.add_argument("--checkpoint", default=None, help="write model and optimizer state here at the end")
    p.add_argument("--resume", default=None, help="start from this checkpoint")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="lazytensor", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("demo", help="build a small lazy graph, print it and its realized result")
    _train_parser(sub)
    args = parser.parse_args(argv)
    if args.command in (None, "demo"):
        demo()
        return 0
    if args.command == "train":
        from .train import TrainConfig, run
        if args.steps <= 0 or args.log_every <= 0:
            parser.error("--steps and --log-every must be positive")
        options = {k: v for k, v in vars(args).items() if k != "command"}
        try:
            run(TrainConfig(**options))
        except (ValueError, OSError) as exc:
            print(f"lazytensor train: error: {exc}", file=sys.stderr)
            return 2
        return 0
    parser.error(f"unknown command {args.command}")


if __name__ == "__main__":
    sys.exit(main())
