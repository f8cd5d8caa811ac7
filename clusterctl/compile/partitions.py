"""Slurm partitions from the spec, with the guide's two tiers: critical (never preempted) and experiment (preemptible)."""

from __future__ import annotations

from clusterctl.compile.model import Node, Partition
from clusterctl.spec.cluster import ClusterSpec

CRITICAL_TIER = 2  # PriorityTier of non-preemptible partitions: their jobs preempt preemptible ones
PREEMPTIBLE_TIER = 1


def partitions(spec: ClusterSpec, nodes: list[Node]) -> tuple[Partition, ...]:
    slurm = spec.scheduler.slurm
    parts = slurm.partitions
    default = next((p.name for p in parts if p.default), parts[0].name)
    mode = slurm.preemption.mode.upper()
    out = []
    for p in parts:
        members = set(p.pools)
        preemptible = p.preemptible and slurm.preemption.enabled
        out.append(
            Partition(
                name=p.name,
                nodes=tuple(n.name for n in nodes if n.pool in members),
                default=p.name == default,
                priority_tier=PREEMPTIBLE_TIER if preemptible else CRITICAL_TIER,
                preempt_mode=mode if preemptible else "OFF",
                grace_time=slurm.preemption.grace_time_seconds if preemptible else 0,
                max_time=p.max_time,
            )
        )
    return tuple(out)
