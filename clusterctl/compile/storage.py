"""Mounts and the local NVMe cache: which pool gets what."""

from __future__ import annotations

from clusterctl.compile.model import Fsx, LiveFacts, LocalCache, Mount
from clusterctl.spec import effective as eff
from clusterctl.spec.cluster import ClusterSpec
from clusterctl.spec.storage import FsxLustreFS, LustreFS, NfsFS

FSX_OPTIONS = "relatime,flock"  # AWS's recommended FSx for Lustre client mount options


def mounts(spec: ClusterSpec, facts: LiveFacts) -> tuple[Mount, ...]:
    every = tuple(p.name for p in spec.pools)
    out = []
    for fs in spec.storage.shared:
        pools = tuple(fs.pools) if fs.pools is not None else every
        if isinstance(fs, LustreFS):
            # Failover MGS NIDs are joined with ':' before the filesystem name.
            out.append(Mount("lustre", ":".join(fs.mgs_nids) + f":/{fs.fs_name}", fs.mount_point, fs.mount_options, pools, fs.lnet_networks))
        elif isinstance(fs, FsxLustreFS):
            # The DNS and mount names exist only once the stack created the filesystem (the stack's outputs).
            out.append(Mount("fsx-lustre", facts.mount_sources.get(fs.mount_point, ""), fs.mount_point, FSX_OPTIONS, pools))
        elif isinstance(fs, NfsFS):
            out.append(Mount("nfs", f"{fs.server}:{fs.export}", fs.mount_point, fs.options, pools))
    return tuple(out)


def fsx_filesystems(spec: ClusterSpec) -> tuple[Fsx, ...]:
    out = []
    for fs in spec.storage.shared:
        if isinstance(fs, FsxLustreFS):
            link = fs.s3_link
            out.append(
                Fsx(
                    fs.mount_point,
                    fs.deployment_type,
                    fs.storage_capacity_gib,
                    fs.per_unit_storage_throughput if fs.deployment_type.startswith("PERSISTENT") else None,
                    link.bucket if link else None,
                    link.import_path if link else None,
                    (link.export_path or link.import_path) if link else None,
                    eff.fsx_zone(spec, fs) or "",
                )
            )
    return tuple(out)


def local_cache(spec: ClusterSpec) -> LocalCache | None:
    c = spec.storage.local_cache
    if c is None:
        return None
    pools = tuple(c.pools) if c.pools is not None else tuple(p.name for p in spec.pools if eff.gpus_per_node(p) > 0)
    devices = None if c.devices == "auto" else tuple(c.devices)
    return LocalCache(devices, c.filesystem, c.mount_point, c.raid0, c.reformat, pools)
