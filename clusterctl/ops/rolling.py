"""Rolling changes: a change whose policy is `drain` is applied batch by batch. Each batch is drained (its jobs
finish), converged, passes the node health check (the program slurmd runs, in --dry-run) and is resumed before the
next is touched, so never more than one batch is out of service. A batch that fails its converge or its health check
stays drained and the rollout stops there: the rest of the cluster keeps running the old configuration.
The controller goes first (it only reloads); nodes the change does not touch are converged live at the end."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from clusterctl.core import hostlist
from clusterctl.engines.ansible.result import Failure, RunResult, merge
from clusterctl.ops.draining import drain, resume, wait_drained
from clusterctl.compile.model import ClusterPlan
from clusterctl.diff.report import PlanReport
from clusterctl.render import layout

if TYPE_CHECKING:
    from rich.console import Console

    from clusterctl.engines.ssh.remote import Remote
    from clusterctl.ops.access import Access

DISRUPTIVE = ("drain", "replace")  # policies whose nodes are taken out of service while they change
HEALTH_WORKERS = 16  # health checks of one batch run side by side, as `clusterctl check`'s node probes do


def affected_nodes(report: PlanReport, plan: ClusterPlan) -> list[str]:
    """Static compute nodes a drain- or replace-policy line touches: named in slurm.conf, or every node of a pool whose files
    changed, or every node when a cluster-wide file changed with that policy. A hunk caused only by nodes coming or
    going (a count, a host list, a pool: FieldChange.membership) touches only the nodes its NodeName lines name: a
    partition or hosts line that loses gpu003 is no reason to drain gpu001."""
    membership = {c.path for c in report.spec_changes if c.membership}
    static = [n.name for n in plan.nodes if not n.cloud]
    pools = {p.name: [n.name for n in plan.nodes_of(p.name) if not n.cloud] for p in plan.pools}
    pool_files = {}
    for p in plan.pools:
        for tmpl in (layout.NCCL_ENV, layout.HEALTH_CONF):
            pool_files[tmpl.format(pool=p.name)] = p.name
        pool_files[f"{layout.GROUP_VARS}/{layout.pool_group(p.name)}.yml"] = p.name
    hit: set[str] = set()
    for f in report.files:
        for h in f.hunks:
            lines = [(i, ln) for i, ln in enumerate(h.lines) if h.line_policies.get(i) in DISRUPTIVE]
            if h.causes and set(h.causes) <= membership:
                lines = [(i, ln) for i, ln in lines if f.path == layout.SLURM_CONF and ln[1:].startswith("NodeName=")]
            if not lines:
                continue
            if f.path == layout.SLURM_CONF:
                for _, ln in lines:
                    name = ln[1:].split()[0].removeprefix("NodeName=") if ln[1:].startswith("NodeName=") else None
                    if name:
                        hit.update(x for x in _expand(name) if x in static)
                    else:
                        hit.update(static)  # a cluster-wide slurm.conf setting
            elif f.path in pool_files:
                hit.update(pools[pool_files[f.path]])
            else:
                hit.update(static)
    return [n for n in static if n in hit]


def _expand(expr: str) -> list[str]:
    try:
        return hostlist.expand(expr)
    except hostlist.HostlistError:
        return []


def batches(nodes: list[str], size: int) -> list[list[str]]:
    return [nodes[i : i + size] for i in range(0, len(nodes), size)]


class Rollout:
    """Callable handed to `up`: converges the cluster in phases (see the module docstring)."""

    def __init__(self, report: PlanReport, console: Console, quiet: bool, fast: bool = True,
                 log: Callable[[str], None] | None = None) -> None:
        self.report, self.console, self.quiet, self.fast = report, console, quiet, fast
        self.log = log or (lambda m: None)

    def __call__(self, plan: ClusterPlan, build: Path, access: Access, key: Path) -> tuple[RunResult, list[dict]]:
        from clusterctl.ops.up import converge

        ctl = access.remote(plan.controller)
        removed = [n.name for n in self.report.nodes if n.kind == "removed"]
        todo = batches([n for n in affected_nodes(self.report, plan) if n not in removed], plan.slurm.drain_batch_size)
        timeline: list[dict] = []
        results: list[RunResult] = []

        def run(limit: str, title: str) -> RunResult:
            r = converge(build, access, key, self.console, self.quiet, fast=self.fast, title=title, limit=limit)
            results.append(r)
            return r

        def stop(entry: dict) -> tuple[RunResult, list[dict]]:
            results.append(RunResult(status="failed", failures=[Failure(hostlist.compress(entry["nodes"]), "drain", entry["error"])]))
            return merge(results), timeline

        # Nodes leaving the cluster were drained by up before any provider touched them (ops.leaving).
        if not run(plan.controller.name, "controller").ok:
            return merge(results), timeline
        done = set(removed)
        for i, batch in enumerate(todo):
            entry = self._drain(ctl, batch, plan, timeline, f"rolling update, batch {i + 1} of {len(todo)}")
            if entry.get("error"):
                return stop(entry)
            if not run(",".join(batch), f"batch {i + 1}: {hostlist.compress(batch)}").ok:
                return merge(results), timeline  # the batch stays drained: fix and apply again
            entry["health"] = self._health(access, plan, batch)
            unhealthy = {n: why for n, why in entry["health"].items() if why != "OK"}
            if unhealthy:
                results.append(RunResult(status="failed", failures=[
                    Failure(n, "health check", f"{why}; left drained, the rollout stopped") for n, why in unhealthy.items()]))
                return merge(results), timeline
            resume(ctl, batch)
            entry["resumed_at"] = time.time()
            done.update(batch)
        rest = [n.name for n in plan.nodes if not n.cloud and n.name not in done]
        if rest:
            run(",".join(rest), "remaining nodes (live)")
        return merge(results), timeline

    def _health(self, access: Access, plan: ClusterPlan, batch: list[str]) -> dict[str, str]:
        """{node: "OK" or the health check's verdict} for a converged batch, before it takes jobs again; the batch's
        nodes are checked side by side (a batch can be a rack), as `clusterctl check` probes nodes."""
        by_name = {n.name: n for n in plan.nodes}

        def verdict(name: str) -> str:
            try:
                r = access.remote(by_name[name]).run(f"{layout.HEALTH_PROGRAM} --dry-run", timeout=120, check=False)
            except Exception as e:  # no answer is not healthy
                return f"health check did not run: {e}"
            lines = [ln for ln in r.stdout.splitlines() if ln.startswith(("OK ", "FAIL "))]
            return "OK" if r.returncode == 0 else (lines[-1] if lines else (r.stderr or r.stdout).strip()[-300:])

        with ThreadPoolExecutor(max_workers=max(1, min(HEALTH_WORKERS, len(batch)))) as ex:
            return dict(zip(batch, ex.map(verdict, batch), strict=True))

    def _drain(self, ctl: Remote, nodes: list[str], plan: ClusterPlan, timeline: list[dict], why: str) -> dict:
        hl = hostlist.compress(nodes)
        entry = {"nodes": nodes, "why": why, "drained_at": time.time()}
        timeline.append(entry)
        self.log(f"draining {hl} ({why})")
        drain(ctl, nodes, why)
        left = wait_drained(ctl, nodes, plan.slurm.drain_timeout, lambda jobs, waited: self.log(
            f"still draining {hl} after {waited:.0f}s: " + "; ".join(j.describe() for j in jobs)) if jobs else None)
        if not left:
            entry["drained_at"] = time.time()
            return entry
        resume(ctl, nodes)
        entry["error"] = (f"{hl} still running jobs after {plan.slurm.drain_timeout}s ("
                          + "; ".join(j.describe() for j in left) + "); resumed, nothing changed on it")
        return entry
