"""Per-node cgroups on hosts without systemd.

nspawn --keep-unit uses the cgroup it is started in and creates `payload`/`supervisor` below it. Two nodes started
from the same cgroup would share those (on this host: the root of every hierarchy), so one node's systemd would
manage the other's processes. The supervisor therefore moves itself into a cgroup of its own in every hierarchy
before starting nspawn; with cgroup namespaces the node sees that cgroup as its `/`, and its cgroup v1 controllers
are private to it (Slurm's cgroup plugins can create job cgroups there). On systemd hosts a delegated scope
(systemd-run --scope -p Delegate=yes) does the same job and this module only records where the node lives.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

_NOT_CONTROLLERS = {"rw", "ro"}


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(fstype, mountpoint, super options) of cgroup mounts whose root is the hierarchy root."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        f = line.split()
        sep = f.index("-")
        fstype, root, mp = f[sep + 1], f[3], f[4]
        if fstype in ("cgroup", "cgroup2") and root == "/":
            out.append((fstype, mp, set(f[sep + 3].split(",")) - _NOT_CONTROLLERS))
    return out


def current(pid: int | str = "self") -> dict[str, tuple[str, bool]]:
    """Hierarchy mountpoint -> (absolute directory of pid's cgroup in it, tracks processes for systemd)."""
    mounts = _mounts()
    found: dict[str, tuple[str, bool]] = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, key, path = line.split(":", 2)
        wanted = set(key.split(",")) if key else None
        for fstype, mp, opts in mounts:
            if (wanted is None and fstype == "cgroup2") or (wanted and fstype == "cgroup" and wanted <= opts):
                tracking = fstype == "cgroup2" or "name=systemd" in opts
                found[mp] = (mp + path.rstrip("/") if path != "/" else mp, tracking)
                break
    return found


def create_and_enter(name: str) -> list[str]:
    """Create <current>/<name> in every hierarchy and move this process there; returns the directories.

    The systemd-tracking hierarchies must work (else nodes collide); resource controllers are best effort."""
    made = []
    for here, tracking in current().values():
        target = os.path.join(here, name)
        try:
            os.makedirs(target, exist_ok=True)
            _inherit_cpuset(target)
            Path(target, "cgroup.procs").write_text(str(os.getpid()))
            made.append(target)
        except OSError as exc:
            if tracking:
                raise
            print(f"warning: could not use cgroup {target}: {exc}", flush=True)
    return made


def _inherit_cpuset(target: str) -> None:
    # A new cgroup v1 cpuset is empty and refuses tasks until cpus/mems are set: copy the parent's.
    cpus = Path(target, "cpuset.cpus")
    if cpus.exists() and not cpus.read_text().strip():
        for knob in ("cpuset.cpus", "cpuset.mems"):
            Path(target, knob).write_text(Path(os.path.dirname(target), knob).read_text())


def pids(dirs: list[str]) -> set[int]:
    out: set[int] = set()
    for top in dirs:
        for d, _, _ in os.walk(top):
            try:
                out.update(int(p) for p in Path(d, "cgroup.procs").read_text().split())
            except (FileNotFoundError, ValueError):
                pass
    return out


def kill_all(dirs: list[str], timeout: float = 10.0) -> set[int]:
    """SIGKILL everything still in the node's cgroups (orphaned containers included); returns survivors."""
    deadline = time.monotonic() + timeout
    left = pids(dirs) - {os.getpid()}
    while left and time.monotonic() < deadline:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
        left = pids(dirs) - {os.getpid()}
    return left


def remove(dirs: list[str]) -> None:
    """rmdir bottom-up (cgroupfs directories are removed with rmdir, never by deleting their files)."""
    for top in dirs:
        if not os.path.isdir(top):
            continue
        for d, _, _ in sorted(os.walk(top), key=lambda w: len(w[0]), reverse=True):
            try:
                os.rmdir(d)
            except OSError:
                pass
