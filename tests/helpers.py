"""Build specs in tests from the examples with small edits."""

from __future__ import annotations

import copy
import time
from pathlib import Path

from ruamel.yaml import YAML

from clusterctl.validate import load_text

ROOT = Path(__file__).resolve().parents[1]


def example_dict(name: str) -> dict:
    return YAML(typ="safe").load((ROOT / "examples" / name).read_text())


def to_yaml(data: dict) -> str:
    import io

    buf = io.StringIO()
    y = YAML(typ="safe")
    y.default_flow_style = False
    y.dump(data, buf)
    return buf.getvalue()


def load_dict(data: dict):
    return load_text(to_yaml(data))


def edited(name: str, edit) -> dict:
    data = copy.deepcopy(example_dict(name))
    edit(data)
    return data


def codes(loaded, level=None) -> set[str]:
    return {f.code for f in loaded.findings if level is None or f.level.value == level}


def wait_for(predicate, timeout: float, interval: float = 3.0, what: str | None = None):
    """Poll predicate() until it returns something truthy and return that. On timeout: with `what`, fail naming it and
    the last value; without, return the last (falsy) value for the caller's own assertion."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    if what is not None:
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
    return last


def clusterctl(*args, env, check=True, timeout=1800):
    """Run the CLI as a user would (a separate process with its own environment)."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "clusterctl", *map(str, args)], capture_output=True, text=True, env=env,
                       timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"clusterctl {args} -> {r.returncode}\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    return r


def spec_from(example: str, edit=None):
    """An example spec with an edit applied (edit(data) changes the dict), loaded and checked valid."""
    loaded = load_dict(edited(example, edit or (lambda d: None)))
    assert loaded.ok, [f.message for f in loaded.errors]
    return loaded.spec


def plan_from(example: str, edit=None):
    """The compiled plan of spec_from(example, edit)."""
    from clusterctl.compile import compile_plan

    return compile_plan(spec_from(example, edit))


def needs_root():
    """Skip mark for tests that make network namespaces, nspawn containers or daemons."""
    import os

    import pytest

    return pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, nspawn, daemons)")
