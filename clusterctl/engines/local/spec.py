"""What a lab is made of (pure data, validated on construction) and what status() reports."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from clusterctl.engines.local.errors import LabError

# Names end up in hostnames, netns names, cgroup names and /etc/hosts: keep them to one lowercase DNS label.
_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
MAX_DISK_MB = 16 * 1024 * 1024  # 16 TiB: sparse, so only what the node writes costs host disk space


@dataclass(frozen=True)
class LabNode:
    name: str  # hostname and machine name, e.g. "lab-ctl", "gpu001"
    address: str  # IPv4 inside the lab subnet, e.g. "10.213.0.11"
    gpus: int = 0  # fake /dev/nvidiaN device nodes to create
    # > 0: a fake local NVMe disk of this many MiB, /dev/nvme0n1 inside the node (a sparse file on a host loop
    # device, kept across up() and node reboots, deleted by down()). mkfs.xfs needs more than 300.
    disk_mb: int = 0
    image: str | None = None  # a baked node image (root filesystem) to boot from instead of the base rootfs


@dataclass(frozen=True)
class LabSpec:
    cluster: str  # namespaces host-side names: bridge, netns, cgroups, NAT rules
    subnet: str  # e.g. "10.213.0.0/24"
    gateway: str  # host-side address in the subnet (on the bridge), e.g. "10.213.0.1"
    nodes: tuple[LabNode, ...]
    state_dir: Path  # per-cluster: overlays, ssh key, known_hosts, logs, pid files
    cache_dir: Path  # shared across clusters: the debootstrapped base rootfs, the nodes' apt package cache
    shared_home: Path | None = None  # a host directory every node mounts as /home (the lab's stand-in for NFS)
    suite: str = "bookworm"
    mirror: str = "http://deb.debian.org/debian"

    def __post_init__(self) -> None:
        # Coerce the convenient forms (list of nodes, str paths) so callers need not care.
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "state_dir", Path(self.state_dir))
        object.__setattr__(self, "cache_dir", Path(self.cache_dir))
        problems = list(self._problems())
        if problems:
            raise LabError(f"invalid lab spec for cluster {self.cluster!r}: " + "; ".join(problems))

    def _problems(self) -> Iterator[str]:
        if not _LABEL.match(self.cluster or ""):
            yield f"cluster name {self.cluster!r} must be a lowercase DNS label (a-z, 0-9, '-')"
        try:
            net = ipaddress.IPv4Network(self.subnet, strict=True)
        except ValueError as exc:
            yield f"subnet {self.subnet!r} is not an IPv4 network: {exc}"
            return
        if net.prefixlen > 30:
            yield f"subnet {self.subnet} is too small for a gateway and nodes"
        seen: dict[str, str] = {}
        for label, addr in [("gateway", self.gateway)] + [(f"node {n.name}", n.address) for n in self.nodes]:
            try:
                ip = ipaddress.IPv4Address(addr)
            except ValueError:
                yield f"{label}: {addr!r} is not an IPv4 address"
                continue
            if ip not in net or ip in (net.network_address, net.broadcast_address):
                yield f"{label}: {addr} is not a host address in {net}"
            if addr in seen:
                yield f"{label}: address {addr} already used by {seen[addr]}"
            seen[addr] = label
        if not self.nodes:
            yield "no nodes"
        names = set()
        for n in self.nodes:
            if not _LABEL.match(n.name or ""):
                yield f"node name {n.name!r} must be a lowercase DNS label (a-z, 0-9, '-')"
            if n.name in names:
                yield f"node name {n.name!r} appears twice"
            names.add(n.name)
            if not isinstance(n.gpus, int) or not 0 <= n.gpus <= 64:
                yield f"node {n.name}: gpus must be an integer 0..64, got {n.gpus!r}"
            if isinstance(n.disk_mb, bool) or not isinstance(n.disk_mb, int) or not 0 <= n.disk_mb <= MAX_DISK_MB:
                yield f"node {n.name}: disk_mb must be an integer 0..{MAX_DISK_MB} (MiB), got {n.disk_mb!r}"

    @property
    def prefixlen(self) -> int:
        return ipaddress.IPv4Network(self.subnet).prefixlen

    def node(self, name: str) -> LabNode:
        for n in self.nodes:
            if n.name == name:
                return n
        raise LabError(f"cluster {self.cluster!r} has no lab node named {name!r}")


@dataclass(frozen=True)
class NodeStatus:
    name: str
    address: str
    running: bool  # the nspawn process for this node is alive
    pid: int | None  # pid of systemd-nspawn on the host
    leader_pid: int | None  # host pid of the node's init (systemd), for nsenter
    ssh_reachable: bool  # `ssh root@address true` succeeded with strict host key checking
    gpus: int | None  # /dev/nvidiaN nodes present inside the node (None when not running)
    disk: str | None = None  # host loop device backing the node's /dev/nvme0n1 (None: no disk, or not attached)
    disk_in_node: bool | None = None  # /dev/nvme0n1 exists inside the node as that block device (None: not running)
