"""Pulumi stack config for the cluster's AWS resources: what stacks/ (or a plain `pulumi up`) builds.

The config is the whole contract between the plan and the Pulumi program (clusterctl/cloud/program.py): the program
reads only these keys, so `pulumi up --config-file build/pulumi/Pulumi.<cluster>.yaml` in a team's own CI builds
exactly what `clusterctl up` builds. Decisions (network layout, the controller's address, ENI layout) are made here,
deterministically, so a PR diff of the build shows them.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, ip_address

from clusterctl.catalog import INSTANCE_TYPES
from clusterctl.compile.model import ClusterPlan, PoolPlan
from clusterctl.core.providers import traits

PLACEMENT_STRATEGY = "cluster"  # EFA needs the instances on the same spine: one cluster placement group per pool
# ... except where the capacity itself decides placement: a Capacity Block is placed in an EC2 UltraCluster by AWS,
# and a targeted reservation made for a cluster placement group carries its own group (launching into another fails).
SELF_PLACED_MARKETS = ("capacity-block", "reserved")
PROJECT = "clusterctl"  # Pulumi project (and config namespace) of stacks/aws
ADMIN_USER = "admin"  # the default user of Debian's cloud images; Ansible logs in as it and becomes root
ROOT_VOLUME_GIB = 200  # CUDA, drivers and container images do not fit the images' 8 GiB root
CONTROLLER_ROOT_VOLUME_GIB = 100
CONTROLLER_HOST_INDEX = 10  # the aws controller's fixed address: the 10th host of the public subnet (AWS reserves .0-.3)
SUBNET_PREFIX = 20  # 4091 usable addresses per AZ; efa-only ENIs take none, so one per node is used
# Candidate VPC ranges, first one that overlaps nothing the cluster already uses (on-prem hosts, lab subnet) wins.
VPC_CANDIDATES = tuple(f"10.{b}.0.0/16" for b in range(240, 256)) + tuple(f"172.{b}.0.0/16" for b in range(16, 32))


def munge_parameter(plan: ClusterPlan) -> str:
    """SSM Parameter Store name of the cluster's munge key (SecureString, readable by the instance role only)."""
    return f"/clusterctl/{plan.name}/munge-key"


def vpc_cidr(plan: ClusterPlan) -> str:
    used = []
    for n in plan.all_nodes:
        if not n.address:
            continue
        try:
            used.append(ip_address(n.address))
        except ValueError:
            pass  # a hostname: not an address range we could collide with
    lab = IPv4Network(plan.lab.subnet) if plan.lab else None
    for cand in VPC_CANDIDATES:
        net = IPv4Network(cand)
        if any(a in net for a in used) or (lab is not None and lab.overlaps(net)):
            continue
        return cand
    return VPC_CANDIDATES[0]


def _azs(plan: ClusterPlan) -> list[str]:
    """Every AZ an aws pool may use, in order of first mention (the first is the preferred one)."""
    return list(dict.fromkeys(az for p in plan.aws_pools for az in p.availability_zones))


def network(plan: ClusterPlan) -> dict:
    vpc = IPv4Network(vpc_cidr(plan))
    blocks = list(vpc.subnets(new_prefix=SUBNET_PREFIX))
    azs = _azs(plan)
    public = blocks[-1]  # NAT gateway and the aws controller; compute nodes never get public addresses
    ingress = [str(vpc)]
    ctl = plan.controller
    if traits(ctl).owned and ctl.address:
        try:
            ingress.append(f"{IPv4Address(ctl.address)}/32")
        except ValueError:
            pass
    return {
        "vpc_cidr": str(vpc),
        "public_subnet": {"availability_zone": azs[0], "cidr": str(public)},
        "subnets": [{"availability_zone": az, "cidr": str(blocks[i])} for i, az in enumerate(azs)],
        "ssh_ingress_cidrs": ingress,
    }


def controller_address(plan: ClusterPlan) -> str | None:
    """The controller's address as cloud nodes see it: fixed in the public subnet when it runs on AWS."""
    if not traits(plan.controller).rented:
        return plan.controller.address
    public = IPv4Network(network(plan)["public_subnet"]["cidr"])
    return str(public.network_address + CONTROLLER_HOST_INDEX)


def _pool(plan: ClusterPlan, p: PoolPlan) -> dict:
    assert p.instance_type is not None  # an aws pool (plan.aws_pools): compile gives it its instance type
    it = INSTANCE_TYPES[p.instance_type]
    static = [n.name for n in plan.nodes_of(p.name) if not n.cloud]
    return {
        "name": p.name,
        "instance_type": p.instance_type,
        "market": p.market,
        "fallback_markets": list(p.fallback_markets),
        "capacity_reservation_id": p.capacity_reservation_id,
        "availability_zones": list(p.availability_zones),
        "ami": p.ami,
        "static_nodes": static,
        "max_nodes": p.max_count,
        "efa": p.fabric == "efa",
        "placement_strategy": None if p.market in SELF_PLACED_MARKETS else PLACEMENT_STRATEGY,
        "root_volume_gib": ROOT_VOLUME_GIB,
        "network_interfaces": [
            {"network_card_index": s.network_card_index, "device_index": s.device_index, "interface_type": s.interface_type}
            for s in (it.eni_layout() if p.fabric == "efa" else it.eni_layout()[:1])
        ],
    }


def _controller(plan: ClusterPlan) -> dict:
    c = plan.controller
    out: dict[str, object] = {"name": c.name, "provider": c.provider, "address": controller_address(plan)}
    if traits(c).rented:
        out.update(
            instance_type=c.instance_type,
            availability_zone=_azs(plan)[0],
            ami=plan.aws_pools[0].ami,  # the same OS image as the nodes
            root_volume_gib=CONTROLLER_ROOT_VOLUME_GIB,
        )
    return out


def cloud_config(plan: ClusterPlan) -> dict | None:
    pools = plan.aws_pools
    if not pools:
        return None
    ns = PROJECT + ":"
    cfg = {
        "aws:region": pools[0].region,
        ns + "cluster": plan.name,
        ns + "admin_user": ADMIN_USER,
        ns + "network": network(plan),
        ns + "controller": _controller(plan),
        ns + "pools": [_pool(plan, p) for p in pools],
        ns + "fsx": [
            {
                "mount_point": f.mount_point,
                "deployment_type": f.deployment_type,
                "storage_capacity_gib": f.storage_capacity_gib,
                "per_unit_storage_throughput": f.per_unit_storage_throughput,
                "s3_bucket": f.s3_bucket,
                "import_path": f.import_path,
                "export_path": f.export_path,
                "availability_zone": f.availability_zone,
            }
            for f in plan.fsx
        ],
        ns + "checkpoint_bucket": (plan.checkpoints or {}).get("s3_bucket"),
        ns + "munge_parameter": munge_parameter(plan),
    }
    return {k: v for k, v in cfg.items() if v is not None}  # Pulumi config has no null: an absent key is "not set"
