"""Ctrl-C (SIGINT) or SIGTERM during training asks the loop to stop after the current step.

The first signal sets a flag the loop checks between steps, so the step finishes and its outputs are
written; a second one stops at once (KeyboardInterrupt), as a user pressing Ctrl-C twice expects.
"""
import signal
import sys
import threading


class StopRequest:
    """`with StopRequest() as stop:` ... `if stop.requested:` (handlers restored on exit)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, notice=sys.stderr):
        self.requested = None  # the name of the signal that asked, once one has
        self._notice = notice
        self._previous = {}

    def _handle(self, signum, frame):
        if self.requested is not None:
            raise KeyboardInterrupt
        self.requested = signal.Signals(signum).name
        print(f"\n{self.requested}: stopping after this step (again to stop at once)", file=self._notice,
              flush=True)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():  # signals reach the main thread only
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        return False
