"""Burst resume boots the pool's recorded node image: `image build` runs against moto (a fake converge stands in
for the ansible engine), the launch template is made with the recorded id the way the stack makes it, and a real
resume (actions.resume on moto and the fake Slurm) launches instances from that image."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from clusterctl.engines.aws import image as img
from clusterctl.engines.aws.burst import actions
from clusterctl.engines.aws.burst import ec2 as cloud
from clusterctl.state.local import LocalBackend
from tests.engines.aws.burst.conftest import lab_plan
from tests.engines.aws.burst.harness import CLUSTER_ID, create_stack

BUILT: dict[str, str] = {}


@pytest.fixture
def stack(aws, cloud_pool, tmp_path: Path):  # overrides the conftest's: the template boots the built image
    plan = lab_plan(cloud_pool)
    region = plan.pool("cloud").region
    ec2, ssm = boto3.client("ec2", region_name=region), boto3.client("ssm", region_name=region)
    vpc = ec2.create_vpc(CidrBlock="172.31.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="172.31.0.0/24")["Subnet"]["SubnetId"]
    sg = ec2.create_security_group(GroupName="builder", Description="image builder", VpcId=vpc)["GroupId"]
    base = sorted(i["ImageId"] for i in ec2.describe_images(
        Owners=["amazon"], Filters=[{"Name": "architecture", "Values": ["x86_64"]}])["Images"])[0]
    state = LocalBackend(tmp_path / "state", plan.name)
    req = img.BuildRequest(cluster=plan.name, cluster_id=CLUSTER_ID, pool="cloud", region=region, instance_type="p5.48xlarge",
                           subnet_id=subnet, security_group_ids=(sg,), inputs_hash="ef" * 32, base_ami=base)
    built = img.build_image(ec2, ssm, state, req, lambda address: None, delay=1)
    BUILT.update(image=built.image_id, base=base)
    image_id = img.recorded_images(state, ["cloud"])["cloud"]
    return ec2, create_stack(ec2, plan, "cloud", image_id=image_id)


def test_resume_launches_burst_nodes_from_the_recorded_image(ctx, stack) -> None:
    ec2, _ = stack
    report = actions.resume(ctx, "cloud[001-002]", {"jobs": [{"job_id": 7, "nodes": "cloud[001-002]"}],
                                                      "all_nodes": "cloud[001-002]"})
    assert report.ok and sorted(report.launched) == ["cloud001", "cloud002"]
    ids = [i.id for i in cloud.cluster_instances(ec2, "burst", CLUSTER_ID)]
    raw = [i for r in ec2.describe_instances(InstanceIds=ids)["Reservations"] for i in r["Instances"]]
    assert len(raw) == 2 and {i["ImageId"] for i in raw} == {BUILT["image"]} != {BUILT["base"]}
