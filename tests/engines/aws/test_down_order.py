"""`down` of a hybrid cluster: Slurm stopped on the owned hosts, then the burst instances terminated, then the
stack destroyed; a failed termination stops it before the destroy.

The SSH/Ansible and Pulumi engines are replaced by recorders (no owned hosts nor pulumi CLI here); the burst
termination itself is tested against moto in tests/engines/aws/burst/test_burst_moto.py.
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from clusterctl.engines.ansible.result import RunResult
from clusterctl.ops import down as down_mod
from clusterctl.engines.aws.burst import teardown
from clusterctl.engines.aws import automation
from clusterctl.engines.aws import up as cloud_up_mod
from clusterctl.engines.ssh.remote import RemoteError
from clusterctl.render import layout
from clusterctl.render.compiled import Compiled
from clusterctl.state import ClusterState
from clusterctl.validate import load_valid
from tests.conftest import example


class NoController:
    def remote(self, node):
        return self

    def run(self, *a, **kw):
        raise RemoteError("unreachable")


@pytest.fixture
def recorded(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(automation, "require_pulumi_cli", lambda: calls.append("cli") or "/usr/bin/pulumi")
    access = NoController()
    access.lab, access.ssh, access.identities = None, None, {}
    monkeypatch.setattr(down_mod, "access_for", lambda plan, state, log, providers=None: access)

    def playbook(run, on_event):
        calls.append(f"ansible:{run.playbook}")
        return RunResult(status="successful", rc=0)

    monkeypatch.setattr(down_mod, "run_playbook", playbook)
    monkeypatch.setattr(down_mod, "print_recap", lambda console, r: None)
    monkeypatch.setattr(teardown, "release_burst_instances",
                        lambda plan, cluster_id, log: calls.append(f"release:{plan.name}") or {"p5b001": "i-1"})
    monkeypatch.setattr(cloud_up_mod, "cloud_down", lambda plan, state, **kw: calls.append("destroy") or {"delete": 40})
    return calls


def spec_with_build():
    compiled = Compiled.of(load_valid(example("hybrid-burst.yaml")))
    inventory = ClusterState(compiled.name).dir / "build" / layout.INVENTORY
    inventory.parent.mkdir(parents=True)
    inventory.write_text("all: {}\n")
    return compiled


def test_slurm_stopped_then_burst_instances_then_the_stack(recorded):
    spec = spec_with_build()
    result = down_mod.down(spec, Console(file=io.StringIO()))
    assert recorded == ["cli", "ansible:down.yml", f"release:{spec.name}", "destroy"]
    assert result["burst_terminated"] == {"p5b001": "i-1"} and result["aws"] == {"delete": 40}


def test_a_failed_termination_leaves_the_stack(recorded, monkeypatch):
    def fail(plan, cluster_id, log):
        raise teardown.BurstTeardownFailed("could not terminate ...; the stack was not destroyed")

    monkeypatch.setattr(teardown, "release_burst_instances", fail)
    spec = spec_with_build()
    with pytest.raises(teardown.BurstTeardownFailed):
        down_mod.down(spec, Console(file=io.StringIO()))
    assert "destroy" not in recorded
