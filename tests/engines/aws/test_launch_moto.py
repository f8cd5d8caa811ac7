"""Launching and terminating nodes through the product's boto3 path (clusterctl.engines.aws.launch) against moto.

The network and security group are created here with boto3 the way the Pulumi stack would (moto has no Pulumi);
the launch template is created from launch.launch_template_data, the same dict the Pulumi launch template is built
from; nodes launch with RunInstances, all or nothing (MinCount = MaxCount = count).
"""

from __future__ import annotations

import boto3

from clusterctl.engines.aws import launch
from clusterctl.render.stack_config import StackConfig
from clusterctl.compile import compile_plan
from tests.helpers import edited, load_dict

ID = "0123456789abcdef"  # the cluster id (apply/secrets.ensure_cluster_id)


def pool_config(edit=None):
    loaded = load_dict(edited("aws-p5-spot.yaml", edit or (lambda d: None)))
    assert loaded.ok
    cfg = StackConfig.from_plan(compile_plan(loaded.spec))
    return cfg, cfg.pools[0]


def network(ec2, cfg):
    vpc = ec2.create_vpc(CidrBlock=cfg.network.vpc_cidr)["Vpc"]["VpcId"]
    first = cfg.network.subnets[0]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock=first.cidr, AvailabilityZone=first.availability_zone)["Subnet"]["SubnetId"]
    sg = ec2.create_security_group(GroupName=f"{cfg.cluster}-efa", Description="efa", VpcId=vpc)["GroupId"]
    image = sorted(i["ImageId"] for i in ec2.describe_images(
        Owners=["amazon"], Filters=[{"Name": "architecture", "Values": ["x86_64"]}])["Images"])[0]
    return subnet, sg, image


def test_spot_nodes_launch_from_the_pool_template_and_terminate(aws):
    ec2 = boto3.client("ec2")
    cfg, pool = pool_config()
    subnet, sg, image = network(ec2, cfg)
    data = launch.launch_template_data(pool, image_id=image, subnet_id=subnet, security_group_ids=[sg],
                                       user_data="#cloud-config\n{}\n")
    lt = ec2.create_launch_template(LaunchTemplateName=f"{cfg.cluster}-{pool.name}", LaunchTemplateData=data)
    lt_id = lt["LaunchTemplate"]["LaunchTemplateId"]

    stored = ec2.describe_launch_template_versions(LaunchTemplateId=lt_id)["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    enis = sorted((e["NetworkCardIndex"], e["DeviceIndex"], e["InterfaceType"]) for e in stored["NetworkInterfaces"])
    assert enis == [(0, 0, "interface"), (0, 1, "efa-only")] + [(c, 0, "efa-only") for c in range(1, 32)]
    assert all(e["Groups"] == [sg] and e["SubnetId"] == subnet for e in stored["NetworkInterfaces"])
    assert stored["InstanceMarketOptions"]["MarketType"] == "spot"

    names = list(pool.static_nodes[:3])
    nodes = launch.launch_nodes(ec2, pool, cfg.cluster, names, cluster_id=ID,
        subnet_id=subnet, security_group_ids=[sg],
                                launch_template_id=lt_id)
    assert sorted(nodes) == names
    ids = [n["instance_id"] for n in nodes.values()]
    described = {i["InstanceId"]: i for r in ec2.describe_instances(InstanceIds=ids)["Reservations"] for i in r["Instances"]}
    for name, n in nodes.items():
        inst = described[n["instance_id"]]
        tags = {t["Key"]: t["Value"] for t in inst["Tags"]}
        assert tags["Name"] == name and tags["clusterctl:cluster"] == "p5spot" and tags["clusterctl:pool"] == "p5"
        assert inst["InstanceType"] == "p5.48xlarge"
        assert inst.get("InstanceLifecycle") == "spot"
        assert inst["Placement"]["AvailabilityZone"] == "us-east-1a" == n["availability_zone"]
        assert inst["PrivateIpAddress"] == n["private_ip"] and n["private_ip"].startswith("10.240.")
        assert not inst.get("PublicIpAddress")

    terminated = launch.terminate_nodes(ec2, ids)
    assert sorted(terminated) == sorted(ids)
    states = {i["State"]["Name"] for r in ec2.describe_instances(InstanceIds=ids)["Reservations"] for i in r["Instances"]}
    assert states <= {"shutting-down", "terminated"}


def test_on_demand_nodes_launch_without_a_template(aws):
    ec2 = boto3.client("ec2")
    cfg, pool = pool_config(lambda d: d["pools"][0].update(market="on-demand", count=2, availability_zones=["us-east-1a"]))
    subnet, sg, image = network(ec2, cfg)
    req = launch.run_instances_request(pool, cfg.cluster, 2, cluster_id=ID,
        subnet_id=subnet, security_group_ids=[sg], image_id=image)
    assert req["MinCount"] == req["MaxCount"] == 2 and "InstanceMarketOptions" not in req
    nodes = launch.launch_nodes(ec2, pool, cfg.cluster, ["p5001", "p5002"], cluster_id=ID,
        subnet_id=subnet, security_group_ids=[sg],
                                image_id=image)
    insts = [i for r in ec2.describe_instances(InstanceIds=[n["instance_id"] for n in nodes.values()])["Reservations"]
             for i in r["Instances"]]
    assert len(insts) == 2 and all(i.get("InstanceLifecycle") is None for i in insts)
    assert all(i["MetadataOptions"]["HttpTokens"] == "required" for i in insts)
    launch.terminate_nodes(ec2, [i["InstanceId"] for i in insts])


def test_run_instances_request_markets():
    _, spot = pool_config()
    req = launch.run_instances_request(spot, "c", 4, cluster_id=ID, subnet_id="subnet-1",
                                       security_group_ids=["sg-1"], launch_template_id="lt-1", placement_group="pg-1")
    assert req["InstanceMarketOptions"] == {"MarketType": "spot", "SpotOptions": {"SpotInstanceType": "one-time",
                                                                                 "InstanceInterruptionBehavior": "terminate"}}
    assert req["Placement"] == {"GroupName": "pg-1"} and req["LaunchTemplate"]["LaunchTemplateId"] == "lt-1"
    assert len(req["NetworkInterfaces"]) == 33
    assert req["NetworkInterfaces"][0]["AssociatePublicIpAddress"] is False
    assert all("AssociatePublicIpAddress" not in e for e in req["NetworkInterfaces"][1:])
    # the burst IAM policy allows RunInstances only with the id in the request's tags (instance, disks, ENIs)
    assert {t["ResourceType"]: {x["Key"]: x["Value"] for x in t["Tags"]}["clusterctl:cluster-id"]
            for t in req["TagSpecifications"]} == dict.fromkeys(("instance", "volume", "network-interface"), ID)

    _, block = pool_config(lambda d: d["pools"][0].update(market="capacity-block", capacity_reservation_id="cr-0123456789abcdef0",
                                                          availability_zones=["us-east-1a"], count=2))
    req = launch.run_instances_request(block, "c", 2, cluster_id=ID, subnet_id="subnet-1",
                                       security_group_ids=["sg-1"], launch_template_id="lt-1")
    assert req["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert req["CapacityReservationSpecification"] == {"CapacityReservationTarget": {"CapacityReservationId": "cr-0123456789abcdef0"}}
