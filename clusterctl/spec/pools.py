"""Node pools: where capacity comes from (lab containers, owned hosts, rented AWS instances)."""

from __future__ import annotations

from typing import Annotated, Literal, Self, Union

from pydantic import Field, StringConstraints, model_validator

from clusterctl.core import hostlist
from clusterctl.spec.base import SpecModel, UpdatePolicy, spec_field
from clusterctl.spec.fabric import Fabric
from clusterctl.spec.vendor import OsName
from clusterctl.spec.types import (
    NAME_PATTERN,
    Address,
    AvailabilityZone,
    AwsRegion,
    HostlistOfAddresses,
    HostlistOfNames,
    InstanceType,
    JumpHost,
    LocalPath,
    NodeName,
    PosixUser,
    allowed,
)

GpuKey = Literal["h100-sxm", "h100-pcie", "h200", "b200", "a100-80gb", "a100-40gb", "l40s", "mi300x"]
Market = Literal["on-demand", "spot", "capacity-block", "reserved"]
FallbackMarket = Literal["on-demand", "spot"]  # bought per launch; blocks and reservations belong to one pool
FEATURE_PATTERN = allowed(r"^[A-Za-z0-9_-]{1,64}$", "a feature: 1-64 letters, digits, _ or -")

L, D, R, F = UpdatePolicy.LIVE, UpdatePolicy.DRAIN, UpdatePolicy.REPLACE, UpdatePolicy.FORBIDDEN


class SshSpec(SpecModel):
    user: PosixUser = spec_field("root", description="SSH user Ansible logs in as (a POSIX login name).")
    port: int = spec_field(22, ge=1, le=65535, description="SSH port.")
    jump_host: JumpHost | None = spec_field(None, description="Bastion as [user@]host[:port] (OpenSSH ProxyJump).")
    become: bool = spec_field(False, description="Escalate with sudo after login (needed when user is not root).")
    private_key_file: LocalPath | None = spec_field(None, description="Private key path (absolute or ~/...); default: the SSH agent / ~/.ssh config.")
    known_hosts_file: LocalPath | None = spec_field(
        None, description="Pin host keys: check hosts (and the jump host) strictly against this file instead of ~/.ssh/known_hosts."
    )


class HostGroup(SpecModel):
    names: HostlistOfNames = spec_field(
        description="Slurm hostlist of node names (lower-case letters, digits and -), e.g. gpu[001-064].", policy=R
    )
    addresses: HostlistOfAddresses | None = spec_field(
        None, description="Hostlist of addresses in the same order, e.g. 10.1.0.[1-64]. Alternative to address_map.", policy=R
    )
    address_map: dict[NodeName, Address] | None = spec_field(
        None, description="Explicit node name -> address (IP or DNS name) map.", policy=R,
        json_schema_extra={"additionalProperties": False},  # keys outside the host name pattern are errors
    )

    @model_validator(mode="after")
    def _one_address_source(self) -> Self:
        if (self.addresses is None) == (self.address_map is None):
            raise ValueError("give exactly one of 'addresses' (a hostlist) or 'address_map'")
        return self


class PoolCommon(SpecModel):
    name: str = spec_field(description="Pool name; also the Ansible group and the default node name prefix.", pattern=NAME_PATTERN, policy=R)
    gpu: GpuKey | None = spec_field(None, description="GPU model of every node in the pool; omit for CPU-only pools.", policy=R)
    gpus_per_node: int | None = spec_field(
        None, ge=0, le=16, description="GPUs per node; defaults to the instance type's count (aws) or 8 when gpu is set.", policy=R
    )
    cpus: int | None = spec_field(None, ge=1, le=4096, description="CPUs Slurm schedules per node (default: catalog or 1).", policy=D)
    memory_mb: int | None = spec_field(None, ge=256, description="RealMemory Slurm schedules per node, MiB.", policy=D)
    sockets: int | None = spec_field(
        None, ge=1, le=16, description="CPU sockets per node (Slurm Sockets); default: the catalog's layout. Give with "
        "cores_per_socket and threads_per_core.", policy=D)
    cores_per_socket: int | None = spec_field(None, ge=1, le=512, description="Physical cores per socket (CoresPerSocket).", policy=D)
    threads_per_core: int | None = spec_field(None, ge=1, le=8, description="Hardware threads per core (ThreadsPerCore).", policy=D)
    features: list[Annotated[str, StringConstraints(pattern=FEATURE_PATTERN)]] = spec_field(
        default_factory=list, description="Extra Slurm node features (letters, digits, _ and -).", policy=L
    )
    fabric: Fabric | None = spec_field(None, description="Overrides the cluster-level fabric for this pool.", policy=R)
    os: OsName = spec_field(
        "debian12", description="Distribution on the pool's nodes: debian12, ubuntu2204 or ubuntu2404 (picks the vendor "
        "repositories; lab nodes are debian12).", policy=R
    )

    @model_validator(mode="after")
    def _cpu_layout(self) -> Self:
        given = [v is not None for v in (self.sockets, self.cores_per_socket, self.threads_per_core)]
        if any(given) and not all(given):
            raise ValueError("give sockets, cores_per_socket and threads_per_core together")
        s, c, t = self.sockets, self.cores_per_socket, self.threads_per_core
        if s is not None and c is not None and t is not None and self.cpus is not None and self.cpus != s * c * t:
            raise ValueError("cpus must equal sockets x cores_per_socket x threads_per_core")
        return self


class LocalPool(PoolCommon):
    provider: Literal["local"] = spec_field(description="Lab nodes on this machine (systemd-nspawn + network namespaces).", policy=R)
    count: int = spec_field(ge=1, le=64, description="Number of lab nodes.", policy=L, shrink=D)
    node_prefix: str | None = spec_field(None, pattern=NAME_PATTERN, description="Node name prefix (default: pool name).", policy=R)

    def max_nodes(self) -> int:
        return self.count


class OnpremPool(PoolCommon):
    provider: Literal["onprem"] = spec_field(description="Bare-metal hosts you own, configured over SSH.", policy=R)
    hosts: list[HostGroup] = spec_field(min_length=1, description="Host groups: names and addresses.", policy=L, shrink=D)
    ssh: SshSpec = spec_field(default_factory=SshSpec, description="How Ansible reaches these hosts.", policy=L)

    def max_nodes(self) -> int:
        return sum(hostlist.count(g.names) for g in self.hosts)  # counted, never expanded: hostile sizes cost nothing


class AwsPool(PoolCommon):
    provider: Literal["aws"] = spec_field(description="Rented EC2 capacity created with Pulumi.", policy=R)
    instance_type: InstanceType = spec_field(description="EC2 instance type, e.g. p5.48xlarge.", policy=R)
    region: AwsRegion = spec_field(description="AWS region, e.g. us-east-1.", policy=F)
    availability_zones: list[AvailabilityZone] = spec_field(
        min_length=1, description="AZs to launch in, in order of preference (next one tried on capacity errors).", policy=L
    )
    market: Market = spec_field("on-demand", description="Purchase option: on-demand, spot, capacity-block or reserved.", policy=R)
    capacity_reservation_id: str | None = spec_field(
        None, pattern=allowed(r"^cr-[0-9a-f]{8,17}$", "a reservation id: cr- and 8-17 hex digits"), description="Capacity reservation / capacity block id (cr-...).", policy=R
    )
    fallback_markets: list[FallbackMarket] = spec_field(
        default_factory=list,
        description="Elastic pools: purchase options Slurm's resume tries next, in order, when the pool's market has no "
        "capacity in any of its AZs or hits its quota (e.g. [on-demand] behind spot).",
        policy=L,
    )
    count: int | None = spec_field(
        None, ge=1, le=4096, description="Static node count (always running); a pool that may be empty is elastic (min/max).",
        policy=L, shrink=D,
    )
    min: int | None = spec_field(None, ge=0, le=4096, description="Elastic pool: nodes kept running.", policy=L, shrink=D)
    max: int | None = spec_field(None, ge=1, le=4096, description="Elastic pool: most nodes Slurm may power up.", policy=L, shrink=D)
    ami: str | None = spec_field(None, pattern=allowed(r"^ami-[0-9a-f]{8,17}$", "an AMI id: ami- and 8-17 hex digits"), description="AMI id (default: latest Debian 12).", policy=R)
    node_prefix: str | None = spec_field(None, pattern=NAME_PATTERN, description="Node name prefix (default: pool name).", policy=R)

    @model_validator(mode="after")
    def _static_or_elastic(self) -> Self:
        if self.count is not None and (self.min is not None or self.max is not None):
            raise ValueError("give either 'count' (static) or 'min'/'max' (elastic), not both")
        if self.count is None and self.max is None:
            raise ValueError("give 'count' (static pool) or 'max' (elastic pool)")
        if self.max is not None and self.min is not None and self.min > self.max:
            raise ValueError(f"'min' ({self.min}) is larger than 'max' ({self.max})")
        return self

    def max_nodes(self) -> int:
        return self.count if self.count is not None else (self.max or 0)

    @property
    def elastic(self) -> bool:
        return self.max is not None


Pool = Annotated[Union[LocalPool, OnpremPool, AwsPool], Field(discriminator="provider")]


def is_elastic(pool: Pool) -> bool:
    return isinstance(pool, AwsPool) and pool.elastic
