"""plan and apply for a cluster with aws pools, over the Pulumi program run under pulumi.runtime.set_mocks (no CLI
here): the plan's classification is checked against what the stack would really be asked to do, and the CLI's exit
codes and refusals are checked with the aws example recorded as applied in a throwaway state directory."""

from __future__ import annotations

import json
import os

import pytest

from clusterctl.render import render_spec
from clusterctl.state import ClusterState
from tests.engines.aws.pulumi_harness import run_spec
from tests.helpers import clusterctl, edited, spec_of, to_yaml

EXAMPLE = "aws-p5-spot.yaml"
INSTANCE = "aws:ec2/instance:Instance"
LT = "aws:ec2/launchTemplate:LaunchTemplate"


def resources(spec) -> dict[tuple[str, str], dict]:
    _, rec = run_spec(spec)
    return {(r.typ, r.name): r.inputs for r in rec.resources}


GROW = lambda d: d["pools"][0].update(count=17)  # noqa: E731
H200 = lambda d: d["pools"][0].update(instance_type="p5e.48xlarge")  # noqa: E731 — H100 -> H200


@pytest.fixture
def applied(tmp_path):
    """The example as the last applied build; no pulumi CLI on PATH (none can be installed here)."""
    state_dir = tmp_path / "state"
    spec = spec_of(EXAMPLE)
    _, files = render_spec(spec)
    ClusterState(spec.name, root=state_dir).record_applied(files)
    env = dict(os.environ, CLUSTERCTL_STATE_DIR=str(state_dir), PATH="/usr/bin:/bin")
    return tmp_path, env


def write(tmp_path, name, edit):
    path = tmp_path / name
    path.write_text(to_yaml(edited(EXAMPLE, edit)))
    return path


def test_adding_a_node_is_live_and_only_creates_one_instance():
    before, after = resources(spec_of(EXAMPLE)), resources(spec_of(EXAMPLE, GROW))
    added = set(after) - set(before)
    assert [k[0] for k in added] == [INSTANCE] and not set(before) - set(after)
    assert all(after[k] == v for k, v in before.items()), "no existing resource changes when a node is added"


def test_gpu_type_change_rewrites_the_pools_launch_template_and_nothing_shared():
    before, after = resources(spec_of(EXAMPLE)), resources(spec_of(EXAMPLE, H200))
    changed = {k for k in before if k in after and before[k] != after[k]}
    lts = [k for k in changed if k[0] == LT]
    assert len(lts) == 1 and after[lts[0]]["instanceType"] == "p5e.48xlarge"
    # Every instance of the pool carries the new instance type, which replaces it (node_instance_options:
    # replace_on_changes=instanceType, old one deleted first); the mocks record inputs, the engine does the replace.
    instances = [k for k in after if k[0] == INSTANCE and after[k]["tags"].get("clusterctl:pool") == "p5"]
    assert len(instances) == 16 and {after[k]["launchTemplate"]["id"] for k in instances} == {f"{lts[0][1]}-id"}
    assert {before[k]["instanceType"] for k in instances} == {"p5.48xlarge"}
    assert {after[k]["instanceType"] for k in instances} == {"p5e.48xlarge"}
    shared = [k for k in changed if k[0] not in (LT, INSTANCE)]
    assert not shared, f"network, security groups, buckets and FSx stay as they are: {shared}"


def test_a_new_instance_type_replaces_pool_instances_old_one_first():
    from clusterctl.engines.aws.compute import node_instance_options

    opts = node_instance_options(None)
    assert opts.replace_on_changes == ["instanceType"] and opts.delete_before_replace is True
    # Template changes other than the type (user data, AMI) never recreate a running node.
    assert {"launchTemplate", "userData", "ami"} <= set(opts.ignore_changes)


def test_plan_no_change_exits_0_and_says_why_the_cloud_was_not_previewed(applied):
    tmp_path, env = applied
    r = clusterctl("plan", write(tmp_path, "same.yaml", lambda d: None), env=env, check=False, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no changes" in r.stdout and "cloud: not previewed" in r.stdout and "pulumi" in r.stdout


def test_plan_adding_a_node_exits_2_and_lists_it_live(applied):
    tmp_path, env = applied
    r = clusterctl("plan", write(tmp_path, "grown.yaml", GROW), "--output", "json", env=env, check=False, timeout=300)
    assert r.returncode == 2, r.stderr
    report = json.loads(r.stdout)
    assert {"name": "p5017", "kind": "added", "policy": "live", "detail": "pool p5"} in report["nodes"]
    assert report["cloud"]["checked"] is False and report["cost"]["delta_monthly_usd"] > 0


def test_gpu_type_change_is_replace_and_refused_without_allow_replace(applied):
    tmp_path, env = applied
    h200 = write(tmp_path, "h200.yaml", H200)
    r = clusterctl("plan", h200, "--output", "json", "--out", tmp_path / "plan.json", env=env, check=False, timeout=300)
    assert r.returncode == 2 and json.loads(r.stdout)["policy"] == "replace"
    r = clusterctl("apply", h200, "--plan", tmp_path / "plan.json", env=env, check=False, timeout=300)
    assert r.returncode == 1 and "--allow-replace" in r.stderr and "pools[p5].instance_type" in r.stderr
    assert "Traceback" not in r.stderr
    # With --allow-replace the gate passes and the next thing in the way is the missing pulumi CLI: nothing was touched.
    r = clusterctl("apply", h200, "--plan", tmp_path / "plan.json", "--allow-replace", "--yes", env=env, check=False, timeout=300)
    assert r.returncode == 1 and "pulumi" in r.stderr.lower()
    assert not (tmp_path / "state" / "p5spot" / "lock").exists()


def test_stale_plan_is_refused(applied):
    tmp_path, env = applied
    clusterctl("plan", write(tmp_path, "grown.yaml", GROW), "--out", tmp_path / "plan.json", env=env, check=False, timeout=300)
    r = clusterctl("apply", write(tmp_path, "h200.yaml", H200), "--plan", tmp_path / "plan.json", "--allow-replace", env=env, check=False, timeout=300)
    assert r.returncode == 1 and "stale plan" in r.stderr
