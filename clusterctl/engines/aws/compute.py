"""Compute: per pool a placement group, a launch template and the static nodes; the aws controller.

The launch template is the pool's whole launch recipe (ENI layout from the catalog, market, IMDS, disks,
user-data, profile), built from launch.py's EC2-API dicts so that nodes Slurm powers up later with boto3
(RunInstances from the same template) are identical to the static ones Pulumi creates here.

Static nodes launch in the pool's first AZ (a cluster placement group lives in one AZ); the other AZs are the
fallbacks the resume path tries on capacity errors. A change to the template (new AMI, user-data) applies to the
next launched node and never replaces running GPU nodes: instances ignore template version changes.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
from pulumi import Input, ResourceOptions

from clusterctl.engines.aws import launch
from clusterctl.engines.aws.amis import DEBIAN_12_NAME, DEBIAN_OWNER
from clusterctl.render.stack_config import ControllerConfig, PoolConfig



def image(ami: str | None, opts: pulumi.InvokeOptions | None = None) -> pulumi.Output[aws.ec2.GetAmiResult]:
    """The AMI (explicit, or the latest official Debian 12) with its root device name."""
    if ami:
        return aws.ec2.get_ami_output(filters=[{"name": "image-id", "values": [ami]}], most_recent=True, opts=opts)
    return aws.ec2.get_ami_output(
        owners=[DEBIAN_OWNER], most_recent=True,
        filters=[{"name": "name", "values": [DEBIAN_12_NAME]}, {"name": "architecture", "values": ["x86_64"]},
                 {"name": "state", "values": ["available"]}], opts=opts)


def _flag(v: bool) -> str:
    return "true" if v else "false"  # launch template booleans are strings in the provider schema


def launch_template_args(data: dict) -> dict:
    """launch.py's LaunchTemplateData (EC2 API shape) -> aws.ec2.LaunchTemplate keyword arguments."""
    args = {
        "image_id": data["ImageId"],
        "instance_type": data["InstanceType"],
        "ebs_optimized": _flag(data.get("EbsOptimized", True)),
        "network_interfaces": [
            {k2: v2 for k2, v2 in {
                "network_card_index": e["NetworkCardIndex"],
                "device_index": e["DeviceIndex"],
                "interface_type": e["InterfaceType"],
                "subnet_id": e["SubnetId"],
                "security_groups": e["Groups"],
                "delete_on_termination": _flag(e["DeleteOnTermination"]),
                "associate_public_ip_address": _flag(e["AssociatePublicIpAddress"]) if "AssociatePublicIpAddress" in e else None,
            }.items() if v2 is not None}
            for e in data["NetworkInterfaces"]
        ],
        "metadata_options": {
            "http_tokens": data["MetadataOptions"]["HttpTokens"],
            "http_endpoint": data["MetadataOptions"]["HttpEndpoint"],
            "http_put_response_hop_limit": data["MetadataOptions"]["HttpPutResponseHopLimit"],
            "instance_metadata_tags": data["MetadataOptions"]["InstanceMetadataTags"],
        },
        "block_device_mappings": [
            {"device_name": b["DeviceName"],
             "ebs": {"volume_size": b["Ebs"]["VolumeSize"], "volume_type": b["Ebs"]["VolumeType"],
                     "encrypted": _flag(b["Ebs"]["Encrypted"]), "delete_on_termination": _flag(b["Ebs"]["DeleteOnTermination"])}}
            for b in data["BlockDeviceMappings"]
        ],
    }
    if "InstanceMarketOptions" in data:
        args["instance_market_options"] = market_args(data["InstanceMarketOptions"])
    if "CapacityReservationSpecification" in data:
        args["capacity_reservation_specification"] = reservation_args(data["CapacityReservationSpecification"])
    if "UserData" in data:
        args["user_data"] = data["UserData"]
    if "IamInstanceProfile" in data:
        args["iam_instance_profile"] = {"arn": data["IamInstanceProfile"]["Arn"]}
    if "KeyName" in data:
        args["key_name"] = data["KeyName"]
    return args


def market_args(m: dict) -> aws.ec2.InstanceInstanceMarketOptionsArgsDict:
    out: aws.ec2.InstanceInstanceMarketOptionsArgsDict = {"market_type": m["MarketType"]}
    if "SpotOptions" in m:
        out["spot_options"] = {"spot_instance_type": m["SpotOptions"]["SpotInstanceType"],
                               "instance_interruption_behavior": m["SpotOptions"]["InstanceInterruptionBehavior"]}
    return out


def reservation_args(c: dict) -> aws.ec2.InstanceCapacityReservationSpecificationArgsDict:
    if "CapacityReservationTarget" in c:
        return {"capacity_reservation_target": {"capacity_reservation_id": c["CapacityReservationTarget"]["CapacityReservationId"]}}
    return {"capacity_reservation_preference": c["CapacityReservationPreference"]}


@dataclass
class NodePoolArgs:
    cluster: str
    pool: PoolConfig
    subnet_id: Input[str]  # the pool's first AZ
    security_group_ids: list[Input[str]]
    instance_profile_arn: Input[str]
    user_data: str
    key_name: Input[str] | None
    tags: dict[str, str]


class NodePool(pulumi.ComponentResource):
    placement_group: aws.ec2.PlacementGroup | None
    launch_template: aws.ec2.LaunchTemplate
    instances: dict[str, aws.ec2.Instance]

    def __init__(self, name: str, args: NodePoolArgs, opts: ResourceOptions | None = None):
        super().__init__("clusterctl:aws:NodePool", name, None, opts)
        child = ResourceOptions(parent=self)
        pool = args.pool
        tags = {**args.tags, "clusterctl:pool": pool.name}

        self.placement_group = None
        if pool.placement_strategy:
            self.placement_group = aws.ec2.PlacementGroup(f"{name}-pg", strategy=pool.placement_strategy,
                                                          tags=tags, opts=child)

        ami = image(pool.ami, pulumi.InvokeOptions(parent=self))
        data = launch.launch_template_data(
            pool, image_id=ami.id, subnet_id=args.subnet_id, security_group_ids=args.security_group_ids,
            root_device=ami.root_device_name, user_data=args.user_data,
            instance_profile_arn=args.instance_profile_arn, key_name=args.key_name)
        self.launch_template = aws.ec2.LaunchTemplate(
            f"{name}-lt", description=f"clusterctl {args.cluster} pool {pool.name}: {pool.instance_type}, {pool.market}",
            update_default_version=True,
            tag_specifications=[{"resource_type": kind, "tags": tags} for kind in ("instance", "volume", "network-interface")],
            tags=tags, opts=child, **launch_template_args(data))

        market = launch.market_options(pool)
        reservation = launch.capacity_reservation(pool)
        self.instances = {}
        for node in pool.static_nodes:
            self.instances[node] = aws.ec2.Instance(
                node,
                instance_type=pool.instance_type,
                launch_template={"id": self.launch_template.id, "version": self.launch_template.latest_version.apply(str)},
                placement_group=self.placement_group.name if self.placement_group else None,
                instance_market_options=market_args(market) if market else None,
                capacity_reservation_specification=reservation_args(reservation) if reservation else None,
                tags={**tags, "Name": node},  # the node's hostname (the bootstrap reads it from IMDS)
                opts=node_instance_options(self))

        self.register_outputs({
            "launch_template_id": self.launch_template.id,
            "placement_group": self.placement_group.name if self.placement_group else None,
            "instances": {n: i.id for n, i in self.instances.items()},
        })


def node_instance_options(parent: pulumi.Resource) -> ResourceOptions:
    """A pool node's instance: a new instance type (the spec's `replace` policy: GPU model / instance type) replaces
    it, the old one deleted first so a capacity block or reservation never has to hold both. Other launch template
    changes (user data, AMI, ENI details) reach nodes launched later and never recreate a running one."""
    return ResourceOptions(parent=parent, ignore_changes=["launchTemplate", "userData", "ami"],
                           replace_on_changes=["instanceType"], delete_before_replace=True)


@dataclass
class ControllerArgs:
    cluster: str
    config: ControllerConfig
    subnet_id: Input[str]  # the public subnet
    security_group_ids: list[Input[str]]
    instance_profile_name: Input[str]
    public_address: bool  # only when an admin CIDR may reach it (single NIC: a public address is allowed)
    user_data: str
    key_name: Input[str] | None
    tags: dict[str, str]


class Controller(pulumi.ComponentResource):
    instance: aws.ec2.Instance

    def __init__(self, name: str, args: ControllerArgs, opts: ResourceOptions | None = None):
        super().__init__("clusterctl:aws:Controller", name, None, opts)
        c = args.config
        ami = image(c.ami, pulumi.InvokeOptions(parent=self))
        self.instance = aws.ec2.Instance(
            c.name, ami=ami.id, instance_type=c.instance_type, subnet_id=args.subnet_id, private_ip=c.address,
            vpc_security_group_ids=args.security_group_ids, associate_public_ip_address=args.public_address,
            iam_instance_profile=args.instance_profile_name,
            key_name=args.key_name, user_data=args.user_data,
            metadata_options={"http_tokens": "required", "http_put_response_hop_limit": launch.IMDS_HOP_LIMIT,
                              "instance_metadata_tags": "enabled"},
            root_block_device={"volume_size": c.root_volume_gib, "volume_type": "gp3", "encrypted": True},
            tags={**args.tags, "Name": c.name, "clusterctl:role": "controller"},
            opts=ResourceOptions(parent=self, ignore_changes=["ami", "userData"]))
        self.register_outputs({"instance_id": self.instance.id, "private_ip": self.instance.private_ip,
                               "public_ip": self.instance.public_ip})
