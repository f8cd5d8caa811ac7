"""The Pulumi program under pulumi.runtime.set_mocks (no CLI, no cloud), for every example with aws pools and
spec variants for the markets and instance types the examples do not use. Assertions are on the resource inputs
as the engine receives them (serialized, camelCase)."""

from __future__ import annotations

import base64
import json
import runpy

import pulumi
import pulumi_aws
import pytest
import yaml

from clusterctl.render.stack_config import Runtime
from clusterctl.render import render_spec
from tests.engines.aws.pulumi_harness import AMI, CLUSTER_ID, MUNGE_B64, SSH_KEY, run_program, run_spec
from tests.conftest import ROOT
from tests.helpers import spec_of

LT = "aws:ec2/launchTemplate:LaunchTemplate"
INSTANCE = "aws:ec2/instance:Instance"
SG = "aws:ec2/securityGroup:SecurityGroup"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
PG = "aws:ec2/placementGroup:PlacementGroup"
CR = "cr-0123456789abcdef0"


def expected_enis(cards: int) -> list[tuple[int, int, str]]:
    """The AWS-documented layout: card 0 device 0 ENA interface, card 0 device 1 efa-only, cards 1.. device 0 efa-only."""
    return [(0, 0, "interface"), (0, 1, "efa-only")] + [(c, 0, "efa-only") for c in range(1, cards)]


def pool_instances(rec, pool="p5"):
    return [r for r in rec.of_type(INSTANCE) if r.inputs["tags"].get("clusterctl:pool") == pool]


def eni_layout(lt) -> list[tuple[int, int, str]]:
    return [(int(e["networkCardIndex"]), int(e["deviceIndex"]), e["interfaceType"]) for e in lt.inputs["networkInterfaces"]]


# -- the examples ------------------------------------------------------------------------------------------------

def test_p5_spot_example_launch_template_and_instances():
    cfg, rec = run_spec(spec_of("aws-p5-spot.yaml"))
    lt = rec.one(LT)
    assert lt.inputs["instanceType"] == "p5.48xlarge"
    assert eni_layout(lt) == expected_enis(32) and len(lt.inputs["networkInterfaces"]) == 33
    efa_sg = rec.one(SG, "p5spot-efa").id
    for eni in lt.inputs["networkInterfaces"]:
        assert eni["securityGroups"] == [efa_sg]  # every ENI lists its own groups
        assert eni["subnetId"] == "p5spot-us-east-1a-id"  # the pool's first AZ
        assert eni.get("associatePublicIpAddress", "false") == "false"  # multi-NIC: never a public address
    assert lt.inputs["networkInterfaces"][0]["associatePublicIpAddress"] == "false"
    assert "vpcSecurityGroupIds" not in lt.inputs  # not allowed together with network interfaces
    assert lt.inputs["instanceMarketOptions"] == {
        "marketType": "spot", "spotOptions": {"spotInstanceType": "one-time", "instanceInterruptionBehavior": "terminate"}}
    assert "capacityReservationSpecification" not in lt.inputs
    assert lt.inputs["metadataOptions"]["httpTokens"] == "required"
    assert lt.inputs["metadataOptions"]["instanceMetadataTags"] == "enabled"  # the bootstrap reads the Name tag
    assert lt.inputs["imageId"] == AMI
    assert lt.inputs["blockDeviceMappings"][0]["ebs"]["encrypted"] == "true"
    user_data = base64.b64decode(lt.inputs["userData"]).decode()
    assert user_data.startswith("#cloud-config") and SSH_KEY in user_data and MUNGE_B64 not in user_data

    nodes = pool_instances(rec)
    assert sorted(r.name for r in nodes) == [f"p5{i:03d}" for i in range(1, 17)]
    for r in nodes:
        assert r.inputs["launchTemplate"]["id"] == lt.id
        assert r.inputs["tags"]["Name"] == r.name
        assert r.inputs["instanceMarketOptions"]["marketType"] == "spot"
        assert r.inputs["instanceMarketOptions"]["spotOptions"]["instanceInterruptionBehavior"] == "terminate"
        assert r.inputs["placementGroup"] == "p5spot-p5-pg"
        assert "associatePublicIpAddress" not in r.inputs and "subnetId" not in r.inputs  # the template's ENIs decide


def test_placement_group_is_cluster_strategy():
    _, rec = run_spec(spec_of("aws-p5-spot.yaml"))
    assert rec.one(PG).inputs["strategy"] == "cluster"
    _, rec = run_spec(spec_of("hybrid-burst.yaml"))
    assert rec.one(PG).inputs["strategy"] == "cluster"


def test_efa_security_group_self_rules_both_directions_and_ssh():
    _, rec = run_spec(spec_of("aws-p5-spot.yaml"), Runtime(SSH_KEY, "203.0.113.0/24"))
    sg = rec.one(SG, "p5spot-efa").id
    self_in = [r for r in rec.of_type(INGRESS) if r.inputs.get("referencedSecurityGroupId") == sg and r.inputs["securityGroupId"] == sg]
    self_out = [r for r in rec.of_type(EGRESS) if r.inputs.get("referencedSecurityGroupId") == sg and r.inputs["securityGroupId"] == sg]
    assert len(self_in) == 1 and self_in[0].inputs["ipProtocol"] == "-1"
    assert len(self_out) == 1 and self_out[0].inputs["ipProtocol"] == "-1"
    assert "fromPort" not in self_in[0].inputs and "fromPort" not in self_out[0].inputs  # all protocols, all ports
    ssh = {r.inputs["cidrIpv4"] for r in rec.of_type(INGRESS) if r.inputs.get("fromPort") == 22 and r.inputs["securityGroupId"] == sg}
    assert ssh == {"10.240.0.0/16", "203.0.113.0/24"}
    assert all(r.inputs["toPort"] == 22 and r.inputs["ipProtocol"] == "tcp" for r in rec.of_type(INGRESS) if r.inputs.get("fromPort") == 22)


def test_fsx_throughput_capacity_and_s3_association():
    _, rec = run_spec(spec_of("aws-p5-spot.yaml"))
    fs = rec.one("aws:fsx/lustreFileSystem:LustreFileSystem")
    assert fs.inputs["deploymentType"] == "PERSISTENT_2"
    assert fs.inputs["storageCapacity"] == 4800 and fs.inputs["perUnitStorageThroughput"] == 500
    assert "importPath" not in fs.inputs  # PERSISTENT_2 links S3 through an association
    assert fs.inputs["securityGroupIds"] == [rec.one(SG, "p5spot-fsx").id]
    dra = rec.one("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")
    assert dra.inputs["fileSystemId"] == fs.id
    assert dra.inputs["dataRepositoryPath"] == "s3://p5spot-datasets/train"
    assert dra.inputs["s3"]["autoImportPolicy"]["events"] == ["NEW", "CHANGED", "DELETED"]
    lustre_in = {(r.inputs["fromPort"], r.inputs["toPort"]) for r in rec.of_type(INGRESS) if r.inputs["securityGroupId"] == fs.inputs["securityGroupIds"][0]}
    assert lustre_in == {(988, 988), (1018, 1023)}


def test_fsx_is_made_in_the_az_of_the_pools_that_mount_it():
    """One FSx is one subnet: it goes where the static nodes of its mounting pools launch, not where the spec's first
    aws pool happens to be."""
    def edit(d):
        d["pools"][0]["availability_zones"] = ["us-east-1a"]
        d["pools"].insert(0, {**d["pools"][0], "name": "p5b", "availability_zones": ["us-east-1b"], "count": 1})
        d["storage"]["shared"][0]["pools"] = ["p5"]
        d["scheduler"]["slurm"]["partitions"][0]["pools"] = ["p5", "p5b"]
    _, rec = run_spec(spec_of("aws-p5-spot.yaml", edit))
    fs = rec.one("aws:fsx/lustreFileSystem:LustreFileSystem")
    assert fs.inputs["subnetIds"] == "p5spot-us-east-1a-id"  # pulumi-aws 7: FSx for Lustre takes one subnet


def test_an_existing_fsx_is_never_moved_to_another_subnet(monkeypatch):
    """Moving an FSx filesystem replaces it, data and all: its subnet is ignored once it exists (Pulumi keeps the
    state's value), so a changed AZ rule places only new filesystems."""
    seen = []
    real = pulumi_aws.fsx.LustreFileSystem.__init__

    def record(self, name, *args, opts=None, **kwargs):
        seen.append(opts.ignore_changes if opts else None)
        real(self, name, *args, opts=opts, **kwargs)

    monkeypatch.setattr(pulumi_aws.fsx.LustreFileSystem, "__init__", record)
    run_spec(spec_of("aws-p5-spot.yaml"))
    assert seen == [["subnet_ids"]]


def test_fsx_scratch_uses_import_path_and_no_throughput():
    def edit(d):
        d["storage"]["shared"][0].update(deployment_type="SCRATCH_2", storage_capacity_gib=2400, per_unit_storage_throughput=None)
    _, rec = run_spec(spec_of("aws-p5-spot.yaml", edit))
    fs = rec.one("aws:fsx/lustreFileSystem:LustreFileSystem")
    assert fs.inputs["deploymentType"] == "SCRATCH_2" and fs.inputs["storageCapacity"] == 2400
    assert "perUnitStorageThroughput" not in fs.inputs
    assert fs.inputs["importPath"] == "s3://p5spot-datasets/train"
    assert not rec.of_type("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")


def test_checkpoint_bucket_versioned_encrypted_private_and_role_scoped_to_it():
    _, rec = run_spec(spec_of("aws-p5-spot.yaml"))
    bucket = rec.one("aws:s3/bucket:Bucket")
    assert bucket.inputs["bucket"] == "p5spot-checkpoints"
    assert rec.one("aws:s3/bucketVersioning:BucketVersioning").inputs == {
        "bucket": bucket.id, "versioningConfiguration": {"status": "Enabled"}}
    sse = rec.one("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration").inputs
    assert sse["bucket"] == bucket.id
    assert sse["rules"][0]["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "AES256"
    pab = rec.one("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock").inputs
    assert pab["bucket"] == bucket.id
    assert all(pab[k] is True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"))

    policy = json.loads(rec.one("aws:iam/rolePolicy:RolePolicy").inputs["policy"])
    s3_resources = {r for s in policy["Statement"] if any(a.startswith("s3:") for a in s["Action"]) for r in [s["Resource"]]}
    assert s3_resources == {"arn:aws:s3:::p5spot-checkpoints", "arn:aws:s3:::p5spot-checkpoints/*"}
    assert not any(s["Resource"] == "*" for s in policy["Statement"])
    ssm = [s for s in policy["Statement"] if "ssm:GetParameter" in s["Action"]]
    assert ssm[0]["Resource"].endswith("parameter/clusterctl/p5spot/munge-key")
    assert not rec.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")  # no managed policy (test_node_iam.py)
    assert json.loads(rec.one("aws:iam/role:Role").inputs["assumeRolePolicy"])["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}


def test_munge_key_is_a_secure_string_parameter_not_in_user_data():
    _, rec = run_spec(spec_of("aws-p5-spot.yaml"))
    param = rec.one("aws:ssm/parameter:Parameter")
    assert param.inputs["type"] == "SecureString" and param.inputs["name"] == "/clusterctl/p5spot/munge-key"
    for r in rec.of_type(LT):
        assert MUNGE_B64 not in base64.b64decode(r.inputs["userData"]).decode()
    for r in rec.of_type(INSTANCE):
        assert MUNGE_B64 not in json.dumps(r.inputs)


def test_network_private_subnets_per_az_nat_and_s3_gateway_endpoint():
    _, rec = run_spec(spec_of("hybrid-burst.yaml"))
    subnets = {r.inputs["availabilityZone"]: r.inputs for r in rec.of_type("aws:ec2/subnet:Subnet") if r.name != "hybrid-public"}
    assert sorted(subnets) == ["us-west-2a", "us-west-2b", "us-west-2c"]
    assert all(s["mapPublicIpOnLaunch"] is False for s in subnets.values())
    ep = rec.one("aws:ec2/vpcEndpoint:VpcEndpoint").inputs
    assert ep["serviceName"] == "com.amazonaws.us-west-2.s3" and ep["vpcEndpointType"] == "Gateway"
    assert rec.one("aws:ec2/natGateway:NatGateway")
    assert rec.one("aws:ec2/vpc:Vpc").inputs["cidrBlock"] == "10.240.0.0/16"  # does not overlap the on-prem 10.20/16


def test_hybrid_example_elastic_pool_has_template_but_no_static_instances():
    _, rec = run_spec(spec_of("hybrid-burst.yaml"))
    lt = rec.one(LT)
    assert eni_layout(lt) == expected_enis(32)
    assert "instanceMarketOptions" not in lt.inputs and "capacityReservationSpecification" not in lt.inputs  # on-demand
    assert rec.of_type(INSTANCE) == []  # min 0: Slurm powers nodes up from the template
    user_data = base64.b64decode(lt.inputs["userData"]).decode()
    assert "10.20.0.2 hybrid-ctl" in user_data  # the on-prem controller in /etc/hosts


def test_aws_controller_single_nic_public_only_with_admin_cidr():
    _, rec = run_spec(spec_of("aws-p5-spot.yaml"))
    ctl = rec.one(INSTANCE, "p5spot-ctl").inputs
    assert ctl["associatePublicIpAddress"] is False and ctl["privateIp"] == "10.240.240.10"
    assert ctl["subnetId"] == "p5spot-public-id"
    _, rec = run_spec(spec_of("aws-p5-spot.yaml"), Runtime(SSH_KEY, "203.0.113.0/24"))
    assert rec.one(INSTANCE, "p5spot-ctl").inputs["associatePublicIpAddress"] is True


# -- markets the examples do not use -----------------------------------------------------------------------------

def with_market(market: str, reservation: str | None = CR):
    def edit(d):
        p = d["pools"][0]
        p.update(market=market, availability_zones=["us-east-1a"], count=4)
        if reservation:
            p["capacity_reservation_id"] = reservation
    return edit


def test_capacity_block_market_type_and_reservation_target():
    _, rec = run_spec(spec_of("aws-p5-spot.yaml", with_market("capacity-block")))
    lt = rec.one(LT)
    assert lt.inputs["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert lt.inputs["capacityReservationSpecification"] == {"capacityReservationTarget": {"capacityReservationId": CR}}
    nodes = pool_instances(rec)
    assert len(nodes) == 4
    for r in nodes:
        assert r.inputs["instanceMarketOptions"] == {"marketType": "capacity-block"}
        assert r.inputs["capacityReservationSpecification"]["capacityReservationTarget"]["capacityReservationId"] == CR
        assert "placementGroup" not in r.inputs  # AWS places capacity blocks in an UltraCluster itself
    assert rec.of_type(PG) == []


def test_reserved_market_targets_the_reservation_without_market_options():
    _, rec = run_spec(spec_of("aws-p5-spot.yaml", with_market("reserved")))
    lt = rec.one(LT)
    assert "instanceMarketOptions" not in lt.inputs
    assert lt.inputs["capacityReservationSpecification"] == {"capacityReservationTarget": {"capacityReservationId": CR}}
    assert len(pool_instances(rec)) == 4
    for r in pool_instances(rec):
        assert "instanceMarketOptions" not in r.inputs
        assert r.inputs["capacityReservationSpecification"]["capacityReservationTarget"]["capacityReservationId"] == CR


def test_pool_with_fallback_markets_keeps_the_market_off_its_template_and_on_each_instance():
    # RunInstances cannot undo a template's spot market: resume's on-demand fallback needs a template without one.
    elastic = spec_of("aws-p5-spot.yaml", lambda d: (d["pools"][0].pop("count"),
                                                     d["pools"][0].update(min=2, max=8, fallback_markets=["on-demand"])))
    _, rec = run_spec(elastic)
    assert "instanceMarketOptions" not in rec.one(LT).inputs
    nodes = pool_instances(rec)
    assert len(nodes) == 2  # min: launched by the stack, in the pool's own market
    for r in nodes:
        assert r.inputs["instanceMarketOptions"]["marketType"] == "spot"


def test_on_demand_market_has_no_market_options():
    _, rec = run_spec(spec_of("aws-p5-spot.yaml", with_market("on-demand", None)))
    lt = rec.one(LT)
    assert "instanceMarketOptions" not in lt.inputs and "capacityReservationSpecification" not in lt.inputs
    assert rec.one(PG).inputs["strategy"] == "cluster"


@pytest.mark.parametrize("instance_type,gpu,cards", [("p5e.48xlarge", "h200", 32), ("p5en.48xlarge", "h200", 16),
                                                     ("p6-b200.48xlarge", "b200", 8), ("p4d.24xlarge", "a100-40gb", 4)])
def test_eni_count_and_types_per_instance_type(instance_type, gpu, cards):
    def edit(d):
        d["pools"][0]["instance_type"] = instance_type
    _, rec = run_spec(spec_of("aws-p5-spot.yaml", edit))
    lt = rec.one(LT)
    if instance_type.startswith("p4d"):  # p4d predates efa-only ENIs: one full EFA per card
        assert eni_layout(lt) == [(c, 0, "efa") for c in range(cards)]
    else:
        assert eni_layout(lt) == expected_enis(cards)
        assert len(lt.inputs["networkInterfaces"]) == cards + 1
    assert lt.inputs["instanceType"] == instance_type
    assert lt.inputs["networkInterfaces"][0]["associatePublicIpAddress"] == "false"


def test_explicit_ami_is_looked_up_by_id():
    def edit(d):
        d["pools"][0]["ami"] = "ami-0fedcba9876543210"
    _, rec = run_spec(spec_of("aws-p5-spot.yaml", edit))
    lookups = [args for token, args in rec.calls if token == "aws:ec2/getAmi:getAmi"]
    assert {"name": "image-id", "values": ["ami-0fedcba9876543210"]} in lookups[0]["filters"] + lookups[-1]["filters"]


# -- the plain `pulumi up` path: stacks/aws/__main__.py reading the rendered Pulumi.<stack>.yaml ------------------

@pytest.mark.parametrize("example", ["aws-p5-spot.yaml", "hybrid-burst.yaml"])
def test_stack_project_reads_the_rendered_config_file(example):
    """What the CLI would hand the program from build/pulumi/Pulumi.<cluster>.yaml (objects as JSON) gives the
    same resources, with the same inputs, as clusterctl's own call."""
    spec = spec_of(example)
    plan, files = render_spec(spec)
    rendered = yaml.safe_load(files[f"pulumi/Pulumi.{plan.name}.yaml"])["config"]
    config = {k: json.dumps(v) if isinstance(v, (dict, list)) else str(v) for k, v in rendered.items()}
    config["clusterctl:munge_key_b64"] = MUNGE_B64
    config["clusterctl:ssh_public_key"] = SSH_KEY
    config["clusterctl:cluster_id"] = CLUSTER_ID

    def via_project():
        pulumi.runtime.set_all_config(config, secret_keys=["clusterctl:munge_key_b64"])
        runpy.run_path(str(ROOT / "stacks" / "aws" / "__main__.py"), run_name="__main__")

    try:
        from_file = run_program(via_project)
    finally:
        pulumi.runtime.set_all_config({})
    _, direct = run_spec(spec)
    # Registration order is asynchronous; the set of resources is what must match.
    assert sorted((r.typ, r.name) for r in from_file.resources) == sorted((r.typ, r.name) for r in direct.resources)
    by_name = {(r.typ, r.name): r.inputs for r in direct.resources}
    for r in from_file.resources:
        assert r.inputs == by_name[(r.typ, r.name)], (r.typ, r.name)
