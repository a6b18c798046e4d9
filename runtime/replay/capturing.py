"""Which capture (runtime/replay/capture.py's `Recorder`) is told the kernels run now: an explicit context the
API enters around a captured call (`with capturing.into(recorder)`), read by the executor and the host
reads and writes. One capture at a time in the process; it belongs to the thread that entered it (other
threads' kernels are not its)."""
import contextlib
import threading

_active = None  # the Recorder of the capture under way, or None


def current():
    """The Recorder of the capture this thread is making, or None."""
    recorder = _active
    return recorder if recorder is not None and recorder.thread == threading.get_ident() else None


def anywhere():
    """Whether some thread is making a capture now (a realization then runs as planned, not replayed)."""
    return _active is not None


def other_thread_computes():
    """Called as a thread other than the capturing one realizes something during a capture: the
    capture is marked disturbed (what it saw may be that thread's doing, so its refusal is not final)."""
    recorder = _active
    if recorder is not None and recorder.thread != threading.get_ident():
        recorder.disturbed = True


@contextlib.contextmanager
def into(recorder):
    """Tell `recorder` every kernel this thread runs inside the block."""
    global _active
    if _active is not None:
        raise RuntimeError("a capture is already under way")
    _active = recorder
    try:
        yield recorder
    finally:
        _active = None
