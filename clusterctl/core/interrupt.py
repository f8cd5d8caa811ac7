"""SIGINT, SIGTERM and SIGHUP end a command the same way: as an exception in the main thread, so every `finally`,
context manager and atexit hook runs (locks released, secrets removed, child processes ended) before it exits.

Python's default for SIGTERM and SIGHUP is to die on the spot, which skips all of that. While a child run is in
progress (`shielded()`: ansible-playbook under ansible-runner), the signal is only recorded: the runner polls
`requested()`, stops its child first, and the exception is raised once the child is gone.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
EXIT_CODE = 130  # what a shell reports for a command ended by Ctrl-C; used for every signal here


class Interrupted(KeyboardInterrupt):
    """The command was told to stop. A KeyboardInterrupt, so code that already handles Ctrl-C handles all three."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


_state: dict = {"signum": None, "shield": 0}


def install() -> None:
    """From the main thread, at the start of a command."""
    if threading.current_thread() is threading.main_thread():
        for sig in SIGNALS:
            signal.signal(sig, _handler)


def _handler(signum: int, frame: FrameType | None) -> None:
    if _state["signum"] is None:
        _state["signum"] = signum
    if not _state["shield"]:
        raise Interrupted(signum)


def requested() -> int | None:
    """The signal that asked the command to stop, or None."""
    return _state["signum"]


def reset() -> None:
    """Forget a recorded signal (tests run several commands in one process)."""
    _state["signum"] = None


@contextmanager
def shielded() -> Iterator[None]:
    """While the block runs, signals are recorded instead of raised (the block polls requested() and stops its
    child); a signal that came meanwhile is raised when the block ends, unless the block raised one itself."""
    _state["shield"] += 1
    try:
        yield
    finally:
        _state["shield"] -= 1
    if _state["signum"] is not None and not _state["shield"]:
        raise Interrupted(_state["signum"])
