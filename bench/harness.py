"""Shared benchmark plumbing: the result header (machine, versions, threads, date) and robust timing."""
import datetime
import os
import platform
import statistics
import subprocess
import time


def machine():
    from lazytensor.kernels.cpu.machine import cpu_description
    from lazytensor.kernels.cpu.gemm import host_blas
    return f"{cpu_description()}; mid-sized float32 products: {host_blas()}"


def versions():
    import numpy
    import lazytensor
    parts = [f"Python {platform.python_version()}", f"NumPy {numpy.__version__}",
             f"lazytensor {lazytensor.__version__} ({git_revision()})"]
    try:
        import numba
        parts.append(f"numba {numba.__version__}")
    except ImportError:
        pass
    try:
        import torch
        parts.append(f"PyTorch {torch.__version__}")
    except ImportError:
        parts.append("PyTorch not installed")
    return ", ".join(parts)


def git_revision():
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=here)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, cwd=here).stdout.strip()
        return rev.stdout.strip() + ("+changes" if dirty else "") if rev.returncode == 0 else "unknown"
    except OSError:
        return "unknown"


def header(title, threads):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"## {title}\n\nMachine: {machine()}. {versions()}. Threads: {threads}. Date: {now}.\n")


def thread_env(threads):
    """The environment for a process whose libraries all use `threads` threads (set before it starts:
    they read it when they load)."""
    n = str(threads)
    return dict(os.environ, OMP_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n, MKL_NUM_THREADS=n, NUMBA_NUM_THREADS=n,
                LAZYTENSOR_NUM_THREADS=n)


def timed(fn, sync=None):
    """Seconds one call of fn takes; `sync` (a device synchronize) runs before the clock is read."""
    t0 = time.perf_counter()
    fn()
    if sync is not None:
        sync()
    return time.perf_counter() - t0


def summary(samples):
    return {"median": statistics.median(samples), "min": min(samples), "n": len(samples)}
