"""The smoke job: every static compute node registered and idle, then one real multi-node job per pool."""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass

from clusterctl.core import hostlist
from clusterctl.compile.model import ClusterPlan
from clusterctl.engines.ssh.remote import Remote, RemoteError

READY = {"idle", "mixed", "allocated", "completing"}


@dataclass
class SmokeResult:
    pool: str
    command: str
    ok: bool
    detail: str

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


def run_smoke(plan: ClusterPlan, ctl: Remote, timeout: float = 240) -> list[SmokeResult]:
    out = []
    for pool in plan.pools:
        names = [n.name for n in plan.nodes_of(pool.name) if not n.cloud]
        if not names:
            continue
        part = next((p.name for p in plan.partitions if set(names) <= set(p.nodes)), None)
        gres = f" --gres=gpu:{pool.gpus_per_node}" if pool.gpus_per_node else ""
        cmd = (f"srun{' -p ' + part if part else ''} -w {hostlist.compress(names)} -N {len(names)}{gres} "
               f"--time=5 hostname")
        states = wait_ready(ctl, names, timeout)
        not_ready = {n: s for n, s in states.items() if s not in READY}
        missing = set(names) - set(states)
        if not_ready or missing:
            detail = ", ".join(f"{n} {s}" for n, s in sorted(not_ready.items()))
            if missing:
                detail += (", " if detail else "") + "not registered: " + hostlist.compress(sorted(missing))
            reasons = _reasons(ctl, names)
            out.append(SmokeResult(pool.name, cmd, False, f"nodes not ready after {timeout:.0f}s: {detail}"
                                   + (f" (reasons: {reasons})" if reasons else "")))
            continue
        try:
            r = ctl.run(cmd, timeout=120)
        except RemoteError as e:
            out.append(SmokeResult(pool.name, cmd, False, str(e)))
            continue
        seen = sorted(set(r.stdout.split()))
        ok = seen == sorted(names)
        out.append(SmokeResult(pool.name, cmd, ok, f"ran on {hostlist.compress(seen) if seen else 'no node'}"))
    return out
