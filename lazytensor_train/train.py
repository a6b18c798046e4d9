"""The training job behind `lazytensor train`: a char-level GPT on a text, with progress, periodic
validation and checkpoints, exact resumption, a clean stop on Ctrl-C, a sample, the transfer summary,
residency stats and a loss-curve PNG. Under `mpiexec -n N` it trains data-parallel (docs/DISTRIBUTED.md):
each rank takes its part of a global batch of N x the config's batch, gradients are averaged, the
logged and validation losses are averaged over ranks, and only rank 0 prints and writes files.

Every input and output path and every setting is checked before anything is built; a loss that turns
NaN or infinite stops the run and leaves the last good checkpoint in place.
"""
import collections
import contextlib
import dataclasses
import io
import math
import os
import sys
import time

import numpy as np

import lazytensor
from lazytensor import (distributed, float64, get_device, get_rng_state, jit, kernel_cache_dir, manual_seed, nn, optim,
                        parse_bytes, profile, realize, residency_stats, set_device, set_memory_budget, set_rng_state,
                        tensor, when_compiling)

from . import checkpoint, report
from .config import TrainConfig, TrainError, check, check_resumed, plan_of, resolve  # noqa: F401 (API)
from .data import CharDataset, default_corpus
from .models import llama
from .models.gpt import CONFIGS, GPT, GPTConfig
from .rank_launcher import rank_pid_file
from .stop_request import StopRequest

EVAL_SEED = 20240601  # every evaluation draws the same batches, and leaves the training draws untouched


def train_step(model, opt, params, x, y, grad_clip):
    """One step: forward, backward, clip, AdamW update (realized). Returns the loss, still lazy/resident."""
    _, loss = model(x, y)
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(params, grad_clip)
    opt.step()
    return loss


def build(cfg, data):
    """The model (on the active device), its optimizer with decay/no-decay groups, and the schedule."""
    cfg = resolve(cfg)
    sizes = dict(CONFIGS[cfg.config])
    sizes.pop("batch_size")
    if cfg.model == "llama":
        model = Llama(data.vocab_size, sizes["n_layer"], sizes["n_head"], sizes["n_embd"], sizes["block_size"])
        for p in model.parameters():  # GPT-2/Llama's init: with the embedding as the head, N(0, 1) rows
            if p.ndim >= 2:           # would start the logits hundreds of nats off
                nn.init.normal_(p, 0.0, 0.02)
    else:
        model = GPT(GPTConfig(vocab_size=data.vocab_size, dropout=cfg.dropout, **sizes))
    if get_device() != "cpu":
        model.to(get_device())
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    opt = optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                       {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.99))
    sched = optim.CosineWarmupLR(opt, cfg.warmup, cfg.schedule_steps, min_lr=cfg.lr * cfg.min_lr_ratio)
    return model, opt, sched


# The Llama-style decoder written the way PyTorch users write it (RMSNorm, rotary embeddings, SwiGLU,
# tied embeddings), made with this library; the trainer uses its own optimizer, schedule and step.
Llama, _, _, llama_sample = llama.make(lazytensor)


def generate(model, prompt, new_tokens, temperature=0.8):
    """`prompt` (1, T) extended by `new_tokens` sampled tokens, with either model's sampler."""
    if isinstance(model, GPT):
        return model.generate(prompt, new_tokens, temperature=temperature)
    return llama_sample(model, prompt, new_tokens, temperature=temperature, top_k=None)


def evaluate(model, data, batch_size, block_size, iters, splits=("train", "val")):
    """Mean loss over `iters` fixed batches of each split (no gradients, eval mode, RNG left as found).
    In a data-parallel job the ranks share the batches (rank r takes batches r, r + N, ...) and the
    mean is over all of them: the value one process would compute."""
    state = get_rng_state()
    rank, size = _ranks()
    model.eval()
    out = {}
    try:
        with lazytensor.no_grad():
            for split in splits:
                manual_seed(EVAL_SEED + ("train", "val").index(split))  # a split's batches never vary
                batches = [data.batch(split, batch_size, block_size) for _ in range(iters)]
                losses = [model(*batch)[1] for batch in batches[rank::size]]
                realize(*losses)
                values = [loss.item() for loss in losses]
                if size > 1:
                    total = distributed.all_reduce(tensor([sum(values), len(values)], dtype=float64))
                    out[split] = float(total[0].item() / total[1].item())
                else:
                    out[split] = float(np.mean(values))
    finally:
        model.train()
        set_rng_state(state)
    return out


def _ranks():
    """(rank, number of ranks) of this data-parallel job; (0, 1) outside one."""
    if distributed.is_initialized():
        return distributed.rank(), distributed.world_size()
    return 0, 1


def _join_job():
    """Under an MPI launcher with several ranks, join the job; returns (rank, number of ranks)."""
    if distributed.launched_by_mpi():
        distributed.init()
    return _ranks()


def _read_text(path):
    if not path:
        return default_corpus()
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError as exc:
        raise TrainError(f"--text {path}: not UTF-8 text (byte {exc.start} cannot be decoded)") from None


def _dataset(text, cfg, block):
    """The dataset, once both splits are known to hold a batch (checked before training starts)."""
    source = f"--text {cfg.text}" if cfg.text else "the corpus"
    need = math.ceil((block + 2) / 0.1) + 1  # the validation split is the last tenth
    if not text:
        raise TrainError(f"{source}: the file is empty; give a text of at least {need:,} characters")
    train = int(len(text) * 0.9)  # CharDataset's split
    for split, held in (("train", train), ("val", len(text) - train)):
        if held <= block + 1:
            smaller = [name for name, c in CONFIGS.items() if c["block_size"] < block]
            hint = f" (or --config {smaller[0]}, whose blocks are shorter)" if smaller else ""
            raise TrainError(f"{source}: {len(text):,} characters leave {held:,} for the {split} split, fewer "
                             f"than the {block + 2} a block of {block} needs; use a text of at least {need:,} "
                             f"characters{hint}")
    return CharDataset(text, val_fraction=0.1)


def _resume_point(cfg):
    """(meta, plan saved in the checkpoint) for --resume, checked against this run's --steps."""
    if not cfg.resume:
        return None, None
    try:
        _, header = checkpoint.read(cfg.resume)
    except checkpoint.CheckpointError as exc:
        raise TrainError(f"--resume {exc}") from None  # the message begins with the file's name
    meta = header.get("meta", {})
    check_resumed(cfg.resume, meta)
    saved = {"config": meta.get("config"), "model": "gpt", **meta.get("plan", {})}  # older ones: all GPTs
    done = int(meta.get("step", 0))
    if cfg.steps <= done:
        raise TrainError(f"--resume {cfg.resume}: the checkpoint is at step {done}; --steps {cfg.steps} would "
                         f"train nothing (give --steps above {done})")
    return meta, saved


def _compile_note(out):
    """The line printed when kernels start compiling (the first run on a machine, or after an upgrade)."""
    def note():
        if _ranks()[0] == 0:
            print(f"compiling the CPU kernels: once per machine and version (tens of seconds); they are kept "
                  f"in {kernel_cache_dir()} for later runs", file=out, flush=True)
    return when_compiling(note)


def _progress(cfg, start, show):
    if show is None:
        show = sys.stderr.isatty()
    if not show:
        return None
    from tqdm import tqdm
    return tqdm(total=cfg.steps, initial=start, unit="step", file=sys.stderr, dynamic_ncols=True,
                mininterval=0.5, leave=False)


class _Run:
    """What one `run` carries between its parts: settings, data, model, history, outputs written."""

    def __init__(self, cfg, out):
        self.cfg, self.out = cfg, out
        self.history = {"steps": [], "loss": [], "val_steps": [], "val_loss": []}
        self.step_times = collections.deque(maxlen=1000)
        self.saved_step = None  # the step of the newest good checkpoint (this run's or the resumed one)
        self.modeled = None     # the profile of the one step modeled on a GPU profile (--modeled-device)
        self.written = False  # whether this run wrote a checkpoint
        self.errors = []

    def say(self, line, bar=None):
        if bar is not None:
            bar.write(line, file=self.out)
        else:
            print(line, file=self.out, flush=True)

    def save(self, model, opt, data, completed, rng_state):
        if distributed.is_initialized() and distributed.rank() != 0:  # every rank holds the same state
            self.saved_step = completed
            return
        meta = {"step": completed, "config": self.cfg.config, "vocab": "".join(data.chars),
                "plan": plan_of(self.cfg), "rng": rng_state, "history": self.history}
        checkpoint.save(self.cfg.checkpoint, model, opt, meta=meta, require_finite=True)
        self.saved_step = completed
        self.written = True

    def kept(self):
        """What a run stopped early leaves to continue from, in words."""
        if self.written:
            return f"the checkpoint of step {self.saved_step} is kept in {self.cfg.checkpoint}"
        if self.cfg.resume:
            return f"nothing was saved; --resume {self.cfg.resume} (step {self.saved_step}) is unchanged"
        return "no checkpoint was written" + ("" if self.cfg.checkpoint else " (no --checkpoint given)")


_STOP_CODES = {"SIGINT": 1, "SIGTERM": 2}
_STOP_NAMES = {code: name for name, code in _STOP_CODES.items()}


def _agreed_stop(stop, size):
    """The signal that asked this job to stop, or None: the same on every rank (a request any rank saw
    stops them all after this step; one collective of 8 bytes per step)."""
    name = stop.poll()
    if size == 1:
        return name
    code = tensor([_STOP_CODES.get(name, 0)])
    distributed.all_reduce(code, "max")
    return _STOP_NAMES.get(int(code.item()))


def run(cfg, out=None):
    """Train, report (to `out`, default stdout), and return a dict of what happened: "status" ("done",
    "interrupted", "aborted" or "nonfinite"), losses, timings, stats. Bad settings raise TrainError
    first."""
    out = sys.stdout if out is None else out
    check(cfg)
    started = {}  # what _run has set up so far: the run's _Run, once it exists
    with _compile_note(out):
        try:
            return _run(cfg, out, started)
        except KeyboardInterrupt:  # a Ctrl-C outside the loop (building, the final checkpoint, the report)
            state = started.get("state")
            kept = state.kept() if state is not None else "nothing was written"
            result = {"status": "aborted", "signal": "SIGINT", "errors": [],
                      "message": f"stopped at once; {kept}"}
            return _quiet_unless_first(result, _ranks()[0])


def _run(cfg, out, started):
    rank, size = _join_job()
    if rank != 0:  # rank 0 reports and writes; the others train quietly (and decide alike: same cfg)
        out = io.StringIO()
        cfg = dataclasses.replace(cfg, png=None, progress=False)
    if cfg.stop_dir is not None:  # a rank of `--nproc N`: its launcher signals it by this file
        with open(rank_pid_file(cfg.stop_dir, rank), "w") as f:
            f.write(str(os.getpid()))
    meta, saved = _resume_point(cfg)
    cfg = resolve(cfg, saved)
    if cfg.device is not None:
        set_device(cfg.device)
    if cfg.budget is not None:
        if get_device() == "cpu":
            raise TrainError(f"--budget {cfg.budget}: the cpu device keeps nothing resident, so a budget would "
                             "change nothing; give it with --device virtual or a GPU")
        nbytes = parse_bytes(cfg.budget)  # its form was checked with the other flags
        total = residency_stats()["devices"].get(get_device(), {}).get("device_total")
        if total and nbytes > total:
            raise TrainError(f"--budget {cfg.budget}: more than the {get_device()} device's {total:,} bytes of "
                             "memory; give at most that")
        set_memory_budget(nbytes)
    manual_seed(cfg.seed)
    batch_size, block = CONFIGS[cfg.config]["batch_size"], CONFIGS[cfg.config]["block_size"]
    data = _dataset(_read_text(cfg.text), cfg, block)
    state = started["state"] = _Run(cfg, out)
    if meta is not None and meta.get("vocab") not in (None, "".join(data.chars)):
        raise TrainError(f"--resume {cfg.resume}: the checkpoint was trained on a text with another vocabulary "
                         f"({len(meta['vocab'])} characters; this text has {data.vocab_size}); "
                         "pass the same --text")
    device = get_device()
    model, opt, sched = build(cfg, data)
    start = 0
    if meta is not None:
        try:
            checkpoint.load(cfg.resume, model, opt)
        except checkpoint.CheckpointError as exc:
            raise TrainError(f"--resume {exc}") from None
        start = state.saved_step = int(meta["step"])
        if "rng" in meta:
            set_rng_state(meta["rng"])
        sched.load_state_dict({"base_lrs": sched.base_lrs, "last_epoch": start})
        state.history = {k: list(v) for k, v in {**state.history, **meta.get("history", {})}.items()}
    params = list(model.parameters())
    stepped = distributed.DistributedDataParallel(model) if size > 1 else model
    step_fn = jit(train_step) if cfg.compile else train_step  # a replay runs the gradient collectives too
    resumed = f", resuming at step {start} from {cfg.resume}" if meta is not None else ""
    how = "compiled step (lt.jit)" if cfg.compile else "eager step (--no-compile)"
    ranks = f", on each of {size} data-parallel ranks ({distributed.library()})" if size > 1 else ""
    state.say(f"lazytensor train: {cfg.model} config {cfg.config} ({model.num_parameters():,} parameters, "
              f"{len(data.train):,} training chars, vocab {data.vocab_size}), device {device}, "
              f"{cfg.steps} steps, batch {batch_size} x {block}{resumed}{ranks}, {how}")
    status, bad_value, step, stopping = "done", None, start - 1, None
    bar = _progress(cfg, start, cfg.progress)
    stop = StopRequest(notice=sys.stderr if rank == 0 else None, watch=cfg.stop_dir)
    # Copies and stats only: timing kernels would cost an event pair each and keep compiled
    # replays off their prepared launches, and the ms/step printed must be the unprofiled speed.
    prof = profile(kernels=False)
    modeled_on = cfg.modeled_device or ("h200" if device == "virtual" else "none")
    # the third step: an eager step past its first sightings, a compiled one replayed (through the executors)
    modeled_at = min(start + 2, cfg.steps - 1) if modeled_on != "none" else None
    try:
        with prof, stop:
            window_start, window_steps = time.perf_counter(), 0
            for step in range(start, cfg.steps):
                t0 = time.perf_counter()
                # one step, its batch's copies included, with kernel records: its modeled time on a GPU profile
                with profile(model=modeled_on) if step == modeled_at else contextlib.nullcontext() as modeled:
                    x, y = data.batch("train", batch_size * size, block)  # every rank draws the global batch
                    if size > 1:
                        mine = slice(rank * batch_size, (rank + 1) * batch_size)
                        x, y = x[mine], y[mine]
                    if device != "cpu":
                        x.to(device)
                        y.to(device)
                    loss = step_fn(stepped, opt, params, x, y, cfg.grad_clip)
                    if modeled is not None:
                        realize(loss)
                if modeled is not None:
                    state.modeled = modeled
                sched.step()
                state.step_times.append(time.perf_counter() - t0)
                window_steps += 1
                completed = step + 1
                stopping = _agreed_stop(stop, size)  # before any branch a collective is in: same on every rank
                log = step % cfg.log_every == 0 or completed == cfg.steps
                save = bool(cfg.checkpoint and cfg.checkpoint_every and completed % cfg.checkpoint_every == 0)
                if log or save or stopping:
                    if size > 1 and (log or save):  # the same steps on every rank: the mean over ranks
                        distributed.all_reduce(loss, "mean")
                    value = loss.item()  # the only host read of a step, and only on these steps
                    if not math.isfinite(value):
                        status, bad_value = "nonfinite", value
                        break
                if log:
                    state.history["steps"].append(step)
                    state.history["loss"].append(value)
                    elapsed = time.perf_counter() - window_start
                    tok_s = size * batch_size * block * window_steps / elapsed
                    state.say(f"step {step:5d} | loss {value:.4f} | {tok_s:9,.0f} tok/s | "
                              f"{1e3 * elapsed / window_steps:7.1f} ms/step | lr {sched.get_last_lr()[0]:.2e}", bar)
                    if bar is not None:
                        bar.set_postfix_str(f"loss {value:.4f}, {tok_s:,.0f} tok/s")
                    window_start, window_steps = time.perf_counter(), 0
                if completed % cfg.eval_every == 0 and completed != cfg.steps and not stopping:
                    val = evaluate(model, data, batch_size, block, cfg.eval_iters, ("val",))["val"]
                    state.history["val_steps"].append(step)
                    state.history["val_loss"].append(val)
                    state.say(f"step {step:5d} | val loss {val:.4f}", bar)
                if save and not stopping:
                    try:
                        state.save(model, opt, data, completed, get_rng_state())
                    except checkpoint.NonFiniteError:
                        status, bad_value = "nonfinite", float("nan")
                        break
                if bar is not None:
                    bar.update(1)
                if stopping:
                    status = "interrupted"
                    break
    except KeyboardInterrupt:  # a second Ctrl-C: stop now, mid-step; nothing more is written
        status, stopping = "aborted", stop.requested
    finally:
        if bar is not None:
            bar.close()
    result = {"status": status, "history": state.history, "transfers": prof.transfers, "profile": prof,
              "model": model, "errors": state.errors, "signal": stopping, "first_step": start,
              "median_step_ms": 1e3 * float(np.median(list(state.step_times)[1:] or list(state.step_times) or [0])),
              "modeled": state.modeled.stats["modeled"] if state.modeled is not None else None}
    if status == "aborted":
        result["message"] = f"stopped at once during step {step + 1}; {state.kept()}"
        return _quiet_unless_first(result, rank)
    if status == "nonfinite":
        kept = (f"the last good checkpoint (step {state.saved_step}) is kept in {cfg.checkpoint}"
                if state.saved_step is not None and cfg.checkpoint else "no checkpoint was written")
        result["message"] = (f"the loss became {bad_value} at step {step}: stopped; {kept}. "
                             f"Try a lower --lr (now {cfg.lr:g}) or --grad-clip (now {cfg.grad_clip:g})")
        _write_png(state, cfg, None)
        return _quiet_unless_first(result, rank)
    if cfg.checkpoint and state.saved_step != step + 1:  # unless the last step's periodic save wrote it
        _write(state, "checkpoint", lambda: state.save(model, opt, data, step + 1, get_rng_state()))
    if status == "interrupted":
        written = (f"checkpoint written to {cfg.checkpoint} (continue with --resume {cfg.checkpoint})"
                   if state.saved_step == step + 1 else "no --checkpoint given, nothing saved")
        result["message"] = f"stopped by {stopping} after step {step} of {cfg.steps}: {written}"
        _write_png(state, cfg, None)
        return _quiet_unless_first(result, rank)
    _report(state, result, model, data, batch_size, block, prof)
    return result


def _quiet_unless_first(result, rank):
    """`result` without its closing message on ranks other than 0 (which says it for the job)."""
    if rank != 0:
        result.pop("message", None)
    return result


def _report(state, result, model, data, batch_size, block, prof):
    """After training: final losses, a sample, the transfer summary, residency stats, the PNG."""
    cfg, out = state.cfg, state.out
    losses = evaluate(model, data, batch_size, block, cfg.eval_iters)
    state.history["val_steps"].append(cfg.steps - 1)
    state.history["val_loss"].append(losses["val"])
    unigram = data.unigram_loss("val")
    print(f"\nfinal loss: train {losses['train']:.4f}, val {losses['val']:.4f} (an evaluation: "
          f"{cfg.eval_iters} batches per split, dropout off; unigram baseline on val: {unigram:.4f} nats/char)",
          file=out)
    sample = ""
    if cfg.sample_chars:
        prompt = data.batch("val", 1, 8)[0]
        ids = generate(model, prompt, cfg.sample_chars, temperature=0.8).numpy()[0]
        sample = data.decode(ids)
        print("\nsample:\n" + sample + "\n", file=out)
    print(f"what moved and what was read (the loss is read every {cfg.log_every} steps):", file=out)
    print(report.summary(prof, cfg.steps - result["first_step"]), file=out)
    if state.modeled is not None:
        print(report.modeled(state.modeled, result["median_step_ms"]), file=out)
    if cfg.checkpoint and state.saved_step == cfg.steps:
        print(f"checkpoint written to {cfg.checkpoint}", file=out)
    _write_png(state, cfg, unigram)
    print(f"median step {result['median_step_ms']:.1f} ms", file=out)
    result.update({"final": losses, "unigram_val": unigram, "sample": sample})


def _write(state, what, action):
    """Run one output's writer; a failure is reported and recorded, and the other outputs still go out."""
    try:
        action()
        return True
    except (OSError, ValueError) as exc:
        state.errors.append(f"{what} not written: {exc}")
        print(f"lazytensor train: error: {what} not written: {exc}", file=sys.stderr)
        return False


def _write_png(state, cfg, unigram):
    if not cfg.png or not state.history["steps"]:
        return
    from .plot import loss_curve
    h = state.history
    series = {"train loss": (h["steps"], h["loss"])}
    if h["val_steps"]:
        series["val loss"] = (h["val_steps"], h["val_loss"])
    references = {"unigram baseline": unigram} if unigram is not None else {}
    title = f"lazytensor train: {cfg.config}, {cfg.steps} steps"
    if _write(state, "loss curve", lambda: loss_curve(cfg.png, series, references, title=title)):
        print(f"loss curve written to {cfg.png}", file=state.out)
