"""One exception root; the CLI prints these without a traceback (use --debug to see one)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from clusterctl.core.findings import Finding


class ClusterctlError(Exception):
    """Base of every error clusterctl raises on purpose."""

    exit_code = 1


class SpecError(ClusterctlError):
    """The spec could not be read or is invalid; carries the findings that say why."""

    def __init__(self, message: str, findings: Iterable[Finding] = ()):
        super().__init__(message)
        self.findings = list(findings)


class RenderError(ClusterctlError):
    """Writing the build directory failed."""


class StateError(ClusterctlError):
    """The state directory (last applied build) is unreadable or inconsistent."""
