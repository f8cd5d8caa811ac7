"""Which vendor components a node group installs: derived from the spec alone (validate and compile both ask)."""

from __future__ import annotations

from clusterctl.catalog.vendor_repos import DISTRO_SLURM
from clusterctl.spec import effective as eff
from clusterctl.spec.cluster import ClusterSpec
from clusterctl.spec.pools import Pool
from clusterctl.spec.storage import FsxLustreFS, LustreFS


def _has_lustre(spec: ClusterSpec, pool: Pool | None) -> bool:
    for fs in spec.storage.shared:
        if isinstance(fs, (LustreFS, FsxLustreFS)) and (pool is None or fs.pools is None or pool.name in fs.pools):
            return True  # the controller (pool None) mounts every shared filesystem
    return False


def os_of(spec: ClusterSpec, pool: Pool | None) -> str:
    return pool.os if pool is not None else spec.controller.os


def components(spec: ClusterSpec, pool: Pool | None) -> list[str]:
    """The vendor components a pool's nodes install, in install order (pool=None: the controller)."""
    want: list[str] = []
    sw = spec.software
    if pool is not None:
        fab, _ = eff.fabric(spec, pool)
        if eff.gpus_per_node(pool) > 0 and eff.gpu_key(pool) != "mi300x":
            want.append("cuda")
        if fab.type == "efa":
            want.append("efa")
        elif sw.rdma_stack == "doca":
            want.append("doca")
    if _has_lustre(spec, pool):
        want.append("lustre")
    if sw.slurm != DISTRO_SLURM[os_of(spec, pool)]:
        want.append("slurm")
    return want
