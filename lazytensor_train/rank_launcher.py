"""`lazytensor train --nproc N`: the same command under `mpiexec -n N`, and stop requests relayed to it.

mpiexec runs in a session of its own, so a Ctrl-C at the terminal reaches this launcher only (not
mpiexec, whose reaction to signals differs between MPI libraries). The first SIGINT or SIGTERM is
written to a file in a folder the ranks are told of (`--stop-dir`); every rank checks it between steps,
the ranks agree on the step to stop after, rank 0 writes the checkpoint, and the job exits 130 (SIGINT)
or 143 (SIGTERM). A second signal is sent on to every rank, which stops at once; ranks still running
a few seconds later are killed. On Linux, mpiexec gets SIGTERM if this launcher dies (even by SIGKILL),
which MPICH's mpiexec passes on to the ranks: they stop after their step as for any SIGTERM.
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

from .stop_request import STOP_FILE, exit_status

GRACE_SECONDS = 5.0  # after the second signal: how long the ranks get to stop before they are killed


def _die_with_parent():
    """In the child, before exec: a session of its own, and SIGTERM when this launcher dies (Linux)."""
    os.setsid()
    if sys.platform.startswith("linux"):
        import ctypes
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except OSError:
            pass


def rank_pid_file(folder, rank):
    """Where rank `rank` of a launched job writes its process id (so a second signal can reach it)."""
    return os.path.join(folder, f"rank{rank}.pid")


class RankJob:
    """An `mpiexec` child whose ranks are asked to stop through `folder` (see the module docstring)."""

    def __init__(self, command, folder, ranks, notice=sys.stderr):
        self.folder, self.ranks, self.notice = folder, ranks, notice
        self.signals, self.deadline, self.first = 0, None, None
        self.proc = subprocess.Popen(command, preexec_fn=_die_with_parent)

    def _handle(self, signum, frame):
        self.signals += 1
        name = signal.Signals(signum).name
        if self.signals == 1:
            self.first = name
            tmp = os.path.join(self.folder, STOP_FILE + ".tmp")
            with open(tmp, "w") as f:
                f.write(name)
            os.replace(tmp, os.path.join(self.folder, STOP_FILE))  # the ranks never read a half-written name
            print(f"\n{name}: stopping all {self.ranks} ranks after this step (again to stop at once)",
                  file=self.notice, flush=True)
        elif self.deadline is None:
            self._signal_ranks(signal.SIGINT)
            self.deadline = time.monotonic() + GRACE_SECONDS
        else:  # a third signal: no more grace
            self.deadline = time.monotonic()

    def _rank_pids(self):
        pids = []
        for rank in range(self.ranks):
            try:
                with open(rank_pid_file(self.folder, rank)) as f:
                    pids.append(int(f.read()))
            except (OSError, ValueError):
                pass
        return pids

    def _kill_all(self):
        """SIGKILL to every rank, and to mpiexec's session (its proxies), mpiexec last."""
        self._signal_ranks(signal.SIGKILL)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # mpiexec leads a session of its own
        except OSError:
            pass
        self.proc.kill()

    def _signal_ranks(self, sig):
        for pid in self._rank_pids():
            try:
                os.kill(pid, sig)
            except OSError:
                pass

    def wait(self):
        """The job's exit status, relaying SIGINT and SIGTERM to the ranks until it ends; ranks still
        running GRACE_SECONDS after a second signal are killed."""
        previous = {sig: signal.signal(sig, self._handle) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            while True:
                # Polled, never an unbounded wait: Python resumes such a wait after a signal handler
                # returns (PEP 475), so the deadline a second signal sets would never be looked at.
                try:
                    code = self.proc.wait(timeout=0.2)
                    break
                except subprocess.TimeoutExpired:
                    if self.deadline is not None and time.monotonic() >= self.deadline:
                        self._kill_all()
                        code = self.proc.wait()
                        break
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if self.deadline is not None:  # stopped at once: the ranks' own statuses are whatever killed them
            return exit_status(self.first)
        return code


def launch(mpiexec, ranks, argv):
    """Run `lazytensor <argv>` on `ranks` processes under `mpiexec`; returns the job's exit status."""
    if sys.stderr.isatty() and not any(a in ("--progress", "--no-progress") for a in argv):
        argv = [*argv, "--progress"]  # the ranks' stderr reaches the terminal through mpiexec's pipes
    with tempfile.TemporaryDirectory(prefix="lazytensor-ranks-") as folder:
        command = [mpiexec, "-n", str(ranks), sys.executable, "-m", "lazytensor_train", *argv, "--stop-dir", folder]
        return RankJob(command, folder, ranks).wait()
