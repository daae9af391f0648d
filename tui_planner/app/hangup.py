"""Leaving when the terminal goes away (a dropped SSH connection, a killed tmux session) or on SIGTERM.

Once the terminal is gone, writing to it fails (EIO) or blocks, and Textual's shutdown can wait forever on
its writer thread's queue: the event loop never runs again, so nothing armed from it can fire. The handler
here is installed with signal.signal in the main thread before the app runs and does one thing: it wakes a
watchdog *thread* that was started beforehand. The watchdog asks the app to stop (the sweep's stop event,
then the event loop, if it still turns), gives a running sweep the time to kill its trial and record it,
then kills whatever the process started (trial process groups, the GPU probe) and leaves with os._exit.

The database stays whole either way: the sweep writes each trial as one DuckDB statement (committed rows
are in the file or its WAL), and the sweep's store is closed here once the sweep has stopped.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any, Callable

HANGUP_SIGNALS = (signal.SIGHUP, signal.SIGTERM)
GRACE_S = 1.5  # for the app to leave by itself: a terminal that is still there gets its state restored
SWEEP_GRACE_S = 8.0  # a running sweep: the launcher's SIGTERM, its 5 s, then SIGKILL to the trial's group


def kill_below(pid: int) -> None:
    """SIGKILL every process below pid and the process group each leads (a trial's torchrun group). The
    launcher's /proc walk is imported here, at exit, so that the app's start-up stays light."""
    from engine.bench.launcher import descendants

    for child in descendants(pid):
        for kill in (lambda: os.killpg(child, signal.SIGKILL), lambda: os.kill(child, signal.SIGKILL)):
            try:
                kill()
            except (ProcessLookupError, PermissionError):
                pass


class ExitGuard:
    """The signal handlers and the watchdog thread for one run of the app.

    `stop_soft` is called from the watchdog thread (it must only hand work to the event loop, e.g. with
    call_soon_threadsafe); `sweep` returns the running sweep's handle (tui_planner.app.state.SweepHandle)
    or None."""

    def __init__(self, stop_soft: Callable[[], None], sweep: Callable[[], Any]) -> None:
        self._stop_soft = stop_soft
        self._sweep = sweep
        self.signalled = threading.Event()
        self.finished = threading.Event()  # the app's run returned: nothing left to do
        self.signum = 0
        self._previous: dict[int, Any] = {}
        self._thread = threading.Thread(target=self._watch, name="tui-planner-exit-guard", daemon=True)

    def install(self) -> None:
        """Start the watchdog and take SIGHUP and SIGTERM (main thread only: signal.signal's rule)."""
        self._thread.start()
        for sig in HANGUP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handler)

    def uninstall(self) -> None:
        """The app has returned: put the previous handlers back (the default ends the process at once)."""
        self.finished.set()
        for sig, previous in self._previous.items():
            try:
                signal.signal(sig, previous)
            except (TypeError, ValueError):
                pass
        if not self.signalled.is_set():  # let the watchdog return: a thread left waiting would keep the app
            self.signalled.set()          # (and its DuckDB objects) alive until the interpreter is torn down
            self._thread.join(1.0)
        self._stop_soft = self._sweep = lambda: None

    def _handler(self, signum: int, frame: Any) -> None:
        # Runs in the main thread between two bytecodes, wherever it was (the event loop, or a write that
        # blocks): only wake the watchdog. Event.set takes a lock no code of the main thread holds.
        if not self.signalled.is_set():
            self.signum = signum
            self.signalled.set()

    def _watch(self) -> None:
        self.signalled.wait()
        if self.finished.is_set():
            return
        handle = self._sweep()
        if handle is not None:
            handle.stop.set()  # the launcher polls it: kills the trial's group, records it as stopped
        try:
            self._stop_soft()
        except Exception:  # noqa: BLE001 - a loop already closed: leave below
            pass
        done = getattr(handle, "done", None)  # set when the sweep's thread returns
        if done is not None:
            done.wait(SWEEP_GRACE_S)
        if self.finished.wait(GRACE_S):
            return
        kill_below(os.getpid())
        store = getattr(handle, "store", None)
        if store is not None and done is not None and done.is_set():
            try:
                store.close()  # the sweep is over: its rows are checkpointed into the file
            except Exception:  # noqa: BLE001 - already closed by the app, or busy: the WAL keeps the rows
                pass
        os._exit(128 + self.signum)
