"""Every process a tool run starts (ansible-playbook and what it forks: Mitogen's workers, ssh) is kept in one place
so that none outlives the command, however it ends.

ansible-runner starts ansible-playbook in a session of its own, and Mitogen starts ssh in further sessions (each
with its own terminal), so neither a process group nor the parent's death reaches them all. A cgroup does: the
wrapper that starts ansible-playbook (engines.ansible.runner) enters this run's cgroup first, and everything it
forks stays there. When the run ends, in any way, what is left in it is killed and waited for. A command killed
with SIGKILL cannot do that; the next command that starts a run sweeps the cgroups of runs whose command is gone.

The cgroup is made in the cgroup v2 hierarchy (the unified one on hybrid hosts), below this process's own. Where
that cannot be written (not root, no cgroup2), the run falls back to its session: the wrapper records its pid, which
leads the session ansible-runner made, and that whole session is killed.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from clusterctl.core import procs

PREFIX = "clusterctl-run-"
KILL_WAIT = 10.0  # seconds for killed processes to be gone


def _cgroup2_base() -> Path | None:
    """This process's own cgroup v2 directory, where run cgroups are made; None without one we can write."""
    mount = None
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        f = line.split()
        sep = f.index("-")
        if f[sep + 1] == "cgroup2":
            mount = f[4]
            break
    if mount is None:
        return None
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hid, _, rest = line.split(":", 2)
        if hid == "0":
            base = Path(mount + rest.rstrip("/"))
            return base if os.access(base, os.W_OK) else None
    return None


def _owner_alive(name: str) -> bool:
    """clusterctl-run-<pid>-<starttime>-<n>: whether the command that made it still runs."""
    return procs.tag_alive(name[len(PREFIX):].rpartition("-")[0])


def _procs(cgroup: Path) -> list[int]:
    try:
        return [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def kill_cgroup(cgroup: Path) -> list[int]:
    """SIGKILL everything in `cgroup`, wait until it is empty, remove it. Returns the pids that were killed."""
    killed: list[int] = []
    deadline = time.monotonic() + KILL_WAIT
    while True:
        pids = _procs(cgroup)
        if not pids or time.monotonic() > deadline:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    try:
        cgroup.rmdir()
    except OSError:
        pass  # still busy after KILL_WAIT: the next sweep takes it
    return sorted(set(killed))


def sweep() -> list[int]:
    """Kill what runs of dead commands left behind (their command was SIGKILLed). Returns the pids killed."""
    base = _cgroup2_base()
    if base is None:
        return []
    killed: list[int] = []
    for d in sorted(base.glob(PREFIX + "*")):
        if d.is_dir() and not _owner_alive(d.name):
            killed += kill_cgroup(d)
    return killed


class RunScope:
    """with RunScope() as scope: start the tool with scope.env; on leaving, nothing it started is still running."""

    _count = 0

    def __init__(self, pidfile: Path) -> None:
        self.pidfile = pidfile  # the wrapper writes its pid here: the fallback when there is no cgroup
        self.cgroup: Path | None = None
        self.swept: list[int] = []
        self.killed: list[int] = []

    def __enter__(self) -> RunScope:
        self.swept = sweep()
        base = _cgroup2_base()
        if base is not None:
            RunScope._count += 1
            d = base / f"{PREFIX}{procs.me()}-{RunScope._count}"
            try:
                d.mkdir()
                self.cgroup = d
            except OSError:
                self.cgroup = None
        self.pidfile.unlink(missing_ok=True)
        return self

    @property
    def env(self) -> dict[str, str]:
        out = {"CLUSTERCTL_RUN_PIDFILE": str(self.pidfile)}
        if self.cgroup is not None:
            out["CLUSTERCTL_RUN_CGROUP"] = str(self.cgroup / "cgroup.procs")
        return out

    def __exit__(self, *exc: object) -> None:
        self.killed = self._end_session()
        if self.cgroup is not None:
            self.killed += kill_cgroup(self.cgroup)

    def _end_session(self) -> list[int]:
        try:
            leader = int(self.pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return []
        try:
            if os.getsid(leader) != leader:
                return []  # its pid went to something else
        except ProcessLookupError:
            pass  # the leader is gone; what it forked may still be in its group
        try:
            os.killpg(leader, signal.SIGKILL)
            return [leader]
        except (ProcessLookupError, PermissionError):
            return []
