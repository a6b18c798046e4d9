"""`lazytensor train` as a user runs it: bad input refused before training, periodic checkpoints, exact
resumption, Ctrl-C / SIGTERM / SIGKILL, a NaN loss, outputs written independently, help and version."""
import io
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import lazytensor as lt
from lazytensor_train import checkpoint, cli, train
from lazytensor_train.data import CharDataset, default_corpus
from lazytensor_train.train import TrainConfig, build, run
from training_processes import start_training, wait_for_step

FAST = ["--eval-iters", "1", "--sample-chars", "0"]


def _cli(capsys, *args):
    """Run the command in this process; (exit status, stdout, stderr)."""
    code = cli.main(["train", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def small_checkpoint(tmp_path):
    """A checkpoint of the 'small' config at step 50 (never trained: only its header matters here)."""
    lt.manual_seed(0)
    data = CharDataset(default_corpus())
    model, opt, _ = build(TrainConfig(config="small"), data)
    path = tmp_path / "small.npz"
    checkpoint.save(str(path), model, opt, meta={"step": 50, "config": "small", "vocab": "".join(data.chars)})
    return path


def _bad_inputs(tmp_path, small_checkpoint):
    short = tmp_path / "short.txt"
    short.write_text("x" * 200)
    note = tmp_path / "note.txt"
    note.write_text("hello")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    corrupt = tmp_path / "corrupt.npz"
    _, arrays = checkpoint.read_archive(str(small_checkpoint), "__header__")
    header = np.frombuffer(b'{"format": "lazytensor-checkpoint-1", "arrays": [], "meta": {}}', np.uint8)
    np.savez(corrupt, __header__=header, **arrays)
    return [
        (["--text", str(tmp_path / "missing.txt")], "--text .*missing.txt: no such file"),
        (["--text", str(short)], "200 characters leave 20 for the val split, fewer than the 66 a block of 64 needs; "
                                 "use a text of at least 661 characters$"),  # no --config tiny: it is the default
        (["--lr", "nan"], r"--lr nan: must be a finite number"),
        (["--lr", "1e9"], r"--lr 1e\+09: must be in \(0, 1\]"),
        (["--lr", "0"], r"--lr 0: must be in \(0, 1\]"),
        (["--eval-iters", "0"], r"--eval-iters 0: must be in \[1, inf\)"),
        (["--sample-chars", "-5"], r"--sample-chars -5: must be in \[0, inf\)"),
        (["--steps", "0"], r"--steps 0: must be in \[1, inf\)"),
        (["--dropout", "1.5"], r"--dropout 1.5: must be in \[0, 0.95\]"),
        (["--checkpoint", "/nonexistent/dir/c.npz"], "--checkpoint /nonexistent/dir/c.npz: the folder /nonexistent/dir "
                                                     "does not exist"),
        (["--png", str(tmp_path)], "--png .*: is a directory"),
        (["--resume", str(tmp_path / "gone.npz")], "--resume .*gone.npz: no such file"),
        (["--resume", str(note)], "note.txt: not a lazytensor checkpoint"),
        (["--config", "tiny", "--steps", "60", "--resume", str(small_checkpoint)],
         "the checkpoint is config 'small', this run is config 'tiny'"),
        (["--steps", "30", "--resume", str(small_checkpoint)],
         "the checkpoint is at step 50; --steps 30 would train nothing"),
        (["--budget", "lots"], "cannot read 'lots' as a number of bytes"),
        (["--model", "llama", "--dropout", "0.1"], "--dropout 0.1: the llama model has no dropout"),
        (["--model", "llama", "--config", "small", "--steps", "60", "--resume", str(small_checkpoint)],
         "the checkpoint is --model 'gpt', this run is --model 'llama'"),
        # an output over an input or another output would destroy it
        (["--png", str(tmp_path / "o.npz"), "--checkpoint", str(tmp_path / "o.npz")],
         "--png .*o.npz: is also --checkpoint .*o.npz; writing it would destroy that file"),
        (["--steps", "60", "--resume", str(small_checkpoint), "--png", str(small_checkpoint)],
         "--png .*small.npz: is also --resume .*small.npz"),
        (["--text", str(note), "--checkpoint", str(tmp_path / "." / "note.txt")],
         "--checkpoint .*note.txt: is also --text .*note.txt"),
        (["--text", str(empty)], "--text .*empty.txt: the file is empty"),
        (["--device", "cpu", "--budget", "512MB"], "--budget 512MB: the cpu device keeps nothing resident"),
        (["--device", "virtual", "--budget", "100GB"],
         "--budget 100GB: more than the virtual device's 1,073,741,824 bytes of memory"),
        (["--resume", str(corrupt)], "--resume .*corrupt.npz: corrupt checkpoint header"),
        (["--modeled-device", "a100"], "--modeled-device 'a100': known device profiles: h200, rtx4060, or none"),
    ]


def test_every_bad_input_is_refused_before_training_with_a_message_naming_it(tmp_path, small_checkpoint, capsys):
    for args, message in _bad_inputs(tmp_path, small_checkpoint):
        code, out, err = _cli(capsys, *FAST, *args)
        assert code == 2, (args, err)
        assert err.startswith("lazytensor train: error: ") and len(err.strip().splitlines()) == 1, err
        assert __import__("re").search(message, err), (message, err)
        assert "step     0" not in out  # refused before the first step
        assert "pickle" not in err


def test_help_shows_each_flags_default_and_version_prints_it(capsys):
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag, default in [("--lr", "0.003"), ("--steps", "300"), ("--checkpoint-every", "100"),
                          ("--eval-every", "100"), ("--config", "tiny"), ("--seed", "1337"), ("--log-every", "25")]:
        assert flag in text and f"(default: {default}" in text, flag
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert capsys.readouterr().out.strip() == f"lazytensor {lt.__version__}"


def _losses_by_step(history):
    return {s: np.float64(v).tobytes() for s, v in zip(history["steps"], history["loss"])}


def _params(model):
    return {k: v.numpy().tobytes() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("device", ["cpu", "virtual"])
def test_training_half_then_resuming_equals_training_straight_through(tmp_path, device):
    kw = dict(eval_iters=1, sample_chars=0, log_every=4, eval_every=8, device=device, dropout=0.1)
    straight = run(TrainConfig(steps=24, **kw), out=io.StringIO())
    ck = str(tmp_path / "half.npz")
    first = run(TrainConfig(steps=12, schedule_steps=24, checkpoint=ck, **kw), out=io.StringIO())
    assert first["status"] == "done" and checkpoint.read(ck)[1]["meta"]["step"] == 12
    resumed = run(TrainConfig(steps=24, resume=ck, **kw), out=io.StringIO())
    a, b = _losses_by_step(straight["history"]), _losses_by_step(resumed["history"])
    assert set(a) <= set(b) and all(a[s] == b[s] for s in a)  # the resumed run logged step 11 as well
    assert straight["history"]["val_loss"] == resumed["history"]["val_loss"]
    assert _params(straight["model"]) == _params(resumed["model"])


def test_the_llama_model_trains_samples_and_resumes_from_the_command(tmp_path):
    kw = dict(model="llama", eval_iters=1, sample_chars=40, log_every=5, eval_every=10)
    out = io.StringIO()
    straight = run(TrainConfig(steps=20, **kw), out=out)
    text = out.getvalue()
    assert text.startswith("lazytensor train: llama config tiny")
    assert "RMSNorm" in repr(straight["model"]) and "final loss" in text and "\nsample:\n" in text
    losses = straight["history"]["loss"]
    assert losses[-1] < losses[0]
    ck = str(tmp_path / "llama.npz")
    run(TrainConfig(steps=10, schedule_steps=20, checkpoint=ck, **kw), out=io.StringIO())
    resumed = run(TrainConfig(steps=20, resume=ck, eval_iters=1, sample_chars=0, log_every=5, eval_every=10),
                  out=io.StringIO())  # the model comes from the checkpoint's plan
    assert _params(resumed["model"]) == _params(straight["model"])


@pytest.mark.parametrize("device", ["cpu", "virtual"])
def test_the_compiled_step_trains_byte_identically_to_the_eager_step(device):
    kw = dict(steps=14, eval_iters=1, sample_chars=0, log_every=1, eval_every=7, device=device, dropout=0.1)
    out = io.StringIO()
    compiled = run(TrainConfig(**kw), out=out)
    eager = run(TrainConfig(compile=False, **kw), out=io.StringIO())
    assert "compiled step (lt.jit)" in out.getvalue().splitlines()[0]
    assert _losses_by_step(compiled["history"]) == _losses_by_step(eager["history"])
    assert compiled["history"]["val_loss"] == eager["history"]["val_loss"]
    assert _params(compiled["model"]) == _params(eager["model"])


def test_the_compiled_step_trains_byte_identically_to_the_eager_step_on_cuda(cuda_device):
    """On CUDA the replays also write parameters, moments and gradients over their old device blocks,
    between evaluations that read the parameters."""
    kw = dict(steps=14, eval_iters=1, sample_chars=0, log_every=1, eval_every=7, dropout=0.1)
    cuda_device(offload="always")
    compiled = run(TrainConfig(**kw), out=io.StringIO())
    assert lt.counters()["updated_in_place"] > 0
    cuda_device(offload="always")
    eager = run(TrainConfig(compile=False, **kw), out=io.StringIO())
    assert _losses_by_step(compiled["history"]) == _losses_by_step(eager["history"])
    assert compiled["history"]["val_loss"] == eager["history"]["val_loss"]
    assert _params(compiled["model"]) == _params(eager["model"])


def test_the_training_loop_runs_at_its_unprofiled_speed_on_cuda(cuda_device):
    """No kernel records or events inside the loop: compiled replays take their prepared launches."""
    cuda_device(offload="policy")
    r = run(TrainConfig(steps=5, eval_iters=1, sample_chars=0), out=io.StringIO())  # on the active device
    assert r["profile"].kernels == [] and r["profile"].stats["kernels"] > 0
    assert lt.counters()["prepared_kernels"] > 0


def test_a_run_on_the_virtual_device_ends_with_one_steps_modeled_time_on_an_h200(capsys):
    code, out, _ = _cli(capsys, *FAST, "--device", "virtual", "--steps", "4")
    assert code == 0
    modeled = out[out.index("one training step modeled"):]
    assert "modeled on h200" in modeled and "a model, not a measurement" in modeled
    assert "copies" in modeled and "device kernels" in modeled and "launches" in modeled


def test_a_modeled_step_is_printed_only_where_asked_or_on_the_virtual_device(capsys):
    assert "step modeled" not in _cli(capsys, *FAST, "--device", "cpu", "--steps", "2")[1]
    assert "step modeled" not in _cli(capsys, *FAST, "--device", "virtual", "--steps", "2",
                                      "--modeled-device", "none")[1]
    assert "modeled on rtx4060" in _cli(capsys, *FAST, "--device", "cpu", "--steps", "2",
                                        "--modeled-device", "rtx4060")[1]


def test_periodic_checkpoints_are_written_every_n_steps(tmp_path, monkeypatch):
    written = []
    real = checkpoint.save
    monkeypatch.setattr(checkpoint, "save", lambda path, m, o, meta, **k: (written.append(meta["step"]),
                                                                          real(path, m, o, meta=meta, **k)))
    run(TrainConfig(steps=7, checkpoint_every=3, checkpoint=str(tmp_path / "c.npz"), eval_iters=1,
                    sample_chars=0), out=io.StringIO())
    assert written == [3, 6, 7]


def test_a_nan_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    real_step = train.train_step
    calls = []

    def step_that_diverges(model, opt, params, x, y, clip):
        calls.append(1)
        loss = real_step(model, opt, params, x, y, clip)
        return loss * float("nan") if len(calls) >= 8 else loss
    monkeypatch.setattr(train, "train_step", step_that_diverges)
    ck = tmp_path / "c.npz"
    # compile=False: the step's Python counter must run every step (a replay runs none of it)
    r = run(TrainConfig(steps=20, log_every=1, checkpoint=str(ck), checkpoint_every=3, eval_iters=1,
                        sample_chars=0, compile=False), out=io.StringIO())
    assert r["status"] == "nonfinite"
    assert "the loss became nan at step 7" in r["message"] and "last good checkpoint (step 6)" in r["message"]
    assert checkpoint.read(str(ck))[1]["meta"]["step"] == 6
    assert all(np.isfinite(r["history"]["loss"]))


def test_a_failing_output_does_not_stop_the_others(tmp_path, monkeypatch, capsys):
    import lazytensor_train.plot as plot

    def broken(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(plot, "loss_curve", broken)
    ck = tmp_path / "c.npz"
    code, out, err = _cli(capsys, "--steps", "2", "--png", str(tmp_path / "l.png"), "--checkpoint", str(ck), *FAST)
    assert code == 1 and "loss curve not written: disk full" in err
    assert checkpoint.read(str(ck))[1]["meta"]["step"] == 2


def test_stale_temporary_files_of_killed_writers_are_removed(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    stale = tmp_path / f".c.npz.{dead_pid}.tmp"
    stale.write_bytes(b"half a checkpoint")
    alive = tmp_path / f".c.npz.{os.getppid()}.tmp"  # a writer that is still running: left alone
    alive.write_bytes(b"in progress")
    lt.manual_seed(0)
    model, _, _ = build(TrainConfig(), CharDataset("abcdefghij" * 50))
    checkpoint.save(str(tmp_path / "c.npz"), model)
    assert not stale.exists() and alive.exists()


def test_progress_bar_goes_to_stderr_with_rate_and_loss(capsys):
    run(TrainConfig(steps=3, log_every=1, eval_iters=1, sample_chars=0, progress=True))
    captured = capsys.readouterr()
    assert "step/s" in captured.err or "s/step" in captured.err
    assert "tok/s" in captured.err and "step     0 | loss" in captured.out


def _start_training(tmp_path, *extra):
    return start_training(tmp_path, "--steps", "100000", "--log-every", "1", *FAST, *extra)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_finishes_the_step_writes_the_checkpoint_and_exits_128_plus_the_signal(tmp_path, sig):
    ck = tmp_path / "c.npz"
    proc = _start_training(tmp_path, "--checkpoint", str(ck), "--checkpoint-every", "0")
    wait_for_step(proc, 3)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig.value, err  # 130 for Ctrl-C, 143 for SIGTERM, as a shell reports
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"lazytensor train: stopped by {sig.name} after step ")
    assert f"checkpoint written to {ck} (continue with --resume {ck})" in last
    stopped_after = int(last.split("after step ")[1].split()[0])
    assert checkpoint.read(str(ck))[1]["meta"]["step"] == stopped_after + 1
    resumed = run(TrainConfig(steps=stopped_after + 3, resume=str(ck), eval_iters=1, sample_chars=0),
                  out=io.StringIO())
    assert resumed["status"] == "done" and resumed["history"]["steps"][-1] == stopped_after + 2


def test_sigkill_during_training_leaves_the_last_periodic_checkpoint_intact(tmp_path):
    ck = tmp_path / "c.npz"
    proc = _start_training(tmp_path, "--checkpoint", str(ck), "--checkpoint-every", "2")
    wait_for_step(proc, 7)
    proc.kill()
    proc.communicate(timeout=60)
    step = checkpoint.read(str(ck))[1]["meta"]["step"]
    assert step >= 6 and step % 2 == 0
    resumed = run(TrainConfig(steps=step + 2, resume=str(ck), checkpoint=str(ck), eval_iters=1, sample_chars=0),
                  out=io.StringIO())
    assert resumed["status"] == "done"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file stays


def test_piping_into_a_reader_that_leaves_stops_quietly(tmp_path):
    proc = _start_training(tmp_path)
    proc.stdout.readline()
    proc.stdout.close()  # `lazytensor train | head -1`
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141
    assert "Traceback" not in err and "error" not in err


def _crafted(header):
    """Ways a checkpoint's JSON header can be malformed (each names what it changes)."""
    yield "header_a_list", [header]
    yield "meta_a_list", {**header, "meta": [1]}
    yield "arrays_a_list", {**header, "arrays": []}
    yield "manifest_entry_a_number", {**header, "arrays": {k: 1 for k in header["arrays"]}}
    yield "optimizer_a_string", {**header, "optimizer": "adamw"}
    yield "optimizer_state_a_list", {**header, "optimizer": {**header["optimizer"], "state": [1]}}
    groups = header["optimizer"]["param_groups"]
    for name, key, value in (("a_group_lr_as_text", "lr", "fast"), ("a_group_betas_a_number", "betas", 0.9)):
        changed = [{**groups[0], key: value}] + groups[1:]
        yield name, {**header, "optimizer": {**header["optimizer"], "param_groups": changed}}
    state = header["optimizer"]["state"]
    first = next(iter(state))
    yield "a_step_count_as_text", {**header, "optimizer": {**header["optimizer"],
                                                           "state": {**state, first: {**state[first], "step": "2"}}}}
    yield "a_state_entry_missing", {**header, "optimizer": {**header["optimizer"], "state": {
        **state, first: {k: v for k, v in state[first].items() if k != "exp_avg"}}}}
    meta = header["meta"]
    yield "step_negative", {**header, "meta": {**meta, "step": -4}}
    yield "step_text", {**header, "meta": {**meta, "step": "4"}}
    yield "config_unknown", {**header, "meta": {**meta, "config": "huge"}}
    yield "plan_lr_text", {**header, "meta": {**meta, "plan": {**meta["plan"], "lr": "fast"}}}
    yield "plan_unknown_setting", {**header, "meta": {**meta, "plan": {**meta["plan"], "speed": 3}}}
    yield "rng_a_list", {**header, "meta": {**meta, "rng": [1, 2]}}
    yield "history_of_text", {**header, "meta": {**meta, "history": {"loss": ["low"]}}}
    yield "vocabulary_a_number", {**header, "meta": {**meta, "vocab": 7}}
    yield "plan_lr_nested", {**header, "meta": {**meta, "plan": {**meta["plan"], "lr": {"a": {"b": None}}}}}


@pytest.fixture(scope="module")
def trained_checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("ck") / "real.npz"
    run(TrainConfig(steps=2, checkpoint=str(path), eval_iters=1, sample_chars=0), out=io.StringIO())
    return path


def test_resuming_from_a_checkpoint_with_a_malformed_header_is_one_line_naming_the_file_and_flag(
        tmp_path, trained_checkpoint, capsys):
    header, arrays = checkpoint.read_archive(str(trained_checkpoint), "__header__")
    for name, crafted in _crafted(header):
        path = tmp_path / f"{name}.npz"
        np.savez(path, __header__=np.frombuffer(json.dumps(crafted).encode(), np.uint8), **arrays)
        code, out, err = _cli(capsys, *FAST, "--steps", "5", "--resume", str(path))
        assert code == 2, (name, err)
        assert err.startswith(f"lazytensor train: error: --resume {path}: "), (name, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, (name, err)
