"""The local provider: lab nodes are containers on this machine, booted by `up` and removed whole by `down`."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from clusterctl.compile.model import ClusterPlan
from clusterctl.engines.provider import Context, SshIdentity
from clusterctl.core.providers import traits
from clusterctl.state import ClusterState

if TYPE_CHECKING:
    from clusterctl.engines.local import Lab

# Lab nodes of pools with a local cache get one sparse loop-backed disk as /dev/nvme0n1 (mkfs.xfs needs > 300 MB).
LAB_NVME_MB = 1024


def cache_dir() -> Path:
    """Shared by every lab on this machine: the debootstrapped base rootfs (built once, ~80 s)."""
    return Path(os.environ.get("CLUSTERCTL_CACHE_DIR", "/var/cache/clusterctl"))


def lab_for(plan: ClusterPlan, state: ClusterState, log: Callable[[str], None] = print) -> Lab:
    from clusterctl.engines.local import Lab, LabNode, LabSpec, image

    if plan.lab is None:
        raise ValueError(f"cluster {plan.name} has no lab nodes")
    nodes = [n for n in plan.all_nodes if traits(n).lab]
    by_name = {n.name: n for n in nodes}
    cached = set(plan.local_cache.pools) if plan.local_cache else set()
    spec = LabSpec(
        cluster=plan.name,
        subnet=plan.lab.subnet,
        gateway=plan.lab.gateway,
        # lab nodes always have an address: compile hands them out of the lab subnet
        nodes=tuple(LabNode(n.name, n.address or "", n.gpus, LAB_NVME_MB if n.pool in cached else 0) for n in nodes),
        state_dir=state.dir / "lab",
        cache_dir=cache_dir(),
        # The kernel NFS server and client are not in this machine's kernel (no nfsd/nfs in /proc/filesystems): every
        # lab node binds one host directory as /home instead, so job output is seen from the login node as on NFS.
        shared_home=state.dir / "lab" / "home",
    )
    images = {p.name: image.current_image(state.backend, plan, p, spec) for p in plan.pools if traits(p).lab}
    if any(images.values()):  # nodes of a pool with a current image boot from it
        spec = replace(spec, nodes=tuple(replace(n, image=images.get(by_name[n.name].pool or "")) for n in spec.nodes))
    return Lab(spec, log=log)


class LocalProvider:
    name = "local"

    def check_tools(self) -> None:
        """Lab nodes need root (namespaces, mounts, nspawn): refused before anything is written. debootstrap and
        systemd-container are installed by the lab itself on first boot."""
        from clusterctl.engines.local import host

        host.require_root()

    def prepare(self, ctx: Context) -> None:
        return None

    def identity(self, plan: ClusterPlan, state: ClusterState, log: Callable[[str], None]) -> SshIdentity:
        lab = lab_for(plan, state, log)
        # The lab writes every node's host key itself: nothing is accepted on first use.
        return SshIdentity(private_key=lab.ssh_key, known_hosts=lab.known_hosts, tofu=False, lab=lab)

    def boot(self, ctx: Context, identity: SshIdentity) -> None:
        if not ctx.quiet and ctx.console is not None:
            names = ", ".join(n.name for n in ctx.plan.all_nodes if traits(n).lab)
            ctx.console.print(f"lab nodes: {names}", markup=False)
        identity.lab.up()

    def preview(self, plan: ClusterPlan, state: ClusterState) -> None:
        return None

    def teardown(self, ctx: Context, identity: SshIdentity | None, result: dict) -> None:
        if identity is not None and identity.lab is not None:
            identity.lab.down()
            result["lab_removed"] = [n.name for n in ctx.plan.all_nodes if traits(n).lab]
