"""The smoke job: every static compute node registered and schedulable, then one real multi-node job per pool on the
nodes that are idle. It never waits behind users' work or preempts it: it runs only on idle nodes, in the pool's
lowest-PriorityTier partition, with --immediate; with no idle node (or nodes taken in the meantime) it is skipped,
and the report says why."""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass

from clusterctl.core import hostlist
from clusterctl.compile.model import ClusterPlan, PoolPlan
from clusterctl.engines.ssh.remote import Remote, RemoteError

READY = {"idle", "mixed", "allocated", "completing"}
# srun --immediate's refusals when the nodes were taken between sinfo and srun (slurm_errno.c).
BUSY_ERRORS = ("Requested nodes are busy", "Immediate execution impossible", "Job can not start immediately")
IMMEDIATE_SECONDS = 10


@dataclass
class SmokeResult:
    pool: str
    command: str
    ok: bool
    detail: str
    skipped: bool = False  # no idle node: not a failure, `up` still succeeds

    def to_dict(self) -> dict:
        return vars(self)


def node_states(ctl: Remote, names: list[str]) -> dict[str, str]:
    r = ctl.run(f"sinfo -h -N -o '%N %T' -n {shlex.quote(hostlist.compress(names))}", timeout=30, check=False)
    out = {}
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            out[parts[0]] = parts[1].lower().rstrip("*~#!%$@^-")
    return out


def wait_ready(ctl: Remote, names: list[str], timeout: float) -> dict[str, str]:
    """Wait until every node is schedulable; return the last states seen."""
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        states = node_states(ctl, names)
        if len(states) == len(names) and all(s in READY for s in states.values()):
            return states
        time.sleep(2)
    return states


def _reasons(ctl: Remote, names: list[str]) -> str:
    r = ctl.run(f"sinfo -h -N -R -o '%N: %E' -n {shlex.quote(hostlist.compress(names))}", timeout=30, check=False)
    return "; ".join(ln.strip() for ln in r.stdout.splitlines() if ln.strip())


def idle_nodes(names: list[str], states: dict[str, str]) -> tuple[list[str], str | None]:
    """The nodes the smoke job may use without waiting for or preempting anyone: the idle ones; else why none."""
    idle = [n for n in names if states.get(n) == "idle"]
    if idle:
        return idle, None
    busy = ", ".join(f"{s} {hostlist.compress(sorted(n for n in names if states.get(n) == s))}"
                     for s in sorted({states.get(n, "unknown") for n in names}))
    return [], f"skipped: no idle node, users' jobs hold them all ({busy})"


def smoke_partition(plan: ClusterPlan, names: list[str]) -> str | None:
    """The lowest-PriorityTier partition holding the nodes: a job there can preempt nobody (preempt/partition_prio)."""
    parts = [p for p in plan.partitions if set(names) <= set(p.nodes)]
    return min(parts, key=lambda p: p.priority_tier).name if parts else None


def smoke_command(plan: ClusterPlan, pool: PoolPlan, names: list[str]) -> str:
    part = smoke_partition(plan, names)
    gres = f" --gres=gpu:{pool.gpus_per_node}" if pool.gpus_per_node else ""
    return (f"srun{' -p ' + part if part else ''} --immediate={IMMEDIATE_SECONDS} -w {hostlist.compress(names)} "
            f"-N {len(names)}{gres} --time=5 hostname")


def _not_ready(ctl: Remote, names: list[str], states: dict[str, str], timeout: float) -> str | None:
    not_ready = {n: s for n, s in states.items() if s not in READY}
    missing = set(names) - set(states)
    if not not_ready and not missing:
        return None
    detail = ", ".join(f"{n} {s}" for n, s in sorted(not_ready.items()))
    if missing:
        detail += (", " if detail else "") + "not registered: " + hostlist.compress(sorted(missing))
    reasons = _reasons(ctl, names)
    return f"nodes not ready after {timeout:.0f}s: {detail}" + (f" (reasons: {reasons})" if reasons else "")


def run_smoke(plan: ClusterPlan, ctl: Remote, timeout: float = 240) -> list[SmokeResult]:
    out = []
    for pool in plan.pools:
        names = [n.name for n in plan.nodes_of(pool.name) if not n.cloud]
        if not names:
            continue
        states = wait_ready(ctl, names, timeout)
        problem = _not_ready(ctl, names, states, timeout)
        if problem:
            out.append(SmokeResult(pool.name, smoke_command(plan, pool, names), False, problem))
            continue
        idle, why_not = idle_nodes(names, states)
        if not idle:
            assert why_not is not None  # idle_nodes gives a reason whenever it finds no idle node
            out.append(SmokeResult(pool.name, "", True, why_not, skipped=True))
            continue
        cmd = smoke_command(plan, pool, idle)
        try:
            r = ctl.run(cmd, timeout=120)
        except RemoteError as e:
            if any(b in str(e) for b in BUSY_ERRORS):
                out.append(SmokeResult(pool.name, cmd, True, "skipped: the idle nodes were taken by users' jobs "
                                       "before the smoke job could start", skipped=True))
            else:
                out.append(SmokeResult(pool.name, cmd, False, str(e)))
            continue
        seen = sorted(set(r.stdout.split()))
        ok = seen == sorted(idle)
        out.append(SmokeResult(pool.name, cmd, ok, f"ran on {hostlist.compress(seen) if seen else 'no node'}"))
    return out
