"""`image build` for aws pools against a real moto_server: builder launched from the base image, converged (a fake
converge that records its SSH target stands in for the ansible engine), CreateImage, image recorded in the state;
a failed converge terminates the builder and records nothing; a failure after CreateImage deregisters the image."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from clusterctl.engines.aws import image as img
from clusterctl.engines.aws import launch
from clusterctl.state.local import LocalBackend
from tests.engines.aws.test_launch_moto import network, pool_config

ID = "0123456789abcdef"


def request(subnet: str, sg: str, base: str | None) -> img.BuildRequest:
    return img.BuildRequest(cluster="p5spot", cluster_id=ID, pool="p5", region="us-east-1", instance_type="p5.48xlarge",
                            subnet_id=subnet, security_group_ids=(sg,), inputs_hash="ab" * 32, base_ami=base)


def setup(tmp_path: Path) -> tuple:
    ec2, ssm = boto3.client("ec2"), boto3.client("ssm")
    cfg, _ = pool_config()
    subnet, sg, base = network(ec2, cfg)
    return ec2, ssm, LocalBackend(tmp_path / "state", "p5spot"), subnet, sg, base


def instance_state(ec2, instance_id: str) -> str:
    return ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]["State"]["Name"]


def test_build_records_the_image_and_the_launch_template_uses_it(aws, tmp_path: Path) -> None:
    ec2, ssm, state, subnet, sg, base = setup(tmp_path)
    targets: list[str] = []
    volumes: list[dict] = []

    def converge(address: str) -> None:  # while the builder runs: its disk is the pool's root volume, not the base's
        targets.append(address)
        [builder] = [i for r in ec2.describe_instances(Filters=[{"Name": "private-ip-address", "Values": [address]}])[
            "Reservations"] for i in r["Instances"]]
        volumes.extend(ec2.describe_volumes(Filters=[{"Name": "attachment.instance-id",
                                                      "Values": [builder["InstanceId"]]}])["Volumes"])

    built = img.build_image(ec2, ssm, state, request(subnet, sg, base), converge, delay=1)
    assert [(v["Size"], v["VolumeType"], v["Encrypted"]) for v in volumes] == [(200, "gp3", True)]

    builder = ec2.describe_instances(InstanceIds=[built.builder_id])["Reservations"][0]["Instances"][0]
    assert targets == [builder["PrivateIpAddress"]]  # converged over the builder's address, once
    assert builder["ImageId"] == base
    assert instance_state(ec2, built.builder_id) in ("shutting-down", "terminated")
    image = ec2.describe_images(ImageIds=[built.image_id])["Images"][0]
    assert image["State"] == "available"
    tags = {t["Key"]: t["Value"] for t in image.get("Tags", [])}
    assert tags.get("clusterctl:cluster") == "p5spot" and tags.get("clusterctl:cluster-id") == ID
    assert tags.get("clusterctl:inputs") == "ab" * 32
    assert img.recorded_image(state, "p5") == {"image_id": built.image_id, "base_ami": base, "inputs_hash": "ab" * 32}
    assert img.recorded_images(state, ["p5"]) == {"p5": built.image_id}

    # The recorded id is what the pool's launch template boots (the same dict the Pulumi template is built from).
    cfg, pool = pool_config()
    data = launch.launch_template_data(pool, image_id=img.recorded_images(state, ["p5"])["p5"], subnet_id=subnet,
                                       security_group_ids=[sg], user_data="#cloud-config\n{}\n")
    lt = ec2.create_launch_template(LaunchTemplateName="p5spot-p5", LaunchTemplateData=data)["LaunchTemplate"]
    stored = ec2.describe_launch_template_versions(LaunchTemplateId=lt["LaunchTemplateId"])["LaunchTemplateVersions"]
    assert stored[0]["LaunchTemplateData"]["ImageId"] == built.image_id


def test_converge_failure_terminates_the_builder_and_records_nothing(aws, tmp_path: Path) -> None:
    ec2, ssm, state, subnet, sg, base = setup(tmp_path)
    seen: list[str] = []

    def failing(address: str) -> None:
        seen.append(address)
        raise RuntimeError("nvidia_driver: apt failed")

    with pytest.raises(img.ImageBuildError, match="converging the image builder .* failed: nvidia_driver"):
        img.build_image(ec2, ssm, state, request(subnet, sg, base), failing, delay=1)
    builders = [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
    assert len(builders) == 1 and seen == [builders[0]["PrivateIpAddress"]]
    assert builders[0]["State"]["Name"] in ("shutting-down", "terminated")
    assert ec2.describe_images(Owners=["self"])["Images"] == []
    assert img.recorded_image(state, "p5") is None
    assert img.recorded_images(state, ["p5"]) == {}


def test_going_back_to_earlier_inputs_makes_a_new_image(aws, tmp_path: Path, monkeypatch) -> None:
    """AMI names are unique per account: inputs X, then Y, then X again must not trip over X's first image."""
    from dataclasses import replace

    ec2, ssm, state, subnet, sg, base = setup(tmp_path)
    stamps = iter(["20261206T230000Z", "20261206T231500Z", "20261206T233000Z"])
    monkeypatch.setattr(img, "stamp", lambda: next(stamps))
    ids = [img.build_image(ec2, ssm, state, replace(request(subnet, sg, base), inputs_hash=h), lambda a: None,
                           delay=1).image_id for h in ("ab" * 32, "cd" * 32, "ab" * 32)]
    assert len(set(ids)) == 3


def test_failure_after_create_image_deregisters_it(aws, tmp_path: Path) -> None:
    ec2, ssm, state, subnet, sg, base = setup(tmp_path)

    def never_available(client, image_id: str) -> None:
        raise TimeoutError(f"{image_id} stayed pending")

    snapshots_before = {s["SnapshotId"] for s in ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]}
    with pytest.raises(TimeoutError):
        img.build_image(ec2, ssm, state, request(subnet, sg, base), lambda a: None, wait_image=never_available, delay=1)
    assert [i for i in ec2.describe_images(Owners=["self"])["Images"] if i["State"] == "available"] == []
    # its snapshots go with it (deregistering alone leaves them, billed)
    assert {s["SnapshotId"] for s in ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]} == snapshots_before
    assert img.recorded_image(state, "p5") is None
    builders = [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
    assert [b["State"]["Name"] in ("shutting-down", "terminated") for b in builders] == [True]


def test_missing_base_image_stops_before_any_launch(aws, tmp_path: Path) -> None:
    ec2, ssm, state, subnet, sg, _ = setup(tmp_path)
    with pytest.raises(img.ImageBuildError, match="ami-0123456789abcdef0 does not exist in us-east-1"):
        img.build_image(ec2, ssm, state, request(subnet, sg, "ami-0123456789abcdef0"), lambda a: None, delay=1)
    assert ec2.describe_instances()["Reservations"] == []


def test_default_base_is_the_dlami_resolved_through_its_public_ssm_parameter() -> None:
    # moto answers PutParameter under /aws with "No access to reserved parameter name", so the public parameter
    # is stubbed with botocore's own Stubber.
    ssm = boto3.client("ssm", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    name = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"
    with Stubber(ssm) as stub:
        stub.add_response("get_parameter", {"Parameter": {"Name": name, "Value": "ami-0abc12345678def90"}},
                          {"Name": name})
        assert img.resolve_base_ami(None, ssm, request("subnet-1", "sg-1", None)) == "ami-0abc12345678def90"
    assert img.resolve_base_ami(None, ssm, request("subnet-1", "sg-1", "ami-0fedcba987654321")) == "ami-0fedcba987654321"


def test_a_debian_pool_builds_on_the_newest_official_debian_12_image() -> None:
    """No DLAMI is made for Debian: the base is the newest Debian 12 AMI of Debian's cloud team, as the stack picks
    it for static nodes (stubbed: moto holds no image of that owner)."""
    from dataclasses import replace

    ec2 = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    req = replace(request("subnet-1", "sg-1", None), base_os="debian12")
    query = {"Owners": ["136693071363"], "Filters": [{"Name": "name", "Values": ["debian-12-amd64-*"]},
                                                     {"Name": "architecture", "Values": ["x86_64"]},
                                                     {"Name": "state", "Values": ["available"]}]}
    images = [{"ImageId": "ami-0000000000000old1", "CreationDate": "2025-01-10T00:00:00.000Z"},
              {"ImageId": "ami-0000000000000new2", "CreationDate": "2026-11-02T00:00:00.000Z"}]
    with Stubber(ec2) as stub:
        stub.add_response("describe_images", {"Images": images}, query)
        stub.add_response("describe_images", {"Images": []}, query)
        assert img.resolve_base_ami(ec2, None, req) == "ami-0000000000000new2"
        with pytest.raises(img.ImageBuildError, match="no official Debian 12 image .* name one in pools\\[\\].ami"):
            img.resolve_base_ami(ec2, None, req)


def test_unresolvable_dlami_parameter_is_a_clear_error(aws, tmp_path: Path) -> None:
    ec2, ssm, state, subnet, sg, _ = setup(tmp_path)  # moto holds no DLAMI parameters: ParameterNotFound
    with pytest.raises(img.ImageBuildError, match="cannot resolve the base image from SSM parameter "
                                                  "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu"):
        img.build_image(ec2, ssm, state, request(subnet, sg, None), lambda a: None, delay=1)
    assert ec2.describe_instances()["Reservations"] == []


def test_inputs_hash_follows_versions_base_and_role_files(tmp_path: Path) -> None:
    roles = tmp_path / "roles"
    (roles / "efa" / "tasks").mkdir(parents=True)
    task = roles / "efa" / "tasks" / "main.yml"
    task.write_text("- name: EFA installer\n")
    soft = {"nvidia_driver": "570.172.08", "efa_installer": "1.38.1"}
    first = img.inputs_hash(soft, "ami-0abc12345678def90", roles, "p5.48xlarge")
    assert first == img.inputs_hash(dict(reversed(list(soft.items()))), "ami-0abc12345678def90", roles, "p5.48xlarge")
    assert first != img.inputs_hash({**soft, "efa_installer": "1.39.0"}, "ami-0abc12345678def90", roles, "p5.48xlarge")
    assert first != img.inputs_hash(soft, "ami-0fedcba987654321", roles, "p5.48xlarge")
    assert first != img.inputs_hash(soft, "ami-0abc12345678def90", roles, "p5en.48xlarge")
    task.write_text("- name: EFA installer, changed\n")
    assert first != img.inputs_hash(soft, "ami-0abc12345678def90", roles, "p5.48xlarge")
    repo_roles = Path(__file__).resolve().parents[3] / "playbooks" / "roles"
    assert len(img.inputs_hash(soft, "ami-0abc12345678def90", repo_roles, "p5.48xlarge")) == 64
