"""`plan`'s cloud preview and `drift`'s refresh-preview, with the Pulumi engine replaced by recorders (no CLI here):
plan never previews while another run holds the cluster's lock (it would change the stack config under an apply),
and drift compares the stack against the applied build's config, not whatever a later plan left in the workspace."""

from __future__ import annotations

import pytest

from clusterctl.ops.drift import cloud_drift
from clusterctl.engines.aws import automation
from clusterctl.engines.aws import up as cloud_up_mod
from clusterctl.state import ClusterState
from tests.helpers import plan_of


@pytest.fixture
def engine(monkeypatch):
    seen: list = []
    monkeypatch.setattr(cloud_up_mod, "existing_stack_or_reason", lambda plan, state: ("stack", None))
    monkeypatch.setattr(automation, "open_stack", lambda state, settings: seen.append(settings) or "stack")
    monkeypatch.setattr(automation, "preview", lambda stack, on_event=None, refresh=True: automation.Preview(
        {"update": 1, "same": 40}, [("update", "aws:ec2/launchTemplate:LaunchTemplate", "p5spot-p5-lt")]))
    return seen


def p5_nodes(count: int):
    """The aws example with `count` nodes in its pool."""
    return plan_of("aws-p5-spot.yaml", lambda d: d["pools"][0].update(count=count))


def pools_config(settings) -> list:
    return settings.config["clusterctl:pools"]


def test_plan_previews_its_own_config_and_releases_the_lock(engine):
    plan = p5_nodes(17)
    state = ClusterState(plan.name)
    report = cloud_up_mod.cloud_preview(plan, state)
    assert report["checked"] and report["changes"] == {"update": 1}
    assert len(pools_config(engine[0])[0]["static_nodes"]) == 17
    assert state.lock_holder() is None


def test_plan_does_not_preview_while_an_apply_holds_the_lock(engine):
    plan = p5_nodes(17)
    state = ClusterState(plan.name)
    with state.lock("apply"):
        report = cloud_up_mod.cloud_preview(plan, state)
    assert report == {"checked": False, "reason": report["reason"]}
    assert "another run holds the lock" in report["reason"] and "`clusterctl apply`" in report["reason"]
    assert engine == []  # the stack config was not touched


def test_drift_previews_with_the_applied_config(engine):
    applied = p5_nodes(16)
    state = ClusterState(applied.name)
    cloud_up_mod.cloud_preview(p5_nodes(20), state)  # a PR's plan set 20 nodes in the workspace
    report = cloud_drift(applied, state)
    assert report == {"checked": True, "changes": {"update": 1}}
    assert len(pools_config(engine[-1])[0]["static_nodes"]) == 16
