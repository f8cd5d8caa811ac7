"""A command compiles its spec once: `plan` and `apply` of the lab, counted at the compiler (every compile places the
pools' nodes exactly once). The apply's engines (lab boot, Ansible, smoke job) are replaced by recorders here; the
same path runs for real against lab nodes in tests/integration/test_lab_cluster.py."""

from __future__ import annotations

import sys

import pytest

import clusterctl.compile as compile_module
from clusterctl.engines.ansible.result import RunResult
from clusterctl.engines.local.provider import LocalProvider
from clusterctl.ops import up as up_module
from clusterctl.ops.smoke import SmokeResult
from tests.conftest import example

LAB = example("lab.yaml")


@pytest.fixture
def compiles(monkeypatch):
    count = {"n": 0}
    real = compile_module.pool_nodes

    def counted(spec, facts):
        count["n"] += 1
        return real(spec, facts)

    monkeypatch.setattr(compile_module, "pool_nodes", counted)
    return count


def _run(monkeypatch, *argv) -> int:
    from clusterctl import cli

    monkeypatch.setattr(sys, "argv", ["clusterctl", *map(str, argv)])
    with pytest.raises(SystemExit) as e:
        cli.main()
    return e.value.code


def test_plan_compiles_once(compiles, monkeypatch):
    assert _run(monkeypatch, "plan", LAB, "--output", "json") == 2  # a first apply: everything is new
    assert compiles["n"] == 1


def test_apply_compiles_once(compiles, monkeypatch):
    booted = []
    monkeypatch.setattr(LocalProvider, "boot", lambda self, ctx, identity: booted.append(ctx.plan.name))
    monkeypatch.setattr(up_module, "converge", lambda *a, **kw: RunResult(status="successful", rc=0))
    monkeypatch.setattr(up_module, "run_smoke", lambda plan, remote: [SmokeResult("gpu", "srun", True, "ran")])
    assert _run(monkeypatch, "apply", LAB, "--yes", "--output", "json") == 0
    assert booted == ["lab"]
    assert compiles["n"] == 1
