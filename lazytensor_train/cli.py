"""The `lazytensor` command. `lazytensor demo` builds a small graph, prints it, then realizes it."""
import argparse
import os
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
    from .config import PLAN_DEFAULTS as P
    from .config import TrainConfig
    d = TrainConfig()
    resumed = "; on --resume, the checkpoint's"
    p = sub.add_parser("train", help="train the char-level GPT (default: tiny config on CPython's pydoc text)",
                       description="Train a char-level GPT. Settings of the training plan (config, lr, schedule, "
                                   "seed, ...) default to the checkpoint's values when resuming.")
    plan = p.add_argument_group("training plan")
    plan.add_argument("--config", choices=["tiny", "small"],
                      help=f"model and batch size: tiny (2 layers, 64 wide) or small (4 layers, 128 wide) "
                           f"(default: {P['config']}{resumed})")
    plan.add_argument("--model", choices=["gpt", "llama"],
                      help="gpt: nanoGPT-style (LayerNorm, GELU MLP, learned positions); llama: RMSNorm, rotary "
                           f"positions, SwiGLU MLP, no biases (default: {P['model']}{resumed})")
    plan.add_argument("--lr", type=float, help=f"peak learning rate, in (0, 1] (default: {P['lr']:g}{resumed})")
    plan.add_argument("--min-lr-ratio", type=float,
                      help=f"final learning rate as a fraction of --lr (default: {P['min_lr_ratio']:g}{resumed})")
    plan.add_argument("--warmup", type=int, help=f"linear warm-up steps (default: {P['warmup']}{resumed})")
    plan.add_argument("--weight-decay", type=float,
                      help=f"AdamW weight decay of the matrices (default: {P['weight_decay']:g}{resumed})")
    plan.add_argument("--grad-clip", type=float,
                      help=f"clip the gradients' global norm to this (default: {P['grad_clip']:g}{resumed})")
    plan.add_argument("--dropout", type=float, help=f"dropout probability (default: {P['dropout']:g}{resumed})")
    plan.add_argument("--seed", type=int, help=f"random seed: weights, batches, dropout (default: {P['seed']}{resumed})")
    plan.add_argument("--schedule-steps", type=int,
                      help="length of the learning-rate schedule; later steps use the final rate "
                           f"(default: --steps{resumed})")
    p.add_argument("--steps", type=int, default=d.steps,
                   help=f"train until this many steps are done, counting a resumed checkpoint's (default: {d.steps})")
    p.add_argument("--device", help="auto, cpu, virtual, cuda, metal (default: LAZYTENSOR_DEVICE, else auto)")
    p.add_argument("--budget", help="device memory budget, e.g. 512MB (default: a quarter of the device's free memory)")
    p.add_argument("--text", help="train on this UTF-8 text file (default: the built-in corpus, CPython's pydoc text)")
    p.add_argument("--log-every", type=int, default=d.log_every,
                   help=f"print (and read) the loss every N steps (default: {d.log_every})")
    p.add_argument("--eval-every", type=int, default=d.eval_every,
                   help=f"validation loss every N steps, and at the end (default: {d.eval_every})")
    p.add_argument("--eval-iters", type=int, default=d.eval_iters,
                   help=f"batches per split in each evaluation (default: {d.eval_iters})")
    p.add_argument("--sample-chars", type=int, default=d.sample_chars,
                   help=f"characters to sample after training; 0 for none (default: {d.sample_chars})")
    p.add_argument("--png", help="write the loss curve to this PNG file (matplotlib if installed, else built in)")
    p.add_argument("--checkpoint", help="write model, optimizer and data-order state to this .npz file")
    p.add_argument("--checkpoint-every", type=int, default=d.checkpoint_every,
                   help=f"with --checkpoint: also write it every N steps; 0 for only at the end (default: "
                        f"{d.checkpoint_every})")
    p.add_argument("--resume", help="continue from this checkpoint, exactly where it stopped")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show a progress bar on stderr (default: when stderr is a terminal)")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=d.compile,
                   help="capture the training step once and replay it (lt.jit); --no-compile rebuilds "
                        "and plans it every step (default: on)")
    p.add_argument("--modeled-device", metavar="PROFILE",
                   help="model one training step's time on this device profile (h200, rtx4060; a model, not a "
                        "measurement) and print it with the closing table; none: do not (default: h200 on the "
                        "virtual device, else none)")
    p.add_argument("--nproc", type=int, default=None,
                   help="train data-parallel on N processes of this machine: runs mpiexec -n N lazytensor "
                        "train with the other options (needs lazytensor[mpi]; on a cluster call mpiexec)")
    p.add_argument("--stop-dir", help=argparse.SUPPRESS)  # set by --nproc's launcher for its ranks
    return p


def main(argv=None):
    from lazytensor import __version__
    parser = argparse.ArgumentParser(prog="lazytensor", description=__doc__)
    parser.add_argument("--version", action="version", version=f"lazytensor {__version__}")
    sub = parser.add_subparsers(dest="command")
    demo_parser = sub.add_parser("demo", help="build a small lazy graph, print it and its realized result")
    train_parser = _train_parser(sub)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said by the subcommand's parser, so its usage (and the closest flag) is what is shown
        _unknown_arguments({"train": train_parser, "demo": demo_parser}.get(args.command, parser), unknown)
    if args.command in (None, "demo"):
        demo()
        return 0
    if args.command == "train":
        if args.nproc is not None:
            return _launch_ranks(args.nproc, sys.argv[1:] if argv is None else argv)
        return _train(args)
    parser.error(f"unknown command {args.command}")


def _unknown_arguments(parser, unknown):
    """Exit 2 through `parser.error`, naming the unrecognized arguments and the closest known flag."""
    import difflib
    flags = [o for action in parser._actions for o in action.option_strings if action.help != argparse.SUPPRESS]
    first = unknown[0].split("=", 1)[0]
    close = difflib.get_close_matches(first, flags, n=1) if first.startswith("-") else []
    hint = f" (did you mean {close[0]}?)" if close else ""
    parser.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")


def _without_nproc(argv):
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--nproc":
            skip = True
        elif not a.startswith("--nproc="):
            out.append(a)
    return out


def _launch_ranks(n, argv):
    """`--nproc N`: the same command under `mpiexec -n N` (its exit status is the job's)."""
    import shutil
    from . import rank_launcher
    from lazytensor.distributed import launched_by_mpi
    if n < 1:
        print(f"lazytensor train: error: --nproc {n}: give at least 1 process", file=sys.stderr)
        return 2
    if launched_by_mpi():
        print("lazytensor train: error: --nproc inside an mpiexec job; give one or the other", file=sys.stderr)
        return 2
    here = os.path.dirname(sys.executable)
    mpiexec = shutil.which("mpiexec", path=here + os.pathsep + os.environ.get("PATH", ""))
    if mpiexec is None:
        print("lazytensor train: error: --nproc needs mpiexec: pip install 'lazytensor[mpi]' (mpi4py and "
              "MPICH), or load your cluster's MPI", file=sys.stderr)
        return 2
    return rank_launcher.launch(mpiexec, n, _without_nproc(argv))


def _train(args):
    """Run the training job; exit status 0 done, 1 a NaN loss or an output not written, 2 bad input,
    130 stopped by Ctrl-C (SIGINT), 143 by SIGTERM."""
    import lazytensor as lt

    from .stop_request import exit_status
    from .train import TrainConfig, run
    options = {k: v for k, v in vars(args).items() if k not in ("command", "nproc")}
    try:
        lt.check_settings()  # a bad LAZYTENSOR_* value: one line now, not a traceback mid-run
        result = run(TrainConfig(**options))
    except BrokenPipeError:  # `lazytensor train | head`: the reader left; stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (ValueError, OSError) as exc:  # TrainError, CheckpointError, a bad --budget, an unreadable file
        print(f"lazytensor train: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before the run began (the run reports its own)
        print("lazytensor train: stopped at once, before training began; nothing was written", file=sys.stderr)
        return 130
    if "message" in result:
        print(f"lazytensor train: {result['message']}", file=sys.stderr)
    if result["status"] in ("interrupted", "aborted"):
        return exit_status(result["signal"])
    return 1 if result["status"] == "nonfinite" or result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
