"""How long each phase of a long command took (cloud capacity, boot, converge, smoke job, checks), so a user sees
where the time goes without a profiler: printed after the command and carried in its JSON output."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Phases:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block; a phase entered twice (e.g. one per provider) adds up."""
        start = time.monotonic()
        try:
            yield
        finally:
            self._add(name, start)

    @contextmanager
    def phase_if(self, name: str, happened: Callable[[], bool]) -> Iterator[None]:
        """Like phase(), for a step that mostly has nothing to do: recorded only when happened() says it did work."""
        start = time.monotonic()
        yield
        if happened():
            self._add(name, start)

    def _add(self, name: str, start: float) -> None:
        self.seconds[name] = round(self.seconds.get(name, 0.0) + time.monotonic() - start, 1)

    def to_dict(self) -> dict[str, float]:
        return dict(self.seconds)

    def line(self) -> str:
        return line(self.seconds)


def line(seconds: dict[str, float]) -> str:
    """The text form, for a report that carries its phases as a dict (JSON)."""
    return "time: " + ", ".join(f"{name} {s:.1f} s" for name, s in seconds.items())
