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
                def_mem_per_gpu=def_mem_per_gpu([n for n in nodes if n.pool in members]),
            )
        )
    return tuple(out)


def def_mem_per_gpu(nodes: list[Node]) -> int | None:
    """Schedulable memory per GPU on the partition's leanest GPU node. Without it a GPU job is given the whole node's
    memory (DefMemPerNode defaults to unlimited under CR_Core_Memory), so two 4-GPU jobs could never share 8 GPUs."""
    gpu_nodes = [n for n in nodes if n.gpus]
    memory = [n.memory_mb for n in gpu_nodes]
    if not gpu_nodes or any(m is None or m == 0 for m in memory):
        return None
    return min((m - n.mem_spec_mb) // n.gpus for n, m in zip(gpu_nodes, memory, strict=True) if m is not None)
