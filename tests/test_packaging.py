"""A wheel install carries every data directory the code looks up (clusterctl/resources.py): a plain
`pip install .` must be able to `init`, `render` and `up`, not only an editable checkout."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_resource_dir_the_code_uses_is_in_the_wheel():
    used = set()
    for py in (ROOT / "clusterctl").rglob("*.py"):
        used |= set(re.findall(r'resource_dir\("([a-z_]+)"\)', py.read_text()))
    assert {"templates", "playbooks", "examples"} <= used
    used.add("stacks")  # stacks/aws is the program a plain `pulumi up` runs (stacks/aws/README.md)
    included = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert {src: f"clusterctl/_{src}" for src in sorted(used)} == dict(sorted(included.items()))
    assert all((ROOT / src).is_dir() for src in included)
