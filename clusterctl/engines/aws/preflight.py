"""Preflight: can this AWS account host the plan as written? Checked with boto3 before anything is created.

Small named checks returning findings (ERROR / WARNING / INFO with the spec path, like the spec validators), so a
user sees every problem at once. Credentials, region and endpoint are resolved the standard boto3 way (env,
profile, SSO, instance role; AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_<SERVICE> are honoured by botocore itself).
When an API cannot answer (no permission, not offered in the partition), the check says so as a WARNING rather
than pretending it passed.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from collections.abc import Callable, Iterator
from typing import Any, Iterable, TypeVar

from clusterctl.catalog import INSTANCE_TYPES
from clusterctl.compile.model import ClusterPlan, PoolPlan
from clusterctl.core.findings import Finding, Level, format_path
from clusterctl.engines.aws.amis import DEBIAN_OWNER, debian_12_query

# Service Quotas codes (vCPUs): "Running On-Demand P instances" and "All P Spot Instance Requests".
QUOTA_ON_DEMAND_P = "L-417A185B"
QUOTA_SPOT_P = "L-7212CCBC"
T = TypeVar("T")
NOT_FOUND = ("NotFound", "Malformed", "InvalidCapacityReservationId", "InvalidAMIID")


class ApiUnavailable(Exception):
    """The AWS API did not answer usefully (permissions, not implemented, throttled): the check is inconclusive."""


@dataclass
class AwsApi:
    """boto3 clients per region plus cached lookups. `session` is a boto3.Session (default: the standard chain)."""

    session: Any = None  # a boto3.Session (no stubs)
    _clients: dict = field(default_factory=dict)
    _cache: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.session is None:
            import boto3

            self.session = boto3.Session()

    def client(self, service: str, region: str) -> Any:
        key = (service, region)
        if key not in self._clients:
            from botocore.config import Config

            self._clients[key] = self.session.client(service, region_name=region,
                                                     config=Config(retries={"max_attempts": 3, "mode": "standard"}))
        return self._clients[key]

    def call(self, service: str, region: str, op: str, **kwargs: Any) -> dict:
        """Call an API; not-found errors propagate as ClientError, every other failure (denied, throttled, an
        endpoint that answers garbage, no credentials) becomes ApiUnavailable: inconclusive, never a pass."""
        from botocore.exceptions import ClientError

        try:
            return getattr(self.client(service, region), op)(**kwargs)
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code", "")
            if any(s in code for s in NOT_FOUND):
                raise
            raise ApiUnavailable(f"{service} {op}: {code or e}") from e
        except Exception as e:  # noqa: BLE001 - botocore's parser/connection errors have no common base
            raise ApiUnavailable(f"{service} {op}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from e

    def _cached(self, key: tuple[str, ...], fn: Callable[[], T]) -> T:
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]

    def zones(self, region: str) -> set[str]:
        return self._cached(("zones", region), lambda: {
            z["ZoneName"] for z in self.call("ec2", region, "describe_availability_zones", AllAvailabilityZones=False)["AvailabilityZones"]})

    def offered_in(self, region: str, instance_type: str) -> set[str]:
        def fetch() -> Any:
            azs: set[str] = set()
            kwargs = {"LocationType": "availability-zone", "Filters": [{"Name": "instance-type", "Values": [instance_type]}]}
            while True:
                r = self.call("ec2", region, "describe_instance_type_offerings", **kwargs)
                azs |= {o["Location"] for o in r["InstanceTypeOfferings"]}
                if not r.get("NextToken"):
                    return azs
                kwargs["NextToken"] = r["NextToken"]
        return self._cached(("offered", region, instance_type), fetch)

    def instance_type(self, region: str, instance_type: str) -> dict | None:
        from botocore.exceptions import ClientError

        def fetch() -> Any:
            try:
                r = self.call("ec2", region, "describe_instance_types", InstanceTypes=[instance_type])
            except ClientError:
                return None
            return (r.get("InstanceTypes") or [None])[0]
        return self._cached(("type", region, instance_type), fetch)


class CloudCheck:
    """A named preflight rule: check(plan, api) yields findings."""

    code = ""

    def check(self, plan: ClusterPlan, api: AwsApi) -> Iterable[Finding]:
        raise NotImplementedError

    def _f(self, level: Level, parts: tuple, message: str) -> Finding:
        return Finding(level, self.code, format_path(parts), message, parts=tuple(parts))

    def error(self, parts: tuple, message: str) -> Finding:
        return self._f(Level.ERROR, parts, message)

    def warning(self, parts: tuple, message: str) -> Finding:
        return self._f(Level.WARNING, parts, message)

    def info(self, parts: tuple, message: str) -> Finding:
        return self._f(Level.INFO, parts, message)


def aws_pools(plan: ClusterPlan) -> list[tuple[int, PoolPlan, str, str]]:
    """(spec index, pool, region, instance type): plan.pools keeps the spec's order, so the index is the spec path's
    index; compile gives every aws pool its region and instance type."""
    out = []
    for i, p in enumerate(plan.pools):
        if p.provider == "aws":
            assert p.region is not None and p.instance_type is not None, f"aws pool {p.name} compiled without a region"
            out.append((i, p, p.region, p.instance_type))
    return out


def count_path(i: int, p: PoolPlan) -> tuple:
    return ("pools", i, "min" if p.elastic else "count")


class InstanceTypeOffered(CloudCheck):
    """Each chosen AZ exists and offers the pool's instance type (DescribeInstanceTypeOfferings)."""

    code = "aws-instance-type-offered"

    def check(self, plan: ClusterPlan, api: AwsApi) -> Iterator[Finding]:
        for i, p, region, itype in aws_pools(plan):
            try:
                zones, offered = api.zones(region), api.offered_in(region, itype)
            except ApiUnavailable as e:
                yield self.warning(("pools", i, "availability_zones"), f"could not check where {itype} is offered: {e}")
                continue
            for j, az in enumerate(p.availability_zones):
                where = ("pools", i, "availability_zones", j)
                if az not in zones:
                    yield self.error(where, f"{az} is not an availability zone of {region} (this account has: {', '.join(sorted(zones))})")
                elif az not in offered:
                    alt = ", ".join(sorted(offered)) or f"no AZ of {region}"
                    yield self.error(where, f"{itype} is not offered in {az}; it is offered in {alt}")
        ctl = plan.controller
        if ctl.provider == "aws" and plan.aws_pools and ctl.instance_type is not None:
            _, _, region, _ = aws_pools(plan)[0]
            az = plan.aws_pools[0].availability_zones[0]
            try:
                if az in api.zones(region) and az not in api.offered_in(region, ctl.instance_type):
                    yield self.error(("controller", "instance_type"), f"{ctl.instance_type} is not offered in {az}, where the controller goes")
            except ApiUnavailable as e:
                yield self.warning(("controller", "instance_type"), f"could not check where {ctl.instance_type} is offered: {e}")


class EfaSupported(CloudCheck):
    """The instance type exists in the region, supports EFA when the pool's fabric is EFA, and has the network
    cards the catalog's ENI layout asks for (DescribeInstanceTypes)."""

    code = "aws-efa"

    def check(self, plan: ClusterPlan, api: AwsApi) -> Iterator[Finding]:
        for i, p, region, itype in aws_pools(plan):
            path = ("pools", i, "instance_type")
            try:
                info = api.instance_type(region, itype)
            except ApiUnavailable as e:
                yield self.warning(path, f"could not describe {itype}: {e}")
                continue
            if info is None:
                yield self.error(path, f"{itype} does not exist in {region}")
                continue
            net = info.get("NetworkInfo", {})
            if p.fabric == "efa":
                if not net.get("EfaSupported"):
                    yield self.error(path, f"{itype} does not support EFA (fabric: efa)")
                    continue
                want = INSTANCE_TYPES[itype].network_cards if itype in INSTANCE_TYPES else None
                have = net.get("MaximumNetworkCards")
                if want and have and want > have:
                    yield self.error(path, f"the ENI layout needs {want} network cards but {itype} has {have} "
                                           "in this region (clusterctl's catalog is out of date)")


class VcpuQuota(CloudCheck):
    """Enough vCPU quota for the P instances: on-demand (and reserved) L-417A185B, spot L-7212CCBC.

    A pool's fallback markets count at full size against their own quota (every node may end up there) but not at
    start: static nodes launch in the pool's own market."""

    code = "aws-vcpu-quota"

    def check(self, plan: ClusterPlan, api: AwsApi) -> Iterator[Finding]:
        groups: dict[str, list[tuple[int, PoolPlan, int, int, str]]] = {}  # quota -> (index, pool, vCPUs, static nodes, region)
        for i, p, region, itype in aws_pools(plan):
            if not itype.startswith("p"):
                continue
            if p.market == "capacity-block":
                yield self.info(("pools", i, "market"), "capacity blocks are bought capacity; the running-instance vCPU quota is not checked")
            markets = [m for m in (p.market, *p.fallback_markets) if m != "capacity-block"]
            if not markets:
                continue
            it = INSTANCE_TYPES.get(itype)
            vcpus = it.vcpus if it else ((api.instance_type(region, itype) or {}).get("VCpuInfo", {}).get("DefaultVCpus") or 0)
            for market in markets:
                code = QUOTA_SPOT_P if market == "spot" else QUOTA_ON_DEMAND_P
                groups.setdefault(code, []).append((i, p, vcpus, p.static_count if market == p.market else 0, region))
        for code, members in groups.items():
            kind = "spot" if code == QUOTA_SPOT_P else "on-demand"
            static = sum(n * v for _, _, v, n, _ in members)
            most = sum(p.max_count * v for _, p, v, _, _ in members)
            i0, p0, _, _, region0 = max(members, key=lambda m: m[1].max_count * m[2])
            try:
                quota = api.call("service-quotas", region0, "get_service_quota", ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"]
            except Exception as e:  # noqa: BLE001 - any failure here means "not checked", never "passed"
                yield self.warning(("pools", i0, "instance_type"),
                                   f"could not check the {kind} P-instance vCPU quota ({code}) in {p0.region}: {_reason(e)}; "
                                   f"make sure it is at least {most} vCPUs")
                continue
            if static > quota:
                yield self.error(count_path(i0, p0), f"{static} vCPUs of {kind} P instances are needed at start but the "
                                                     f"quota {code} in {p0.region} is {int(quota)}; request an increase")
            elif most > quota:
                yield self.warning(("pools", i0, "max"), f"at full size the pools need {most} {kind} P vCPUs; quota {code} "
                                                         f"is {int(quota)}: Slurm cannot power up every node")


class ReservationMatches(CloudCheck):
    """The capacity reservation / capacity block exists and matches instance type, AZ, count and dates."""

    code = "aws-reservation"

    def check(self, plan: ClusterPlan, api: AwsApi) -> Iterator[Finding]:
        from botocore.exceptions import ClientError

        now = dt.datetime.now(dt.timezone.utc)
        for i, p, region, _ in aws_pools(plan):
            if p.market not in ("capacity-block", "reserved") or not p.capacity_reservation_id:
                continue
            rid, path = p.capacity_reservation_id, ("pools", i, "capacity_reservation_id")
            try:
                found = api.call("ec2", region, "describe_capacity_reservations", CapacityReservationIds=[rid])["CapacityReservations"]
            except ClientError:
                found = []
            except ApiUnavailable as e:
                yield self.warning(path, f"could not check {rid}: {e}")
                continue
            if not found:
                yield self.error(path, f"{rid} does not exist in {region} (or is not shared with this account)")
                continue
            r = found[0]
            yield from self._match(i, p, r, path, now)

    def _match(self, i: int, p: PoolPlan, r: dict, path: tuple, now: dt.datetime) -> Iterator[Finding]:
        itype = p.instance_type
        rid = p.capacity_reservation_id
        is_block = r.get("ReservationType") == "capacity-block"
        if p.market == "capacity-block" and not is_block:
            yield self.error(("pools", i, "market"), f"{rid} is an on-demand capacity reservation, not a capacity block; use market: reserved")
        if p.market == "reserved" and is_block:
            yield self.error(("pools", i, "market"), f"{rid} is a capacity block; use market: capacity-block")
        if r.get("InstanceType") != itype:
            yield self.error(("pools", i, "instance_type"), f"{rid} reserves {r.get('InstanceType')}, not {itype}")
        az = r.get("AvailabilityZone")
        if az not in p.availability_zones:
            yield self.error(("pools", i, "availability_zones"), f"{rid} is in {az}, which is not one of the pool's AZs")
        elif az != p.availability_zones[0]:
            yield self.error(("pools", i, "availability_zones", 0),
                             f"{rid} is in {az}; list it first (static nodes launch in the first AZ)")
        total = r.get("TotalInstanceCount", 0)
        available = r.get("AvailableInstanceCount", total)
        if p.static_count > total:
            yield self.error(count_path(i, p), f"{rid} holds {total} instances but the pool starts {p.static_count}")
        elif p.static_count > available:
            yield self.warning(count_path(i, p), f"only {available} of {total} instances in {rid} are free; "
                                                 f"the pool starts {p.static_count}")
        if p.max_count > total:
            yield self.warning(("pools", i, "max" if p.elastic else "count"),
                               f"{rid} holds {total} instances; nodes beyond that cannot launch into it")
        state = r.get("State")
        start, end = r.get("StartDate"), r.get("EndDate")
        if state in ("expired", "cancelled", "failed", "unsupported") or (end is not None and end <= now):
            yield self.error(path, f"{rid} is {state or 'over'}" + (f" (ended {end:%Y-%m-%d %H:%M} UTC)" if end else ""))
        elif state in ("scheduled", "payment-pending", "pending") or (start is not None and start > now):
            when = f" at {start:%Y-%m-%d %H:%M} UTC" if start else ""
            yield self.warning(path, f"{rid} is {state}: instances cannot launch before it starts{when}")
        elif is_block and end is not None:
            yield self.info(path, f"capacity block {rid} ends {end:%Y-%m-%d %H:%M} UTC; its instances are terminated then")


class AmiExists(CloudCheck):
    """The pool's AMI exists, is available and fits the instance type's architecture; without one, the official
    Debian 12 image must be findable in the region."""

    code = "aws-ami"

    def check(self, plan: ClusterPlan, api: AwsApi) -> Iterator[Finding]:
        from botocore.exceptions import ClientError

        for i, p, region, itype in aws_pools(plan):
            path = ("pools", i, "ami")
            try:
                arches = ((api.instance_type(region, itype) or {}).get("ProcessorInfo", {})
                          .get("SupportedArchitectures") or ["x86_64"])
                if p.ami:
                    try:
                        images = api.call("ec2", region, "describe_images", ImageIds=[p.ami])["Images"]
                    except ClientError:
                        images = []
                    if not images:
                        yield self.error(path, f"{p.ami} does not exist in {region} (or is not shared with this account)")
                        continue
                    img = images[0]
                    if img.get("State", "available") != "available":
                        yield self.error(path, f"{p.ami} is {img.get('State')}, not available")
                    if img.get("Architecture") and img["Architecture"] not in arches:
                        yield self.error(path, f"{p.ami} is {img['Architecture']} but {itype} runs {', '.join(arches)}")
                else:
                    def debian(r: str = region) -> list[dict]:
                        return api.call("ec2", r, "describe_images", **debian_12_query())["Images"]

                    images = api._cached(("debian", region), debian)
                    if not images:
                        yield self.error(path, f"no official Debian 12 AMI (owner {DEBIAN_OWNER}) is visible in {region}; set ami")
            except ApiUnavailable as e:
                yield self.warning(path, f"could not check the AMI: {e}")


class Credentials(CloudCheck):
    """Who am I: without working credentials no other check means anything."""

    code = "aws-credentials"

    def check(self, plan: ClusterPlan, api: AwsApi) -> Iterator[Finding]:
        first, _, region, _ = aws_pools(plan)[0]
        try:
            ident = api.call("sts", region, "get_caller_identity")
        except Exception as e:  # noqa: BLE001
            yield self.error(("pools", first, "region"), f"AWS credentials do not work for {region}: {_reason(e)}")
            return
        yield self.info(("pools", first, "region"), f"AWS account {ident.get('Account')} as {ident.get('Arn')}")


CHECKS: list[CloudCheck] = [InstanceTypeOffered(), EfaSupported(), VcpuQuota(), ReservationMatches(), AmiExists()]


def _reason(e: Exception) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def run_preflight(plan: ClusterPlan, api: AwsApi | None = None, checks: list[CloudCheck] | None = None) -> list[Finding]:
    """Every finding of every check; empty for a plan without aws pools."""
    if not plan.aws_pools:
        return []
    api = api or AwsApi()
    found = list(Credentials().check(plan, api))
    if any(f.level is Level.ERROR for f in found):
        return found
    for c in checks if checks is not None else CHECKS:
        found.extend(c.check(plan, api))
    return found
