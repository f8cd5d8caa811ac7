"""The few Slurm commands the burst programs use (scontrol), behind one small class so tests can replace it.

Node states as `scontrol -o show node` prints them in 22.05: a base state plus flags joined with '+', e.g.
IDLE+CLOUD+POWERED_DOWN (idle~), MIXED+CLOUD+POWERING_UP (mix#), IDLE+CLOUD+POWERING_DOWN (idle%),
IDLE+DRAIN+CLOUD (drained).
"""

from __future__ import annotations

import logging
import re
import subprocess
from dataclasses import dataclass

from clusterctl.core import hostlist
from clusterctl.core.errors import ClusterctlError

REASON_MAX = 200  # keep reasons readable in sinfo -R


class SlurmError(ClusterctlError):
    pass


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str
    addr: str | None = None
    reason: str | None = None

    @property
    def flags(self) -> set[str]:
        return set(self.state.upper().split("+"))

    @property
    def base(self) -> str:
        return self.state.upper().split("+")[0]

    @property
    def powered_down(self) -> bool:
        return "POWERED_DOWN" in self.flags and "POWERING_UP" not in self.flags

    @property
    def powering_up(self) -> bool:
        return "POWERING_UP" in self.flags

    @property
    def powering_down(self) -> bool:
        return "POWERING_DOWN" in self.flags

    @property
    def powered_up(self) -> bool:
        """Slurm believes a machine is behind this node (it may run jobs, or is idle waiting for SuspendTime)."""
        return not (self.flags & {"POWERED_DOWN", "POWERING_UP", "POWERING_DOWN"})


_FIELD = re.compile(r"(?:^|\s)(NodeName|State|NodeAddr)=(\S*)")
_REASON = re.compile(r"\sReason=(.*?)(?:\s+\[[^\]]*\])?\s*$")


def parse_show_node(text: str) -> dict[str, NodeState]:
    """`scontrol -o show node` output (one node per line) -> name -> NodeState."""
    out = {}
    for line in text.splitlines():
        fields = {m.group(1): m.group(2) for m in _FIELD.finditer(line)}
        if "NodeName" not in fields:
            continue
        m = _REASON.search(line)
        out[fields["NodeName"]] = NodeState(fields["NodeName"], fields.get("State", "UNKNOWN"),
                                            fields.get("NodeAddr"), m.group(1) if m else None)
    return out


def clip_reason(reason: str) -> str:
    reason = " ".join(reason.split())
    return reason if len(reason) <= REASON_MAX else reason[: REASON_MAX - 3] + "..."


class Slurm:
    def __init__(self, scontrol: str = "scontrol", timeout: float = 30, log: logging.Logger | None = None) -> None:
        self.scontrol = scontrol
        self.timeout = timeout
        self.log = log

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        argv = [self.scontrol, *args]
        try:
            cp = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise SlurmError(f"{' '.join(argv)}: {e}") from None
        if check and cp.returncode != 0:
            raise SlurmError(f"{' '.join(argv)} -> {cp.returncode}: {(cp.stderr or cp.stdout).strip()}")
        return cp

    def nodes(self, names: list[str]) -> dict[str, NodeState]:
        if not names:
            return {}
        cp = self._run("-o", "show", "node", hostlist.compress(sorted(names)))
        return parse_show_node(cp.stdout)

    def set_address(self, node: str, address: str) -> None:
        """Where slurmctld (and srun on other nodes) reach the node until slurmd registers (cloud_reg_addrs)."""
        self._run("update", f"nodename={node}", f"nodeaddr={address}", f"nodehostname={node}")

    def power_down(self, names: list[str], reason: str) -> None:
        """Back to power saving (POWERING_DOWN, then POWERED_DOWN after SuspendTimeout) with the reason shown in
        sinfo -R; jobs on the nodes are requeued. Never DOWN: the nodes can be tried again later."""
        if names:
            self._run("update", f"nodename={hostlist.compress(sorted(names))}", "state=power_down_force",
                      f"reason={clip_reason(reason)}")

    def drain(self, names: list[str], reason: str) -> None:
        """No new work on the nodes, with the reason (a static node whose replacement failed: `up` recreates it)."""
        if names:
            self._run("update", f"nodename={hostlist.compress(sorted(names))}", "state=drain",
                      f"reason={clip_reason(reason)}")

    def resume(self, names: list[str]) -> None:
        """Back to service: the drain lifted (a node that does not answer stays DOWN until slurmd registers)."""
        if names:
            self._run("update", f"nodename={hostlist.compress(sorted(names))}", "state=resume")
