"""Per-node identity and configuration written into the node's overlay before it boots."""

from __future__ import annotations

import ipaddress
import re
import uuid
from collections.abc import Callable
from pathlib import Path

HOSTS_BEGIN = "# BEGIN clusterctl lab nodes"
HOSTS_END = "# END clusterctl lab nodes"

# nspawn mounts the node's cgroup v1 controllers read-only. The node has a cgroup subtree of its own (cgroup
# namespace), so remounting them writable only exposes that subtree, and gives Slurm's cgroup plugins
# (proctrack/cgroup, task/cgroup, ConstrainDevices) what they get on a real machine.
CGROUP_SCRIPT = """#!/bin/sh
# clusterctl lab node: make this node's own cgroup v1 controllers writable (nspawn mounts them read-only).
findmnt -rn -t cgroup -o TARGET,VFS-OPTIONS | while read -r target opts; do
  case ",$opts," in *,ro,*) mount -o remount,bind,rw "$target" ;; esac
done
exit 0
"""
CGROUP_UNIT = """[Unit]
Description=clusterctl lab: writable cgroup v1 controllers for this node
DefaultDependencies=no
ConditionVirtualization=container
Before=sysinit.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/clusterctl-lab-cgroups

[Install]
WantedBy=sysinit.target
"""


def machine_id(cluster: str, node: str) -> str:
    # Stable per node (journal, dbus, and Slurm's view stay the same across down/up) and unique across nodes.
    return uuid.uuid5(uuid.NAMESPACE_DNS, f"{node}.{cluster}.lab.clusterctl").hex


def hosts_block(nodes: dict[str, str]) -> str:
    lines = [HOSTS_BEGIN] + [f"{addr}\t{name}" for name, addr in nodes.items()] + [HOSTS_END]
    return "\n".join(lines) + "\n"


def merge_hosts(existing: str, block: str) -> str:
    """Replace our block (Ansible blockinfile style) and keep everything else a role may have added."""
    if not existing.strip():
        existing = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
    pattern = re.compile(re.escape(HOSTS_BEGIN) + r".*?" + re.escape(HOSTS_END) + r"\n?", re.DOTALL)
    if pattern.search(existing):
        return pattern.sub(lambda _: block, existing)
    return existing.rstrip("\n") + "\n" + block


def resolv_conf(log: Callable[[str], None]) -> str:
    """The host's resolvers minus loopback ones (127.0.0.53 means nothing inside a node's netns)."""
    for candidate in (Path("/etc/resolv.conf"), Path("/run/systemd/resolve/resolv.conf")):
        try:
            text = candidate.read_text()
        except OSError:
            continue
        servers = [line.split()[1] for line in text.splitlines()
                   if line.startswith("nameserver") and len(line.split()) > 1]
        usable = [s for s in servers if not _loopback(s)]
        if usable:
            search = [line for line in text.splitlines() if line.startswith(("search", "domain", "options"))]
            return "\n".join([f"# from the host's {candidate} (loopback servers dropped)"] + search
                             + [f"nameserver {s}" for s in usable]) + "\n"
    log("warning: the host has no non-loopback DNS server; lab nodes will not resolve names (apt will fail)")
    return "# the host had no usable (non-loopback) nameserver\n"


def _loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr.split("%")[0]).is_loopback
    except ValueError:
        return False


def update_hosts(root: Path, hosts: dict[str, str]) -> None:
    """Every lab node resolves every other by name (Slurm needs it); only rewritten when it changes."""
    hosts_file = root / "etc/hosts"
    old = hosts_file.read_text() if hosts_file.exists() else ""
    new = merge_hosts(old, hosts_block(hosts))
    if new != old:
        hosts_file.write_text(new)


def write(root: Path, *, cluster: str, node: str, hosts: dict[str, str], authorized_key: str, resolv: str) -> None:
    etc = root / "etc"
    (etc / "hostname").write_text(f"{node}\n")
    (etc / "machine-id").write_text(machine_id(cluster, node) + "\n")
    update_hosts(root, hosts)
    resolv_file = etc / "resolv.conf"
    if resolv_file.is_symlink():
        resolv_file.unlink()  # e.g. systemd-resolved's stub link installed by a role; nspawn is --resolv-conf=off
    resolv_file.write_text(resolv)
    ssh = root / "root/.ssh"
    ssh.mkdir(mode=0o700, parents=True, exist_ok=True)
    auth = ssh / "authorized_keys"
    keys = auth.read_text().splitlines() if auth.exists() else []
    if authorized_key.strip() not in keys:
        auth.write_text("\n".join(keys + [authorized_key.strip()]) + "\n")
    auth.chmod(0o600)
    script = root / "usr/local/sbin/clusterctl-lab-cgroups"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(CGROUP_SCRIPT)
    script.chmod(0o755)
    unit = etc / "systemd/system/clusterctl-lab-cgroups.service"
    unit.write_text(CGROUP_UNIT)
    wants = etc / "systemd/system/sysinit.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    link = wants / unit.name
    if not link.is_symlink():
        link.symlink_to(f"/etc/systemd/system/{unit.name}")
