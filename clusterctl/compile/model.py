"""ClusterPlan: what the compiler decided, as plain immutable data. Renderers and engines only read it."""

from __future__ import annotations
from clusterctl.core.providers import traits

from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any


@dataclass(frozen=True)
class SshTarget:
    user: str = "root"
    port: int = 22
    jump_host: str | None = None
    become: bool = False
    private_key_file: str | None = None
    known_hosts_file: str | None = None


@dataclass(frozen=True)
class LiveFacts:
    """What exists only once cloud resources do (the stack's outputs); compile takes them as input."""

    addresses: dict = field(default_factory=dict)  # node name (the controller too) -> private IPv4
    jump_host: str | None = None  # user@public address of the aws controller: how cloud nodes are reached
    mount_sources: dict = field(default_factory=dict)  # mount point -> source (FSx: <dns>@tcp:/<mountname>)


@dataclass(frozen=True)
class Node:
    name: str
    pool: str | None  # None for the controller
    provider: str  # local | onprem | aws
    role: str  # controller | compute
    address: str | None  # None: known only once the cloud instance exists
    gpus: int = 0
    gpu_model: str | None = None  # catalog key, e.g. h100-sxm
    gres_type: str | None = None  # Slurm GRES type, e.g. h100
    cpus: int = 1
    memory_mb: int | None = None
    mem_spec_mb: int = 0  # MemSpecLimit: memory kept from jobs for the OS and the node's daemons
    sockets: int = 0  # CPU layout (0: unknown, only CPUs= is written)
    cores_per_socket: int = 0
    threads_per_core: int = 0
    features: tuple[str, ...] = ()
    cloud: bool = False  # Slurm State=CLOUD: powered up on demand (elastic pools above min)
    leaf: str | None = None  # leaf switch (topology.conf)
    instance_type: str | None = None  # aws nodes
    ssh: SshTarget = field(default_factory=SshTarget)


@dataclass(frozen=True)
class Mount:
    kind: str  # lustre | fsx-lustre | nfs
    source: str  # what `mount` takes, e.g. 10.0.0.1@o2ib:/atlas or server:/export
    mount_point: str
    options: str
    pools: tuple[str, ...]
    lnet_networks: str | None = None


@dataclass(frozen=True)
class Fsx:
    """An FSx for Lustre filesystem the cloud stack creates."""

    mount_point: str
    deployment_type: str
    storage_capacity_gib: int
    per_unit_storage_throughput: int | None
    s3_bucket: str | None
    import_path: str | None
    export_path: str | None
    availability_zone: str  # where its mounting pools' static nodes launch (one FSx is one subnet, one AZ)


@dataclass(frozen=True)
class LocalCache:
    devices: tuple[str, ...] | None  # None = auto-detect unused NVMe namespaces
    filesystem: str
    mount_point: str
    raid0: bool
    reformat: bool
    pools: tuple[str, ...]


@dataclass(frozen=True)
class Health:
    """What the node health check expects on a pool's nodes."""

    gpus: int
    ib_ports: int  # active InfiniBand/RoCE ports expected (0: not checked); counted only where rails are not named
    efa_devices: int
    mounts: tuple[str, ...]
    gpu_source: str = "nvidia-smi"  # "devices": lab nodes judge /dev/nvidiaN unless a stand-in nvidia-smi is there
    rails: tuple[tuple[str, int, int], ...] = ()  # (RDMA device, port, Gb/s) of each compute rail, from the spec
    pcie_gen: int = 0
    pcie_width: int = 0
    nvlinks: int = 0
    fabric_manager: bool = False
    cache_mount: str | None = None
    driver: str | None = None  # the NVIDIA driver nvidia-smi must report where clusterctl installs it; None: not judged


@dataclass(frozen=True)
class Repo:
    """One vendor repository (or installer tarball) a node group installs from, resolved from mirrors + the catalog."""

    component: str  # cuda | doca | lustre | efa | slurm
    kind: str  # apt | tarball
    url: str  # apt: the repository URL; tarball: the file's URL
    suite: str  # apt suite ("/" or "./")
    key_url: str | None  # the signing key (required: nothing unsigned is installed)
    keyring: str  # /usr/share/keyrings/<keyring>.gpg
    mirror: bool  # True: from the spec's mirrors:, False: the vendor's public location
    key_fingerprint: str | None = None  # tarball signed with the vendor's own key: its pinned primary fingerprint


@dataclass(frozen=True)
class PoolPlan:
    name: str
    provider: str
    nodes: tuple[str, ...]
    gpus_per_node: int
    gpu_model: str | None
    fabric: str
    fabric_speed: str | None
    rails: int
    rail_optimized: bool
    nccl_env: tuple[tuple[str, str], ...]
    health: Health
    gpu_cores: tuple[str, ...] = ()  # per GPU index: the Slurm core range on its socket (gres.conf Cores=)
    nccl_notes: tuple[tuple[str, str], ...] = ()  # (variable or "", why): comments of the rendered env file
    elastic: bool = False
    instance_type: str | None = None
    region: str | None = None
    availability_zones: tuple[str, ...] = ()
    market: str | None = None
    fallback_markets: tuple[str, ...] = ()  # elastic pools: what resume tries when the market has no capacity
    capacity_reservation_id: str | None = None
    static_count: int = 0
    max_count: int = 0
    ami: str | None = None
    os: str = "debian12"
    repos: tuple[Repo, ...] = ()
    nvidia_stack: bool = False  # clusterctl installs the NVIDIA driver, CUDA and NCCL here (vendor.installs_nvidia_stack)


@dataclass(frozen=True)
class Partition:
    name: str
    nodes: tuple[str, ...]
    default: bool
    priority_tier: int
    preempt_mode: str  # OFF for critical partitions, the preemption mode for preemptible ones
    grace_time: int
    max_time: str
    def_mem_per_gpu: int | None = None  # MiB a job gets per GPU unless it asks (so jobs can share a node)


@dataclass(frozen=True)
class Switch:
    name: str
    nodes: tuple[str, ...] = ()
    switches: tuple[str, ...] = ()


@dataclass(frozen=True)
class SlurmSettings:
    version: tuple[int, int]
    preemption: bool
    preempt_mode: str
    accounting: bool
    accounting_host: str | None
    health_check_interval: int
    suspend_time: int
    resume_timeout: int
    burst_partitions: tuple[str, ...]
    drain_batch_size: int = 1
    drain_timeout: int = 3600
    accounts: tuple[tuple[str, int, tuple[str, ...]], ...] = ()  # (account, fair share, users)
    dcgm_prolog: bool = False


@dataclass(frozen=True)
class Lab:
    subnet: str
    gateway: str
    prefix_len: int
    users: tuple[tuple[str, int], ...] = ()  # (login, uid): the same uid on every node, as the shared /home needs


LAB_FIRST_UID = 2000  # above Debian's system and first-user ranges (adduser.conf FIRST_UID=1000)


@dataclass(frozen=True)
class ClusterPlan:
    name: str
    controller: Node
    nodes: tuple[Node, ...]
    pools: tuple[PoolPlan, ...]
    partitions: tuple[Partition, ...]
    switches: tuple[Switch, ...]
    mounts: tuple[Mount, ...]
    local_cache: LocalCache | None
    checkpoints: dict | None
    fsx: tuple[Fsx, ...]
    slurm: SlurmSettings
    software: dict
    monitoring: dict
    lab: Lab | None = None
    controller_os: str = "debian12"
    controller_repos: tuple[Repo, ...] = ()
    pulumi_backend: str | None = None  # state backend of the aws stack from the spec (None: the default / env)

    def pool(self, name: str) -> PoolPlan:
        return next(p for p in self.pools if p.name == name)

    def nodes_of(self, pool: str) -> list[Node]:
        return [n for n in self.nodes if n.pool == pool]

    @property
    def all_nodes(self) -> tuple[Node, ...]:
        return (self.controller, *self.nodes)

    @property
    def aws_pools(self) -> tuple[PoolPlan, ...]:
        return tuple(p for p in self.pools if traits(p).rented)

    @property
    def static_spot_nodes(self) -> tuple[Node, ...]:
        """Static (Pulumi's) nodes of spot pools: EC2 may take them back, and the sync timer replaces them."""
        spot = {p.name for p in self.aws_pools if p.market == "spot"}
        return tuple(n for n in self.nodes if not n.cloud and n.pool in spot)

    def to_dict(self) -> dict:
        return _plain(self)


_LEAVES = frozenset((str, int, float, bool, type(None)))
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}  # per dataclass: fields() is slow, and called once per node otherwise


def _plain(value: Any) -> Any:  # a plan's dataclasses -> JSON-able values
    """dataclasses.asdict without its deep copies (every value here is immutable): a third of render's time at scale."""
    cls = type(value)
    if cls in _LEAVES:
        return value
    names = _FIELD_NAMES.get(cls)
    if names is None and is_dataclass(cls):
        names = _FIELD_NAMES.setdefault(cls, tuple(f.name for f in fields(cls)))
    if names is not None:
        return {name: _plain(getattr(value, name)) for name in names}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
