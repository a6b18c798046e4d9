"""`lazytensor train` as a child process for tests: starting it, following its progress lines, and
whether MPI (mpi4py and an mpiexec) is here for data-parallel runs."""
import os
import shutil
import subprocess
import sys
import time

import pytest

MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
try:
    import mpi4py  # noqa: F401
    HAVE_MPI = MPIEXEC is not None
except ImportError:
    HAVE_MPI = False
needs_mpi = pytest.mark.skipif(not HAVE_MPI, reason="needs mpi4py and mpiexec (pip install 'lazytensor[mpi]')")


def start_training(cwd, *args):
    """`lazytensor train *args` in `cwd`, its output piped, on the CPU (not the suite's device)."""
    env = {k: v for k, v in os.environ.items() if k != "LAZYTENSOR_DEVICE"}
    return subprocess.Popen([sys.executable, "-m", "lazytensor_train", "train", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=cwd, env=env)


def wait_for_step(proc, n, timeout=300):
    """Read the child's progress lines until step n is printed; returns the lines read."""
    deadline = time.monotonic() + timeout
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        lines.append(line)
        if line.startswith(f"step {n:5d} | loss"):
            return lines
        assert line or proc.poll() is None, "".join(lines) + proc.stderr.read()
    raise AssertionError("training did not reach step %d:\n%s" % (n, "".join(lines)))
