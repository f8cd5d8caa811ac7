"""resume / suspend / resume-fail / sync against a real moto server (EC2 API over HTTP) and a fake Slurm.

The pool's launch resources are created in moto the way the Pulumi stack creates them (harness.create_stack:
VPC, one subnet per AZ, the EFA group, the launch template from clusterctl.engines.aws.launch), and launches that
should fail go through harness.FaultProxy, which answers RunInstances in chosen AZs with EC2's
InsufficientInstanceCapacity (or another code) the way EC2 does: HTTP 500 and EC2's error XML.
"""

from __future__ import annotations

import tarfile
import io
from datetime import datetime, timedelta, timezone

import boto3
import pytest

from clusterctl.engines.aws.burst import actions
from clusterctl.engines.aws.burst import ec2 as cloud
from tests.engines.aws.burst.harness import CLUSTER_ID, FaultProxy

AZS = ["us-west-2a", "us-west-2b", "us-west-2c"]


@pytest.fixture
def proxy(stack, moto_server):
    _, st = stack
    p = FaultProxy(moto_server, "127.0.0.1", st.subnet_azs)
    yield p
    p.stop()


@pytest.fixture
def ctx_proxy(ctx, proxy):
    """ctx whose RunInstances goes through the fault proxy (describe/terminate go straight to moto)."""
    ctx.ec2_launch = cloud.clients("us-west-2", endpoint_url=proxy.url)[1]  # the product's client (no SDK retries)
    return ctx


# What the stack and resume tag this cluster's instances with: its name and its unique id.
OURS = [{"Key": "clusterctl:cluster", "Value": "burst"}, {"Key": "clusterctl:cluster-id", "Value": CLUSTER_ID}]
# Another stack's (or account's) cluster of the same name: other id.
NAMESAKE = [{"Key": "clusterctl:cluster", "Value": "burst"}, {"Key": "clusterctl:cluster-id", "Value": "ffffffffffffffff"}]


def live(ec2, cluster="burst"):
    return cloud.cluster_instances(ec2, cluster, CLUSTER_ID)


# --- discovery and failover -------------------------------------------------------------------------------


def test_launch_targets_follow_the_pool_az_order_and_the_stack_tags(ctx, stack):
    ec2, st = stack
    pool = ctx.plan.pool_config("cloud")
    targets = cloud.launch_targets(ec2, "burst", CLUSTER_ID, pool)
    assert [t.availability_zone for t in targets] == AZS
    assert [t.subnet_id for t in targets] == [st.subnets[az] for az in AZS]
    assert all(t.launch_template_id == st.launch_template_id for t in targets)
    assert all(t.security_group_ids == (st.security_group_id,) for t in targets)  # the template's own groups


def test_no_stack_means_no_launch(aws):
    from tests.engines.aws.burst.conftest import lab_plan
    from clusterctl.render.stack_config import StackConfig

    pool = StackConfig.from_plan(lab_plan()).pool("cloud")
    with pytest.raises(cloud.LaunchFailed) as e:
        cloud.launch_targets(boto3.client("ec2", region_name="us-west-2"), "burst", CLUSTER_ID, pool)
    assert e.value.code == "NoLaunchTemplate"


def test_capacity_error_moves_to_the_next_az(ctx_proxy, proxy, stack):
    ec2, st = stack
    proxy.failing_azs = {"us-west-2a"}
    pool = ctx_proxy.plan.pool_config("cloud")
    targets = cloud.launch_targets(ec2, "burst", CLUSTER_ID, pool)
    nodes, attempts = cloud.launch_with_failover(ctx_proxy.ec2_launch, pool, "burst", CLUSTER_ID, ["cloud001", "cloud002"], targets)
    assert [(a.availability_zone, a.code) for a in attempts] == [("us-west-2a", "InsufficientInstanceCapacity"),
                                                                 ("us-west-2b", None)]
    assert {v["availability_zone"] for v in nodes.values()} == {"us-west-2b"}
    # All or nothing: exactly one request per AZ, each for both nodes (MinCount = MaxCount = 2).
    assert [(c.availability_zone, c.count, c.failed) for c in proxy.calls] == [("us-west-2a", "2", True), ("us-west-2b", "2", False)]
    insts = live(ec2)
    assert sorted(i.name for i in insts) == ["cloud001", "cloud002"]
    assert all(i.availability_zone == "us-west-2b" and i.pool == "cloud" for i in insts)


def test_every_az_failing_raises_with_the_cloud_code(ctx_proxy, proxy, stack):
    ec2, _ = stack
    proxy.failing_azs = set(AZS)
    pool = ctx_proxy.plan.pool_config("cloud")
    with pytest.raises(cloud.LaunchFailed) as e:
        cloud.launch_with_failover(ctx_proxy.ec2_launch, pool, "burst", CLUSTER_ID, ["cloud001"], cloud.launch_targets(ec2, "burst", CLUSTER_ID, pool))
    assert e.value.code == "InsufficientInstanceCapacity"
    assert [a.availability_zone for a in e.value.attempts] == AZS
    assert live(ec2) == []


@pytest.mark.parametrize("code", [
    "MaxSpotInstanceCountExceeded",  # a quota is regional: the pool's other AZs would fail the same way
    "InvalidParameterValue",  # not a capacity problem at all
])
def test_errors_other_than_capacity_stop_at_once(ctx_proxy, proxy, stack, code):
    ec2, _ = stack
    proxy.failing_azs = {"us-west-2a"}
    proxy.fail_code = code
    pool = ctx_proxy.plan.pool_config("cloud")
    with pytest.raises(cloud.LaunchFailed) as e:
        cloud.launch_with_failover(ctx_proxy.ec2_launch, pool, "burst", CLUSTER_ID, ["cloud001"], cloud.launch_targets(ec2, "burst", CLUSTER_ID, pool))
    assert e.value.code == code and len(proxy.calls) == 1


# --- fallback markets (the pool: spot, then on-demand) ------------------------------------------------------

FALLBACK = pytest.mark.parametrize("cloud_pool", [{"fallback_markets": ["on-demand"]}])


@FALLBACK
def test_template_of_a_pool_with_fallbacks_leaves_the_market_to_each_request(ctx, stack):
    # A request cannot turn a template's spot market back into on-demand: the template must not carry one.
    ec2, st = stack
    data = ec2.describe_launch_template_versions(LaunchTemplateId=st.launch_template_id)["LaunchTemplateVersions"][0]
    assert "InstanceMarketOptions" not in data["LaunchTemplateData"]
    assert ctx.plan.pool_config("cloud").fallback_markets == ("on-demand",)


@FALLBACK
def test_no_spot_capacity_anywhere_falls_back_to_on_demand(ctx_proxy, proxy, stack):
    ec2, _ = stack
    proxy.failing_azs, proxy.failing_markets = set(AZS), {"spot"}
    pool = ctx_proxy.plan.pool_config("cloud")
    nodes, attempts = cloud.launch_with_failover(ctx_proxy.ec2_launch, pool, "burst", CLUSTER_ID, ["cloud001", "cloud002"],
                                                 cloud.launch_targets(ec2, "burst", CLUSTER_ID, pool))
    # Every AZ in the pool's own market first, then the fallback from the first AZ again.
    assert [(a.market, a.availability_zone, a.code) for a in attempts] == [
        ("spot", "us-west-2a", "InsufficientInstanceCapacity"), ("spot", "us-west-2b", "InsufficientInstanceCapacity"),
        ("spot", "us-west-2c", "InsufficientInstanceCapacity"), ("on-demand", "us-west-2a", None)]
    assert [(c.market, c.count, c.failed) for c in proxy.calls] == [("spot", "2", True)] * 3 + [("on-demand", "2", False)]
    assert sorted(i.name for i in live(ec2)) == ["cloud001", "cloud002"]
    assert {v["availability_zone"] for v in nodes.values()} == {"us-west-2a"}


@FALLBACK
def test_a_spot_quota_error_goes_straight_to_the_fallback_market(ctx_proxy, proxy, stack):
    ec2, _ = stack
    proxy.failing_azs, proxy.failing_markets, proxy.fail_code = set(AZS), {"spot"}, "MaxSpotInstanceCountExceeded"
    pool = ctx_proxy.plan.pool_config("cloud")
    _, attempts = cloud.launch_with_failover(ctx_proxy.ec2_launch, pool, "burst", CLUSTER_ID, ["cloud001"],
                                             cloud.launch_targets(ec2, "burst", CLUSTER_ID, pool))
    # The quota is regional: the other AZs of the same market are not tried.
    assert [(a.market, a.availability_zone, a.code) for a in attempts] == [
        ("spot", "us-west-2a", "MaxSpotInstanceCountExceeded"), ("on-demand", "us-west-2a", None)]


@FALLBACK
def test_every_market_failing_powers_down_naming_the_markets_tried(ctx_proxy, proxy, stack):
    ec2, _ = stack
    proxy.failing_azs = set(AZS)
    report = actions.resume(ctx_proxy, "cloud[001-002]", {"jobs": [{"job_id": 6, "nodes": "cloud[001-002]"}]})
    assert not report.ok and live(ec2) == []
    assert [c.market for c in proxy.calls] == ["spot"] * 3 + ["on-demand"] * 3
    [(names, reason)] = ctx_proxy.slurm.powered_down
    assert "InsufficientInstanceCapacity" in reason and "us-west-2a, us-west-2b, us-west-2c; spot, on-demand" in reason


# --- resume ------------------------------------------------------------------------------------------------


def test_resume_launches_per_job_tags_and_sets_addresses(ctx, stack):
    ec2, _ = stack
    data = {"jobs": [{"job_id": 11, "nodes": "cloud[001-002]"}], "all_nodes": "cloud[001-003]"}
    report = actions.resume(ctx, "cloud[001-003]", data)
    assert report.ok and sorted(report.launched) == ["cloud001", "cloud002", "cloud003"]
    insts = {i.name: i for i in live(ec2)}
    assert sorted(insts) == ["cloud001", "cloud002", "cloud003"]
    for n, i in insts.items():
        assert ctx.slurm.addresses[n] == i.private_ip  # scontrol update nodename=N nodeaddr=IP
    raw = ec2.describe_instances(InstanceIds=[insts["cloud001"].id])["Reservations"][0]["Instances"][0]
    tags = {t["Key"]: t["Value"] for t in raw["Tags"]}
    assert tags["clusterctl:cluster"] == "burst" and tags["clusterctl:pool"] == "cloud" and tags["Name"] == "cloud001"
    assert raw["InstanceType"] == "p5.48xlarge" and raw.get("InstanceLifecycle") == "spot"
    # One RunInstances per job group: the job's two nodes together, the third alone.
    launches = [a for a in report.attempts if a.code is None]
    assert len(launches) == 2


def test_resume_twice_reuses_the_live_instance(ctx, stack):
    ec2, _ = stack
    first = actions.resume(ctx, "cloud001")
    second = actions.resume(ctx, "cloud001")  # slurmctld may run ResumeProgram again after a restart
    assert list(first.launched) == ["cloud001"] and second.launched == {}
    assert second.reused["cloud001"]["instance_id"] == first.launched["cloud001"]["instance_id"]
    assert len(live(ec2)) == 1


def test_resume_ignores_nodes_that_are_not_burst_nodes(ctx, stack):
    report = actions.resume(ctx, "gpu001,cloud004")
    assert list(report.launched) == ["cloud004"]


def test_failed_launch_powers_the_job_down_with_the_code(ctx_proxy, proxy, stack):
    ec2, _ = stack
    proxy.failing_azs = set(AZS)
    report = actions.resume(ctx_proxy, "cloud[001-002]", {"jobs": [{"job_id": 5, "nodes": "cloud[001-002]"}]})
    assert not report.ok and report.launched == {}
    assert live(ec2) == []
    [(names, reason)] = ctx_proxy.slurm.powered_down
    assert names == ["cloud001", "cloud002"]
    assert "InsufficientInstanceCapacity" in reason and "us-west-2a, us-west-2b, us-west-2c" in reason
    assert all(ctx_proxy.slurm.states[n].powering_down for n in names)  # POWER_DOWN, never DOWN


def test_capacity_in_the_second_az_is_used(ctx_proxy, proxy, stack):
    ec2, st = stack
    proxy.failing_azs = {"us-west-2a"}
    report = actions.resume(ctx_proxy, "cloud001")
    assert report.ok and report.launched["cloud001"]["availability_zone"] == "us-west-2b"
    assert ctx_proxy.slurm.powered_down == []


# --- suspend / resume-fail ---------------------------------------------------------------------------------


def test_suspend_terminates_by_tag_and_is_safe_to_repeat(ctx, stack):
    ec2, _ = stack
    actions.resume(ctx, "cloud[001-003]")
    ids = actions.suspend(ctx, "cloud[001-002]")
    assert len(ids) == 2
    assert [i.name for i in live(ec2)] == ["cloud003"]
    assert actions.suspend(ctx, "cloud[001-002]") == []


def test_resume_fail_terminates_and_powers_down(ctx, stack):
    ec2, _ = stack
    actions.resume(ctx, "cloud002")
    actions.resume_fail(ctx, "cloud002")
    assert live(ec2) == []
    [(names, reason)] = ctx.slurm.powered_down
    assert names == ["cloud002"] and "resume failed" in reason


# --- sync --------------------------------------------------------------------------------------------------


def _old(ctx, monkeypatch, seconds=3600):
    """Make every instance look `seconds` old (moto stamps LaunchTime now)."""
    real = cloud.cluster_instances

    def aged(*a, **kw):
        from dataclasses import replace

        return [replace(i, launch_time=datetime.now(timezone.utc) - timedelta(seconds=seconds)) for i in real(*a, **kw)]

    monkeypatch.setattr(cloud, "cluster_instances", aged)


def test_sync_terminates_instances_of_powered_down_nodes(ctx, stack):
    ec2, _ = stack
    actions.resume(ctx, "cloud[001-002]")
    ctx.slurm.set("cloud001", "IDLE+CLOUD", ctx.slurm.addresses["cloud001"])  # registered, in use
    # cloud002: Slurm powered it down but the instance is still there (a suspend that failed)
    ctx.slurm.set("cloud002", "IDLE+CLOUD+POWERED_DOWN")
    report = actions.sync(ctx)
    assert [i.name for i in live(ec2)] == ["cloud001"]
    assert len(report.terminated) == 1 and "cloud002 is powered down" in next(iter(report.terminated.values()))
    assert ctx.slurm.powered_down == []


def test_sync_powers_down_nodes_whose_instance_vanished(ctx, stack):
    ec2, _ = stack
    actions.resume(ctx, "cloud[001-002]")
    for n in ("cloud001", "cloud002"):
        ctx.slurm.set(n, "ALLOCATED+CLOUD", ctx.slurm.addresses[n])
    victim = next(i for i in live(ec2) if i.name == "cloud002")
    ec2.terminate_instances(InstanceIds=[victim.id])  # a spot interruption: EC2 takes it back
    report = actions.sync(ctx)
    assert list(report.powered_down) == ["cloud002"]
    [(names, reason)] = ctx.slurm.powered_down
    assert names == ["cloud002"] and "instance gone" in reason
    assert [i.name for i in live(ec2)] == ["cloud001"]  # the healthy node is left alone


def test_sync_leaves_launches_in_flight_alone(ctx, stack):
    ec2, _ = stack
    actions.resume(ctx, "cloud001")
    ctx.slurm.set("cloud001", "MIXED+CLOUD+POWERING_UP", ctx.slurm.addresses["cloud001"])
    report = actions.sync(ctx)
    assert report.terminated == {} and ctx.slurm.powered_down == [] and len(live(ec2)) == 1


def test_sync_terminates_strays_only_after_the_grace(ctx, stack, monkeypatch):
    ec2, st = stack
    # An instance of the pool with no Name (a resume that died between RunInstances and tagging) and one whose
    # Name is no node of this cluster (max shrank): both strays.
    for name in (None, "cloud099"):
        tags = [*OURS, {"Key": "clusterctl:pool", "Value": "cloud"}]
        if name:
            tags.append({"Key": "Name", "Value": name})
        ec2.run_instances(MinCount=1, MaxCount=1, LaunchTemplate={"LaunchTemplateId": st.launch_template_id},
                          SubnetId=st.subnets["us-west-2a"], TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])
    # Something else in the account (another cluster's node): never touched.
    ec2.run_instances(MinCount=1, MaxCount=1, LaunchTemplate={"LaunchTemplateId": st.launch_template_id},
                      SubnetId=st.subnets["us-west-2a"],
                      TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "clusterctl:cluster", "Value": "other"},
                                                                             {"Key": "clusterctl:pool", "Value": "cloud"}]}])
    young = actions.sync(ctx)
    assert young.terminated == {} and len(live(ec2)) == 2
    _old(ctx, monkeypatch)
    old = actions.sync(ctx)
    assert len(old.terminated) == 2 and live(ec2) == []
    others = ec2.describe_instances(Filters=[{"Name": "tag:clusterctl:cluster", "Values": ["other"]},
                                             {"Name": "instance-state-name", "Values": ["running"]}])["Reservations"]
    assert len(others) == 1


def test_sync_leaves_an_image_builder_alone_and_down_terminates_it(ctx, stack, monkeypatch):
    """`image build`'s builder carries the pool's tag and no Name, like a stray of a resume that died before
    tagging, but a build takes longer than sync's grace: sync must not take it from under the converge. A builder
    an interrupted build left behind is the cluster's, and `down` terminates it before destroying the stack."""
    from clusterctl.engines.aws.burst.teardown import release_burst_instances
    from tests.engines.aws.burst.conftest import lab_plan

    ec2, st = stack
    tags = [*OURS, {"Key": "clusterctl:pool", "Value": "cloud"}, {"Key": "clusterctl:role", "Value": "image-builder"}]
    builder = ec2.run_instances(MinCount=1, MaxCount=1, LaunchTemplate={"LaunchTemplateId": st.launch_template_id},
                                SubnetId=st.subnets["us-west-2a"],
                                TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])["Instances"][0]
    _old(ctx, monkeypatch)
    assert actions.sync(ctx).terminated == {} and [i.id for i in live(ec2)] == [builder["InstanceId"]]
    released = release_burst_instances(lab_plan(), ctx.cluster_id, lambda m: None, poll_seconds=1)
    assert released == {builder["InstanceId"]: builder["InstanceId"]} and live(ec2) == []


def test_sync_keeps_the_instance_slurm_uses_when_there_are_two(ctx, stack):
    ec2, st = stack
    first = actions.resume(ctx, "cloud001").launched["cloud001"]
    ctx.slurm.set("cloud001", "IDLE+CLOUD", first["private_ip"])
    # A second launch for the same node (two resumes racing without tags to see each other)
    tags = [*OURS, {"Key": "clusterctl:pool", "Value": "cloud"},
            {"Key": "Name", "Value": "cloud001"}]
    ec2.run_instances(MinCount=1, MaxCount=1, LaunchTemplate={"LaunchTemplateId": st.launch_template_id},
                      SubnetId=st.subnets["us-west-2b"], TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])
    actions.sync(ctx)
    assert [i.id for i in live(ec2)] == [first["instance_id"]]


def test_sync_dry_run_changes_nothing(ctx, stack):
    ec2, _ = stack
    actions.resume(ctx, "cloud001")  # cloud001 still POWERED_DOWN in the fake Slurm: an orphan
    report = actions.sync(ctx, dry_run=True)
    assert len(report.terminated) == 1 and len(live(ec2)) == 1


# --- bootstrap payload -------------------------------------------------------------------------------------


def test_bootstrap_payload_carries_the_kit_and_no_slurm_files(ctx, settings, stack):
    from clusterctl.engines.aws.burst import bootstrap
    from tests.engines.aws.burst.conftest import HERE

    role_files = HERE.parents[3] / "playbooks" / "roles" / "burst" / "files"
    for f in ("bootstrap.sh", "clusterctl-spot-watch", "clusterctl-spot-watch.service"):
        (settings.kit_dir / f).write_bytes((role_files / f).read_bytes())
    (settings.kit_dir / "pools" / "cloud").mkdir(parents=True)
    (settings.kit_dir / "pools" / "cloud" / "nccl.env").write_text("NCCL_DEBUG=WARN\n")
    (settings.kit_dir / "slurmd-configless.conf").write_text("[Service]\n")
    settings.munge_key.write_bytes(b"k" * 1024)
    data = bootstrap.payload(ctx, "cloud002", "10.219.0.70")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = set(tar.getnames())
        env = tar.extractfile("node.env").read().decode()
        key = tar.getmember("munge.key")
        dropin = tar.getmember("slurmd-configless.conf")
    assert {"bootstrap.sh", "clusterctl-spot-watch", "clusterctl-spot-watch.service", "nccl.env",
            "slurmd-configless.conf", "munge.key", "node.env"} <= names
    # Configless: the node's slurmd fetches slurm.conf & co. from slurmctld; the payload carries none of them.
    assert not [n for n in names if n.startswith("slurm/")], names
    assert key.mode == 0o400 and dropin.mode == 0o644
    assert "NODE=cloud002\n" in env and "ADDRESS=10.219.0.70\n" in env and "CONTROLLER=burst-ctl\n" in env
    assert "CONTROLLER_ADDR=10.219.0.10\n" in env and "POOL=cloud\n" in env
    # The plan's user for aws nodes is Debian's admin (sudo); the lab overrides it with CLUSTERCTL_BURST_SSH_USER.
    argv = bootstrap.ssh_argv(ctx, "cloud002", "i-0123", "10.219.0.70")
    assert argv[-1] == "admin@10.219.0.70" and any("known_hosts.d/i-0123" in a for a in argv)


def test_sync_heals_nodes_a_failed_resume_left_down(ctx, stack):
    # ResumeTimeout marked them DOWN and ResumeFailProgram could not run (the AWS API hung): Slurm's own reason.
    ctx.slurm.states["cloud003"] = ctx.slurm.NodeState("cloud003", "DOWN+CLOUD+POWERED_DOWN", "cloud003", "ResumeTimeout reached")
    # An admin took cloud004 down on purpose: left alone.
    ctx.slurm.states["cloud004"] = ctx.slurm.NodeState("cloud004", "DOWN+CLOUD+POWERED_DOWN", "cloud004", "bad DIMM, ticket 42")
    report = actions.sync(ctx)
    assert list(report.powered_down) == ["cloud003"]
    [(names, reason)] = ctx.slurm.powered_down
    assert names == ["cloud003"] and "ResumeTimeout reached" in reason


# --- down ---------------------------------------------------------------------------------------------------


def test_down_terminates_burst_instances_and_strays_but_nothing_else(ctx, stack):
    from clusterctl.engines.aws.burst.teardown import release_burst_instances

    ec2, st = stack
    launched = actions.resume(ctx, "cloud[001-002]").launched

    def run(tags):
        return ec2.run_instances(MinCount=1, MaxCount=1, LaunchTemplate={"LaunchTemplateId": st.launch_template_id},
                                 SubnetId=st.subnets["us-west-2a"],
                                 TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])["Instances"][0]["InstanceId"]

    ours = list(OURS)
    stray = run(ours + [{"Key": "clusterctl:pool", "Value": "cloud"}])  # a resume that died before tagging the Name
    static = run(ours + [{"Key": "clusterctl:pool", "Value": "gpu"}, {"Key": "Name", "Value": "gpu001"}])
    other = run([{"Key": "clusterctl:cluster", "Value": "other"}, {"Key": "clusterctl:pool", "Value": "cloud"},
                 {"Key": "Name", "Value": "cloud001"}])
    said = []
    released = release_burst_instances(ctx.plan.plan, CLUSTER_ID, said.append, poll_seconds=1)
    assert released == {"cloud001": launched["cloud001"]["instance_id"], "cloud002": launched["cloud002"]["instance_id"],
                        stray: stray}
    states = {i["InstanceId"]: i["State"]["Name"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]}
    assert {states[i] for i in released.values()} == {"terminated"}  # waited for, not just asked
    assert states[static] == "running" and states[other] == "running"
    assert "terminating 3 burst instance(s) in us-west-2" in said[0]
    assert release_burst_instances(ctx.plan.plan, CLUSTER_ID, said.append, poll_seconds=1) == {}  # safe to repeat


def test_down_stops_before_the_destroy_when_terminating_fails(ctx, stack, monkeypatch):
    from clusterctl.engines.aws.burst import teardown

    actions.resume(ctx, "cloud001")
    monkeypatch.setattr(teardown.cloud, "terminate", lambda ec2, ids: ec2.terminate_instances(InstanceIds=["i-00000000"]))
    with pytest.raises(teardown.BurstTeardownFailed, match="the stack was not destroyed"):
        teardown.release_burst_instances(ctx.plan.plan, CLUSTER_ID, poll_seconds=1)


def test_a_namesake_clusters_instances_and_template_are_never_used_or_touched(ctx, stack):
    """Another stack's (or account's) cluster called `burst` too, with its own id: its instances carry node names
    of ours and its launch template our pool's tag. resume launches from our template only; sync (no grace),
    suspend, resume-fail and down's teardown terminate nothing of it."""
    import dataclasses

    from clusterctl.engines.aws.burst.teardown import release_burst_instances

    ec2, st = stack
    theirs_lt = ec2.create_launch_template(
        LaunchTemplateName="burst-cloud-lt-namesake", LaunchTemplateData={"ImageId": "ami-12c6146b"},
        TagSpecifications=[{"ResourceType": "launch-template",
                            "Tags": [*NAMESAKE, {"Key": "clusterctl:pool", "Value": "cloud"}]}])["LaunchTemplate"]
    theirs = []
    for name in ("cloud001", "cloud099", None):
        tags = [*NAMESAKE, {"Key": "clusterctl:pool", "Value": "cloud"}] + ([{"Key": "Name", "Value": name}] if name else [])
        theirs += [i["InstanceId"] for i in ec2.run_instances(
            MinCount=1, MaxCount=1, ImageId="ami-12c6146b", SubnetId=st.subnets["us-west-2a"],
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])["Instances"]]

    targets = cloud.launch_targets(ec2, "burst", CLUSTER_ID, ctx.plan.pool_config("cloud"))
    assert {t.launch_template_id for t in targets} == {st.launch_template_id} != {theirs_lt["LaunchTemplateId"]}
    ctx.settings = dataclasses.replace(ctx.settings, sync_grace_seconds=0)
    ours = actions.resume(ctx, "cloud002").launched["cloud002"]["instance_id"]
    assert {t["Key"]: t["Value"] for t in ec2.describe_tags(
        Filters=[{"Name": "resource-id", "Values": [ours]}])["Tags"]}["clusterctl:cluster-id"] == CLUSTER_ID

    actions.sync(ctx)  # cloud001 has no Slurm state here and cloud099 is no node: ours would both go
    actions.suspend(ctx, "cloud001")
    actions.resume_fail(ctx, "cloud001")
    release_burst_instances(ctx.plan.plan, CLUSTER_ID, poll_seconds=1)

    states = {i["InstanceId"]: i["State"]["Name"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]}
    assert [states[i] for i in theirs] == ["running"] * 3
    assert states[ours] == "terminated"  # the same calls did act on our own instance


def test_burst_refuses_to_run_without_a_cluster_id(settings, fake_slurm, stack):
    import dataclasses
    import logging

    from clusterctl.core.errors import ClusterctlError

    with pytest.raises(ClusterctlError, match="CLUSTERCTL_BURST_CLUSTER_ID"):
        actions.Context.create(dataclasses.replace(settings, cluster_id=""), logging.getLogger("t"), slurm=fake_slurm)
    with pytest.raises(ClusterctlError, match="no cluster id"):
        cloud.cluster_instances(stack[0], "burst", "")


# --- static spot nodes: replaced by sync, adopted by up ----------------------------------------------------


@pytest.fixture
def steady(stack, settings, fake_slurm, proxy):
    """The static spot node steady001 made as the Pulumi stack makes it, and a Context whose plan.json names its
    address (as `up` renders it from the stack's outputs), talking to EC2 through the fault proxy (which reports an
    instance the test puts in proxy.reclaimed as one EC2 took back). Returns (ctx, instance id, address)."""
    import logging

    from clusterctl.compile import compile_plan
    from clusterctl.compile.model import LiveFacts
    from clusterctl.engines.aws.burst.actions import Context
    from clusterctl.engines.aws.burst.plan import BurstPlan
    from clusterctl.render import to_json
    from clusterctl.validate import load_valid
    from tests.engines.aws.burst.conftest import HERE, lab_plan
    from tests.engines.aws.burst.harness import create_static_nodes

    ec2, st = stack
    (iid, address), = create_static_nodes(ec2, lab_plan(), st, "steady").values()
    plan = compile_plan(load_valid(HERE / "lab-hybrid.yaml"), LiveFacts(addresses={"steady001": address}))
    settings.plan.write_text(to_json(plan.to_dict()))
    fake_slurm.set("steady001", "IDLE", address)
    ec2, ec2_launch = cloud.clients("us-west-2", endpoint_url=proxy.url)  # the product's clients (no SDK retries)
    ctx = Context(settings, BurstPlan.load(settings.plan), fake_slurm, ec2, ec2_launch, logging.getLogger("burst.test"))
    return ctx, iid, address


def _instances(ec2, name):
    resp = ec2.describe_instances(Filters=[{"Name": "tag:Name", "Values": [name]}])
    return sorted((i for r in resp["Reservations"] for i in r["Instances"]), key=lambda i: i["LaunchTime"])


def _reclaim(ctx, proxy, iid):
    """EC2 takes the instance back: terminated, and reported with EC2's spot StateReason from now on."""
    ctx.ec2.terminate_instances(InstanceIds=[iid])
    proxy.reclaimed.add(iid)


def test_sync_replaces_a_static_spot_node_ec2_took_back_at_its_address(steady, proxy):
    """EC2 takes steady001's instance back: sync launches one replacement with the same Name (at launch), address,
    pool, market and first AZ, from the pool's launch template, tagged as a replacement, and only one."""
    ctx, iid, address = steady
    ec2 = ctx.ec2
    assert actions.sync(ctx).replaced == {}  # running: nothing to do
    _reclaim(ctx, proxy, iid)
    report = actions.sync(ctx)
    assert list(report.replaced) == ["steady001"] and report.replaced["steady001"]["private_ip"] == address
    new = _instances(ec2, "steady001")[-1]
    tags = {t["Key"]: t["Value"] for t in new["Tags"]}
    assert new["InstanceId"] == report.replaced["steady001"]["instance_id"] != iid
    assert new["PrivateIpAddress"] == address and new["Placement"]["AvailabilityZone"] == "us-west-2a"
    assert tags["clusterctl:pool"] == "steady" and tags["clusterctl:cluster-id"] == CLUSTER_ID
    assert tags["clusterctl:role"] == "replacement" and new["InstanceLifecycle"] == "spot"
    assert [c.market for c in proxy.calls] == ["spot"]
    assert actions.sync(ctx).replaced == {} and len(_instances(ec2, "steady001")) == 2


def test_sync_leaves_a_static_node_terminated_by_anyone_but_ec2_to_up(steady):
    """Pulumi removing a node (count lowered, its converge not yet done) or a person terminating it: the instance's
    reason is Client.UserInitiatedShutdown, and sync must not bring back what someone removed."""
    ctx, iid, _ = steady
    ctx.ec2.terminate_instances(InstanceIds=[iid])
    report = actions.sync(ctx)
    assert report.replaced == {} and report.not_replaced == {} and len(_instances(ctx.ec2, "steady001")) == 1


@pytest.mark.parametrize("cloud_pool", [{"fallback_markets": ["on-demand"]}])
def test_a_failed_replacement_is_tried_again_by_the_next_sync_in_its_own_market(steady, proxy, cloud_pool):
    """No spot capacity in the node's AZ: no other AZ (its address is in the first AZ's subnet) and no fallback
    market (the stack declares spot; `up` would recreate an on-demand one under its jobs); the next sync launches."""
    ctx, iid, address = steady
    _reclaim(ctx, proxy, iid)
    proxy.failing_azs = {"us-west-2a"}
    report = actions.sync(ctx)
    assert report.replaced == {} and "InsufficientInstanceCapacity" in report.not_replaced["steady001"]
    assert [(c.availability_zone, c.market) for c in proxy.calls] == [("us-west-2a", "spot")]
    proxy.failing_azs = set()
    assert actions.sync(ctx).replaced["steady001"]["private_ip"] == address


def test_a_replaced_node_is_resumed_only_from_a_drain_of_ours(steady):
    """After the bootstrap: the spot watcher's drain is lifted, an admin's is kept."""
    from clusterctl.engines.aws.burst.bootstrap import _resume_replaced

    ctx, _, _ = steady
    for reason, lifted in (("spot interruption: terminate at 2026-12-07T03:00:00Z", ["steady001"]),
                           ("ops: replacing a cable", [])):
        ctx.slurm.resumed.clear()
        ctx.slurm.states["steady001"] = ctx.slurm.NodeState("steady001", "DOWN+DRAIN", None, reason)
        _resume_replaced(ctx, ["steady001"])
        assert ctx.slurm.resumed == lifted, reason


def test_a_replacement_that_cannot_be_set_up_is_terminated_and_its_node_drained_not_powered_down(steady, proxy, monkeypatch):
    from clusterctl.engines.aws.burst import bootstrap

    ctx, iid, _ = steady
    _reclaim(ctx, proxy, iid)
    new = actions.sync(ctx).replaced["steady001"]["instance_id"]
    monkeypatch.setattr(bootstrap, "bootstrap_one", lambda c, n, i, d: "no SSH to it within 270s (port 22 closed)")
    assert bootstrap.bootstrap_nodes(ctx, ["steady001"])["steady001"].startswith("no SSH")
    assert _instances(ctx.ec2, "steady001")[-1]["State"]["Name"] in ("shutting-down", "terminated")
    assert ctx.slurm.powered_down == [] and ctx.slurm.drained[0][0] == ["steady001"]
    assert "`clusterctl up` recreates it" in ctx.slurm.drained[0][1]
    assert actions.sync(ctx).replaced == {}  # terminated by us, not by EC2: not launched again
    assert new != iid


def test_down_terminates_a_replacement_no_up_adopted(steady, proxy):
    from clusterctl.engines.aws.burst.teardown import release_burst_instances

    ctx, iid, _ = steady
    _reclaim(ctx, proxy, iid)
    new = actions.sync(ctx).replaced["steady001"]["instance_id"]
    released = release_burst_instances(ctx.plan.plan, ctx.cluster_id, lambda m: None, poll_seconds=1)
    assert released == {"steady001": new}


class ExportedStack:
    """What adopt_replacements uses of a Pulumi Automation API stack (export_stack / import_stack), over a
    deployment in Pulumi's format; the pulumi CLI behind the real ones cannot be installed here."""

    def __init__(self, deployment: dict):
        from pulumi import automation as auto

        self.exported = auto.Deployment(version=3, deployment=deployment)
        self.imported: list = []

    def export_stack(self):
        return self.exported

    def import_stack(self, deployment):
        self.imported.append(deployment)


def _deployment(node_ids: dict[str, str]) -> dict:
    """A stack export's `deployment` with the cluster's instance resources (component parent, provider, outputs),
    shaped as `pulumi stack export` writes them."""
    prefix = "urn:pulumi:hybrid::clusterctl::clusterctl:aws:NodePool$aws:ec2/instance:Instance::"
    return {"manifest": {"time": "2026-12-07T00:00:00Z", "magic": "x", "version": "v3.140.0"},
            "resources": [{"urn": prefix + name, "custom": True, "id": iid, "type": "aws:ec2/instance:Instance",
                           "inputs": {"instanceType": "p5.48xlarge", "tags": {"Name": name}},
                           "outputs": {"id": iid, "privateIp": "10.0.0.1", "tags": {"Name": name}},
                           "parent": "urn:pulumi:hybrid::clusterctl::clusterctl:aws:NodePool::steady"}
                          for name, iid in node_ids.items()]}


def test_up_adopts_the_replacement_instead_of_creating_a_second_instance(steady, proxy):
    """Before its refresh, `up` points the stack's instance of steady001 at the replacement sync launched (found by
    the cluster's tags, the Name and the replacement role), so the refresh reads it and nothing is created; a node
    whose recorded instance is the running one is left as it is."""
    from clusterctl.engines.aws.adopt import adopt_replacements

    ctx, iid, address = steady
    _reclaim(ctx, proxy, iid)
    new = actions.sync(ctx).replaced["steady001"]["instance_id"]
    stack = ExportedStack(_deployment({"steady001": iid}))
    adopted = adopt_replacements(stack, ctx.ec2, ctx.plan.cluster, ctx.cluster_id, ["steady001"])
    assert {n: (a.recorded, a.instance_id, a.address) for n, a in adopted.items()} == {"steady001": (iid, new, address)}
    (dep,) = stack.imported
    (res,) = dep.deployment["resources"]
    assert res["id"] == res["outputs"]["id"] == new and dep.version == 3
    assert stack.exported.deployment["resources"][0]["id"] == iid  # the export itself is not edited in place

    again = ExportedStack(_deployment({"steady001": new}))
    assert adopt_replacements(again, ctx.ec2, ctx.plan.cluster, ctx.cluster_id, ["steady001"]) == {} and again.imported == []


def test_up_adopts_only_a_replacement(steady):
    """An instance named like the node that sync did not launch (no replacement role) is never made the stack's."""
    from clusterctl.engines.aws.adopt import adopt_replacements

    ctx, iid, _ = steady
    stack = ExportedStack(_deployment({"steady001": "i-0123456789abcdef0"}))  # the recorded one is gone
    assert adopt_replacements(stack, ctx.ec2, ctx.plan.cluster, ctx.cluster_id, ["steady001"]) == {}
    assert stack.imported == []


def test_adopt_rewrites_only_gone_instances_of_the_named_nodes():
    from clusterctl.engines.aws.adopt import adopt

    dep = _deployment({"steady001": "i-old", "steady002": "i-two", "steady003": "i-three", "steady004": "i-four",
                       "hybrid-ctl": "i-ctl"})
    dep["resources"][2]["delete"] = True  # pending delete: Pulumi's to finish, not ours to point elsewhere
    running = {"steady001": "i-new", "steady002": "i-two", "steady003": "i-3b", "hybrid-ctl": "i-other"}
    out, adopted = adopt(dep, ["steady001", "steady002", "steady003", "steady004"], running)
    assert adopted == {"steady001": ("i-old", "i-new")}
    assert [r["id"] for r in out["resources"]] == ["i-new", "i-two", "i-three", "i-four", "i-ctl"]
