"""The markdown plan (what a pull request shows) of each example: a first apply, and a typical change."""

import os

import pytest

from clusterctl.diff import build_report
from clusterctl.diff.formats import as_markdown
from clusterctl.ops.plan_live import add_cost
from clusterctl.render.compiled import Compiled
from clusterctl.render import render_spec
from clusterctl.validate import load_valid
from tests.conftest import EXAMPLES, ROOT
from tests.helpers import spec_of

GOLDEN = ROOT / "tests" / "golden" / "plans"


def _check(name: str, text: str):
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.read_text() == text


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_first_apply_markdown(example):
    compiled = Compiled.of(load_valid(example))
    report = build_report(compiled.name, {}, compiled.files)
    add_cost(report, {}, compiled)
    _check(f"{example.stem}.create.md", as_markdown(report))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_change_markdown(example):
    """Each example grows its first pool by one node (or one host)."""
    def grow(d):
        p = d["pools"][0]
        if "count" in p:
            p["count"] += 1
        elif "max" in p:
            p["max"] += 1
        else:
            p["hosts"].append({"names": "extra01", "addresses": "10.99.0.1"})

    old_spec = load_valid(example)
    new = spec_of(example.name, grow)
    _, old = render_spec(old_spec)
    compiled = Compiled.of(new)
    report = build_report(old_spec.name, old, compiled.files)
    add_cost(report, old, compiled)
    _check(f"{example.stem}.grow.md", as_markdown(report))
