"""Pure parts of the burst programs: hostlists and job groups from SLURM_RESUME_FILE, Slurm node states, the
settings file, the plan read back from plan.json, cloud error classification."""

from __future__ import annotations

import json
import os

import pytest

from clusterctl.engines.aws.burst import ec2 as cloud
from clusterctl.engines.aws.burst.actions import job_groups, read_resume_file
from clusterctl.engines.aws.burst.plan import BurstPlan, plan_from_json
from clusterctl.engines.aws.burst.settings import Settings, load_environment, read_env_file
from clusterctl.engines.aws.burst.slurm import clip_reason, parse_show_node
from clusterctl.render import to_json
from tests.engines.aws.burst.conftest import lab_plan

NODES = ["cloud001", "cloud002", "cloud003", "cloud004"]


def test_job_groups_2205_keys():
    # What slurmctld 22.05 wrote in the lab (keys nodes / all_nodes).
    data = {"jobs": [{"job_id": 2, "nodes": "cloud[001-002]"}], "all_nodes": "cloud[001-002]"}
    groups = job_groups(["cloud001", "cloud002"], data)
    assert [(g.job_id, g.nodes) for g in groups] == [(2, ["cloud001", "cloud002"])]


def test_job_groups_2302_keys_and_leftovers():
    data = {"jobs": [{"job_id": 7, "nodes_alloc": "cloud[001-003]", "nodes_resume": "cloud[001,003]"},
                     {"job_id": 8, "nodes_resume": "cloud[003-004]"}],
            "all_nodes_resume": "cloud[001-004]"}
    groups = job_groups(NODES, data)
    # Each node is launched once: in the first job that needs it; nodes no job asked for come last.
    assert [(g.job_id, g.nodes) for g in groups] == [(7, ["cloud001", "cloud003"]), (8, ["cloud004"]), (None, ["cloud002"])]


def test_job_groups_without_resume_file():
    assert [(g.job_id, g.nodes) for g in job_groups(NODES, None)] == [(None, NODES)]


def test_resume_file_unreadable_is_no_data(tmp_path):
    assert read_resume_file(None) is None
    assert read_resume_file(str(tmp_path / "missing")) is None
    p = tmp_path / "f"
    p.write_text(json.dumps({"jobs": []}))
    assert read_resume_file(str(p)) == {"jobs": []}


def test_parse_show_node_states_and_reason():
    text = (
        "NodeName=cloud001 CoresPerSocket=1  CPUAlloc=0 NodeAddr=cloud001 NodeHostName=cloud001  RealMemory=512 "
        "State=IDLE+CLOUD+POWERING_DOWN ThreadsPerCore=1 Partitions=burst "
        "Reason=clusterctl burst: launch failed: InsufficientInstanceCapacity (tried us-west-2a) [slurm@2026-12-03T07:44:52]\n"
        "NodeName=cloud002 NodeAddr=10.219.0.69 State=MIXED+CLOUD+POWERING_UP Partitions=burst\n"
        "NodeName=cloud003 NodeAddr=10.219.0.70 State=IDLE+CLOUD Partitions=burst\n"
        "NodeName=cloud004 NodeAddr=cloud004 State=IDLE+CLOUD+POWERED_DOWN Partitions=burst\n"
    )
    nodes = parse_show_node(text)
    assert nodes["cloud001"].reason == "clusterctl burst: launch failed: InsufficientInstanceCapacity (tried us-west-2a)"
    assert nodes["cloud001"].powering_down and not nodes["cloud001"].powered_up
    assert nodes["cloud002"].powering_up and nodes["cloud002"].addr == "10.219.0.69"
    assert nodes["cloud003"].powered_up and nodes["cloud003"].reason is None
    assert nodes["cloud004"].powered_down and nodes["cloud004"].base == "IDLE"


def test_reasons_are_one_short_line():
    r = clip_reason("a\nb   c" + "x" * 300)
    assert "\n" not in r and len(r) == 200 and r.startswith("a b c")


def test_env_file_like_systemd(tmp_path, monkeypatch):
    f = tmp_path / "burst.env"
    f.write_text("# comment\n\nAWS_DEFAULT_REGION=us-west-2\nexport AWS_PROFILE='burst'\nCLUSTERCTL_BURST_SSH_USER=\"root\"\n"
                 "EMPTY=\nnot a line\n")
    assert read_env_file(f) == {"AWS_DEFAULT_REGION": "us-west-2", "AWS_PROFILE": "burst", "CLUSTERCTL_BURST_SSH_USER": "root",
                                "EMPTY": ""}
    # load_environment writes os.environ itself: let monkeypatch restore every key it may set, or AWS_PROFILE=burst
    # would outlive this test (and break every boto3 client and moto server started after it).
    # (delenv of an unset key records nothing to undo; setenv first does.)
    for key in read_env_file(f):
        monkeypatch.setenv(key, "")
        monkeypatch.delenv(key)
    monkeypatch.setenv("CLUSTERCTL_BURST_ENV_FILE", str(f))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")  # the environment wins over the file
    monkeypatch.delenv("PATH")
    load_environment()
    assert os.environ["AWS_DEFAULT_REGION"] == "eu-west-1"
    assert Settings.from_env().ssh_user == "root"
    assert "/usr/bin" in os.environ["PATH"]  # slurmctld gives its programs no PATH


def test_plan_round_trips_through_plan_json():
    plan = lab_plan()
    assert plan_from_json(to_json(plan.to_dict())) == plan


def test_burst_plan_knows_cloud_nodes_and_pool_config(tmp_path):
    p = tmp_path / "plan.json"
    p.write_text(to_json(lab_plan().to_dict()))
    bp = BurstPlan.load(p)
    assert sorted(bp.cloud_nodes) == NODES and bp.static_nodes == {"steady001"}
    assert bp.pool_of("cloud003").name == "cloud" and bp.pool_of("steady001").name == "steady"
    assert bp.replaceable_nodes == {}  # no address without the stack's facts: nothing sync could launch at
    cfg = bp.pool_config("cloud")
    assert cfg.instance_type == "p5.48xlarge" and cfg.market == "spot"
    assert cfg.availability_zones == ("us-west-2a", "us-west-2b", "us-west-2c")
    assert len(cfg.network_interfaces) == 33  # p5: card 0 interface + efa-only, cards 1..31 efa-only


def test_missing_plan_says_what_to_do(tmp_path):
    from clusterctl.engines.aws.burst.plan import PlanError

    with pytest.raises(PlanError, match="run `clusterctl up` first"):
        BurstPlan.load(tmp_path / "nope.json")


class _Err(Exception):
    def __init__(self, code, msg="m"):
        super().__init__(msg)
        self.response = {"Error": {"Code": code, "Message": msg}}


def test_error_codes_are_classified():
    assert cloud.error_code(_Err("Server.InsufficientInstanceCapacity")) == "InsufficientInstanceCapacity"
    assert cloud.error_code(ValueError("x")) == "ValueError"
    assert "InsufficientInstanceCapacity" in cloud.CAPACITY_ERRORS
    assert "VcpuLimitExceeded" in cloud.QUOTA_ERRORS
    assert not (cloud.CAPACITY_ERRORS & cloud.QUOTA_ERRORS)
