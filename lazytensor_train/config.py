"""The settings of `lazytensor train`: defaults, checks made before any training, and resuming's rules.

A field left at None is "not given": it takes its default, or on `--resume` the checkpoint's value, so
a resumed run continues the same training plan (model, learning-rate schedule, data order) exactly.
"""
import dataclasses
import math
import os

from lazytensor import device_profiles, parse_bytes

from .models.gpt import CONFIGS


class TrainError(ValueError):
    """A setting, an input file or an output path that cannot work; the message names the flag."""


@dataclasses.dataclass
class TrainConfig:
    # the training plan: a resumed run takes these from its checkpoint unless they are given
    config: str = None
    model: str = None
    lr: float = None
    min_lr_ratio: float = None
    warmup: int = None
    weight_decay: float = None
    grad_clip: float = None
    dropout: float = None
    seed: int = None
    schedule_steps: int = None
    # this run: free to differ between a run and its resumption
    steps: int = 300
    device: str = None
    budget: str = None
    text: str = None
    log_every: int = 25
    eval_every: int = 100
    eval_iters: int = 10
    sample_chars: int = 200
    png: str = None
    checkpoint: str = None
    checkpoint_every: int = 100
    resume: str = None
    progress: bool = None  # a progress bar: None shows it when stderr is a terminal
    compile: bool = True  # replay the captured training step (lt.jit) instead of rebuilding it each step
    modeled_device: str = None  # a device profile to model one step on (lt.device_profiles()); None: "h200"
    #                             on the virtual device, else none
    stop_dir: str = None  # a rank of `--nproc N`: the folder its launcher writes stop requests to


MODELS = ("gpt", "llama")
PLAN_DEFAULTS = {"config": "tiny", "model": "gpt", "lr": 3e-3, "min_lr_ratio": 0.1, "warmup": 20, "weight_decay": 0.1,
                 "grad_clip": 1.0, "dropout": 0.0, "seed": 1337}
PLAN = tuple(PLAN_DEFAULTS) + ("schedule_steps",)

_FLAG = {name: "--" + name.replace("_", "-") for name in (f.name for f in dataclasses.fields(TrainConfig))}


def _shown(value):
    return f"{value:g}" if isinstance(value, float) else repr(value) if isinstance(value, str) else str(value)


def _bad(name, value, need):
    raise TrainError(f"{_FLAG[name]} {_shown(value)}: {need}")


def _number(name, value, low, high, low_open=False, integer=False):
    if integer and (isinstance(value, bool) or not isinstance(value, int)):
        _bad(name, value, "must be a whole number")
    if not integer and (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)):
        _bad(name, value, "must be a finite number")
    below = value <= low if low_open else value < low
    if below or (high is not None and value > high):
        lo = "(" if low_open else "["
        _bad(name, value, f"must be in {lo}{low:g}, {'inf)' if high is None else f'{high:g}]'}")


def check(cfg):
    """Raise TrainError for any setting that cannot work, before anything is built or trained."""
    if cfg.config is not None and cfg.config not in CONFIGS:
        _bad("config", cfg.config, f"choose one of {sorted(CONFIGS)}")
    if cfg.model is not None and cfg.model not in MODELS:
        _bad("model", cfg.model, f"choose one of {list(MODELS)}")
    if cfg.model == "llama" and cfg.dropout:
        _bad("dropout", cfg.dropout, "the llama model has no dropout; leave --dropout out (or 0)")
    ranges = {"lr": (0.0, 1.0, True, False), "min_lr_ratio": (0.0, 1.0, False, False),
              "warmup": (0, None, False, True), "weight_decay": (0.0, None, False, False),
              "grad_clip": (0.0, None, True, False), "dropout": (0.0, 0.95, False, False),
              "seed": (0, 2 ** 64 - 1, False, True), "schedule_steps": (1, None, False, True),
              "steps": (1, None, False, True), "log_every": (1, None, False, True),
              "eval_every": (1, None, False, True), "eval_iters": (1, None, False, True),
              "sample_chars": (0, None, False, True), "checkpoint_every": (0, None, False, True)}
    for name, (low, high, low_open, integer) in ranges.items():
        value = getattr(cfg, name)
        if value is not None:
            _number(name, value, low, high, low_open, integer)
    if cfg.budget is not None:
        try:
            parse_bytes(cfg.budget)
        except ValueError as exc:
            _bad("budget", cfg.budget, str(exc))
    known = device_profiles()
    if cfg.modeled_device is not None and cfg.modeled_device != "none" and cfg.modeled_device not in known:
        _bad("modeled_device", cfg.modeled_device, f"known device profiles: {', '.join(sorted(known))}, or none")
    for name in ("png", "checkpoint"):
        path = getattr(cfg, name)
        if path is not None:
            check_output_path(name, path)
    check_distinct_paths(cfg)
    for name in ("text", "resume"):
        path = getattr(cfg, name)
        if path is not None and not os.path.isfile(path):
            raise TrainError(f"{_FLAG[name]} {path}: no such file"
                             + (" (it is a directory)" if os.path.isdir(path) else ""))


def check_output_path(name, path):
    """An output file must be creatable: its folder exists and is writable, and it is not a folder."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise TrainError(f"{_FLAG[name]} {path}: is a directory; give a file name")
    if not os.path.isdir(folder):
        raise TrainError(f"{_FLAG[name]} {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise TrainError(f"{_FLAG[name]} {path}: cannot write there (permission denied)")


def check_distinct_paths(cfg):
    """Every output path names a file no other input or output names: a PNG written over the checkpoint,
    or a checkpoint over the training text, would destroy it. The one exception is continuing a
    checkpoint in place (--resume ck.npz --checkpoint ck.npz), which is written atomically."""
    named = [(name, getattr(cfg, name)) for name in ("text", "resume", "checkpoint", "png")
             if getattr(cfg, name) is not None]
    for i, (out, out_path) in enumerate(named):
        if out not in ("checkpoint", "png"):
            continue
        for other, other_path in named[:i]:
            if {out, other} == {"checkpoint", "resume"}:
                continue
            if _same_file(out_path, other_path):
                raise TrainError(f"{_FLAG[out]} {out_path}: is also {_FLAG[other]} {other_path}; writing it "
                                 f"would destroy that file; give {_FLAG[out]} a path of its own")


def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist yet
        return os.path.realpath(a) == os.path.realpath(b)


def resolve(cfg, saved=None):
    """`cfg` with every plan field filled: given values, else the checkpoint's (`saved`), else defaults.

    A given value that differs from the checkpoint's is an error: the run would not continue the plan
    the checkpoint was made with.
    """
    values = dataclasses.asdict(cfg)
    saved = saved or {}
    for name in PLAN:
        if name in saved and saved[name] is not None:
            if values[name] is not None and values[name] != saved[name]:
                what = "config" if name == "config" else _FLAG[name]
                raise TrainError(f"the checkpoint is {what} {saved[name]!r}, this run is {what} {values[name]!r}; "
                                 f"resume with the checkpoint's value (or leave {_FLAG[name]} out)")
            values[name] = saved[name]
        elif values[name] is None:
            values[name] = cfg.steps if name == "schedule_steps" else PLAN_DEFAULTS[name]
    return TrainConfig(**values)


def plan_of(cfg):
    """The plan fields of a resolved config, as a checkpoint stores them."""
    return {name: getattr(cfg, name) for name in PLAN}


HISTORY = ("steps", "loss", "val_steps", "val_loss")


def check_resumed(path, meta):
    """Raise TrainError, naming --resume and the file, unless `meta` (a checkpoint's) has the fields and
    values `lazytensor train` writes: the step, config, vocabulary, a plan that passes the checks its
    flags pass, the generator's state and the loss history."""
    def bad(what):
        raise TrainError(f"{_FLAG['resume']} {path}: {what}; the file is corrupt or was not written by "
                         "lazytensor train")

    def whole(v):
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0

    def number(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if not whole(meta.get("step", 0)):
        bad(f"its step is {str(meta.get('step'))[:40]}, not a whole number")
    if meta.get("config") is not None and meta.get("config") not in CONFIGS:
        bad(f"its config is {str(meta.get('config'))[:40]}, not one of {sorted(CONFIGS)}")
    if meta.get("vocab") is not None and not (isinstance(meta["vocab"], str) and meta["vocab"]):
        bad("its vocabulary is not a text")
    plan = meta.get("plan", {})
    if not isinstance(plan, dict) or set(plan) - set(PLAN):
        bad("its training plan is not an object of the plan's settings")
    try:
        check(TrainConfig(**plan))
    except TrainError as exc:
        bad(f"its training plan has {exc}")
    rng = meta.get("rng")
    if rng is not None and not (isinstance(rng, dict) and set(rng) == {"seed", "next_stream"}
                                and all(whole(v) and v < 2 ** 64 for v in rng.values())):
        bad("its random generator state is not {seed, next_stream}")
    history = meta.get("history", {})
    if not isinstance(history, dict) or set(history) - set(HISTORY) or not all(
            isinstance(v, list) and all(number(x) for x in v) for v in history.values()):
        bad("its loss history is not lists of numbers")
