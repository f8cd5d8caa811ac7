"""compile: ClusterSpec -> ClusterPlan. Pure: no I/O, same spec in, same plan out."""

from __future__ import annotations


from clusterctl.compile.model import (LAB_FIRST_UID, ClusterPlan, Lab, LiveFacts, LocalCache, Mount, Node, PoolPlan,
                                      SlurmSettings)
from clusterctl.compile.nccl import nccl_env
from clusterctl.compile.nodes import controller_node, lab_prefix_len, pool_nodes
from clusterctl.compile.partitions import partitions
from clusterctl.compile.health import health
from clusterctl.compile.storage import fsx_filesystems, local_cache, mounts
from clusterctl.compile.topology import assign_leaves
from clusterctl.compile import vendor
from clusterctl.spec import effective as eff
from clusterctl.spec.cluster import ClusterSpec
from clusterctl.spec.pools import AwsPool, Pool
from clusterctl.core.providers import traits

__all__ = ["ClusterPlan", "LiveFacts", "compile_plan"]


def compile_plan(spec: ClusterSpec, facts: LiveFacts | None = None) -> ClusterPlan:
    """Decide every concrete fact of the cluster. `facts`: what the cloud stack reported (addresses, FSx names)."""
    facts = facts or LiveFacts()
    nodes, switches = assign_leaves(spec, pool_nodes(spec, facts))
    all_mounts = mounts(spec, facts)
    cache = local_cache(spec)
    slurm = spec.scheduler.slurm
    has_local = any(traits(p).lab for p in spec.pools) or traits(spec.controller).lab
    major, minor = (int(x) for x in spec.software.slurm.split(".")[:2])  # the spec's pattern is YY.MM
    return ClusterPlan(
        name=spec.name,
        controller=controller_node(spec, facts),
        nodes=tuple(nodes),
        pools=tuple(_pool_plan(spec, p, nodes, all_mounts, cache) for p in spec.pools),
        partitions=partitions(spec, nodes),
        switches=switches,
        mounts=all_mounts,
        local_cache=cache,
        checkpoints=spec.storage.checkpoints.model_dump() if spec.storage.checkpoints else None,
        fsx=fsx_filesystems(spec),
        slurm=SlurmSettings(
            version=(major, minor),
            preemption=slurm.preemption.enabled and any(p.preemptible for p in slurm.partitions),
            preempt_mode=slurm.preemption.mode.upper(),
            accounting=slurm.accounting.enabled,
            accounting_host=slurm.accounting.storage_host,
            health_check_interval=slurm.health_check_interval_seconds,
            suspend_time=slurm.burst.suspend_time_seconds,
            resume_timeout=slurm.burst.resume_timeout_seconds,
            burst_partitions=tuple(t.partition for t in slurm.burst.targets),
            drain_batch_size=slurm.drain_batch_size,
            drain_timeout=slurm.drain_timeout_seconds,
            accounts=tuple((a.name, a.share, tuple(a.users)) for a in slurm.accounts),
            dcgm_prolog=slurm.dcgm_prolog,
        ),
        software=spec.software.model_dump(),
        monitoring=spec.monitoring.model_dump(),
        controller_os=spec.controller.os,
        controller_repos=vendor.repos(spec, None),
        lab=Lab(spec.lab.subnet, eff.lab_gateway(spec), lab_prefix_len(spec),
                tuple((u, LAB_FIRST_UID + i) for i, u in enumerate(spec.lab.users))) if has_local else None,
        pulumi_backend=spec.state.pulumi_backend,
    )


def _pool_plan(spec: ClusterSpec, pool: Pool, nodes: list[Node], all_mounts: tuple[Mount, ...],
               cache: LocalCache | None) -> PoolPlan:
    fab, _ = eff.fabric(spec, pool)
    nccl = nccl_env(spec, pool)
    repos = vendor.repos(spec, pool)
    nvidia_stack = vendor.installs_nvidia_stack(spec, pool, repos)
    return PoolPlan(
        name=pool.name,
        provider=pool.provider,
        nodes=tuple(n.name for n in nodes if n.pool == pool.name),
        gpus_per_node=eff.gpus_per_node(pool),
        gpu_model=eff.gpu_key(pool),
        fabric=fab.type,
        fabric_speed=fab.speed,
        rails=fab.rails or (eff.gpus_per_node(pool) if fab.type in ("infiniband", "roce") else 0),
        rail_optimized=fab.rail_optimized,
        nccl_env=nccl.env,
        nccl_notes=nccl.notes,
        health=health(spec, pool, all_mounts, cache, nvidia_stack),
        gpu_cores=layout.gpu_cores(eff.gpus_per_node(pool)) if (layout := eff.cpu_layout(pool)) else (),
        elastic=isinstance(pool, AwsPool) and pool.elastic,
        instance_type=pool.instance_type if isinstance(pool, AwsPool) else None,
        region=pool.region if isinstance(pool, AwsPool) else None,
        availability_zones=tuple(pool.availability_zones) if isinstance(pool, AwsPool) else (),
        market=pool.market if isinstance(pool, AwsPool) else None,
        fallback_markets=tuple(pool.fallback_markets) if isinstance(pool, AwsPool) else (),
        capacity_reservation_id=pool.capacity_reservation_id if isinstance(pool, AwsPool) else None,
        static_count=eff.static_nodes(pool),
        max_count=eff.max_nodes(pool),
        ami=pool.ami if isinstance(pool, AwsPool) else None,
        os=pool.os,
        repos=repos,
        nvidia_stack=nvidia_stack,
    )
