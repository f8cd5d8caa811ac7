"""Automation API wrapper pieces that run without the Pulumi CLI: CLI/plugin detection, backend selection, config
values, outputs mapping, and the progress view fed with real pulumi.automation event objects."""

from __future__ import annotations

import io
import json
import stat

import pytest
from pulumi.automation import events as ev
from rich.console import Console

from clusterctl.engines.aws import automation
from clusterctl.render.stack_config import automation_config
from clusterctl.engines.aws.errors import PulumiCliMissing
from clusterctl.engines.aws.progress import PulumiProgress, print_changes
from clusterctl.engines.aws.up import CloudOutputs
from clusterctl.compile import LiveFacts, compile_plan
from clusterctl.render.cloud import cloud_config
from clusterctl.state import ClusterState
from clusterctl.validate import load_valid
from tests.conftest import example
from tests.helpers import plan_of


def fake_pulumi(bindir, plugins: list[dict]):
    """A `pulumi` stand-in that answers `pulumi plugin ls --json` (all require_aws_plugin asks)."""
    bindir.mkdir(exist_ok=True)
    exe = bindir / "pulumi"
    exe.write_text(f"#!/bin/sh\necho '{json.dumps(plugins)}'\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe


def test_require_cli_finds_pulumi_on_path(tmp_path, monkeypatch):
    exe = fake_pulumi(tmp_path / "bin", [])
    monkeypatch.setenv("PATH", str(exe.parent))
    assert automation.require_pulumi_cli() == str(exe)
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    with pytest.raises(PulumiCliMissing, match="get.pulumi.com"):
        automation.require_pulumi_cli()


def test_require_aws_plugin_matches_the_sdk_version(tmp_path):
    version = automation.aws_plugin_version().lstrip("v")
    ok = fake_pulumi(tmp_path / "a", [{"name": "aws", "kind": "resource", "version": version}])
    automation.require_aws_plugin(str(ok))
    old = fake_pulumi(tmp_path / "b", [{"name": "aws", "kind": "resource", "version": "6.0.0"}])
    with pytest.raises(PulumiCliMissing, match=f"pulumi plugin install resource aws v{version}"):
        automation.require_aws_plugin(str(old))


def test_backend_default_is_file_in_state_dir_and_env_overrides(monkeypatch, tmp_path):
    state = ClusterState("p5spot")
    monkeypatch.delenv(automation.BACKEND_ENV, raising=False)
    assert automation.backend_url(state) == (state.dir / "pulumi").as_uri()
    assert automation.backend_url(state).startswith("file://")
    monkeypatch.setenv(automation.BACKEND_ENV, "s3://team-pulumi-state/clusters")
    assert automation.backend_url(state) == "s3://team-pulumi-state/clusters"


def test_backend_from_the_spec_and_a_conflicting_env_is_refused(monkeypatch):
    from clusterctl.engines.aws.errors import CloudError
    from clusterctl.engines.aws.up import stack_settings
    from tests.helpers import edited, load_dict

    loaded = load_dict(edited("aws-p5-spot.yaml", lambda d: d.update(state={"pulumi_backend": "s3://acme-state/p5"})))
    assert loaded.ok
    plan = compile_plan(loaded.spec)
    assert plan.pulumi_backend == "s3://acme-state/p5"
    state = ClusterState(plan.name)
    monkeypatch.delenv(automation.BACKEND_ENV, raising=False)
    assert stack_settings(plan, state).backend == "s3://acme-state/p5"
    monkeypatch.setenv(automation.BACKEND_ENV, "s3://acme-state/p5/")  # the same place
    assert automation.backend_url(state, plan.pulumi_backend) == "s3://acme-state/p5"
    monkeypatch.setenv(automation.BACKEND_ENV, "s3://other-state")
    with pytest.raises(CloudError, match="CLUSTERCTL_PULUMI_BACKEND=s3://other-state but the spec's state.pulumi_backend"):
        automation.backend_url(state, plan.pulumi_backend)


def test_backend_in_the_spec_must_be_a_backend_url():
    from tests.helpers import edited, load_dict

    loaded = load_dict(edited("aws-p5-spot.yaml", lambda d: d.update(state={"pulumi_backend": "my-bucket/p5"})))
    assert not loaded.ok
    assert [(f.path, f.line is not None) for f in loaded.findings] == [("state.pulumi_backend", True)]


def test_passphrase_file_is_made_once_private(monkeypatch):
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE", raising=False)
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE_FILE", raising=False)
    state = ClusterState("p5spot")
    env = automation._passphrase_env(state)
    path = env["PULUMI_CONFIG_PASSPHRASE_FILE"]
    first = open(path).read()
    assert automation._passphrase_env(state) == env and open(path).read() == first
    import os
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "given")
    assert automation._passphrase_env(state) == {}


def test_automation_config_values_parse_back_to_the_rendered_objects():
    cfg = cloud_config(plan_of("aws-p5-spot.yaml"))
    values = automation_config(cfg)
    assert values["aws:region"] == "us-east-1"
    assert json.loads(values["clusterctl:pools"]) == cfg["clusterctl:pools"]
    assert all(isinstance(v, str) for v in values.values())


def test_outputs_become_addresses_for_compile():
    out = {
        "nodes": {"p5001": {"private_ip": "10.240.0.21", "instance_id": "i-1", "availability_zone": "us-east-1a", "pool": "p5"}},
        "controller": {"name": "p5spot-ctl", "private_ip": "10.240.240.10", "public_ip": "", "instance_id": "i-0"},
        "fsx": {"/fsx": {"dns_name": "fs-1.fsx.us-east-1.amazonaws.com", "mount_name": "abcdefgh"}},
    }
    o = CloudOutputs.from_stack(out)
    assert o.addresses == {"p5001": "10.240.0.21"}
    assert o.instance_ids == {"p5001": "i-1", "p5spot-ctl": "i-0"}
    assert o.fsx_sources == {"/fsx": "fs-1.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh"}
    plan = compile_plan(load_valid(example("aws-p5-spot.yaml")), LiveFacts(addresses=o.addresses))
    assert next(n for n in plan.nodes if n.name == "p5001").address == "10.240.0.21"


def _md(op, typ, name):
    return ev.StepEventMetadata(op=ev.OpType(op), urn=f"urn:pulumi:p5spot::clusterctl::{typ}::{name}", type=typ,
                                provider="", old=None, new=None)


def engine(**kw):
    return ev.EngineEvent(sequence=0, timestamp=0, **kw)


def test_progress_view_follows_engine_events():
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False, width=200)
    with PulumiProgress(console, "creating p5spot (aws)") as p:
        p.event(engine(resource_pre_event=ev.ResourcePreEvent(_md("create", "aws:ec2/vpc:Vpc", "p5spot-vpc"))))
        p.event(engine(resource_pre_event=ev.ResourcePreEvent(_md("create", "aws:ec2/instance:Instance", "p5001"))))
        p.event(engine(resource_pre_event=ev.ResourcePreEvent(_md("same", "aws:s3/bucket:Bucket", "b"))))
        p.event(engine(res_outputs_event=ev.ResOutputsEvent(_md("create", "aws:ec2/vpc:Vpc", "p5spot-vpc"))))
        p.event(engine(res_op_failed_event=ev.ResOpFailedEvent(_md("create", "aws:ec2/instance:Instance", "p5001"), 1, 0)))
        p.event(engine(diagnostic_event=ev.DiagnosticEvent(
            message="InsufficientInstanceCapacity: no p5.48xlarge in us-east-1a\n", color="never", severity="error",
            urn="urn:pulumi:p5spot::clusterctl::aws:ec2/instance:Instance::p5001")))
        p.event(engine(summary_event=ev.SummaryEvent(maybe_corrupt=False, duration_seconds=3,
                                                     resource_changes={"create": 1}, policy_packs={})))
    text = buf.getvalue()
    assert "create aws:ec2/vpc:Vpc p5spot-vpc" in text and "p5001" in text and "InsufficientInstanceCapacity" in text
    assert p.counts() == {"done": 1, "failed": 1}  # unchanged resources are not listed
    assert p.summary == {"create": 1} and p.errors == ["InsufficientInstanceCapacity: no p5.48xlarge in us-east-1a"]
    print_changes(console, {"create": 52, "same": 3, "update": 1})
    assert "cloud changes: create 52, update 1" in buf.getvalue()


def test_preview_collector_keeps_changed_steps_only():
    steps: list = []
    seen: list = []
    cb = automation._collect(steps, seen.append)
    cb(engine(resource_pre_event=ev.ResourcePreEvent(_md("create", "aws:ec2/launchTemplate:LaunchTemplate", "p5spot-p5-lt"))))
    cb(engine(resource_pre_event=ev.ResourcePreEvent(_md("same", "aws:ec2/vpc:Vpc", "p5spot-vpc"))))
    assert steps == [("create", "aws:ec2/launchTemplate:LaunchTemplate", "p5spot-p5-lt")] and len(seen) == 2
