"""The training job: learning, determinism, what a step moves on a device, the CLI, checkpoints, PNG."""
import struct
import re
import subprocess
import sys
import zlib

import numpy as np
import pytest

import lazytensor as lt
from lazytensor_train import checkpoint
from lazytensor_train.data import CharDataset, default_corpus
from lazytensor_train.train import TrainConfig, build, run, train_step

TEXT = default_corpus()


@pytest.fixture(scope="module")
def data():
    return CharDataset(TEXT)


def _quiet(**kw):
    import io
    return run(TrainConfig(eval_iters=2, sample_chars=0, **kw), out=io.StringIO())


def test_same_seed_gives_byte_identical_losses():
    a = _quiet(steps=6, log_every=1, seed=5)["history"]["loss"]
    b = _quiet(steps=6, log_every=1, seed=5)["history"]["loss"]
    c = _quiet(steps=6, log_every=1, seed=6)["history"]["loss"]
    assert np.array(a, np.float64).tobytes() == np.array(b, np.float64).tobytes()
    assert a != c


def test_training_lowers_validation_loss_below_the_unigram_baseline():
    r = _quiet(steps=80, log_every=20, seed=1)
    assert r["history"]["loss"][-1] < r["history"]["loss"][0] - 1.0
    assert r["final"]["val"] < r["unigram_val"]


def test_a_step_on_the_virtual_device_moves_only_the_batch_and_the_losses_read(virtual, data):
    virtual(memory="1GiB")  # a 256 MiB budget: the step's working set fits, nothing is evicted
    lt.manual_seed(0)
    cfg = TrainConfig(steps=10)
    model, opt, _ = build(cfg, data)
    params = list(model.parameters())
    for _ in range(2):  # first steps: the causal mask and optimizer state arrive on the device
        x, y = data.batch("train", 16, 64)
        train_step(model, opt, params, x.to("virtual"), y.to("virtual"), 1.0)
    for step in range(4):
        lt.clear_transfer_log()
        x, y = data.batch("train", 16, 64)
        loss = train_step(model, opt, params, x.to("virtual"), y.to("virtual"), 1.0)
        if step % 2 == 0:
            loss.item()
        log = lt.transfer_log()
        uploads = [(r.reason, r.nbytes) for r in log if r.direction == "h2d"]
        downloads = [(r.reason, r.nbytes) for r in log if r.direction == "d2h"]
        assert uploads == [("to-device", 16 * 64 * 8)] * 2
        assert downloads == ([("host-read:item", 4)] if step % 2 == 0 else [])
    assert all(p.residency in (lt.Residency.DEVICE, lt.Residency.BOTH) for p in params)


def test_a_step_on_the_virtual_device_without_to_uploads_little_more_than_the_batch(virtual, data):
    # Code written as usual: the device selected, the batch left on the host (no .to): the targets'
    # one-hot gradient is made on the device from the uploaded targets, not uploaded whole.
    virtual(memory="1GiB")
    lt.manual_seed(0)
    model, opt, _ = build(TrainConfig(steps=10), data)
    params = list(model.parameters())
    for step in range(3):
        lt.clear_transfer_log()
        x, y = data.batch("train", 16, 64)
        train_step(model, opt, params, x, y, 1.0).item()
    uploaded = sum(r.nbytes for r in lt.transfer_log() if r.direction == "h2d")
    assert uploaded <= 2 * (x.nbytes + y.nbytes), [(r.op, r.nbytes) for r in lt.transfer_log()]


def test_the_training_command_runs_and_writes_a_png_and_a_checkpoint(tmp_path):
    png, ckpt = tmp_path / "loss.png", tmp_path / "model.npz"
    out = subprocess.run([sys.executable, "-m", "lazytensor_train", "train", "--steps", "4", "--log-every", "2",
                          "--eval-iters", "1", "--sample-chars", "20", "--png", str(png), "--checkpoint", str(ckpt)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for expected in ("step     0 | loss", "tok/s", "ms/step", "final loss: train", "unigram baseline", "sample:",
                     "what moved and what was read", "tensors alive now:"):
        assert expected in text
    # one table, every number labelled: the 4 steps' column, then the whole run's
    assert re.search(r"\n +batch offsets read to cut the text +4 +\d+\n", text), text
    assert re.search(r"\n  +values read with \.item\(\) \(logged losses\) +3 +\d+\n", text), text
    assert re.search(r"\n  uploads \(copies host -> device\) +[\d,]+ +[\d,]+\n", text), text
    assert "{" not in text.split("what moved")[1]  # no raw dict
    # the closing loss is an evaluation (eval mode, fixed batches), not the last training batch's
    assert re.search(r"final loss: train [\d.]+, val [\d.]+ \(an evaluation: 1 batches per split, dropout off; ", text)
    raw = png.read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", raw[16:24])
    assert (width, height) == (720, 440)
    assert zlib.decompress(raw[raw.index(b"IDAT") + 4:raw.index(b"IEND") - 8])  # the image data inflates
    assert checkpoint.read(str(ckpt))[1]["meta"]["step"] == 4


def test_training_on_a_users_text_file(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("the quick brown fox jumps over the lazy dog. " * 200)
    r = _quiet(steps=3, log_every=1, text=str(f))
    assert len(r["history"]["loss"]) == 3


def test_checkpoints_load_back_byte_identical_parameters_and_optimizer_state(tmp_path, data):
    lt.manual_seed(0)
    cfg = TrainConfig(steps=5)
    model, opt, _ = build(cfg, data)
    params = list(model.parameters())
    for _ in range(2):
        train_step(model, opt, params, *data.batch("train", 16, 64), 1.0)
    path = tmp_path / "ck.npz"
    checkpoint.save(str(path), model, opt, meta={"step": 2})
    lt.manual_seed(99)
    other, other_opt, _ = build(cfg, data)
    assert checkpoint.load(str(path), other, other_opt) == {"step": 2}
    for (n, a), (_, b) in zip(model.named_parameters(), other.named_parameters()):
        assert a.numpy().tobytes() == b.numpy().tobytes(), n
    state_a, state_b = opt.state_dict()["state"], other_opt.state_dict()["state"]
    assert state_a.keys() == state_b.keys()
    for i in state_a:
        assert state_a[i]["step"] == state_b[i]["step"]
        assert state_a[i]["exp_avg"].numpy().tobytes() == state_b[i]["exp_avg"].numpy().tobytes()
    # the next step is identical too
    x, y = data.batch("train", 16, 64)
    la = train_step(model, opt, params, x, y, 1.0).item()
    lb = train_step(other, other_opt, list(other.parameters()), x, y, 1.0).item()
    assert la == lb


def test_checkpoint_reads_record_the_checkpoint_reason(tmp_path, virtual, data):
    virtual()
    lt.manual_seed(0)
    model, opt, _ = build(TrainConfig(), data)
    lt.clear_transfer_log()
    checkpoint.save(str(tmp_path / "c.npz"), model)
    reasons = {r.reason for r in lt.transfer_log()}
    assert reasons == {"checkpoint"}


def test_corrupt_or_mismatched_checkpoints_raise_clear_errors(tmp_path, data):
    lt.manual_seed(0)
    model, opt, _ = build(TrainConfig(), data)
    path = tmp_path / "ck.npz"
    checkpoint.save(str(path), model, opt)
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    bad = tmp_path / "bad.npz"
    bad.write_bytes(bytes(raw))
    with pytest.raises(checkpoint.CheckpointError, match="corrupt"):
        checkpoint.load(str(bad), model)
    (tmp_path / "junk.npz").write_bytes(b"not a checkpoint")
    with pytest.raises(checkpoint.CheckpointError, match="not an .npz archive"):
        checkpoint.load(str(tmp_path / "junk.npz"), model)
    (tmp_path / "cut.npz").write_bytes(path.read_bytes()[:200])
    with pytest.raises(checkpoint.CheckpointError, match="corrupt or truncated"):
        checkpoint.load(str(tmp_path / "cut.npz"), model)
    small = CharDataset("abcdefghij" * 100)
    other, _, _ = build(TrainConfig(), small)
    with pytest.raises(checkpoint.CheckpointError, match="wte.weight"):
        checkpoint.load(str(path), other)


def test_checkpoint_writes_are_atomic(tmp_path, data, monkeypatch):
    lt.manual_seed(0)
    model, _, _ = build(TrainConfig(), data)
    path = tmp_path / "ck.npz"
    checkpoint.save(str(path), model)
    before = path.read_bytes()

    def fail(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(np, "savez", fail)
    with pytest.raises(OSError, match="disk full"):
        checkpoint.save(str(path), model)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["ck.npz"]  # no temporary file left behind


def test_loss_curve_ticks_are_round_numbers_covering_the_data():
    from lazytensor_train.plot import nice_ticks
    assert nice_ticks(0, 299)[0] == [0, 50, 100, 150, 200, 250, 300]
    assert nice_ticks(1.52, 4.61)[0] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert nice_ticks(0.2, 0.9)[0] == [0.2, 0.4, 0.6, 0.8, 1.0]


@pytest.mark.parametrize("engine", ["builtin", "matplotlib"])
def test_loss_curve_draws_both_series_and_the_baseline(tmp_path, engine):
    from lazytensor_train import plot
    if engine == "matplotlib" and not plot.have_matplotlib():
        pytest.skip("matplotlib is not installed (the [plot] extra)")
    path = tmp_path / "l.png"
    steps = list(range(0, 300, 25)) + [299]
    used = plot.loss_curve(str(path), {"train loss": (steps, [4.6 - 0.01 * s for s in steps]),
                                       "val loss": ([99, 199, 299], [3.5, 2.6, 1.8])},
                           references={"unigram baseline": 3.3}, engine=engine)
    assert used == engine
    raw = path.read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", raw[16:24]) == (720, 440)
    if engine == "builtin":
        img = plot.render({"train loss": (steps, [4.6 - 0.01 * s for s in steps]),
                           "val loss": ([99, 199, 299], [3.5, 2.6, 1.8])}, references={"unigram baseline": 3.3})
        for color in plot._COLORS[:3]:  # train line, val line and markers, dashed baseline
            assert (img == color).all(-1).sum() > 100
