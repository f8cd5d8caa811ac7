"""Nodes leave a cluster by drain, never by kill. Whatever removes a node (a smaller count, hosts dropped, a pool
removed, an elastic max lowered), `up` and `apply` first drain it and wait for its jobs, before any provider stops,
terminates or forgets it. A job still running at the timeout stops the command (exit 1, the job and node named,
nothing else changed; the nodes stay drained, so a rerun goes on waiting where this one stopped). Only --force
goes ahead: Slurm requeues the jobs (they run again elsewhere), and the command says which."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from typing import TYPE_CHECKING, Callable

from clusterctl.core import hostlist
from clusterctl.core.errors import ClusterctlError
from clusterctl.engines.ssh.remote import RemoteError
from clusterctl.ops.draining import Job, drain, jobs_on, resume, wait_drained
from clusterctl.ops.smoke import node_states
from clusterctl.render import layout

if TYPE_CHECKING:
    from collections.abc import Sequence

    from clusterctl.compile.model import ClusterPlan
    from clusterctl.engines.provider import Provider
    from clusterctl.engines.ssh.remote import Remote
    from clusterctl.state import ClusterState

WHY = "leaving the cluster"  # the drain reason's text; a node the spec takes back is resumed from it (resume_returning)
FORCE_GRACE = 120.0  # --force: how long requeued jobs may take to leave the nodes


class JobsHoldLeavingNodes(ClusterctlError):
    pass


def before_changes(plan: ClusterPlan, state: ClusterState, providers: Sequence[Provider], force: bool,
                   timeout: float | None, log: Callable[[str], None]) -> dict | None:
    """up's first step on an existing cluster, before any provider changes anything: nodes the spec drops are drained
    and their jobs waited for (vacate), and nodes a stopped shrink drained that the spec keeps after all are resumed.
    None when the cluster was never applied or its controller is not running (no job can hold a node then)."""
    from clusterctl.ops.access import access_for, controller_running

    applied = state.applied().files
    if not applied:
        return None
    target = applied_controller(applied, plan)
    access = access_for(target, state, log, providers)
    if not target.controller.address or not controller_running(access, target):
        return None
    ctl = access.remote(target.controller)
    back = resume_returning(ctl, plan)
    if back:
        log(f"resumed {hostlist.compress(back)}: drained to leave the cluster by an earlier run, kept by this spec")
    gone = leaving_nodes(applied, plan)
    return vacate(ctl, gone, timeout or plan.slurm.drain_timeout, force, log) if gone else None


def leaving_nodes(applied: dict[str, str], plan: ClusterPlan) -> list[str]:
    """Nodes of the applied build that the new plan no longer has, in the applied build's order."""
    text = applied.get(layout.PLAN_JSON)
    if not text:
        return []
    keep = {n.name for n in plan.nodes}
    return [n["name"] for n in json.loads(text)["nodes"] if n["name"] not in keep]


def applied_controller(applied: dict[str, str], plan: ClusterPlan) -> ClusterPlan:
    """The plan with its controller's address as last applied where the new plan has none yet (a cloud controller's
    address comes back from the stack, which is only touched after the nodes have left)."""
    if plan.controller.address or not applied.get(layout.PLAN_JSON):
        return plan
    address = json.loads(applied[layout.PLAN_JSON])["controller"].get("address")
    return replace(plan, controller=replace(plan.controller, address=address)) if address else plan


def vacate(ctl: Remote, nodes: list[str], timeout: float, force: bool, log: Callable[[str], None]) -> dict:
    """Drain `nodes` and wait for their jobs (see the module docstring). Returns what happened, for up's report:
    {"nodes", "waited_for": [jobs seen], "requeued": [jobs requeued by --force]}. Nodes slurmctld no longer knows
    (an earlier run removed them from slurm.conf) have no job and are passed over."""
    known = sorted(node_states(ctl, nodes))
    entry: dict = {"nodes": nodes, "waited_for": [], "requeued": []}
    if not known:
        return entry
    hl = hostlist.compress(known)
    drain(ctl, known, WHY)
    holding = jobs_on(ctl, known)
    if holding:
        entry["waited_for"] = [j.describe() for j in holding]
        log(f"draining {hl} ({WHY}); waiting for " + "; ".join(entry["waited_for"]))
    else:
        log(f"draining {hl} ({WHY}): no job on them")
    if force:
        requeued = _requeue(ctl, holding, log)
        entry["requeued"] = [j.describe() for j in requeued]
        timeout = FORCE_GRACE

    def waiting(jobs: list[Job], waited: float) -> None:
        if jobs:
            log(f"still draining {hl} after {waited:.0f}s of {timeout:.0f}s: " + "; ".join(j.describe() for j in jobs))

    left = wait_drained(ctl, known, timeout, waiting)
    if left:
        raise JobsHoldLeavingNodes(
            f"{hl} still run job(s) after {timeout:.0f}s of drain: " + "; ".join(j.describe() for j in left)
            + f". Nothing else was changed; {hl} stay drained (no new job starts there). Run the command again "
            "to go on waiting (--drain-timeout SECONDS waits longer), or pass --force to requeue the jobs "
            "(Slurm runs them again on other nodes)")
    return entry


def _requeue(ctl: Remote, jobs: list[Job], log: Callable[[str], None]) -> list[Job]:
    """--force: the jobs go back to the queue (a batch job runs again from its start or its last checkpoint on other
    nodes; the drain keeps it off these). Slurm refuses this for jobs that cannot be requeued (--no-requeue,
    interactive allocations): those are cancelled, and said so."""
    if not jobs:
        return []
    ids = " ".join(shlex.quote(j.id.split("_")[0]) for j in jobs)
    r = ctl.run(f"scontrol requeue {ids}", timeout=60, check=False)
    requeued = []
    for j in jobs:
        if r.returncode == 0 or j.id not in r.stderr:
            requeued.append(j)
            log(f"--force: requeued {j.describe()}; Slurm runs it again on other nodes")
        else:
            ctl.run(f"scancel {shlex.quote(j.id)}", timeout=60, check=False)
            log(f"--force: {j.describe()} cannot be requeued ({r.stderr.strip()[-200:]}); cancelled")
    return requeued


def resume_returning(ctl: Remote, plan: ClusterPlan) -> list[str]:
    """Nodes an earlier, stopped shrink drained that the spec keeps after all: resumed (only our own drains)."""
    try:
        r = ctl.run("sinfo -h -N -t drain -o '%N|%E'", timeout=30, check=False)
    except RemoteError:
        return []
    keep = {n.name for n in plan.nodes}
    back = sorted({p[0] for p in (ln.split("|", 1) for ln in r.stdout.splitlines())
                   if len(p) == 2 and p[0] in keep and p[1].strip() == f"clusterctl: {WHY}"})
    if back:
        resume(ctl, back)
    return back
