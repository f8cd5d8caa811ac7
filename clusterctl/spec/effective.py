"""Values the spec leaves implicit, derived in one place so validators and the compiler agree."""

from __future__ import annotations

import re
from ipaddress import IPv4Network
from typing import Iterable

from clusterctl.core import hostlist
from clusterctl.catalog import GPUS, INSTANCE_TYPES
from clusterctl.catalog.cpus import INSTANCE_LAYOUTS, REFERENCE_SERVER_LAYOUTS, CpuLayout
from clusterctl.catalog.instances import InstanceType
from clusterctl.spec.cluster import ClusterSpec
from clusterctl.spec.fabric import Fabric
from clusterctl.spec.pools import AwsPool, LocalPool, OnpremPool, Pool
from clusterctl.spec.storage import SharedFS
from clusterctl.spec.types import LND

DEFAULT_GPUS_PER_NODE = 8
LAB_FIRST_HOST = 10  # lab addresses start at .10: the controller; .1 is the host side of the lab bridge


def pool_index(spec: ClusterSpec, pool: Pool) -> int:
    return next(i for i, p in enumerate(spec.pools) if p is pool)


def instance_type(pool: Pool) -> InstanceType | None:
    return INSTANCE_TYPES.get(pool.instance_type) if isinstance(pool, AwsPool) else None


def gpu_key(pool: Pool) -> str | None:
    it = instance_type(pool)
    return pool.gpu or (it.gpu if it else None)


def gpus_per_node(pool: Pool) -> int:
    if pool.gpus_per_node is not None:
        return pool.gpus_per_node
    it = instance_type(pool)
    if it:
        return it.gpus
    return DEFAULT_GPUS_PER_NODE if pool.gpu else 0


def gres_type(pool: Pool) -> str | None:
    key = gpu_key(pool)
    return GPUS[key].gres_type if key in GPUS else None


# Memory Slurm may hand to jobs on catalog instances: leave 5% for the OS, daemons and page cache headroom.
OS_MEMORY_RESERVE = 0.05


def cpus(pool: Pool) -> int:
    """CPUs Slurm schedules per node: the spec's, else the CPU layout's, else the instance type's vCPUs, else 1."""
    it = instance_type(pool)
    layout = cpu_layout(pool)
    return pool.cpus or (layout.cpus if layout else None) or (it.vcpus if it else 1)


def cpu_layout(pool: Pool) -> CpuLayout | None:
    """Sockets/cores/threads per node: the spec's; else the catalog's for the instance type, or for owned nodes the GPU's
    reference server where the spec's CPU count matches it. Lab nodes get one only from the spec."""
    if pool.sockets is not None:
        assert pool.cores_per_socket is not None and pool.threads_per_core is not None  # given together (_cpu_layout)
        return CpuLayout(pool.sockets, pool.cores_per_socket, pool.threads_per_core)
    if isinstance(pool, AwsPool):
        layout = INSTANCE_LAYOUTS.get(pool.instance_type)
        return layout if layout and pool.cpus in (None, layout.cpus) else None
    if isinstance(pool, OnpremPool):
        # Only when the spec's CPU count says the nodes are built like the reference server: a guess about owned
        # hardware that is wrong makes slurmd register fewer CPUs than configured, and the node goes INVAL.
        layout = REFERENCE_SERVER_LAYOUTS.get(pool.gpu or "")
        return layout if layout and pool.cpus == layout.cpus else None
    return None


def memory_mb(pool: Pool) -> int | None:
    """RealMemory per node: the spec's, else the instance type's RAM less the OS reserve; None when unknown."""
    if pool.memory_mb is not None:
        return pool.memory_mb
    it = instance_type(pool)
    return int(it.memory_gib * 1024 * (1 - OS_MEMORY_RESERVE)) if it else None


def fabric(spec: ClusterSpec, pool: Pool) -> tuple[Fabric, tuple]:
    """The pool's fabric and the spec path that set it. AWS pools default to EFA (or Ethernet without EFA support)."""
    i = pool_index(spec, pool)
    if pool.fabric is not None:
        return pool.fabric, ("pools", i, "fabric")
    if isinstance(pool, AwsPool):
        it = instance_type(pool)
        return Fabric(type="efa" if (it is None or it.efa_supported) else "ethernet"), ("pools", i, "instance_type")
    return spec.fabric, ("fabric",)


def max_nodes(pool: Pool) -> int:
    """Nodes the pool can have at most (elastic pools: max)."""
    if isinstance(pool, AwsPool):
        return (pool.max or 0) if pool.elastic else (pool.count or 0)
    if isinstance(pool, LocalPool):
        return pool.count
    return sum(_group_size(g.names) for g in pool.hosts)


def _group_size(names: str) -> int:
    try:
        return len(hostlist.expand(names))
    except hostlist.HostlistError:
        return 0  # reported by the hosts validator; sizes stay computable for the other rules


def static_nodes(pool: Pool) -> int:
    if isinstance(pool, AwsPool):
        return (pool.min or 0) if pool.elastic else (pool.count or 0)
    return max_nodes(pool)


def prefix(pool: Pool) -> str:
    return getattr(pool, "node_prefix", None) or pool.name


def generated_names(pool: Pool) -> list[str]:
    """Node names of local and aws pools: <prefix><NNN>, numbered from 001."""
    width = max(3, len(str(max_nodes(pool))))
    return [f"{prefix(pool)}{str(i).zfill(width)}" for i in range(1, max_nodes(pool) + 1)]


def onprem_hosts(pool: OnpremPool) -> list[tuple[str, str]]:
    """(name, address) of every host; raises hostlist.HostlistError or ValueError on a bad group."""
    out: list[tuple[str, str]] = []
    for g in pool.hosts:
        names = hostlist.expand(g.names)
        if g.address_map is not None:
            missing = [n for n in names if n not in g.address_map]
            if missing:
                raise ValueError(f"address_map has no address for {hostlist.compress(missing)}")
            addrs = [g.address_map[n] for n in names]
        else:
            addrs = hostlist.expand(g.addresses or "")  # the model holds one of addresses / address_map
            if len(addrs) != len(names):
                raise ValueError(f"{len(names)} names but {len(addrs)} addresses")
        out.extend(zip(names, addrs, strict=True))
    return out


def controller_name(spec: ClusterSpec) -> str:
    return spec.controller.hostname or f"{spec.name}-ctl"


def lab_addresses(spec: ClusterSpec) -> list[str]:
    """Addresses handed out in order: the controller first, then local pool nodes."""
    net = IPv4Network(spec.lab.subnet)
    hosts = list(net.hosts())
    return [str(a) for a in hosts[LAB_FIRST_HOST - 1 :]]


def lab_gateway(spec: ClusterSpec) -> str:
    return str(next(IPv4Network(spec.lab.subnet).hosts()))


def total_gpus(spec: ClusterSpec, pools: Iterable[Pool] | None = None) -> int:
    return sum(max_nodes(p) * gpus_per_node(p) for p in (pools if pools is not None else spec.pools))


def mounting_pools(spec: ClusterSpec, fs: SharedFS) -> list[Pool]:
    """The pools that mount a shared filesystem: its `pools`, or every pool when it names none."""
    return [p for p in spec.pools if fs.pools is None or p.name in fs.pools]


def mounting_aws_pools(spec: ClusterSpec, fs: SharedFS) -> list[AwsPool]:
    return [p for p in mounting_pools(spec, fs) if isinstance(p, AwsPool)]


def fsx_zone(spec: ClusterSpec, fs: SharedFS) -> str | None:
    """The AZ an FSx for Lustre filesystem is created in (FSx for Lustre lives in one subnet, so one AZ): where the
    static nodes of the first aws pool that mounts it launch, its first AZ. None without an aws pool."""
    pools = mounting_aws_pools(spec, fs) or [p for p in spec.pools if isinstance(p, AwsPool)]
    return pools[0].availability_zones[0] if pools else None


_LNET_ENTRY = re.compile(rf"({LND})(\([^)]*\))?")  # the schema's network pattern (LND has a group of its own)


def lnet_entries(networks: str) -> list[tuple[str, str, str]]:
    """An LNet networks line (schema-checked: spec/types.LnetNetworks) as (network, interfaces, entry) per entry.
    The network is normalised as LNet reads it (`tcp` is `tcp0`); interfaces may hold commas: o2ib1(ib1,ib2)."""
    out = []
    for m in _LNET_ENTRY.finditer(networks):
        net = m.group(1) if m.group(1)[-1].isdigit() else m.group(1) + "0"
        out.append((net, (m.group(3) or "")[1:-1], m.group(0)))
    return out


def lnet_line(lines: Iterable[str | None]) -> str | None:
    """One `networks=` value for a node's Lustre filesystems: every network once, in first-mention order (LNet
    refuses a network named twice; validation refuses one network given two interface lists)."""
    seen: dict[str, str] = {}
    for line in lines:
        for net, _ifaces, entry in lnet_entries(line or ""):
            seen.setdefault(net, entry)
    return ",".join(seen.values()) or None
