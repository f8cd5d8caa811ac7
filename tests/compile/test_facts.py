"""The cloud stack's outputs set on a compiled plan give exactly the plan a compile with those facts gives, so a
command compiles once and the facts come back as data."""

from __future__ import annotations

import pytest

from clusterctl.compile import compile_plan
from clusterctl.compile.facts import apply_facts
from clusterctl.compile.model import LiveFacts
from clusterctl.validate import load_valid
from tests.conftest import EXAMPLES


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_facts_on_a_compiled_plan_equal_a_compile_with_them(path):
    spec = load_valid(path)
    plan = compile_plan(spec)
    names = [n.name for n in plan.all_nodes]
    facts = LiveFacts(addresses={n: f"10.9.{i // 250}.{i % 250 + 1}" for i, n in enumerate(names)},
                      jump_host="admin@203.0.113.7",
                      mount_sources={m.mount_point: f"fs-0123.fsx.example.com@tcp:/{i}" for i, m in enumerate(plan.mounts)})
    assert apply_facts(plan, facts) == compile_plan(spec, facts)
