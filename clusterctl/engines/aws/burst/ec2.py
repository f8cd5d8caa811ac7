"""EC2 for the burst programs: find the pool's launch resources by tag, launch with AZ failover, list and
terminate the cluster's instances. The launch itself is clusterctl.engines.aws.launch (the same request shapes the
Pulumi launch template is built from); this module adds the failover and the tag queries.

Resources are found by the tags the Pulumi stack puts on them (clusterctl:cluster and the cluster's unique id
clusterctl:cluster-id on everything; the name alone is not enough: another stack or account may hold a cluster of
the same name, and its instances must never be touched;
clusterctl:pool on a pool's launch template and placement group, Name <cluster>-<az> on the private subnets), so
the controller needs no copy of the stack outputs: the cloud's tags are the source of truth.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Iterable

from clusterctl.engines.aws import launch
from clusterctl.render.stack_config import CLUSTER_ID_TAG, PoolConfig
from clusterctl.core.errors import ClusterctlError

CLUSTER_TAG = "clusterctl:cluster"
POOL_TAG = "clusterctl:pool"
ROLE_TAG = "clusterctl:role"  # image-builder: `image build`'s instance, neither Slurm's nor the stack's
IMAGE_BUILDER = "image-builder"
REPLACEMENT = "replacement"  # sync's replacement of a static spot node: the stack's once `up` adopts it
NAME_TAG = "Name"
LIVE_STATES = ("pending", "running", "stopping", "stopped")
# EC2's StateReason code of an instance it took back (API reference, StateReason): the only termination that makes
# sync replace a static node. Anything else (Client.UserInitiatedShutdown: Pulumi, a person, clusterctl) is left to `up`.
SPOT_RECLAIMED = "Server.SpotInstanceTermination"

# Not enough of the instance type here and now: another AZ may have it (EC2 API error codes reference).
CAPACITY_ERRORS = frozenset({
    "InsufficientInstanceCapacity", "InsufficientHostCapacity", "InsufficientReservedInstanceCapacity",
    "InsufficientCapacity", "InsufficientFreeAddressesInSubnet", "Unsupported", "SpotMaxPriceTooLow",
})
# Account quotas are per region and purchase option: another AZ of the same market cannot help, another market can.
QUOTA_ERRORS = frozenset({
    "InstanceLimitExceeded", "VcpuLimitExceeded", "MaxSpotInstanceCountExceeded", "InsufficientInstanceQuota",
})


class LaunchFailed(ClusterctlError):
    """No AZ / market the pool allows could launch the nodes; `code` is the cloud's error code (the last one)."""

    def __init__(self, code: str, message: str, attempts: list | None = None):
        super().__init__(message)
        self.code = code
        self.attempts = list(attempts or [])


def error_code(exc: Exception) -> str:
    resp = getattr(exc, "response", None)
    if isinstance(resp, dict):
        code = (resp.get("Error") or {}).get("Code")
        if code:
            return code.rsplit(".", 1)[-1]  # "Server.InsufficientInstanceCapacity" -> the code
    return type(exc).__name__


def error_message(exc: Exception) -> str:
    resp = getattr(exc, "response", None)
    if isinstance(resp, dict):
        msg = (resp.get("Error") or {}).get("Message")
        if msg:
            return msg
    return str(exc)


def clients(region: str, endpoint_url: str | None = None) -> tuple[Any, Any]:  # boto3 EC2 clients
    """(ec2, ec2 for RunInstances). Credentials, endpoint (AWS_ENDPOINT_URL) the standard boto3 way.

    RunInstances gets no SDK retries: botocore retries HTTP 500s, and EC2 answers InsufficientInstanceCapacity
    with a 500; retrying the same AZ only delays the failover.
    """
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(region_name=region)
    ec2 = session.client("ec2", endpoint_url=endpoint_url,
                         config=Config(retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=10, read_timeout=30))
    ec2_launch = session.client("ec2", endpoint_url=endpoint_url,
                                config=Config(retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=10,
                                              read_timeout=120))
    return ec2, ec2_launch


# --- instances ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instance:
    id: str
    name: str | None
    pool: str | None
    state: str
    private_ip: str | None
    availability_zone: str | None
    launch_time: datetime | None
    role: str | None = None
    state_reason: str | None = None  # StateReason.Code: why it stopped or terminated

    @property
    def image_builder(self) -> bool:
        return self.role == IMAGE_BUILDER

    @property
    def replacement(self) -> bool:
        return self.role == REPLACEMENT

    def age(self, now: datetime | None = None) -> float:
        if self.launch_time is None:
            return float("inf")
        now = now or datetime.now(timezone.utc)
        return (now - self.launch_time).total_seconds()


def _instance(i: dict) -> Instance:
    tags = {t["Key"]: t["Value"] for t in i.get("Tags") or []}
    lt = i.get("LaunchTime")
    if isinstance(lt, str):
        lt = datetime.fromisoformat(lt.replace("Z", "+00:00"))
    return Instance(id=i["InstanceId"], name=tags.get(NAME_TAG), pool=tags.get(POOL_TAG), state=i["State"]["Name"],
                    private_ip=i.get("PrivateIpAddress"), availability_zone=(i.get("Placement") or {}).get("AvailabilityZone"),
                    launch_time=lt, role=tags.get(ROLE_TAG), state_reason=(i.get("StateReason") or {}).get("Code"))


def ours(cluster: str, cluster_id: str) -> list[dict]:
    """EC2 filters for the cluster's resources: its name AND its unique id."""
    if not cluster_id:
        raise ClusterctlError(f"no cluster id for {cluster}: clusterctl acts only on resources tagged {CLUSTER_ID_TAG}")
    return [{"Name": f"tag:{CLUSTER_TAG}", "Values": [cluster]},
            {"Name": f"tag:{CLUSTER_ID_TAG}", "Values": [cluster_id]}]


def cluster_instances(ec2: Any, cluster: str, cluster_id: str, names: list[str] | None = None,
                      states: Iterable[str] = LIVE_STATES) -> list[Instance]:
    """The cluster's instances (by name and id tags), optionally only those whose Name is in `names`."""
    filters = [*ours(cluster, cluster_id), {"Name": "instance-state-name", "Values": list(states)}]
    if names is not None:
        if not names:
            return []
        filters.append({"Name": f"tag:{NAME_TAG}", "Values": sorted(names)})
    out = []
    for page in ec2.get_paginator("describe_instances").paginate(Filters=filters):
        for r in page["Reservations"]:
            out += [_instance(i) for i in r["Instances"]]
    return sorted(out, key=lambda i: (i.name or "", i.id))


def terminate(ec2: Any, ids: list[str]) -> list[str]:
    return launch.terminate_nodes(ec2, sorted(set(ids)))


# --- launch resources -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LaunchTarget:
    availability_zone: str
    subnet_id: str
    security_group_ids: tuple[str, ...]
    launch_template_id: str | None
    image_id: str | None
    placement_group: str | None


def _tagged(items: list[dict], key: str = "Tags") -> list[tuple[dict, dict]]:
    return [(x, {t["Key"]: t["Value"] for t in x.get(key) or []}) for x in items]


def launch_targets(ec2: Any, cluster: str, cluster_id: str, pool: PoolConfig) -> list[LaunchTarget]:
    """Where the pool may launch, in the pool's AZ order (capacity blocks: only the block's AZ).

    pool: clusterctl.render.stack_config.PoolConfig. The security groups are the launch template's own (its ENIs'); the
    placement group is used in the first AZ only (a cluster placement group cannot span AZs); fallback AZs
    launch without it.
    """
    subnets = ec2.describe_subnets(Filters=ours(cluster, cluster_id))["Subnets"]
    by_az: dict[str, str] = {}
    for s, tags in _tagged(subnets):
        az = s["AvailabilityZone"]
        if tags.get(NAME_TAG) == f"{cluster}-public":
            continue
        if tags.get(NAME_TAG) == f"{cluster}-{az}" or az not in by_az:
            by_az[az] = s["SubnetId"]

    lt_id, groups, image = None, (), pool.ami
    lts = ec2.describe_launch_templates(Filters=[*ours(cluster, cluster_id),
                                                 {"Name": f"tag:{POOL_TAG}", "Values": [pool.name]}])["LaunchTemplates"]
    if lts:
        lt_id = sorted(lts, key=lambda t: t["CreateTime"])[-1]["LaunchTemplateId"]
        data = ec2.describe_launch_template_versions(LaunchTemplateId=lt_id, Versions=["$Latest"])[
            "LaunchTemplateVersions"][0]["LaunchTemplateData"]
        enis = data.get("NetworkInterfaces") or []
        groups = tuple(enis[0].get("Groups") or ()) if enis else tuple(data.get("SecurityGroupIds") or ())
    if lt_id is None and image is None:
        raise LaunchFailed("NoLaunchTemplate", f"no launch template tagged {CLUSTER_TAG}={cluster}, {CLUSTER_ID_TAG}="
                           f"{cluster_id}, {POOL_TAG}={pool.name} "
                           f"and no AMI in the spec: is the cluster's cloud stack up?")

    placement = None
    try:
        pgs = ec2.describe_placement_groups(Filters=[*ours(cluster, cluster_id),
                                                     {"Name": f"tag:{POOL_TAG}", "Values": [pool.name]}])["PlacementGroups"]
        placement = pgs[0]["GroupName"] if pgs else None
    except Exception:  # an endpoint without placement-group filters: launch without one
        placement = None

    azs = list(pool.availability_zones[:1] if pool.market == "capacity-block" else pool.availability_zones)
    out = []
    for k, az in enumerate(azs):
        if az not in by_az:
            continue
        out.append(LaunchTarget(az, by_az[az], groups, lt_id, image, placement if k == 0 else None))
    if not out:
        raise LaunchFailed("NoSubnet", f"no subnet tagged {CLUSTER_TAG}={cluster}, {CLUSTER_ID_TAG}={cluster_id} in "
                           f"{', '.join(azs)}: is the cluster's "
                           f"cloud stack up?")
    return out


# --- launch with failover -------------------------------------------------------------------------------


@dataclass
class Attempt:
    availability_zone: str
    market: str
    code: str | None  # None: launched
    message: str = ""
    seconds: float = 0.0


def markets(pool: PoolConfig) -> list[str]:
    """Purchase options the pool allows, in order: its market, then the spec's fallback_markets."""
    return [pool.market, *pool.fallback_markets]


def launch_with_failover(ec2: Any, pool: PoolConfig, cluster: str, cluster_id: str, names: list[str], targets: list[LaunchTarget],
                         log: Callable[[str], None] | None = None, **fixed: Any) -> tuple[dict[str, dict], list[Attempt]]:
    """Launch `names` all or nothing, trying each (market, AZ) in order. Returns (name -> instance info, attempts).
    fixed: run_instances_request's private_ip and role (a static node's replacement keeps its address).

    Capacity errors move to the next AZ; quota errors to the next market; any other error stops at once (a bad
    request does not get better elsewhere). Raises LaunchFailed with the last error code when nothing is left.
    """
    attempts: list[Attempt] = []
    last: tuple[str, str] | None = None
    for market in markets(pool):
        p = pool if market == pool.market else dataclasses.replace(pool, market=market)
        for t in targets:
            t0 = time.monotonic()
            try:
                nodes = launch.launch_nodes(ec2, p, cluster, list(names), cluster_id=cluster_id, subnet_id=t.subnet_id,
                                            security_group_ids=list(t.security_group_ids),
                                            launch_template_id=t.launch_template_id,
                                            image_id=None if t.launch_template_id else t.image_id,
                                            placement_group=t.placement_group, **fixed)
            except Exception as e:  # botocore ClientError and connection errors alike; classified by code
                code, msg = error_code(e), error_message(e)
                attempts.append(Attempt(t.availability_zone, market, code, msg, time.monotonic() - t0))
                last = (code, msg)
                if log:
                    log(f"launch of {len(names)} x {pool.instance_type} ({market}) in {t.availability_zone} failed: {code}: {msg}")
                if code in CAPACITY_ERRORS:
                    continue
                if code in QUOTA_ERRORS:
                    break  # the quota is regional: the next market, not the next AZ
                raise LaunchFailed(code, f"{code}: {msg}", attempts) from None
            attempts.append(Attempt(t.availability_zone, market, None, "", time.monotonic() - t0))
            return nodes, attempts
    code, msg = last or ("NoCapacity", "no AZ to try")
    tried = ", ".join(f"{a.availability_zone}/{a.market}: {a.code}" for a in attempts)
    raise LaunchFailed(code, f"{code} everywhere the pool may launch ({tried}): {msg}", attempts)
