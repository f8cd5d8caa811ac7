"""Rules about Slurm: partitions, burst targets, versions."""

from __future__ import annotations

from typing import Iterable

from clusterctl.core.findings import Finding
from clusterctl.spec.cluster import ClusterSpec

import re

from clusterctl.catalog.instances import BURST_JOIN_SECONDS, GPU_INSTANCE_BOOT_SECONDS
from clusterctl.spec.pools import is_elastic
from clusterctl.validate.base import Validator

MIN_SLURM = (22, 5)


class PartitionPoolsExist(Validator):
    code = "partition-unknown-pool"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        names = {p.name for p in spec.pools}
        for i, part in enumerate(spec.scheduler.slurm.partitions):
            for k, pool in enumerate(part.pools):
                if pool not in names:
                    yield self.error(
                        ("scheduler", "slurm", "partitions", i, "pools", k),
                        f"partition {part.name} names pool {pool!r}, which does not exist (pools: {', '.join(sorted(names))})",
                    )


class PartitionNames(Validator):
    code = "partition-names"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        parts = spec.scheduler.slurm.partitions
        seen = set()
        for i, part in enumerate(parts):
            if part.name in seen:
                yield self.error(("scheduler", "slurm", "partitions", i, "name"), f"partition {part.name} is defined twice")
            seen.add(part.name)
        defaults = [i for i, p in enumerate(parts) if p.default]
        for i in defaults[1:]:
            yield self.error(
                ("scheduler", "slurm", "partitions", i, "default"),
                f"only one default partition; {parts[defaults[0]].name} already is",
            )
        if not defaults:
            yield self.info(("scheduler", "slurm", "partitions"), f"no default partition; {parts[0].name} becomes the default")


class BurstTargetsElastic(Validator):
    code = "burst-target"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        slurm = spec.scheduler.slurm
        parts = {p.name: p for p in slurm.partitions}
        for i, t in enumerate(slurm.burst.targets):
            where = ("scheduler", "slurm", "burst", "targets", i)
            if t.partition not in parts:
                yield self.error(where + ("partition",), f"no partition named {t.partition!r}")
            for k, name in enumerate(t.pools):
                pool = spec.pool(name)
                if pool is None:
                    yield self.error(where + ("pools", k), f"no pool named {name!r}")
                elif not is_elastic(pool):
                    yield self.error(
                        where + ("pools", k),
                        f"pool {name} is static ({pool.provider}, fixed count); burst needs an elastic aws pool (min/max)",
                    )
                elif t.partition in parts and name not in parts[t.partition].pools:
                    yield self.error(where + ("pools", k), f"partition {t.partition} does not include pool {name}; add it to its pools")


class ResumeTimeoutFitsBoot(Validator):
    """Slurm marks a resumed node DOWN when it has not registered within ResumeTimeout: a timeout shorter than a GPU
    instance takes to boot and join fails every burst. A warning, not an error: the figures are estimates, and a
    site with a fast image (or a test harness) may know better."""

    code = "resume-timeout"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        if not any(is_elastic(p) for p in spec.pools):
            return
        needed = GPU_INSTANCE_BOOT_SECONDS + BURST_JOIN_SECONDS
        timeout = spec.scheduler.slurm.burst.resume_timeout_seconds
        if timeout < needed:
            yield self.warning(
                ("scheduler", "slurm", "burst", "resume_timeout_seconds"),
                f"{timeout} s is shorter than an elastic GPU node needs to come up: about {GPU_INSTANCE_BOOT_SECONDS} s "
                f"to boot plus {BURST_JOIN_SECONDS} s to join Slurm; use at least {needed} (default 1800)",
            )


class ElasticPoolsReachable(Validator):
    code = "elastic-unused"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        targeted = {n for t in spec.scheduler.slurm.burst.targets for n in t.pools}
        for i, p in enumerate(spec.pools):
            if is_elastic(p) and p.name not in targeted:
                yield self.warning(("pools", i, "max"), f"elastic pool {p.name} is in no burst target; it never grows past min")


class PoolsInSomePartition(Validator):
    code = "pool-unscheduled"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        used = {n for part in spec.scheduler.slurm.partitions for n in part.pools}
        for i, p in enumerate(spec.pools):
            if p.name not in used:
                yield self.warning(("pools", i, "name"), f"pool {p.name} is in no partition; jobs can never run on it")


class SlurmVersionSupported(Validator):
    code = "slurm-version"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        m = re.match(r"^(\d+)\.(\d+)$", spec.software.slurm)
        if m and (int(m.group(1)), int(m.group(2))) < MIN_SLURM:
            yield self.error(("software", "slurm"), f"Slurm {spec.software.slurm} is older than 22.05, the oldest clusterctl renders for")


class PreemptionHasTiers(Validator):
    code = "preemption-tiers"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        slurm = spec.scheduler.slurm
        if not slurm.preemption.enabled:
            return
        pre = [p for p in slurm.partitions if p.preemptible]
        crit = [p for p in slurm.partitions if not p.preemptible]
        if pre and not crit:
            yield self.warning(
                ("scheduler", "slurm", "partitions"), "every partition is preemptible: nothing can preempt them (add a critical partition)"
            )

