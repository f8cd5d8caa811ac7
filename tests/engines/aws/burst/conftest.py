"""Fixtures of the burst tests: moto (tests/cloud's server fixture), a fake Slurm, a Context on both."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

# The cloud tests' moto server and environment (endpoint, region, fake credentials), one server per session.
from tests.engines.aws.conftest import aws, moto_server  # noqa: F401
from tests.engines.aws.burst.harness import CLUSTER_ID

HERE = Path(__file__).resolve().parent


class FakeSlurm:
    """What the burst programs ask of Slurm, recorded; node states set by the test."""

    def __init__(self, states: dict[str, str] | None = None):
        from clusterctl.engines.aws.burst.slurm import NodeState

        self.NodeState = NodeState
        self.states: dict[str, NodeState] = {}
        self.addresses: dict[str, str] = {}
        self.powered_down: list[tuple[list[str], str]] = []
        self.drained: list[tuple[list[str], str]] = []
        self.resumed: list[str] = []
        for n, s in (states or {}).items():
            self.set(n, s)

    def set(self, node: str, state: str, addr: str | None = None):
        self.states[node] = self.NodeState(node, state, addr or node)

    def nodes(self, names):
        return {n: self.states[n] for n in names if n in self.states}

    def set_address(self, node, address):
        self.addresses[node] = address
        if node in self.states:
            self.states[node] = self.NodeState(node, self.states[node].state, address)

    def drain(self, names, reason):
        self.drained.append((sorted(names), reason))
        for n in names:
            self.states[n] = self.NodeState(n, "IDLE+DRAIN", self.states[n].addr if n in self.states else n, reason)

    def resume(self, names):
        self.resumed.extend(sorted(names))

    def power_down(self, names, reason):
        self.powered_down.append((sorted(names), reason))
        for n in names:
            self.states[n] = self.NodeState(n, "IDLE+CLOUD+POWERING_DOWN", n, reason)


@pytest.fixture
def fake_slurm():
    return FakeSlurm()


def lab_plan(cloud_pool: dict | None = None):
    """The compiled lab-hybrid.yaml; `cloud_pool`: keys set on its aws pool first (a variant of the spec)."""
    from ruamel.yaml import YAML

    from clusterctl.compile import compile_plan
    from clusterctl.validate import load_valid
    from tests.helpers import load_dict

    if not cloud_pool:
        return compile_plan(load_valid(HERE / "lab-hybrid.yaml"))
    data = YAML(typ="safe").load((HERE / "lab-hybrid.yaml").read_text())
    next(p for p in data["pools"] if p["name"] == "cloud").update(cloud_pool)
    loaded = load_dict(data)
    assert loaded.ok, loaded.findings
    return compile_plan(loaded.spec)


@pytest.fixture
def cloud_pool() -> dict | None:
    """Keys set on the lab's aws pool; a test parametrizes `cloud_pool` to run on a variant."""
    return None


@pytest.fixture
def plan_file(tmp_path, cloud_pool):
    from clusterctl.render import to_json

    p = tmp_path / "plan.json"
    p.write_text(to_json(lab_plan(cloud_pool).to_dict()))
    return p


@pytest.fixture
def settings(tmp_path, plan_file):
    from clusterctl.engines.aws.burst.settings import Settings

    kit = tmp_path / "kit"
    kit.mkdir()
    return Settings(plan=plan_file, log_file=tmp_path / "burst.log", state_dir=tmp_path / "state", kit_dir=kit,
                    ssh_key=tmp_path / "ssh_key", ssh_user="", munge_key=tmp_path / "munge.key",
                    imds_endpoint="http://169.254.169.254", bootstrap="off", sync_grace_seconds=300, spot_signal="USR1",
                    spot_grace_seconds=60, cluster_id=CLUSTER_ID)


@pytest.fixture
def stack(aws, cloud_pool):  # noqa: F811 - the imported fixture, requested by name
    """The pool's launch resources in moto, as the Pulumi stack makes them (tests/engines/aws/burst/harness.create_stack)."""
    import boto3

    from tests.engines.aws.burst.harness import create_stack

    plan = lab_plan(cloud_pool)
    ec2 = boto3.client("ec2", region_name=plan.pool("cloud").region)
    return ec2, create_stack(ec2, plan, "cloud")


@pytest.fixture
def ctx(stack, settings, fake_slurm):
    """A Context on moto and the fake Slurm, as the CLI builds it."""
    from clusterctl.engines.aws.burst.actions import Context
    from clusterctl.engines.aws.burst.plan import BurstPlan

    ec2, _ = stack
    log = logging.getLogger("clusterctl.engines.aws.burst.test")
    log.setLevel(logging.INFO)
    plan = BurstPlan.load(settings.plan)
    for n in plan.cloud_nodes:
        fake_slurm.set(n, "IDLE+CLOUD+POWERED_DOWN")
    return Context(settings, plan, fake_slurm, ec2, ec2, log)
