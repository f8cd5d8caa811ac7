"""Preflight against a real moto server: offerings, instance types, AMIs and quotas come from moto's AWS data.

Capacity reservations are not implemented by moto (it answers 500); their matching rules are tested with
botocore's Stubber on a real boto3 client (canned DescribeCapacityReservations responses), and the moto answer
itself is tested for what it is: an API that could not be checked.
"""

from __future__ import annotations

import datetime as dt

import boto3
import pytest
from botocore.stub import Stubber

from clusterctl.catalog import INSTANCE_TYPES
from clusterctl.catalog.cpus import INSTANCE_LAYOUTS
from clusterctl.engines.aws.preflight import (AwsApi, EfaSupported, ReservationMatches, VcpuQuota, run_preflight)
from clusterctl.core.findings import Level
from tests.engines.aws.conftest import REGION
from tests.helpers import plan_of

EXAMPLE = "aws-p5-spot.yaml"


def moto_ami() -> str:
    ec2 = boto3.client("ec2")
    images = ec2.describe_images(Owners=["amazon"], Filters=[{"Name": "architecture", "Values": ["x86_64"]}])["Images"]
    return sorted(i["ImageId"] for i in images)[0]


def offered(instance_type: str) -> set[str]:
    r = boto3.client("ec2").describe_instance_type_offerings(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": [instance_type]}])
    return {o["Location"] for o in r["InstanceTypeOfferings"]}


def errors(findings, code=None):
    return [f for f in findings if f.level is Level.ERROR and (code is None or f.code == code)]


def test_aws_endpoint_url_is_honoured_by_boto3_itself(aws):
    """No endpoint_url anywhere in clusterctl: botocore reads AWS_ENDPOINT_URL (supported since botocore 1.31)."""
    api = AwsApi()
    assert api.client("ec2", REGION).meta.endpoint_url == aws
    assert api.client("service-quotas", REGION).meta.endpoint_url == aws
    assert "us-east-1a" in api.zones(REGION)


def test_type_not_offered_in_the_chosen_az_is_an_error_naming_the_az(aws):
    zones = {z["ZoneName"] for z in boto3.client("ec2").describe_availability_zones()["AvailabilityZones"]}
    # moto's offerings data decides: take a catalog type offered in some AZs of the region but not in others.
    pairs = [(t, sorted(offered(t)), sorted(zones - offered(t))) for t in INSTANCE_TYPES]
    t, yes, no = next((t, y, n) for t, y, n in pairs if y and n)
    ami = moto_ami()

    def edit(d):
        d["pools"][0].update(instance_type=t, availability_zones=[yes[0], no[0]], ami=ami)
        d["pools"][0].pop("gpus_per_node", None)

    findings = run_preflight(plan_of(EXAMPLE, edit))
    errs = errors(findings, "aws-instance-type-offered")
    assert len(errs) == 1, findings
    assert errs[0].path == "pools[0].availability_zones[1]"
    assert no[0] in errs[0].message and t in errs[0].message and yes[0] in errs[0].message  # names the AZ and alternatives


def test_valid_spec_passes(aws):
    ami = moto_ami()
    azs = sorted(offered("p5.48xlarge"))[:2]

    def edit(d):
        d["pools"][0].update(availability_zones=azs, ami=ami)

    findings = run_preflight(plan_of(EXAMPLE, edit))
    assert errors(findings) == [], [f"{f.path}: {f.message}" for f in errors(findings)]
    # moto has no Service Quotas data for EC2 in us-east-1: the quota is reported as unchecked, never as passed.
    quota = [f for f in findings if f.code == "aws-vcpu-quota"]
    assert quota and quota[0].level is Level.WARNING and "could not check" in quota[0].message
    assert "L-7212CCBC" in quota[0].message  # the spot P-instance quota for a spot pool
    assert any(f.code == "aws-credentials" and f.level is Level.INFO for f in findings)


def test_unknown_az_is_an_error(aws):
    def edit(d):
        d["pools"][0].update(availability_zones=["us-east-1a", "us-east-1z"], ami=moto_ami())
    errs = errors(run_preflight(plan_of(EXAMPLE, edit)), "aws-instance-type-offered")
    assert [e.path for e in errs] == ["pools[0].availability_zones[1]"] and "us-east-1z" in errs[0].message


def test_missing_ami_is_an_error(aws):
    def edit(d):
        d["pools"][0].update(availability_zones=["us-east-1a"], ami="ami-0123456789abcdef0")
    errs = errors(run_preflight(plan_of(EXAMPLE, edit)), "aws-ami")
    assert [e.path for e in errs] == ["pools[0].ami"] and "ami-0123456789abcdef0" in errs[0].message


def test_default_debian_image_must_be_findable(aws):
    """moto's image catalogue has no Debian account images: the default-AMI lookup must say so, not pass."""
    errs = errors(run_preflight(plan_of(EXAMPLE, lambda d: d["pools"][0].update(availability_zones=["us-east-1a"]))), "aws-ami")
    assert len(errs) == 1 and "Debian 12" in errs[0].message and errs[0].path == "pools[0].ami"


def test_efa_support_comes_from_describe_instance_types(aws):
    plan = plan_of(EXAMPLE, lambda d: d["pools"][0].update(availability_zones=["us-east-1a"]))
    api = AwsApi()
    assert list(EfaSupported().check(plan, api)) == []  # moto's p5 data: EfaSupported true, 32 network cards
    api._cache[("type", REGION, "p5.48xlarge")] = {"NetworkInfo": {"EfaSupported": False, "MaximumNetworkCards": 32}}
    errs = list(EfaSupported().check(plan, api))
    assert [e.path for e in errs] == ["pools[0].instance_type"] and "EFA" in errs[0].message


def test_catalog_eni_layouts_match_aws_instance_type_data(aws):
    """The catalog's card counts (p5/p5e 32, p5en 16, p6-b200 8, p4d 4) against DescribeInstanceTypes data."""
    ec2 = boto3.client("ec2")
    for name, it in INSTANCE_TYPES.items():
        info = ec2.describe_instance_types(InstanceTypes=[name])["InstanceTypes"][0]
        net = info["NetworkInfo"]
        assert net["MaximumNetworkCards"] == it.network_cards, name
        efa_enis = sum(1 for s in it.eni_layout() if s.interface_type in ("efa", "efa-only"))
        assert net["EfaInfo"]["MaximumEfaInterfaces"] == efa_enis, name
        assert info["VCpuInfo"]["DefaultVCpus"] == it.vcpus, name
        assert info["GpuInfo"]["Gpus"][0]["Count"] == it.gpus, name


def test_catalog_cpu_layouts_match_aws_instance_type_data(aws):
    """Slurm's CoresPerSocket x Sockets and ThreadsPerCore for each instance type against DescribeInstanceTypes'
    DefaultCores and DefaultThreadsPerCore (moto's copy of EC2's data). The socket split is not in that API: it comes
    from the processor (two-socket parts, catalog/cpus.py's sources)."""
    ec2 = boto3.client("ec2")
    for name, layout in INSTANCE_LAYOUTS.items():
        cpu = ec2.describe_instance_types(InstanceTypes=[name])["InstanceTypes"][0]["VCpuInfo"]
        assert (layout.sockets * layout.cores_per_socket, layout.threads_per_core, layout.cpus) == \
            (cpu["DefaultCores"], cpu["DefaultThreadsPerCore"], cpu["DefaultVCpus"]), name


def test_capacity_reservation_api_missing_in_moto_is_a_warning_not_a_pass(aws):
    plan = plan_of(EXAMPLE, lambda d: d["pools"][0].update(market="capacity-block", capacity_reservation_id="cr-0123456789abcdef0",
                                                  availability_zones=["us-east-1a"], count=2))
    found = list(ReservationMatches().check(plan, AwsApi()))
    assert [(f.level, f.path) for f in found] == [(Level.WARNING, "pools[0].capacity_reservation_id")]
    assert "could not check" in found[0].message


# -- reservation matching and quota arithmetic with canned AWS responses (botocore Stubber) ------------------------

NOW = dt.datetime.now(dt.timezone.utc)


def stubbed_api(service: str, method: str, response: dict) -> tuple[AwsApi, Stubber]:
    api = AwsApi(session=boto3.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name=REGION))
    client = api.client(service, REGION)
    stub = Stubber(client)
    stub.add_response(method, response)
    stub.activate()
    return api, stub


def reservation(**kw) -> dict:
    r = {"CapacityReservationId": "cr-0123456789abcdef0", "InstanceType": "p5.48xlarge", "AvailabilityZone": "us-east-1a",
         "TotalInstanceCount": 4, "AvailableInstanceCount": 4, "State": "active", "ReservationType": "capacity-block",
         "StartDate": NOW - dt.timedelta(hours=1), "EndDate": NOW + dt.timedelta(days=2), "InstancePlatform": "Linux/UNIX"}
    r.update(kw)
    return {"CapacityReservations": [r]}


def block_plan(count=4, azs=("us-east-1a",), market="capacity-block"):
    return plan_of(EXAMPLE, lambda d: d["pools"][0].update(market=market, capacity_reservation_id="cr-0123456789abcdef0",
                                                  availability_zones=list(azs), count=count))


@pytest.mark.parametrize("plan_kw,resv_kw,want", [
    ({}, {}, []),
    ({}, {"InstanceType": "p5e.48xlarge"}, [("pools[0].instance_type", "p5e.48xlarge")]),
    ({"azs": ("us-east-1a", "us-east-1b")}, {"AvailabilityZone": "us-east-1b"}, [("pools[0].availability_zones[0]", "list it first")]),
    ({}, {"AvailabilityZone": "us-east-1d"}, [("pools[0].availability_zones", "us-east-1d")]),
    ({"count": 8}, {}, [("pools[0].count", "holds 4")]),
    ({}, {"State": "expired", "EndDate": NOW - dt.timedelta(hours=1)}, [("pools[0].capacity_reservation_id", "expired")]),
    ({"market": "capacity-block"}, {"ReservationType": "default"}, [("pools[0].market", "not a capacity block")]),
    ({"market": "reserved"}, {}, [("pools[0].market", "use market: capacity-block")]),
])
def test_reservation_matches_type_az_count_and_dates(plan_kw, resv_kw, want):
    api, stub = stubbed_api("ec2", "describe_capacity_reservations", reservation(**resv_kw))
    found = list(ReservationMatches().check(block_plan(**plan_kw), api))
    stub.assert_no_pending_responses()
    errs = [(f.path, f.message) for f in found if f.level is Level.ERROR]
    assert len(errs) == len(want), found
    for (path, msg), (wpath, wtext) in zip(errs, want, strict=True):
        assert path == wpath and wtext in msg


def test_scheduled_block_warns_with_its_start_and_active_block_reports_its_end():
    start = NOW + dt.timedelta(days=1)
    api, _ = stubbed_api("ec2", "describe_capacity_reservations", reservation(State="scheduled", StartDate=start))
    found = list(ReservationMatches().check(block_plan(), api))
    assert [f.level for f in found] == [Level.WARNING] and f"{start:%Y-%m-%d %H:%M}" in found[0].message
    api, _ = stubbed_api("ec2", "describe_capacity_reservations", reservation())
    found = list(ReservationMatches().check(block_plan(), api))
    assert [f.level for f in found] == [Level.INFO] and "ends" in found[0].message


def test_vcpu_quota_too_small_is_an_error_on_the_count():
    api, stub = stubbed_api("service-quotas", "get_service_quota",
                            {"Quota": {"ServiceCode": "ec2", "QuotaCode": "L-7212CCBC", "Value": 384.0}})
    found = list(VcpuQuota().check(plan_of(EXAMPLE, lambda d: None), api))  # 16 x p5.48xlarge spot = 3072 vCPUs
    stub.assert_no_pending_responses()
    assert [(f.level, f.path) for f in found] == [(Level.ERROR, "pools[0].count")]
    assert "3072" in found[0].message and "384" in found[0].message and "L-7212CCBC" in found[0].message


def test_vcpu_quota_of_a_fallback_market_is_checked_at_full_size():
    api, stub = stubbed_api("service-quotas", "get_service_quota",
                            {"Quota": {"ServiceCode": "ec2", "QuotaCode": "L-7212CCBC", "Value": 4096.0}})
    stub.add_response("get_service_quota", {"Quota": {"ServiceCode": "ec2", "QuotaCode": "L-417A185B", "Value": 384.0}},
                      {"ServiceCode": "ec2", "QuotaCode": "L-417A185B"})
    elastic = plan_of(EXAMPLE, lambda d: (d["pools"][0].pop("count"),
                                 d["pools"][0].update(min=1, max=4, fallback_markets=["on-demand"])))
    found = list(VcpuQuota().check(elastic, api))
    stub.assert_no_pending_responses()
    # Spot (the pool's market) has room; on-demand, where all 4 nodes may land, is short: a warning, not an error
    # (the one static node launches in spot).
    assert [(f.level, f.path) for f in found] == [(Level.WARNING, "pools[0].max")]
    assert "768 on-demand" in found[0].message and "L-417A185B" in found[0].message
