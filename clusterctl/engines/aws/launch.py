"""How a pool's instances are launched, as EC2 API parameters (RunInstances / LaunchTemplateData shapes).

One source for two engines: the Pulumi launch template (compute.py converts these dicts to pulumi-aws args)
and the boto3 path that launches nodes outside Pulumi (Slurm's ResumeProgram powering up elastic nodes, and the
moto tests). Pure functions; only `launch_nodes` / `terminate_nodes` talk to AWS, through a client passed in.

AWS facts encoded here (EC2 user guide, "Maximize network bandwidth ... multiple network cards", Capacity Blocks
and Spot chapters):
- every ENI lists its own security groups (a template with network interfaces cannot use SecurityGroupIds);
- an instance with more than one network interface cannot get an auto-assigned public IPv4 address, so compute
  nodes never ask for one (they reach the internet through the NAT gateway);
- spot: one-time requests, terminate on interruption (the 2-minute notice is at IMDS spot/instance-action);
- capacity blocks: MarketType capacity-block plus the reservation id; reserved: capacity reservation targeting;
- a RunInstances request cannot turn a launch template's spot or capacity-block market back into on-demand (its
  MarketType has no on-demand value), so a pool with fallback markets keeps the purchase option out of its template
  and every request (and every static instance) states it.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any, Sequence

from clusterctl.render.stack_config import CLUSTER_ID_TAG, PoolConfig

if TYPE_CHECKING:  # boto3 callers pass plain strings, the Pulumi program passes Outputs; the values only pass through
    from pulumi import Input

# 1: a token cannot leave the node's own network stack. A container on a bridge network is one hop further and
# its traffic is forwarded, not OUTPUT, so the root-only firewall rule (user-data) would not see it: hop limit 1
# keeps it from IMDSv2 altogether. clusterctl runs no such containers (enroot/pyxis use the host network).
IMDS_HOP_LIMIT = 1


def network_interfaces(pool: PoolConfig, subnet_id: Input[str], security_group_ids: Sequence[Input[str]]) -> list[dict]:
    """The pool's ENIs in card order, each with its own security groups, never a public address."""
    out = []
    for s in pool.network_interfaces:
        eni = {
            "NetworkCardIndex": s.network_card_index,
            "DeviceIndex": s.device_index,
            "InterfaceType": s.interface_type,
            "SubnetId": subnet_id,
            "Groups": list(security_group_ids),
            "DeleteOnTermination": True,
        }
        if s.network_card_index == 0 and s.device_index == 0:
            eni["AssociatePublicIpAddress"] = False  # only the primary ENI may carry the flag; say no explicitly
        out.append(eni)
    return out


def market_options(pool: PoolConfig) -> dict | None:
    """InstanceMarketOptions for the pool's market (None: on-demand and reserved use the default market)."""
    if pool.market == "spot":
        return {"MarketType": "spot", "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"}}
    if pool.market == "capacity-block":
        return {"MarketType": "capacity-block"}
    return None


def capacity_reservation(pool: PoolConfig) -> dict | None:
    """CapacityReservationSpecification: target the block / reservation so instances land in it and nowhere else."""
    if pool.market in ("capacity-block", "reserved") and pool.capacity_reservation_id:
        return {"CapacityReservationTarget": {"CapacityReservationId": pool.capacity_reservation_id}}
    return None  # on-demand: EC2's default ("open") uses a matching open reservation the account already pays for


def metadata_options() -> dict:
    # IMDSv2 only; tags in IMDS: the bootstrap reads the node name from the Name tag.
    return {"HttpTokens": "required", "HttpEndpoint": "enabled", "HttpPutResponseHopLimit": IMDS_HOP_LIMIT,
            "InstanceMetadataTags": "enabled"}


def block_devices(root_device: Input[str], size_gib: int) -> list[dict]:
    return [{"DeviceName": root_device,
             "Ebs": {"VolumeSize": size_gib, "VolumeType": "gp3", "Encrypted": True, "DeleteOnTermination": True}}]


def launch_template_data(pool: PoolConfig, *, image_id: Input[str], subnet_id: Input[str], security_group_ids: Sequence[Input[str]],
                         root_device: Input[str] = "/dev/xvda", user_data: str | None = None, placement_group: str | None = None,
                         instance_profile_arn: Input[str] | None = None, key_name: Input[str] | None = None) -> dict:
    """LaunchTemplateData of the pool: what every node of it, static or powered up later, boots with."""
    data = {
        "ImageId": image_id,
        "InstanceType": pool.instance_type,
        "NetworkInterfaces": network_interfaces(pool, subnet_id, security_group_ids),
        "MetadataOptions": metadata_options(),
        "BlockDeviceMappings": block_devices(root_device, pool.root_volume_gib),
        "EbsOptimized": True,
    }
    if not pool.fallback_markets:
        if (m := market_options(pool)) is not None:
            data["InstanceMarketOptions"] = m
        if (c := capacity_reservation(pool)) is not None:
            data["CapacityReservationSpecification"] = c
    if placement_group:
        data["Placement"] = {"GroupName": placement_group}
    if user_data:
        data["UserData"] = base64.b64encode(user_data.encode()).decode()
    if instance_profile_arn:
        data["IamInstanceProfile"] = {"Arn": instance_profile_arn}
    if key_name:
        data["KeyName"] = key_name
    return data


def run_instances_request(pool: PoolConfig, cluster: str, count: int, *, cluster_id: str, subnet_id: str,
                          security_group_ids: list[str], launch_template_id: str | None = None,
                          image_id: str | None = None, placement_group: str | None = None,
                          private_ip: str | None = None, name: str | None = None, role: str | None = None) -> dict:
    """RunInstances parameters for `count` nodes of the pool, all or nothing (MinCount = MaxCount).

    With a launch template (production), the template carries image, user-data, profile and market; the request
    repeats the ENIs with the subnet of the AZ being tried (AZ failover after InsufficientInstanceCapacity) and the
    market options, so a template edited by hand cannot silently change the purchase option.
    The cluster id is tagged in the request itself (instance, disks, ENIs): the burst IAM policy allows
    RunInstances only with it (aws:RequestTag), and only instances carrying it are ever terminated.
    """
    tags = [{"Key": "clusterctl:cluster", "Value": cluster}, {"Key": CLUSTER_ID_TAG, "Value": cluster_id},
            {"Key": "clusterctl:pool", "Value": pool.name}]
    # One node's request is named at launch (no window in which it is an untagged instance); `role` marks what it is.
    own = [*tags, *([{"Key": "Name", "Value": name}] if name else []), *([{"Key": "clusterctl:role", "Value": role}] if role else [])]
    enis = network_interfaces(pool, subnet_id, security_group_ids)
    if private_ip:  # one node at a fixed address (MinCount 1): on its primary interface
        if count != 1:
            raise ValueError("a private address is given to one instance at a time")
        primary = next(e for e in enis if e["DeviceIndex"] == 0 and e["NetworkCardIndex"] == 0)
        primary["PrivateIpAddress"] = private_ip
    req: dict[str, Any] = {
        "MinCount": count,
        "MaxCount": count,
        "NetworkInterfaces": enis,
        "TagSpecifications": [{"ResourceType": kind, "Tags": own if kind == "instance" else tags}
                              for kind in ("instance", "volume", "network-interface")],
    }
    if launch_template_id:
        req["LaunchTemplate"] = {"LaunchTemplateId": launch_template_id, "Version": "$Latest"}
    else:
        if image_id is None:
            raise ValueError("image_id is needed without a launch template")
        req.update(ImageId=image_id, InstanceType=pool.instance_type, MetadataOptions=metadata_options())
    if (m := market_options(pool)) is not None:
        req["InstanceMarketOptions"] = m
    if (c := capacity_reservation(pool)) is not None:
        req["CapacityReservationSpecification"] = c
    if placement_group:
        req["Placement"] = {"GroupName": placement_group}
    return req


def launch_nodes(ec2: Any, pool: PoolConfig, cluster: str, names: list[str], **kwargs: Any) -> dict[str, dict]:
    """Launch the named nodes in one all-or-nothing request; Name tags follow (the bootstrap waits for them).

    Returns node name -> {instance_id, private_ip, availability_zone}. Raises botocore's ClientError unchanged
    (InsufficientInstanceCapacity etc.): the caller decides on AZ failover and puts Slurm nodes back to POWER_DOWN.
    """
    one = len(names) == 1
    req = run_instances_request(pool, cluster, len(names), name=names[0] if one else None, **kwargs)
    resp = ec2.run_instances(**req)
    instances = sorted(resp["Instances"], key=lambda i: i["AmiLaunchIndex"])
    out = {}
    for name, inst in zip(names, instances, strict=True):  # MinCount = MaxCount: one instance per name
        if not one:
            ec2.create_tags(Resources=[inst["InstanceId"]], Tags=[{"Key": "Name", "Value": name}])
        out[name] = {"instance_id": inst["InstanceId"], "private_ip": inst.get("PrivateIpAddress"),
                     "availability_zone": inst["Placement"]["AvailabilityZone"]}
    return out


def terminate_nodes(ec2: Any, instance_ids: list[str]) -> list[str]:
    if not instance_ids:
        return []
    resp = ec2.terminate_instances(InstanceIds=list(instance_ids))
    return [t["InstanceId"] for t in resp["TerminatingInstances"]]
