"""Least privilege on AWS, asserted on what the Pulumi program would ask the provider for (mocks, no CLI):
IMDSv2 with hop limit 1, the nodes' role limited to the munge key parameter (no managed policy), the burst policy
tied to the cluster's unique id, and that id on every instance and launch template."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterctl.engines.aws.policies import shipped_burst_policy
from tests.engines.aws.pulumi_harness import CLUSTER_ID, run_spec
from tests.helpers import spec_of

ROOT = Path(__file__).resolve().parents[3]
LT = "aws:ec2/launchTemplate:LaunchTemplate"
INSTANCE = "aws:ec2/instance:Instance"
ID_TAG = "clusterctl:cluster-id"


@pytest.fixture(scope="module")
def p5():
    return run_spec(spec_of("aws-p5-spot.yaml"))[1]


def test_imdsv2_only_hop_limit_1_on_templates_and_controller(p5):
    for lt in p5.of_type(LT):
        md = lt.inputs["metadataOptions"]
        assert (md["httpTokens"], md["httpPutResponseHopLimit"], md["httpEndpoint"]) == ("required", 1, "enabled")
    controller = next(r for r in p5.of_type(INSTANCE) if r.inputs["tags"].get("clusterctl:role") == "controller")
    md = controller.inputs["metadataOptions"]
    assert (md["httpTokens"], md["httpPutResponseHopLimit"]) == ("required", 1)


def test_node_role_reads_only_the_munge_parameter_and_has_no_managed_policy(p5):
    assert not p5.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
    policy = json.loads(p5.one("aws:iam/rolePolicy:RolePolicy").inputs["policy"])
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    assert by_sid["MungeKey"] == {"Sid": "MungeKey", "Effect": "Allow", "Action": ["ssm:GetParameter"],
                                  "Resource": "arn:aws:ssm:us-east-1:123456789012:parameter/clusterctl/p5spot/munge-key"}
    assert set(by_sid) == {"MungeKey", "CheckpointList", "CheckpointObjects"}
    for s in policy["Statement"]:
        assert s["Resource"] != "*" and not any(a.endswith("*") for a in s["Action"])


def test_burst_policy_is_tied_to_the_cluster_id_and_the_node_role(p5):
    doc = json.loads(p5.one("aws:iam/policy:Policy").inputs["policy"])
    role_arn = "arn:aws:iam::123456789012:role/p5spot-role"
    by_sid = {s["Sid"]: s for s in doc["Statement"]}
    assert by_sid["LaunchTaggedInstances"]["Condition"] == {
        "StringEquals": {f"aws:RequestTag/{ID_TAG}": CLUSTER_ID}}
    for sid in ("LaunchFromClusterResources", "TerminateOurInstances", "NameOurInstances"):
        assert by_sid[sid]["Condition"]["StringEquals"] == {f"aws:ResourceTag/{ID_TAG}": CLUSTER_ID}, sid
    assert by_sid["NameOurInstances"]["Condition"]["ForAllValues:StringEquals"] == {"aws:TagKeys": ["Name"]}
    assert by_sid["PassNodeRole"]["Resource"] == role_arn
    # every write action is conditioned; only Describe* and images/markets are not
    for s in doc["Statement"]:
        writes = [a for a in s["Action"] if not a.startswith("ec2:Describe")]
        if writes and s["Sid"] != "LaunchImagesAndMarkets":
            assert "Condition" in s, s["Sid"]
    assert "p5spot" not in json.dumps(doc["Statement"][:-1])  # never the cluster name


def test_shipped_burst_policy_file_is_the_generated_one():
    assert (ROOT / "stacks" / "aws" / "burst-policy.json").read_text() == shipped_burst_policy()
    assert "${CLUSTER_ID}" in shipped_burst_policy()


def test_every_instance_and_launch_template_carries_the_cluster_id(p5):
    for lt in p5.of_type(LT):
        assert lt.inputs["tags"][ID_TAG] == CLUSTER_ID
        specs = {t["resourceType"]: t["tags"] for t in lt.inputs["tagSpecifications"]}
        assert set(specs) == {"instance", "volume", "network-interface"}
        assert all(tags[ID_TAG] == CLUSTER_ID for tags in specs.values())
    instances = p5.of_type(INSTANCE)
    assert instances and all(r.inputs["tags"][ID_TAG] == CLUSTER_ID for r in instances)
    untagged = [r.typ for r in p5.resources if "tags" in r.inputs and r.inputs["tags"].get(ID_TAG) != CLUSTER_ID]
    assert not untagged


def test_the_program_refuses_a_stack_without_a_cluster_id():
    from clusterctl.render.stack_config import Runtime, StackConfig
    from clusterctl.compile import compile_plan

    cfg = StackConfig.from_plan(compile_plan(spec_of("aws-p5-spot.yaml")), Runtime())
    with pytest.raises(ValueError, match="no cluster id"):
        _ = cfg.tags
