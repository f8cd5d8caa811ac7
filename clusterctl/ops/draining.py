"""Taking nodes out of service the way Slurm means it: DRAIN with a reason, then wait until no job is left on them.
Used by rolling changes (ops.rolling) and by nodes leaving the cluster (ops.leaving); neither ever kills a job."""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from clusterctl.core import hostlist
from clusterctl.ops.smoke import node_states

if TYPE_CHECKING:
    from clusterctl.engines.ssh.remote import Remote

DRAINED = {"drained", "down", "drain"}  # sinfo %T once no job runs on a drained node
ACTIVE = "RUNNING,COMPLETING,CONFIGURING,SUSPENDED"  # job states that hold a node
POLL_SECONDS = 2.0
REPORT_EVERY = 30.0  # how often a long wait says which jobs hold it


@dataclass(frozen=True)
class Job:
    id: str
    user: str
    name: str
    elapsed: str  # squeue's %M: [days-]hours:minutes:seconds
    nodes: str

    def describe(self) -> str:
        return f"job {self.id} ({self.name}, user {self.user}, running {self.elapsed}, on {self.nodes})"


def jobs_on(ctl: Remote, nodes: list[str]) -> list[Job]:
    """The jobs that hold any of `nodes` (running, completing, starting or suspended)."""
    if not nodes:
        return []
    hl = shlex.quote(hostlist.compress(nodes))
    r = ctl.run(f"squeue -h -w {hl} -t {ACTIVE} -o '%i|%u|%j|%M|%N'", timeout=30, check=False)
    out = []
    for line in r.stdout.splitlines():
        parts = line.split("|")
        if len(parts) == 5:
            out.append(Job(*(p.strip() for p in parts)))
    return out


def drain(ctl: Remote, nodes: list[str], why: str) -> None:
    """DRAIN: running jobs go on, nothing new starts there. The reason names the change (sinfo -R shows it)."""
    reason = shlex.quote(f"clusterctl: {why}")
    ctl.run(f"scontrol update nodename={shlex.quote(hostlist.compress(nodes))} state=drain reason={reason}", timeout=60)


def resume(ctl: Remote, nodes: list[str]) -> None:
    ctl.run(f"scontrol update nodename={shlex.quote(hostlist.compress(nodes))} state=resume", timeout=60, check=False)


def wait_drained(ctl: Remote, nodes: list[str], timeout: float,
                 on_wait: Callable[[list[Job], float], None] | None = None) -> list[Job]:
    """Until every node is drained (no job left on it) or `timeout` seconds passed. Returns the jobs still holding
    them then (empty: drained). on_wait(jobs, waited) is told who holds the nodes every REPORT_EVERY seconds."""
    t0 = time.monotonic()
    next_report = t0
    while True:
        states = node_states(ctl, nodes)
        if states and all(s in DRAINED for s in states.values()):
            return []
        now = time.monotonic()
        if now - t0 >= timeout:
            return jobs_on(ctl, nodes)
        if on_wait is not None and now >= next_report:
            on_wait(jobs_on(ctl, nodes), now - t0)
            next_report = now + REPORT_EVERY
        time.sleep(POLL_SECONDS)
