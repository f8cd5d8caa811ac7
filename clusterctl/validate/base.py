"""Validator base: a small named class per rule, returning findings instead of raising."""

from __future__ import annotations

from typing import Iterable

from clusterctl.core.findings import Finding, Level, format_path
from clusterctl.spec.cluster import ClusterSpec


class Validator:
    code: str = ""

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        raise NotImplementedError

    def _f(self, level: Level, parts: tuple, message: str) -> Finding:
        return Finding(level, self.code, format_path(parts), message, parts=tuple(parts))

    def error(self, parts: tuple, message: str) -> Finding:
        return self._f(Level.ERROR, parts, message)

    def warning(self, parts: tuple, message: str) -> Finding:
        return self._f(Level.WARNING, parts, message)

    def info(self, parts: tuple, message: str) -> Finding:
        return self._f(Level.INFO, parts, message)
