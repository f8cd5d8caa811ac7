"""`clusterctl image build` for aws pools: a builder instance from the base image, converged by the node roles, then
`CreateImage`, waited until available, and the image id recorded in the cluster's state.

The base image follows the pool's `os`: on Ubuntu, AWS's Deep Learning Base OSS Nvidia Driver GPU AMI, resolved
through its public SSM parameter `/aws/service/deeplearning/ami/$architecture/$ami_type/latest/ami-id` ("Finding the
ID of a DLAMI", https://docs.aws.amazon.com/dlami/latest/devguide/find-dlami-id.html: ami_type is the AMI's name
without "deep", "learning" and "ami"); on Debian 12 (for which there is no DLAMI), the newest official Debian 12
AMI, as the stack picks it for static nodes. A user-named AMI (pools[].ami) skips the lookup. Either way a
DescribeImages preflight checks that the image exists and is available in the region before any instance is
launched.

The builder is terminated in `finally`, whatever happened. On any failure after `CreateImage` the half image is
deregistered, and nothing is recorded: a later `up` never boots a pool from an image whose converge failed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from clusterctl.core.errors import ClusterctlError
from clusterctl.engines import images
from clusterctl.engines.aws.burst.ec2 import (CLUSTER_TAG, IMAGE_BUILDER, POOL_TAG, ROLE_TAG, LaunchFailed,
                                              launch_targets, ours)
from clusterctl.engines.aws.launch import block_devices
from clusterctl.engines.aws.amis import DEBIAN_12_NAME, DEBIAN_OWNER, debian_12_query
from clusterctl.render.stack_config import CLUSTER_ID_TAG, PoolConfig
from clusterctl.state.backend import Backend

DLAMI_PARAMETER = "/aws/service/deeplearning/ami/{arch}/base-oss-nvidia-driver-gpu-{os}/latest/ami-id"
DLAMI_OS = {"ubuntu2204": "ubuntu-22.04", "ubuntu2404": "ubuntu-24.04"}  # the spec's os -> the DLAMI's name for it


class ImageBuildError(ClusterctlError):
    """The image could not be built (base image missing, builder or converge failed, image never available)."""


@dataclass(frozen=True)
class BuildRequest:
    cluster: str  # the cluster's name and unique id: the builder and image carry both, like every resource of the stack
    cluster_id: str
    pool: str
    region: str
    instance_type: str  # the builder's type
    subnet_id: str
    security_group_ids: tuple[str, ...]
    inputs_hash: str  # roles, versions and base image: a change means a stale image
    base_ami: str | None = None  # the user's AMI; None resolves the default base of base_os
    base_os: str = "ubuntu2204"  # the pool's os (spec.vendor.OsName)
    arch: str = "x86_64"
    key_name: str | None = None
    root_volume_gib: int = 200  # the pool's root volume: the builder's disk holds driver, CUDA and NCCL like the nodes'


@dataclass(frozen=True)
class BuiltImage:
    image_id: str
    base_ami: str
    inputs_hash: str
    builder_id: str


def inputs_hash(role_vars: dict, base: str, roles_dir: Path, instance_type: str) -> str:
    """What an AMI is made of: the role variables (the spec's software versions and mirrors among them), the base
    image, the instance type (driver/EFA choices follow it) and the node roles. A change to any means the recorded
    image is stale."""
    return images.inputs_hash({"vars": role_vars, "base": base, "instance_type": instance_type}, roles_dir)


def controller_address(ec2: Any, cluster: str, cluster_id: str) -> str | None:
    """The aws controller's public address, found by the stack's tags: the jump host to the private subnets, as
    `up` reaches the pool's nodes (None: no public address, the user reaches the VPC some other way)."""
    resp = ec2.describe_instances(Filters=[*ours(cluster, cluster_id), {"Name": f"tag:{ROLE_TAG}", "Values": ["controller"]},
                                           {"Name": "instance-state-name", "Values": ["running"]}])
    found = [i.get("PublicIpAddress") for r in resp["Reservations"] for i in r["Instances"] if i.get("PublicIpAddress")]
    return str(found[0]) if found else None


def base_ami_parameter(os_name: str = "ubuntu2204", arch: str = "x86_64") -> str:
    return DLAMI_PARAMETER.format(arch=arch, os=DLAMI_OS[os_name])


def resolve_base_ami(ec2: Any, ssm: Any, req: BuildRequest) -> str:
    """The user's AMI, else the DLAMI's current id from its public SSM parameter (Ubuntu), else the newest official
    Debian 12 AMI."""
    if req.base_ami:
        return req.base_ami
    if req.base_os not in DLAMI_OS:
        return newest_debian(ec2, req)
    name = base_ami_parameter(req.base_os, req.arch)
    try:
        return str(ssm.get_parameter(Name=name)["Parameter"]["Value"])
    except Exception as e:  # botocore ClientError (ParameterNotFound, AccessDenied): said plainly
        raise ImageBuildError(f"cannot resolve the base image from SSM parameter {name} in {req.region}: {e}") from e


def newest_debian(ec2: Any, req: BuildRequest) -> str:
    found = ec2.describe_images(**debian_12_query(req.arch))["Images"]
    if not found:
        raise ImageBuildError(f"no official Debian 12 image ({DEBIAN_12_NAME}, owner {DEBIAN_OWNER}) in {req.region}: "
                              f"name one in pools[].ami")
    return str(max(found, key=lambda i: i.get("CreationDate", ""))["ImageId"])


def preflight_base(ec2: Any, ami: str, region: str) -> dict:
    """DescribeImages: the base image exists here and is available."""
    try:
        images = ec2.describe_images(ImageIds=[ami])["Images"]
    except Exception as e:
        raise ImageBuildError(f"base image {ami} does not exist in {region} (or is not shared with you): {e}") from e
    if not images:
        raise ImageBuildError(f"base image {ami} does not exist in {region} (or is not shared with you)")
    if images[0].get("State") != "available":
        raise ImageBuildError(f"base image {ami} is {images[0].get('State')}, not available")
    return images[0]


def _tags(req: BuildRequest, role: str) -> list[dict]:
    return [{"Key": CLUSTER_TAG, "Value": req.cluster}, {"Key": CLUSTER_ID_TAG, "Value": req.cluster_id},
            {"Key": POOL_TAG, "Value": req.pool}, {"Key": "clusterctl:inputs", "Value": req.inputs_hash},
            {"Key": ROLE_TAG, "Value": role}]


@dataclass(frozen=True)
class BuilderNetwork:
    subnet_id: str
    security_group_ids: tuple[str, ...]
    key_name: str | None


def builder_network(ec2: Any, cluster: str, cluster_id: str, pool: PoolConfig) -> BuilderNetwork:
    """Where the builder boots: as the pool's nodes do, in the cluster's subnet of the pool's first AZ, with the
    pool's launch template's security groups and key pair (found by the stack's tags, like burst resume finds
    them). The stack must be up: without it there is no network to build in."""
    try:
        target = launch_targets(ec2, cluster, cluster_id, pool)[0]
    except LaunchFailed as e:
        raise ImageBuildError(f"pool {pool.name}: the image builder boots in the cluster's own network, which is not "
                              f"there yet ({e}); run `clusterctl up` first") from e
    key = None
    if target.launch_template_id:
        data = ec2.describe_launch_template_versions(LaunchTemplateId=target.launch_template_id, Versions=["$Latest"])[
            "LaunchTemplateVersions"][0]["LaunchTemplateData"]
        key = data.get("KeyName")
    return BuilderNetwork(target.subnet_id, target.security_group_ids, key)


def launch_builder(ec2: Any, req: BuildRequest, base: str, root_device: str | None = None) -> str:
    """On-demand, with the pool's root volume (gp3, encrypted, as the launch template gives the nodes; the base
    image's own root, often 8 GiB, would not hold the stack)."""
    args: dict[str, Any] = dict(
        ImageId=base, InstanceType=req.instance_type, MinCount=1, MaxCount=1, SubnetId=req.subnet_id,
        SecurityGroupIds=list(req.security_group_ids),
        MetadataOptions={"HttpTokens": "required", "HttpEndpoint": "enabled"},
        TagSpecifications=[{"ResourceType": "instance", "Tags": _tags(req, IMAGE_BUILDER)}])
    if req.key_name:
        args["KeyName"] = req.key_name
    if root_device:
        args["BlockDeviceMappings"] = block_devices(root_device, req.root_volume_gib)
    return str(ec2.run_instances(**args)["Instances"][0]["InstanceId"])


def wait_running(ec2: Any, instance_id: str, delay: int = 15) -> str:
    """Wait for the builder to run; its private address (the converge's SSH target)."""
    ec2.get_waiter("instance_running").wait(InstanceIds=[instance_id], WaiterConfig={"Delay": delay, "MaxAttempts": 80})
    inst = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    address = inst.get("PrivateIpAddress")
    if not address:
        raise ImageBuildError(f"builder {instance_id} is running without a private address")
    return str(address)


def wait_available(ec2: Any, image_id: str, delay: int = 15) -> None:
    ec2.get_waiter("image_available").wait(ImageIds=[image_id], WaiterConfig={"Delay": delay, "MaxAttempts": 120})


def stamp() -> str:
    """The time in an image's name: going back to earlier inputs makes a new image (AMI names are unique per
    account, and the earlier one may be gone or kept)."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def build_image(ec2: Any, ssm: Any, state: Backend, req: BuildRequest, converge: Callable[[str], None],
                wait_image: Callable[[Any, str], None] = wait_available, delay: int = 15) -> BuiltImage:
    """Base image -> builder -> converge(address) -> CreateImage -> available -> recorded. The builder always ends."""
    base = resolve_base_ami(ec2, ssm, req)
    found = preflight_base(ec2, base, req.region)
    builder = launch_builder(ec2, req, base, found.get("RootDeviceName"))
    image_id: str | None = None
    try:
        try:
            converge(wait_running(ec2, builder, delay))
        except Exception as e:
            raise ImageBuildError(f"converging the image builder {builder} for pool {req.pool} failed: {e}") from e
        image_id = str(ec2.create_image(
            InstanceId=builder, Name=f"clusterctl-{req.cluster_id}-{req.pool}-{req.inputs_hash[:12]}-{stamp()}",
            Description=f"clusterctl node image for pool {req.pool} (inputs {req.inputs_hash})",
            TagSpecifications=[{"ResourceType": "image", "Tags": _tags(req, "node-image")}])["ImageId"])
        wait_image(ec2, image_id)
        built = BuiltImage(image_id, base, req.inputs_hash, builder)
        record_image(state, req.pool, built)
        return built
    except BaseException:
        if image_id is not None:
            discard_image(ec2, image_id)
        raise
    finally:
        try:
            ec2.terminate_instances(InstanceIds=[builder])
        except Exception as e:  # said with what to do; the build's own error, if any, is chained to it
            raise ImageBuildError(f"could not terminate the image builder {builder} of pool {req.pool} ({e}): "
                                  f"terminate it by hand (tag clusterctl:role=image-builder); `clusterctl down` "
                                  f"terminates it too") from e


def discard_image(ec2: Any, image_id: str) -> None:
    """A half-made image goes with its EBS snapshots (deregistering alone leaves them, and they are billed)."""
    found = ec2.describe_images(ImageIds=[image_id])["Images"]
    snapshots = [m["Ebs"]["SnapshotId"] for i in found for m in i.get("BlockDeviceMappings") or []
                 if (m.get("Ebs") or {}).get("SnapshotId")]
    ec2.deregister_image(ImageId=image_id)
    for snapshot in snapshots:
        ec2.delete_snapshot(SnapshotId=snapshot)


def record_image(state: Backend, pool: str, built: BuiltImage) -> None:
    images.record(state, pool, {"image_id": built.image_id, "base_ami": built.base_ami, "inputs_hash": built.inputs_hash})


def recorded_image(state: Backend, pool: str) -> dict | None:
    """What `image build` recorded for the pool: {"image_id", "base_ami", "inputs_hash"}, or None."""
    return images.recorded(state, pool)


def recorded_images(state: Backend, pools: list[str]) -> dict[str, str]:
    """pool -> recorded image id, for the pools that have one."""
    return {p: str(rec["image_id"]) for p in pools if (rec := recorded_image(state, p))}


def with_recorded_images(config: dict, images: dict[str, str]) -> dict:
    """The rendered stack config with each pool's `ami` set to its recorded node image: the launch templates and
    static instances boot the baked image (the spec's `ami` is the image build's base). A copy; config is untouched."""
    from clusterctl.render.cloud import PROJECT

    key = f"{PROJECT}:pools"
    pools = [dict(p, ami=images.get(p["name"], p.get("ami"))) for p in config[key]]
    return {**config, key: pools}
