"""Host-side names for a cluster's objects, derived deterministically so down() finds them after a crash.

Interface names are limited to 15 characters (IFNAMSIZ-1); cluster and node names are DNS labels and can be
longer, so interface names carry a short hash and an alias saying what they belong to.
"""

from __future__ import annotations

import hashlib

IFNAME_MAX = 15


def _h(*parts: str, n: int) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:n]


def tag(cluster: str) -> str:
    """Marks iptables rules, link aliases and cgroups as belonging to this cluster."""
    return f"clusterctl-lab.{cluster}"


def netns(cluster: str, node: str) -> str:
    # '.' cannot occur in a DNS label, so "clusterctl.a-b.c" and "clusterctl.a.b-c" never collide.
    return f"clusterctl.{cluster}.{node}"


def netns_prefix(cluster: str) -> str:
    return f"clusterctl.{cluster}."


def bridge(cluster: str) -> str:
    name = f"clbr-{cluster}"
    return name if len(name) <= IFNAME_MAX else f"clbr-{_h(cluster, n=10)}"


def host_veth(cluster: str, node: str) -> str:
    return f"clv{_h(cluster, node, n=12)}"


def link_alias(cluster: str, node: str | None = None) -> str:
    return f"{tag(cluster)}/{node}" if node else tag(cluster)


def cgroup(cluster: str, node: str) -> str:
    return f"clusterctl.{cluster}.{node}"


NODE_IFNAME = "eth0"  # what the node sees; looks like a real machine to Ansible facts and Slurm
