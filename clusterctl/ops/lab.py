"""The plan's local (lab) nodes as a Lab of the local provider."""

from __future__ import annotations

import os
from pathlib import Path

from clusterctl.compile.model import ClusterPlan
from clusterctl.state import ClusterState


def cache_dir() -> Path:
    """Shared by every lab on this machine: the debootstrapped base rootfs (built once, ~80 s)."""
    return Path(os.environ.get("CLUSTERCTL_CACHE_DIR", "/var/cache/clusterctl"))


# Lab nodes of pools with a local cache get one sparse loop-backed disk as /dev/nvme0n1 (mkfs.xfs needs > 300 MB).
LAB_NVME_MB = 1024


def lab_for(plan: ClusterPlan, state: ClusterState, log=print):
    from clusterctl.engines.local import Lab, LabNode, LabSpec

    nodes = [n for n in plan.all_nodes if n.provider == "local"]
    cached = set(plan.local_cache.pools) if plan.local_cache else set()
    spec = LabSpec(
        cluster=plan.name,
        subnet=plan.lab.subnet,
        gateway=plan.lab.gateway,
        nodes=tuple(LabNode(n.name, n.address, n.gpus, LAB_NVME_MB if n.pool in cached else 0) for n in nodes),
        state_dir=state.dir / "lab",
        cache_dir=cache_dir(),
    )
    return Lab(spec, log=log)
