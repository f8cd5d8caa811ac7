"""Storage: shared filesystems, the local NVMe cache and where checkpoints go."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field

from clusterctl.spec.base import SpecModel, UpdatePolicy, spec_field
from clusterctl.spec.types import (
    AbsPath,
    Address,
    DevicePath,
    LnetNetworks,
    LustreNid,
    MountOptions,
    MountPoint,
    PoolName,
    S3Prefix,
    allowed,
)

L, D, R = UpdatePolicy.LIVE, UpdatePolicy.DRAIN, UpdatePolicy.REPLACE
BUCKET = allowed(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", "an S3 bucket name: 3-63 lower-case letters, digits, . and -")


class SharedCommon(SpecModel):
    mount_point: MountPoint = spec_field(description="Where nodes mount it.", policy=D)
    pools: list[PoolName] | None = spec_field(None, description="Pools that mount it (default: all).", policy=D)


class LustreFS(SharedCommon):
    type: Literal["lustre"] = spec_field(description="An existing Lustre filesystem (on-prem).")
    mgs_nids: list[LustreNid] = spec_field(min_length=1, description="MGS NIDs, e.g. 10.0.0.1@o2ib.", policy=D)
    fs_name: str = spec_field(pattern=allowed(r"^[A-Za-z0-9_]{1,8}$", "1-8 letters, digits or _"), description="Lustre filesystem name (1-8 characters).", policy=D)
    mount_options: MountOptions = spec_field("flock,noatime", description="mount -o options.", policy=D)
    lnet_networks: LnetNetworks | None = spec_field(None, description="LNet networks line, e.g. o2ib0(ib0).", policy=D)


class S3Link(SpecModel):
    bucket: str = spec_field(pattern=BUCKET, description="S3 bucket to link.", policy=R)
    import_path: S3Prefix = spec_field("/", description="Prefix imported into the filesystem.", policy=R)
    export_path: S3Prefix | None = spec_field(None, description="Prefix changes are exported to (default: import_path).", policy=R)


class FsxLustreFS(SharedCommon):
    type: Literal["fsx-lustre"] = spec_field(description="FSx for Lustre created with the AWS stack.")
    mount_point: MountPoint = spec_field("/fsx", description="Where nodes mount it.", policy=D)
    deployment_type: Literal["PERSISTENT_2", "PERSISTENT_1", "SCRATCH_2", "SCRATCH_1"] = spec_field(
        "PERSISTENT_2", description="FSx deployment type.", policy=R
    )
    storage_capacity_gib: int = spec_field(1200, ge=1, description="Capacity, GiB (1200 or a multiple of 2400 for SSD).", policy=L)
    per_unit_storage_throughput: int | None = spec_field(
        250, description="MB/s per TiB (PERSISTENT_2: 125, 250, 500, 1000). Not used by SCRATCH types.", policy=R
    )
    s3_link: S3Link | None = spec_field(None, description="Link to an S3 bucket (data repository association).", policy=R)


class NfsFS(SharedCommon):
    type: Literal["nfs"] = spec_field(description="An NFS export.")
    server: Address = spec_field(description="NFS server: IP address or DNS name.", policy=D)
    export: AbsPath = spec_field(description="Exported path on the server.", policy=D)
    options: MountOptions = spec_field("vers=4.2,hard,noatime", description="mount -o options.", policy=D)


SharedFS = Annotated[Union[LustreFS, FsxLustreFS, NfsFS], Field(discriminator="type")]


class LocalCache(SpecModel):
    devices: Literal["auto"] | list[DevicePath] = spec_field(
        "auto", description="NVMe devices to use, or auto (every unused NVMe namespace).", policy=D
    )
    filesystem: Literal["xfs", "ext4"] = spec_field("xfs", description="Filesystem created on the cache.", policy=R)
    mount_point: MountPoint = spec_field("/mnt/nvme", description="Where the cache is mounted.", policy=D)
    raid0: bool = spec_field(True, description="Stripe several devices into one RAID0 before formatting.", policy=R)
    reformat: bool = spec_field(
        False, description="Allow formatting devices that already hold a filesystem. Off: such devices are left alone.", policy=L
    )
    pools: list[PoolName] | None = spec_field(None, description="Pools that get the cache (default: every GPU pool).", policy=D)


class Checkpoints(SpecModel):
    s3_bucket: str | None = spec_field(
        None, pattern=BUCKET, description="S3 bucket for checkpoints.", policy=R
    )
    s3_prefix: S3Prefix = spec_field("checkpoints/", description="Key prefix inside the bucket.", policy=L)
    path: AbsPath | None = spec_field(None, description="Checkpoint directory on shared storage instead of S3.", policy=L)
    interval_minutes: int = spec_field(10, ge=1, le=1440, description="Advised checkpoint interval (the guide: 5-10 min on spot).", policy=L)


class Storage(SpecModel):
    shared: list[SharedFS] = spec_field(default_factory=list, description="Shared filesystems mounted on the nodes.", policy=D)
    local_cache: LocalCache | None = spec_field(None, description="Local NVMe dataset cache on GPU nodes.", policy=D)
    checkpoints: Checkpoints | None = spec_field(None, description="Where training jobs write checkpoints.", policy=L)
