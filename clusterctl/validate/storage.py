"""Rules about storage: FSx combinations AWS accepts, pool references, checkpoint targets."""

from __future__ import annotations

from typing import Iterable

from clusterctl.core.findings import Finding
from clusterctl.spec import effective as eff
from clusterctl.spec.cluster import ClusterSpec

from clusterctl.validate.base import Validator
from clusterctl.spec.storage import FsxLustreFS, LustreFS
from clusterctl.core.providers import traits

# FSx for Lustre API reference (CreateFileSystemLustreConfiguration.PerUnitStorageThroughput, StorageCapacity).
FSX_THROUGHPUT = {"PERSISTENT_2": (125, 250, 500, 1000), "PERSISTENT_1": (50, 100, 200)}


def fsx_capacity_ok(deployment: str, gib: int) -> bool:
    if deployment == "SCRATCH_1":
        return gib in (1200, 2400) or gib % 3600 == 0
    return gib == 1200 or gib % 2400 == 0


class FsxCombination(Validator):
    code = "fsx-invalid"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        has_aws = any(traits(p).rented for p in spec.pools)
        for j, fs in enumerate(spec.storage.shared):
            if not isinstance(fs, FsxLustreFS):
                continue
            where = ("storage", "shared", j)
            if not has_aws:
                yield self.error(where + ("type",), "fsx-lustre is created in AWS; this cluster has no aws pool")
            if not fsx_capacity_ok(fs.deployment_type, fs.storage_capacity_gib):
                rule = "1200, 2400 or a multiple of 3600" if fs.deployment_type == "SCRATCH_1" else "1200 or a multiple of 2400"
                yield self.error(
                    where + ("storage_capacity_gib",),
                    f"FSx {fs.deployment_type} capacity must be {rule} GiB, not {fs.storage_capacity_gib}",
                )
            allowed = FSX_THROUGHPUT.get(fs.deployment_type)
            t = fs.per_unit_storage_throughput
            if allowed is None and t is not None:
                yield self.error(
                    where + ("per_unit_storage_throughput",), f"{fs.deployment_type} takes no per-unit throughput (remove it)"
                )
            elif allowed is not None and t not in allowed:
                yield self.error(
                    where + ("per_unit_storage_throughput",),
                    f"FSx {fs.deployment_type} per-unit throughput must be one of {', '.join(map(str, allowed))} MB/s/TiB, not {t}",
                )


class FsxInTheNodesAz(Validator):
    """FSx for Lustre lives in one subnet, so one AZ (compile puts it where the first mounting pool's static nodes
    launch). A mounting pool that starts in another AZ would read it across AZs on every I/O: latency and transfer
    charges. Fallback AZs, tried only on capacity errors, are said, not refused."""

    code = "fsx-az"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        index = {p.name: i for i, p in enumerate(spec.pools)}
        for j, fs in enumerate(spec.storage.shared):
            if not isinstance(fs, FsxLustreFS):
                continue
            pools, zone = eff.mounting_aws_pools(spec, fs), eff.fsx_zone(spec, fs)
            for p in pools:
                where = ("pools", index[p.name], "availability_zones")
                first, *fallbacks = p.availability_zones
                if first != zone:
                    yield self.error(where + (0,), (
                        f"pool {p.name} launches in {first}, but FSx {fs.mount_point} (storage.shared[{j}]) is created "
                        f"in {zone}, the first AZ of pool {pools[0].name}: one FSx is one AZ, so these nodes would "
                        f"read it across AZs. Start availability_zones with {zone}, or leave {p.name} out of "
                        f"storage.shared[{j}].pools"))
                elif [az for az in fallbacks if az != zone]:
                    yield self.info(where, (
                        f"nodes of pool {p.name} launched in its fallback AZs ({', '.join(fallbacks)}) reach FSx "
                        f"{fs.mount_point} in {zone} across AZs"))


class LnetNetworksAgree(Validator):
    """A node mounting several Lustre filesystems gets one LNet networks line (compile merges them); a network that two
    of them give different interfaces cannot be written as one, and LNet would refuse it named twice."""

    code = "lnet-conflict"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        for pool in spec.pools:
            seen: dict[str, tuple[int, str]] = {}  # network -> (index in storage.shared, interfaces)
            for j, fs in enumerate(spec.storage.shared):
                if not isinstance(fs, LustreFS) or not fs.lnet_networks or pool not in eff.mounting_pools(spec, fs):
                    continue
                for net, ifaces, entry in eff.lnet_entries(fs.lnet_networks):
                    first = seen.setdefault(net, (j, ifaces))
                    if first[1] != ifaces:
                        yield self.error(("storage", "shared", j, "lnet_networks"), (
                            f"LNet network {net} is {entry} here but has interfaces ({first[1]}) in "
                            f"storage.shared[{first[0]}].lnet_networks, and pool {pool.name} mounts both: a node takes one "
                            f"interface list per network"))
                        return


class StoragePoolsExist(Validator):
    code = "storage-unknown-pool"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        names = {p.name for p in spec.pools}
        refs: list[tuple[tuple[str | int, ...], list[str] | None]] = [
            (("storage", "shared", j, "pools"), fs.pools) for j, fs in enumerate(spec.storage.shared)]
        if spec.storage.local_cache is not None:
            refs.append((("storage", "local_cache", "pools"), spec.storage.local_cache.pools))
        for where, pools in refs:
            for k, name in enumerate(pools or []):
                if name not in names:
                    yield self.error(where + (k,), f"no pool named {name!r}")


class UniqueMounts(Validator):
    code = "mount-conflict"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        seen: dict[str, tuple] = {}
        mounts: list[tuple[tuple[str | int, ...], str]] = [
            (("storage", "shared", j, "mount_point"), fs.mount_point) for j, fs in enumerate(spec.storage.shared)]
        if spec.storage.local_cache is not None:
            mounts.append((("storage", "local_cache", "mount_point"), spec.storage.local_cache.mount_point))
        for where, m in mounts:
            if m in ("/", "/usr", "/etc", "/var", "/boot", "/home"):
                yield self.error(where, f"{m} is a system directory; mount shared storage elsewhere")
            if m in seen:
                yield self.error(where, f"{m} is already the mount point of {'.'.join(map(str, seen[m]))}")
            seen.setdefault(m, where)


class CheckpointTarget(Validator):
    code = "checkpoint-target"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        c = spec.storage.checkpoints
        if c is None:
            return
        if (c.s3_bucket is None) == (c.path is None):
            yield self.error(("storage", "checkpoints"), "give exactly one of s3_bucket or path")
