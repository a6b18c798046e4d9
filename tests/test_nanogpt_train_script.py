"""karpathy/nanoGPT's train.py (tests/programs/nanogpt/, pinned) run with lazytensor as written: only its
imports change. Its configurator takes the command line, its data is a character corpus in its own format
(data/<dataset>/train.bin, val.bin, meta.pkl). PyTorch trains a few iterations and saves the checkpoint;
from that checkpoint (`--init_from=resume`, loaded with lt.load, optimizer state included):

- one process, in this process: lazytensor (with `--compile=True`: lt.compile) and PyTorch (eager) draw
  their batch offsets from one shared stream (program_compare.SharedRandom), and every loss the script
  prints agrees to the 4 decimals it prints;
- two processes, `mpiexec -n 2 python train.py`: the DistributedDataParallel path (RANK and WORLD_SIZE from
  the launcher, gradient accumulation with `require_backward_grad_sync`), on the emulated CUDA device so
  that its `torch.amp.autocast(float16)` and GradScaler are live; each rank draws its own batches, so its
  losses are compared with PyTorch's as statistics."""
import contextlib
import os
import pickle
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import lazytensor as lt
import program_compare as C
import program_loader as P
import stand_ins
from training_processes import MPIEXEC, needs_mpi

NANOGPT = {"model": "nanogpt/model.py", "train": "nanogpt/train.py"}
ARGS = ["--device=cpu", "--dtype=float16", "--dataset=tiny", "--batch_size=4", "--block_size=16", "--n_layer=2",
        "--n_head=2", "--n_embd=32", "--eval_iters=2", "--gradient_accumulation_steps=4", "--warmup_iters=2",
        "--lr_decay_iters=12", "--out_dir=out", "--log_interval=1", "--eval_interval=3"]
RESUME = ARGS + ["--init_from=resume", "--max_iters=9"]
ITER = r"iter (\d+): loss ([0-9.]+)"
EVAL = r"step (\d+): train loss ([0-9.]+), val loss ([0-9.]+)"


def _corpus(folder):
    """The script's data format for a character corpus: uint16 token files and meta.pkl's vocab_size."""
    os.makedirs(folder / "data" / "tiny")
    text = stand_ins.prose(3000, seed=9)
    chars = sorted(set(text))
    ids = np.array([chars.index(c) for c in text], dtype=np.uint16)
    ids[:int(0.9 * len(ids))].tofile(folder / "data" / "tiny" / "train.bin")
    ids[int(0.9 * len(ids)):].tofile(folder / "data" / "tiny" / "val.bin")
    with open(folder / "data" / "tiny" / "meta.pkl", "wb") as f:
        pickle.dump({"vocab_size": len(chars), "itos": dict(enumerate(chars))}, f)
    shutil.copy(P.PROGRAMS / "nanogpt" / "configurator.py", folder / "configurator.py")


def _run_here(framework_name, folder, argv, seed):
    """train.py as __main__ in this process, from `folder`, its batch offsets drawn from a shared stream."""
    framework = pytest.importorskip("torch") if framework_name == "torch" else lt
    with contextlib.chdir(folder):
        P.load(framework_name, NANOGPT, main=True, argv=argv, framework_module=C.SharedRandom(framework, seed))


@pytest.fixture(scope="module")
def start(tmp_path_factory):
    """A folder with the corpus and PyTorch's checkpoint after 3 iterations (the script's own save)."""
    pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("nanogpt")
    _corpus(folder)
    _run_here("torch", folder, ARGS + ["--compile=False", "--max_iters=3"], seed=1)
    assert (folder / "out" / "ckpt.pt").exists()
    return folder


def _resumed(start, tmp_path, name):
    folder = tmp_path / name
    shutil.copytree(start, folder)
    return folder


def _printed(pattern, text):
    return [tuple(float(v) for v in m) for m in re.findall(pattern, text)]


def test_train_script_resumes_from_pytorchs_checkpoint_and_trains_like_pytorch(start, tmp_path, capsys):
    capsys.readouterr()
    out = {}
    for fw, compile_flag in (("torch", "False"), ("lazytensor", "True")):
        _run_here(fw, _resumed(start, tmp_path, fw), RESUME + [f"--compile={compile_flag}"], seed=2)
        out[fw] = capsys.readouterr().out
    iters = {fw: _printed(ITER, text) for fw, text in out.items()}
    evals = {fw: _printed(EVAL, text) for fw, text in out.items()}
    assert [i for i, _ in iters["torch"]] == list(range(3, 10)) and len(evals["torch"]) == 3
    assert [i for i, _ in iters["lazytensor"]] == list(range(3, 10))
    np.testing.assert_allclose(iters["lazytensor"], iters["torch"], atol=1.01e-4)  # printed to 4 decimals
    np.testing.assert_allclose(evals["lazytensor"], evals["torch"], atol=1.01e-4)
    assert "saving checkpoint to out" in out["lazytensor"]
    # the checkpoint lazytensor's run saved is one PyTorch reads (lt.save of the script's dict); a compiled
    # model's keys carry PyTorch's `_orig_mod.` prefix, which the script strips when it resumes
    torch = pytest.importorskip("torch")
    ours, theirs = (torch.load(tmp_path / fw / "out" / "ckpt.pt", weights_only=False) for fw in ("lazytensor", "torch"))
    assert ours["iter_num"] == theirs["iter_num"] == 9
    assert {k.removeprefix("_orig_mod."): v.shape for k, v in ours["model"].items()} == \
        {k: v.shape for k, v in theirs["model"].items()}


@needs_mpi
def test_train_script_runs_data_parallel_with_mixed_precision_under_mpiexec(start, tmp_path, capsys):
    reference = _resumed(start, tmp_path, "torch")
    capsys.readouterr()
    _run_here("torch", reference, RESUME + ["--compile=False"], seed=2)
    theirs = _printed(EVAL, capsys.readouterr().out)
    folder = _resumed(start, tmp_path, "mpi")
    for name in ("model", "train"):  # the program's files with their imports changed, as a user would run them
        (folder / f"{name}.py").write_text(P.as_lazytensor(P.source_of(NANOGPT[name])))
    env = dict(os.environ, LAZYTENSOR_DEVICE="cuda", LAZYTENSOR_CUDA_DRIVER="emulated")
    done = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "train.py", *RESUME, "--compile=True"], cwd=folder,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    # autocast and the GradScaler were live (each says so when its device is not the one in use)
    assert "changes nothing" not in done.stderr and "scaler is disabled" not in done.stderr, done.stderr[-3000:]
    ours = _printed(EVAL, done.stdout)
    # rank 0 alone logs (the script's master_process): one line per iteration, one per evaluation
    assert [i for i, _ in _printed(ITER, done.stdout)] == list(range(3, 10)) and len(ours) == 3
    assert "tokens per iteration will be: 256" in done.stdout  # 4 micro-steps x 4 x 16, split over 2 ranks
    # the same checkpoint, other batches: the evaluations agree as statistics, and both runs learn
    np.testing.assert_allclose([o[1:] for o in ours], [t[1:] for t in theirs], rtol=0.05)
    assert ours[-1][1] < ours[0][1] and theirs[-1][1] < theirs[0][1]
