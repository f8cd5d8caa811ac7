"""Findings: what validators return instead of raising, so a user sees every problem at once."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Iterable


class Level(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True)
class Finding:
    level: Level
    code: str
    path: str
    message: str
    line: int | None = None
    column: int | None = None
    parts: tuple = ()  # the path as keys/indexes, used to look up the YAML line

    def location(self, filename: str | None = None) -> str:
        where = filename or "<spec>"
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return where

    def to_dict(self) -> dict:
        return {
            "level": self.level.value,
            "code": self.code,
            "path": self.path,
            "message": self.message,
            "line": self.line,
            "column": self.column,
        }


def format_path(parts: Iterable[str | int]) -> str:
    """('pools', 1, 'gpus_per_node') -> 'pools[1].gpus_per_node'."""
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out


@dataclass
class FindingList:
    items: list[Finding] = field(default_factory=list)

    def add(self, f: Finding) -> None:
        self.items.append(f)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.items if f.level is Level.ERROR]

    def has_errors(self) -> bool:
        return bool(self.errors)
