"""Starter specs for `clusterctl init`: the examples, optionally renamed (comments kept)."""

from __future__ import annotations

import re

from clusterctl.core.resources import resource_dir
from clusterctl.spec.types import NAME_PATTERN
from clusterctl.core.errors import ClusterctlError


def preset_text(filename: str, name: str | None = None) -> str:
    text = (resource_dir("examples") / filename).read_text()
    if name is None:
        return text
    if not re.fullmatch(NAME_PATTERN, name):
        raise ClusterctlError(f"--name {name!r}: cluster names are lower-case letters, digits and '-', starting with a letter")
    return re.sub(r"(?m)^name: .*$", f"name: {name}", text, count=1)
