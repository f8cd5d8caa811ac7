"""The plan's local (lab) nodes as a Lab of the local provider."""

from __future__ import annotations

import os
from pathlib import Path

from clusterctl.compile.model import ClusterPlan
from clusterctl.state import ClusterState


def cache_dir() -> Path:
    """Shared by every lab on this machine: the debootstrapped base rootfs (built once, ~80 s)."""
    return Path(os.environ.get("CLUSTERCTL_CACHE_DIR", "/var/cache/clusterctl"))


def lab_for(plan: ClusterPlan, state: ClusterState, log=print):
    from clusterctl.local import Lab, LabNode, LabSpec

    nodes = [n for n in plan.all_nodes if n.provider == "local"]
    spec = LabSpec(
        cluster=plan.name,
        subnet=plan.lab.subnet,
        gateway=plan.lab.gateway,
        nodes=tuple(LabNode(n.name, n.address, n.gpus) for n in nodes),
        state_dir=state.dir / "lab",
        cache_dir=cache_dir(),
    )
    return Lab(spec, log=log)
