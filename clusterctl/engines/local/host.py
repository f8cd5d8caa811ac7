"""Host preconditions: root, the tools lab nodes need, kernel features, and the bits of /run nspawn expects."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from clusterctl.engines.local.errors import LabError
from clusterctl.engines.local.proc import host_env, run, which

# tool -> Debian/Ubuntu package providing it
TOOLS = {
    "debootstrap": "debootstrap",
    "systemd-nspawn": "systemd-container",
    "ip": "iproute2",
    "iptables": "iptables",
    "ssh": "openssh-client",
    "ssh-keygen": "openssh-client",
    "nsenter": "util-linux",
    "mount": "mount",
}
# debootstrap checks the Release signature; Ubuntu hosts need Debian's keyring package for that.
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")


def require_root(what: str = "lab nodes") -> None:
    if os.geteuid() != 0:
        raise LabError(f"{what} need root (network namespaces, overlay mounts, systemd-nspawn): run as root or via sudo")


def missing_packages() -> list[str]:
    pkgs = {pkg for tool, pkg in TOOLS.items() if which(tool) is None}
    if not KEYRING.exists():
        pkgs.add("debian-archive-keyring")
    return sorted(pkgs)


def ensure_packages(log: Callable[[str], None]) -> None:
    require_root("installing lab prerequisites")
    pkgs = missing_packages()
    if not pkgs:
        return
    if which("apt-get") is None:
        raise LabError(f"missing host packages {', '.join(pkgs)} and no apt-get to install them; install them by hand")
    log(f"installing host packages: {' '.join(pkgs)}")
    env = host_env(DEBIAN_FRONTEND="noninteractive")
    # Wait for a concurrent apt/dpkg (unattended-upgrades, another installer) instead of failing on the lock.
    install = ["apt-get", "-y", "-o", "DPkg::Lock::Timeout=600", "install", "--no-install-recommends", *pkgs]
    if run(install, check=False, timeout=1800, env=env).returncode != 0:
        run(["apt-get", "-o", "DPkg::Lock::Timeout=600", "update"], what="apt-get update", timeout=900, env=env)
        run(install, what="installing lab prerequisites", timeout=1800, env=env)
    still = missing_packages()
    if still:
        raise LabError(f"host packages still missing after apt-get install: {', '.join(still)}")


def ensure_kernel_features() -> None:
    """overlayfs for per-node roots; bridge and veth are checked where they are created (clear error there)."""
    if "overlay" not in Path("/proc/filesystems").read_text():
        run(["modprobe", "overlay"], check=False)
        if "overlay" not in Path("/proc/filesystems").read_text():
            raise LabError("this kernel has no overlayfs (modprobe overlay failed); lab nodes need it for per-node roots")


def systemd_booted() -> bool:
    """PID 1 is systemd (sd_booted): then nspawn can run in a delegated scope and /run/systemd is systemd's own."""
    return os.path.isdir("/run/systemd/system")


def ensure_run_systemd() -> None:
    """nspawn keeps per-run state (propagation dirs, image locks) under /run/systemd/nspawn and assumes /run is
    volatile. On hosts without systemd (containers, sandboxes) /run may sit on the root disk, so that state would
    survive a host reboot; give nspawn's own directory a tmpfs. Only that directory: over all of /run/systemd it
    would hide elogind's or other tools' state. Never on systemd hosts (there /run is already a tmpfs)."""
    if systemd_booted():
        return
    path = Path("/run/systemd/nspawn")
    path.mkdir(parents=True, exist_ok=True)
    if _fstype(str(path)) != "tmpfs":
        run(["mount", "-t", "tmpfs", "-o", "mode=755", "tmpfs", str(path)], what=f"mounting tmpfs on {path}")


def _fstype(path: str) -> str | None:
    """Filesystem type of the mount containing path (longest matching mount point)."""
    best, kind = "", None
    real = os.path.realpath(path)
    for line in Path("/proc/self/mounts").read_text().splitlines():
        mp, fstype = line.split()[1:3]
        if (real == mp or real.startswith(mp.rstrip("/") + "/")) and len(mp) >= len(best):
            best, kind = mp, fstype
    return kind


def ensure_ip_forward(log: Callable[[str], None]) -> None:
    """Nodes reach the mirrors through the host; left enabled by down() since other things may rely on it."""
    knob = Path("/proc/sys/net/ipv4/ip_forward")
    if knob.read_text().strip() != "1":
        log("enabling net.ipv4.ip_forward on the host (NAT for lab nodes)")
        knob.write_text("1\n")
