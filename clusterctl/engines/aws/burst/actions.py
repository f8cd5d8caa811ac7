"""resume, suspend, resume-fail and sync: what each power-saving call does, as functions of a Context.

The Context carries the plan, the Slurm and EC2 handles and the run's logger, so tests drive the same code with
moto and a fake Slurm, and the CLI with the real ones.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterable

from clusterctl.core import hostlist
from clusterctl.engines.aws.burst import ec2 as cloud
from clusterctl.engines.aws.burst.plan import BurstPlan
from clusterctl.engines.aws.burst.runlog import locked
from clusterctl.engines.aws.burst.settings import Settings
from clusterctl.engines.aws.burst.slurm import Slurm, SlurmError
from clusterctl.core.errors import ClusterctlError

REASON_PREFIX = "clusterctl burst"
# DOWN reasons that are Slurm's or ours, never an admin's: sync may put such powered-down nodes back to power saving.
HEALABLE_REASONS = ("ResumeTimeout reached", REASON_PREFIX)
# Drain reasons a replaced static node is resumed from: the spot watcher's (playbooks/roles/burst/files/
# clusterctl-spot-watch: "spot interruption: <action> at <time>") and ours. An admin's drain is never lifted.
RESUMABLE_REASONS = ("spot interruption:", REASON_PREFIX)


@dataclass
class Context:
    settings: Settings
    plan: BurstPlan
    slurm: Slurm
    ec2: object
    ec2_launch: object
    log: logging.Logger

    @classmethod
    def create(cls, settings: Settings, log: logging.Logger, slurm: Slurm | None = None, region: str | None = None) -> Context:
        plan = BurstPlan.load(settings.plan)
        pools = plan.elastic_pools() or [plan.pool_of(n) for n in sorted(plan.replaceable_nodes)]
        if not pools and region is None:
            raise ClusterctlError(f"cluster {plan.cluster} has no elastic aws pool and no static spot node: "
                                  f"nothing to burst into or replace")
        if not settings.cluster_id:  # written to burst.env by `clusterctl up` (the burst role)
            raise ClusterctlError(f"no cluster id (CLUSTERCTL_BURST_CLUSTER_ID) in the burst settings of "
                                  f"{plan.cluster}: run `clusterctl up` again; without it no instance can be told "
                                  f"apart from another cluster's of the same name")
        region = region or pools[0].region
        assert region is not None  # elastic pools are aws pools; compile gives each its region
        ec2, ec2_launch = cloud.clients(region)
        return cls(settings, plan, slurm or Slurm(log=log), ec2, ec2_launch, log)

    @property
    def cluster_id(self) -> str:
        return self.settings.cluster_id


def parse_nodes(ctx: Context, expr: str) -> list[str]:
    """The hostlist Slurm passed, less nodes that are not cloud nodes of this cluster (logged, left alone)."""
    try:
        names = hostlist.expand(expr)
    except hostlist.HostlistError as e:
        raise ClusterctlError(f"bad hostlist {expr!r}: {e}") from None
    ours = [n for n in names if n in ctx.plan.cloud_nodes]
    other = [n for n in names if n not in ctx.plan.cloud_nodes]
    if other:
        ctx.log.warning(f"ignoring {hostlist.compress(other)}: not cloud nodes of an elastic pool of {ctx.plan.cluster}")
    return ours


# --- resume ------------------------------------------------------------------------------------------------


@dataclass
class Group:
    job_id: int | None
    nodes: list[str]


def read_resume_file(path: str | None) -> dict | None:
    """SLURM_RESUME_FILE: {"jobs": [{"job_id", "nodes"|"nodes_resume", ...}], "all_nodes"|"all_nodes_resume"}
    (22.05 names the keys nodes/all_nodes, 23.02+ nodes_resume/all_nodes_resume)."""
    if not path:
        return None
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def job_groups(names: list[str], data: dict | None) -> list[Group]:
    """One group per job (its launch is all or nothing), then the nodes no job asked for (power_up by hand)."""
    wanted = set(names)
    seen: set[str] = set()
    groups = []
    for job in (data or {}).get("jobs") or []:
        expr = job.get("nodes_resume") or job.get("nodes")
        if not expr:
            continue
        try:
            members = [n for n in hostlist.expand(expr) if n in wanted and n not in seen]
        except hostlist.HostlistError:
            continue
        if members:
            groups.append(Group(job.get("job_id"), members))
            seen.update(members)
    rest = [n for n in names if n not in seen]
    if rest:
        groups.append(Group(None, rest))
    return groups


@dataclass
class ResumeReport:
    launched: dict[str, dict] = field(default_factory=dict)  # node -> {instance_id, private_ip, availability_zone}
    reused: dict[str, dict] = field(default_factory=dict)  # node -> instance already running for it (a repeated call)
    failed: dict[str, str] = field(default_factory=dict)  # node -> reason it went back to POWER_DOWN
    attempts: list = field(default_factory=list)  # ec2.Attempt of every RunInstances call

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def ready(self) -> dict[str, dict]:
        return {**self.reused, **self.launched}


def _live_by_name(ctx: Context, names: list[str]) -> dict[str, cloud.Instance]:
    out: dict[str, cloud.Instance] = {}
    live = cloud.cluster_instances(ctx.ec2, ctx.plan.cluster, ctx.cluster_id, names, states=("pending", "running"))
    for inst in live:
        if inst.name is None:
            continue  # asked for by name: an instance without a Name tag is no node's
        cur = out.get(inst.name)
        if cur is None or _launched(inst) > _launched(cur):
            out[inst.name] = inst
    return out


def _launched(i: cloud.Instance) -> float:
    return i.launch_time.timestamp() if i.launch_time else 0.0


def resume(ctx: Context, expr: str, resume_data: dict | None = None) -> ResumeReport:
    names = parse_nodes(ctx, expr)
    report = ResumeReport()
    if not names:
        return report
    log = ctx.log
    with locked(ctx.settings.state_dir, exclusive=False):
        existing = _live_by_name(ctx, names)
        targets: dict[str, list] = {}
        for group in job_groups(names, resume_data):
            what = f"job {group.job_id}" if group.job_id is not None else "no job"
            by_pool: dict[str, list[str]] = defaultdict(list)
            for n in group.nodes:
                if n in existing:
                    i = existing[n]
                    report.reused[n] = {"instance_id": i.id, "private_ip": i.private_ip, "availability_zone": i.availability_zone}
                    log.info(f"{n}: instance {i.id} ({i.private_ip}) already {i.state}; reusing it")
                else:
                    by_pool[ctx.plan.pool_of(n).name].append(n)
            launched: dict[str, dict] = {}
            failure: cloud.LaunchFailed | None = None
            for pool_name, pnames in by_pool.items():
                pool = ctx.plan.pool_config(pool_name)
                log.info(f"{what}: launching {hostlist.compress(pnames)} ({len(pnames)} x {pool.instance_type}, "
                         f"{' then '.join(cloud.markets(pool))}, AZs {', '.join(pool.availability_zones)})")
                try:
                    if pool_name not in targets:
                        targets[pool_name] = cloud.launch_targets(ctx.ec2, ctx.plan.cluster, ctx.cluster_id, pool)
                    nodes, attempts = cloud.launch_with_failover(ctx.ec2_launch, pool, ctx.plan.cluster, ctx.cluster_id,
                                                                 pnames, targets[pool_name], log=log.warning)
                    report.attempts += attempts
                    launched.update(nodes)
                    log.info(f"{what}: launched " + ", ".join(
                        f"{n}={v['instance_id']}@{v['private_ip']} ({v['availability_zone']})" for n, v in sorted(nodes.items())))
                except cloud.LaunchFailed as e:
                    report.attempts += e.attempts
                    failure = e
                    break
            if failure is not None:
                if launched:  # all or nothing per job: the pools that did launch give their instances back
                    ids = [v["instance_id"] for v in launched.values()]
                    log.warning(f"{what}: terminating {len(ids)} instance(s) of the job's other pools: {', '.join(ids)}")
                    cloud.terminate(ctx.ec2, ids)
                where = ", ".join(dict.fromkeys(a.availability_zone for a in failure.attempts)) or "-"
                tried_markets = list(dict.fromkeys(a.market for a in failure.attempts))
                if len(tried_markets) > 1:
                    where += "; " + ", ".join(tried_markets)
                reason = f"{REASON_PREFIX}: launch failed: {failure.code} (tried {where})"
                log.error(f"{what}: {hostlist.compress(group.nodes)} back to POWER_DOWN: {failure}")
                _power_down(ctx, group.nodes, reason)
                report.failed.update({n: reason for n in group.nodes})
                continue
            report.launched.update(launched)
        for n, v in sorted(report.ready.items()):
            if not v.get("private_ip"):
                continue
            try:
                ctx.slurm.set_address(n, v["private_ip"])
            except SlurmError as e:  # slurmd's registration sets it too (cloud_reg_addrs)
                log.warning(f"{n}: could not set NodeAddr {v['private_ip']}: {e}")
    return report


def _power_down(ctx: Context, names: list[str], reason: str) -> None:
    _tell_slurm(ctx, "power down", ctx.slurm.power_down, names, reason)


def _drain(ctx: Context, names: list[str], reason: str) -> None:
    _tell_slurm(ctx, "drain", ctx.slurm.drain, names, reason)


def _tell_slurm(ctx: Context, what: str, call: Callable[[list[str], str], None], names: list[str], reason: str) -> None:
    """A Slurm update that must not stop the run (the cloud side is done): a failure is logged with the nodes."""
    if not names:
        return
    try:
        call(names, reason)
    except SlurmError as e:
        ctx.log.error(f"could not {what} {hostlist.compress(names)}: {e}")


# --- suspend / resume-fail ---------------------------------------------------------------------------------


def suspend(ctx: Context, expr: str) -> list[str]:
    """Terminate the nodes' instances (found by cluster + Name tag). Slurm already has them powering down."""
    names = parse_nodes(ctx, expr)
    if not names:
        return []
    with locked(ctx.settings.state_dir, exclusive=False):
        insts = cloud.cluster_instances(ctx.ec2, ctx.plan.cluster, ctx.cluster_id, names)
        ids = cloud.terminate(ctx.ec2, [i.id for i in insts])
    if ids:
        ctx.log.info(f"terminated {', '.join(f'{i.name}={i.id}' for i in insts)}")
    missing = sorted(set(names) - {i.name for i in insts})
    if missing:
        ctx.log.info(f"no live instance for {hostlist.compress(missing)} (already gone)")
    return ids


def resume_fail(ctx: Context, expr: str, why: str = "did not register within ResumeTimeout") -> list[str]:
    """Nodes Slurm gave up on: terminate what was launched, back to POWER_DOWN with the reason (not DOWN)."""
    names = parse_nodes(ctx, expr)
    if not names:
        return []
    ids = suspend(ctx, expr)
    reason = f"{REASON_PREFIX}: resume failed: {why}"
    ctx.log.error(f"{hostlist.compress(names)}: {why}; back to POWER_DOWN")
    _power_down(ctx, names, reason)
    return ids


# --- sync --------------------------------------------------------------------------------------------------


@dataclass
class SyncReport:
    terminated: dict[str, str] = field(default_factory=dict)  # instance id -> why
    powered_down: dict[str, str] = field(default_factory=dict)  # node -> why (POWER_DOWN; DOWN ones back to service)
    kept: list[str] = field(default_factory=list)  # instance ids left running
    replaced: dict[str, dict] = field(default_factory=dict)  # static spot node -> its new instance (launch_nodes info)
    not_replaced: dict[str, str] = field(default_factory=dict)  # static spot node -> why its launch failed (tried again)


def sync(ctx: Context, dry_run: bool = False) -> SyncReport:
    """Reconcile Slurm with the cloud. Instances are listed before node states are read: a launch that starts in
    between leaves its nodes POWERING_UP, which sync never touches."""
    report = SyncReport()
    plan = ctx.plan
    elastic = {p.name for p in plan.elastic_pools()}
    grace = ctx.settings.sync_grace_seconds
    with locked(ctx.settings.state_dir, exclusive=True):
        instances = cloud.cluster_instances(ctx.ec2, plan.cluster, ctx.cluster_id)
        states = ctx.slurm.nodes(list(plan.cloud_nodes))
        by_node: dict[str, list[cloud.Instance]] = defaultdict(list)
        for i in instances:
            if i.pool not in elastic or i.name in plan.static_nodes or i.image_builder:
                continue  # static nodes and the controller belong to the Pulumi stack, builders to `image build`
            if i.name in plan.cloud_nodes:
                by_node[i.name].append(i)
            elif i.age() >= grace:
                report.terminated[i.id] = (f"no Slurm node named {i.name}" if i.name
                                           else f"untagged for {int(i.age())}s (a launch that died before tagging)")
            else:
                report.kept.append(i.id)
        down: dict[str, list[str]] = defaultdict(list)
        for name in sorted(plan.cloud_nodes):
            st, live = states.get(name), by_node.get(name, [])
            if st is None:
                for i in live:
                    report.terminated[i.id] = f"Slurm has no node {name}"
            elif st.powering_up:
                report.kept += [i.id for i in live]  # launch or bootstrap in flight; ResumeTimeout guards it
            elif st.powered_down or st.powering_down:
                for i in live:
                    report.terminated[i.id] = f"{name} is powered down in Slurm ({st.state})"
                if st.powered_down and st.base == "DOWN" and (st.reason or "").startswith(HEALABLE_REASONS):
                    # A failed resume whose ResumeFailProgram could not run (e.g. the AWS API hung): not DOWN for good.
                    why = f"{REASON_PREFIX}: back to power saving after: {st.reason}"
                    down[why].append(name)
                    report.powered_down[name] = why
            elif not live:
                why = f"{REASON_PREFIX}: instance gone (spot interruption or terminated outside Slurm)"
                down[why].append(name)
                report.powered_down[name] = why
            else:
                keep = next((i for i in live if st.addr and i.private_ip == st.addr), None) or max(live, key=_launched)
                report.kept.append(keep.id)
                for i in live:
                    if i is not keep:
                        report.terminated[i.id] = f"second instance for {name} (Slurm uses {keep.id})"
        for iid, why in sorted(report.terminated.items()):
            ctx.log.info(f"{'would terminate' if dry_run else 'terminating'} {iid}: {why}")
        for why, names in down.items():
            ctx.log.info(f"{'would power down' if dry_run else 'powering down'} {hostlist.compress(names)}: {why}")
        if not dry_run:
            cloud.terminate(ctx.ec2, list(report.terminated))
            for why, names in down.items():
                _power_down(ctx, names, why)
        replace_static(ctx, report, dry_run)
    ctx.log.info(f"sync: {len(instances)} instance(s), {len(report.terminated)} terminated, "
                 f"{len(report.powered_down)} node(s) powered down, {len(report.kept)} kept, "
                 f"{len(report.replaced)} static node(s) replaced")
    return report


# --- static spot nodes -------------------------------------------------------------------------------------


def static_to_replace(nodes: Iterable[str], instances: list[cloud.Instance]) -> dict[str, cloud.Instance]:
    """Static spot node -> the instance EC2 took back: nodes whose newest instance EC2 reclaimed (StateReason
    Server.SpotInstanceTermination) and that have no other one (a live one, or one still shutting down and holding
    the address). A node whose instance anyone else terminated (Pulumi removing it, a person, a failed bootstrap) or
    that EC2 no longer lists is left to `up`."""
    wanted = set(nodes)
    by_name: dict[str, list[cloud.Instance]] = defaultdict(list)
    for i in instances:
        if i.name in wanted:
            by_name[i.name].append(i)
    out = {}
    for name in sorted(by_name):
        insts = by_name[name]
        if any(i.state != "terminated" for i in insts):
            continue
        newest = max(insts, key=_launched)
        if newest.state_reason == cloud.SPOT_RECLAIMED:
            out[name] = newest
    return out


def replace_static(ctx: Context, report: SyncReport, dry_run: bool = False) -> None:
    """Launch a replacement for each static spot node EC2 took back: the same name, the address slurm.conf names
    (its primary interface, in the pool's first AZ where static nodes live), the pool's launch template; the
    bootstrap kit then makes it the node (cli sync starts it). The next `up` adopts the instance into its stack
    (engines/aws/adopt.py) instead of creating a second one."""
    nodes = ctx.plan.replaceable_nodes
    if not nodes:
        return
    seen = cloud.cluster_instances(ctx.ec2, ctx.plan.cluster, ctx.cluster_id, list(nodes),
                                   states=(*cloud.LIVE_STATES, "shutting-down", "terminated"))
    targets: dict[str, list[cloud.LaunchTarget]] = {}
    for name, gone in static_to_replace(nodes, seen).items():
        node = nodes[name]
        assert node.pool is not None and node.address is not None  # replaceable_nodes holds pool nodes with addresses
        # The pool's own market only: the stack declares it, and a replacement on a fallback market would be
        # replaced by `up` (a market change recreates an instance) under its jobs once adopted.
        pool = dataclasses.replace(ctx.plan.pool_config(node.pool), fallback_markets=())
        ctx.log.info(f"{'would replace' if dry_run else 'replacing'} {name}: EC2 took back {gone.id} "
                     f"({gone.state_reason}); a new {pool.instance_type} at {node.address}")
        if dry_run:
            continue
        try:
            if pool.name not in targets:  # the first AZ only: the node's address is in its subnet
                targets[pool.name] = cloud.launch_targets(ctx.ec2, ctx.plan.cluster, ctx.cluster_id, pool)[:1]
            got, _ = cloud.launch_with_failover(ctx.ec2_launch, pool, ctx.plan.cluster, ctx.cluster_id, [name],
                                                targets[pool.name], log=ctx.log.warning, private_ip=node.address,
                                                role=cloud.REPLACEMENT)
        except cloud.LaunchFailed as e:
            report.not_replaced[name] = str(e)
            ctx.log.error(f"{name}: no replacement launched ({e}); the next sync tries again")
            continue
        report.replaced.update(got)
        ctx.log.info(f"{name}: replaced by {got[name]['instance_id']} at {got[name]['private_ip']}")

