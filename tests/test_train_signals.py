"""Stopping `lazytensor train` with real signals, as a user does: Ctrl-C and SIGTERM to a `--nproc 2`
launcher (every rank stops after the same step, rank 0 writes the checkpoint, one line, exit 130 or
143), the launcher killed outright (no rank keeps training), and a second Ctrl-C (stop at once, and
say truthfully what is kept)."""
import os
import re
import signal
import sys
import time

import pytest

from lazytensor_train import checkpoint
from training_processes import needs_mpi, start_training, wait_for_step

FAST = ["--steps", "100000", "--log-every", "1", "--eval-iters", "1", "--sample-chars", "0"]


def _start(tmp_path, *args):
    return start_training(tmp_path, *FAST, *args)


def _ranks_running(marker, stop_folder_prefix="lazytensor-ranks-"):
    """Processes still running a rank of a launched job whose command line holds `marker` (this test's
    checkpoint path: other tests may run jobs of their own meanwhile)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if stop_folder_prefix in cmd and "--stop-dir" in cmd and marker in cmd:
            found.append(cmd)
    return found


@needs_mpi
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_nproc_launcher_stops_every_rank_after_one_step_and_writes_the_checkpoint(tmp_path, sig):
    ck = tmp_path / "c.npz"
    proc = _start(tmp_path, "--nproc", "2", "--checkpoint", str(ck), "--checkpoint-every", "0")
    wait_for_step(proc, 3)
    proc.send_signal(sig)  # a Ctrl-C at the terminal reaches the launcher, whose mpiexec has a session of its own
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 128 + sig.value, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    lines = err.strip().splitlines()
    assert lines[0] == f"{sig.name}: stopping all 2 ranks after this step (again to stop at once)"
    assert len(lines) == 2 and lines[1].startswith(f"lazytensor train: stopped by {sig.name} after step ")
    stopped_after = int(lines[1].split("after step ")[1].split()[0])
    assert checkpoint.read(str(ck))[1]["meta"]["step"] == stopped_after + 1
    assert _ranks_running(str(ck)) == []


@needs_mpi
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mpiexec learns of its launcher's death on Linux")
def test_killing_the_nproc_launcher_stops_the_ranks_which_still_write_the_checkpoint(tmp_path):
    ck = tmp_path / "c.npz"
    proc = _start(tmp_path, "--nproc", "2", "--checkpoint", str(ck), "--checkpoint-every", "0")
    wait_for_step(proc, 3)
    proc.kill()  # SIGKILL: the launcher cannot relay anything; mpiexec gets SIGTERM as its parent dies
    proc.communicate(timeout=60)
    deadline = time.monotonic() + 120
    while _ranks_running(str(ck)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _ranks_running(str(ck)) == []  # no orphan keeps training
    assert checkpoint.read(str(ck))[1]["meta"]["step"] >= 4


def test_a_second_ctrl_c_stops_at_once_and_says_that_no_checkpoint_exists(tmp_path):
    # the small model's eager steps take long enough for the second Ctrl-C to land inside one
    proc = _start(tmp_path, "--config", "small", "--no-compile", "--checkpoint", str(tmp_path / "c.npz"),
                  "--checkpoint-every", "0")
    wait_for_step(proc, 2)
    proc.send_signal(signal.SIGINT)
    assert proc.stderr.readline() == "\n" and proc.stderr.readline().startswith("SIGINT: stopping after this step")
    proc.send_signal(signal.SIGINT)  # (two signals sent at once would reach the process as one)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and re.fullmatch(r"lazytensor train: stopped at once during step \d+; no checkpoint "
                                            r"was written", lines[0]), err
    assert not (tmp_path / "c.npz").exists()


def test_a_second_ctrl_c_landing_in_a_callback_stops_at_the_next_poll_without_a_traceback(capsys):
    import weakref
    from lazytensor_train.stop_request import StopRequest

    class Value:
        pass
    with StopRequest(notice=None) as stop:
        stop._handle(signal.SIGINT, None)  # the first Ctrl-C: stop after this step
        value = Value()
        ref = weakref.ref(value, lambda _: stop._handle(signal.SIGINT, None))  # the second, inside a callback
        del value
        assert ref() is None and stop.swallowed
        with pytest.raises(KeyboardInterrupt):
            stop.poll()
    assert "Traceback" not in capsys.readouterr().err


_STUCK_JOB = """
import sys
from lazytensor_train.rank_launcher import RankJob, rank_pid_file
rank = ("import os, signal, sys, time\\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN); signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
        "open(sys.argv[1], 'w').write(str(os.getpid())); print('ready', flush=True)\\n"
        "time.sleep(600)\\n")
folder = sys.argv[1]
sys.exit(RankJob([sys.executable, "-c", rank, rank_pid_file(folder, 0)], folder, 1).wait())
"""


def test_a_second_ctrl_c_stops_a_job_whose_rank_ignores_signals_within_the_grace_period(tmp_path):
    # A rank stuck in an MPI call (here: one that ignores SIGINT and SIGTERM) must not keep the job alive.
    import subprocess
    proc = subprocess.Popen([sys.executable, "-c", _STUCK_JOB, str(tmp_path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"
    rank_pid = int((tmp_path / "rank0.pid").read_text())
    proc.send_signal(signal.SIGINT)
    assert proc.stderr.readline() == "\n" and "stopping all 1 ranks" in proc.stderr.readline()
    proc.send_signal(signal.SIGINT)
    started = time.monotonic()
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert time.monotonic() - started < 15  # the 5 s grace, then the kill
    with pytest.raises(ProcessLookupError):
        for _ in range(50):  # the killed rank is reaped by its parent's exit
            os.kill(rank_pid, 0)
            time.sleep(0.1)


def test_the_nproc_launcher_asks_the_ranks_for_a_progress_bar_when_its_stderr_is_a_terminal(monkeypatch):
    from lazytensor_train import rank_launcher
    seen = []
    monkeypatch.setattr(rank_launcher, "RankJob", lambda command, folder, ranks: seen.append(command) or
                        type("Job", (), {"wait": lambda self: 0})())
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    rank_launcher.launch("mpiexec", 2, ["train", "--steps", "3"])
    rank_launcher.launch("mpiexec", 2, ["train", "--no-progress"])
    assert "--progress" in seen[0] and "--progress" not in seen[1]
