"""Locate the project's data directories (templates, playbooks, examples, stacks) in a checkout or an installed wheel."""

from __future__ import annotations

from pathlib import Path

from clusterctl.core.errors import ClusterctlError

_PACKAGE = Path(__file__).resolve().parents[1]  # clusterctl/ (this module is clusterctl/core/resources.py)


def resource_dir(name: str) -> Path:
    """`templates` -> <checkout>/templates (editable install) or <site-packages>/clusterctl/_templates (wheel)."""
    for candidate in (_PACKAGE.parent / name, _PACKAGE / f"_{name}"):
        if candidate.is_dir():
            return candidate
    raise ClusterctlError(f"clusterctl's {name}/ directory is missing from this installation ({_PACKAGE})")
