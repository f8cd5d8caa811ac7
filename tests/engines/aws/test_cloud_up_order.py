"""cloud_up's order: require CLI -> preflight -> preview -> confirm -> up -> outputs.

The Pulumi engine cannot run here (no CLI, no plugin downloads), so the automation calls that need it (plugin
check, open_stack, preview, up) are replaced by recorders; preflight runs for real against moto.
"""

from __future__ import annotations

import base64
import io

import boto3
import pytest
from rich.console import Console

from clusterctl.engines.aws import automation
from clusterctl.engines.aws.errors import NotConfirmed, PreflightFailed
from clusterctl.engines.aws.image import BuiltImage, record_image
from clusterctl.engines.aws.up import cloud_up
from clusterctl.state import ClusterState
from tests.helpers import plan_of


@pytest.fixture
def engine(monkeypatch):
    calls: list[str] = []
    seen: dict = {}
    monkeypatch.setattr(automation, "require_pulumi_cli", lambda: calls.append("cli") or "/usr/bin/pulumi")
    monkeypatch.setattr(automation, "require_aws_plugin", lambda b: calls.append("plugin"))

    def open_stack(state, settings):
        calls.append("open")
        seen["settings"] = settings
        return "stack"

    def preview(stack, on_event=None):
        calls.append("preview")
        return automation.Preview({"create": 40}, [("create", "aws:ec2/vpc:Vpc", "p5spot-vpc")])

    def up(stack, on_event=None):
        calls.append("up")
        return {"nodes": {"p5001": {"private_ip": "10.240.0.5", "instance_id": "i-5", "availability_zone": "us-east-1a",
                                    "pool": "p5"}}, "fsx": {}}

    monkeypatch.setattr(automation, "open_stack", open_stack)
    monkeypatch.setattr(automation, "preview", preview)
    monkeypatch.setattr(automation, "up", up)
    return calls, seen


def valid(d):
    ec2 = boto3.client("ec2")
    ami = sorted(i["ImageId"] for i in ec2.describe_images(
        Owners=["amazon"], Filters=[{"Name": "architecture", "Values": ["x86_64"]}])["Images"])[0]
    d["pools"][0].update(availability_zones=["us-east-1a"], ami=ami, count=2)


BAKED = "ami-0baked0000000001"


def with_image(plan) -> ClusterState:
    """The cluster's state with the p5 pool's node image recorded, as `clusterctl image build` leaves it."""
    state = ClusterState(plan.name)
    record_image(state.backend, "p5", BuiltImage(BAKED, "ami-0base00000000001", "cd" * 32, "i-builder"))
    return state


def test_order_and_outputs(aws, engine):
    calls, seen = engine
    plan = plan_of("aws-p5-spot.yaml", valid)
    confirmed = []
    res = cloud_up(plan, with_image(plan), confirm=lambda p: calls.append("confirm") or confirmed.append(p) or True,
                   console=Console(file=io.StringIO(), force_terminal=False))
    assert calls == ["cli", "plugin", "open", "preview", "confirm", "up"]
    assert confirmed[0].changes == {"create": 40}
    assert res.outputs.addresses == {"p5001": "10.240.0.5"}
    s = seen["settings"]
    assert s.cluster == "p5spot" and s.config["clusterctl:pools"][0]["market"] == "spot"
    assert len(base64.b64decode(s.munge_key_b64)) == 1024 and s.ssh_public_key.startswith("ssh-ed25519 ")
    assert s.config["clusterctl:pools"][0]["ami"] == BAKED  # the pool boots the recorded node image


def test_up_without_a_recorded_image_boots_the_spec_image(aws, engine):
    calls, seen = engine
    plan = plan_of("aws-p5-spot.yaml", valid)
    cloud_up(plan, ClusterState(plan.name), confirm=lambda p: True)
    assert calls == ["cli", "plugin", "open", "preview", "up"]
    assert seen["settings"].config["clusterctl:pools"][0]["ami"] == plan.aws_pools[0].ami


def test_preflight_errors_stop_before_the_stack_is_touched(aws, engine):
    calls, _ = engine
    plan = plan_of("aws-p5-spot.yaml", lambda d: (valid(d), d["pools"][0].update(ami="ami-0123456789abcdef0")))
    with pytest.raises(PreflightFailed) as e:
        cloud_up(plan, ClusterState(plan.name), confirm=lambda p: True)
    assert calls == ["cli", "plugin"]
    assert [f.path for f in e.value.findings if f.level.value == "error"] == ["pools[0].ami"]


def test_declined_preview_changes_nothing(aws, engine):
    calls, _ = engine
    plan = plan_of("aws-p5-spot.yaml", valid)
    with pytest.raises(NotConfirmed):
        cloud_up(plan, with_image(plan), confirm=lambda p: False)
    assert calls == ["cli", "plugin", "open", "preview"]
