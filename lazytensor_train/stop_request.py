"""Ctrl-C (SIGINT) or SIGTERM during training asks the loop to stop after the current step.

The first signal sets a flag the loop checks between steps, so the step finishes and its outputs are
written; a second one stops at once (KeyboardInterrupt), as a user pressing Ctrl-C twice expects. Where
the second one lands inside a callback Python cannot raise from (a weak reference's, a finalizer), Python
would report it as "Exception ignored" with a traceback and go on: it is caught there silently instead, and
the next `poll()` (between steps) raises it.
A data-parallel rank also watches a file its launcher (`lazytensor train --nproc N`) writes when the
launcher is signalled: the file counts as the first signal, so the launcher's second signal, sent on
to the ranks, stops them at once.
"""
import os
import signal
import sys
import threading

STOP_FILE = "stop"  # in the launcher's folder: the name of the signal that asked the ranks to stop


class StopRequest:
    """`with StopRequest() as stop:` ... `if stop.poll():` (handlers restored on exit). `notice=None`
    stops it from printing (the ranks of a job other than rank 0)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, notice=sys.stderr, watch=None):
        self.requested = None  # the name of the signal that asked, once one has
        self._notice = notice
        self._watch = None if watch is None else os.path.join(watch, STOP_FILE)
        self._previous = {}
        self._hook = None  # sys.unraisablehook before __enter__
        self.swallowed = False  # a second signal's KeyboardInterrupt landed where Python could not raise it

    def poll(self):
        """The name of the signal that asked to stop ("SIGINT" or "SIGTERM"), or None; raises the
        KeyboardInterrupt of a second signal that a callback swallowed."""
        if self.swallowed:
            self.swallowed = False
            raise KeyboardInterrupt
        if self.requested is None and self._watch is not None and os.path.exists(self._watch):
            try:
                with open(self._watch) as f:
                    name = f.read().strip()
            except OSError:
                name = ""
            self.requested = name if name in ("SIGINT", "SIGTERM") else "SIGTERM"
        return self.requested

    def _handle(self, signum, frame):
        if self.poll() is not None:
            raise KeyboardInterrupt
        self.requested = signal.Signals(signum).name
        if self._notice is not None:
            print(f"\n{self.requested}: stopping after this step (again to stop at once)", file=self._notice,
                  flush=True)

    def _unraisable(self, info):
        if issubclass(info.exc_type, KeyboardInterrupt) and self.requested is not None:
            self.swallowed = True  # ours, raised inside a callback: poll() raises it where it can
            return
        self._hook(info)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():  # signals reach the main thread only
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
            self._hook, sys.unraisablehook = sys.unraisablehook, self._unraisable
        return self

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        if self._hook is not None:
            sys.unraisablehook, self._hook = self._hook, None
        return False


def exit_status(name):
    """The exit status of a run a signal stopped: 128 + its number, as a shell reports it (130, 143)."""
    return 128 + signal.Signals[name].value if name else 130
