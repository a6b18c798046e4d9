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


def main(argv=None):
    parser = argparse.ArgumentParser(prog="lazytensor", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("demo", help="build a small lazy graph, print it and its realized result")
    args = parser.parse_args(argv)
    if args.command in (None, "demo"):
        demo()
        return 0
    parser.error(f"unknown command {args.command}")


if __name__ == "__main__":
    sys.exit(main())
