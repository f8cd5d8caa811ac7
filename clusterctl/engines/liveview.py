"""A rich live table while an engine works (on a terminal), plain lines otherwise (CI logs, pipes).

Subclasses fold engine events into their state, call `refresh()` after each, and draw it in `_table()`."""

from __future__ import annotations

import time
from types import TracebackType
from typing import TYPE_CHECKING, Literal, Self

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live

REFRESH_EVERY = 0.2  # seconds between redraws: engines emit events far faster than a terminal needs


class LiveView:
    def __init__(self, console: Console, title: str, quiet: bool = False) -> None:
        self.console = console
        self.title = title
        self.quiet = quiet
        self.live: Live | None = None
        self._last = 0.0

    def __enter__(self) -> Self:
        if not self.quiet and self.console.is_terminal:
            from rich.live import Live

            self.live = Live(self._table(), console=self.console, refresh_per_second=4, transient=True)
            self.live.__enter__()
        elif not self.quiet:
            self.console.print(f"{self.title} ...")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        if self.live is not None:
            self.live.update(self._table())
            self.live.__exit__(exc_type, exc, tb)
        return False

    def refresh(self) -> None:
        if self.live is not None and time.monotonic() - self._last > REFRESH_EVERY:
            self._last = time.monotonic()
            self.live.update(self._table())

    def say(self, line: str) -> None:
        """A line for logs; on a terminal the live table shows it instead."""
        if self.live is None and not self.quiet:
            self.console.print(line, highlight=False)

    def _table(self) -> RenderableType:
        raise NotImplementedError
