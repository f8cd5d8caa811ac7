"""The stack config as typed data: one parser for both ways the Pulumi program is run.

`clusterctl up` builds it from the plan (render/cloud.py's `cloud_config`, the same dict written to
build/pulumi/Pulumi.<cluster>.yaml); a plain `pulumi up` reads that file through pulumi.Config. Both end in
`StackConfig.from_mapping`, so the program cannot tell which one ran it. Values that are not in the build
(secrets, the workstation's key, the admin CIDR) are `Runtime` settings, set as stack config by clusterctl or
by hand (`pulumi config set`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

from clusterctl.compile.model import ClusterPlan, Fsx
from clusterctl.render.cloud import PROJECT, cloud_config
from clusterctl.core.providers import traits

# Keys of the rendered config (without the "clusterctl:" namespace) that the program reads.
OBJECT_KEYS = ("network", "controller", "pools", "fsx")
STRING_KEYS = ("cluster", "admin_user", "checkpoint_bucket", "munge_parameter")
# Keys set outside the build: per workstation, or made once per cluster (cluster_id, see apply/secrets.py).
RUNTIME_KEYS = ("ssh_public_key", "admin_cidr", "cluster_id")
# Secrets: never config that clusterctl sets (that goes through argv); a plain `pulumi up` reads them from config.
SECRET_KEYS = ("munge_key_b64",)
# Every resource of the stack and every burst instance carries the cluster's unique id under this key; the burst
# programs and their IAM policy touch only what carries it (the Name/cluster tags are not unique).
CLUSTER_ID_TAG = "clusterctl:cluster-id"


@dataclass(frozen=True)
class EniSlot:
    network_card_index: int
    device_index: int
    interface_type: str  # interface | efa | efa-only


@dataclass(frozen=True)
class PoolConfig:
    name: str
    instance_type: str
    market: str  # on-demand | spot | capacity-block | reserved
    capacity_reservation_id: str | None
    availability_zones: tuple[str, ...]
    ami: str | None
    static_nodes: tuple[str, ...]
    max_nodes: int
    efa: bool
    placement_strategy: str | None  # None: the reservation / capacity block decides placement
    root_volume_gib: int
    network_interfaces: tuple[EniSlot, ...]
    fallback_markets: tuple[str, ...] = ()  # elastic nodes only: markets resume tries after `market`, in order

    @property
    def multi_nic(self) -> bool:
        return len(self.network_interfaces) > 1

    @property
    def primary_az(self) -> str:
        """Static nodes launch here (a cluster placement group is one AZ); the rest are fallbacks."""
        return self.availability_zones[0]


@dataclass(frozen=True)
class SubnetConfig:
    availability_zone: str
    cidr: str


@dataclass(frozen=True)
class NetworkConfig:
    vpc_cidr: str
    public_subnet: SubnetConfig
    subnets: tuple[SubnetConfig, ...]
    ssh_ingress_cidrs: tuple[str, ...]


@dataclass(frozen=True)
class ControllerConfig:
    name: str
    provider: str
    address: str | None
    instance_type: str | None = None
    availability_zone: str | None = None
    ami: str | None = None
    root_volume_gib: int | None = None

    @property
    def on_aws(self) -> bool:
        return traits(self).rented


# The stack config carries an FSx filesystem exactly as the plan describes it.
FsxConfig = Fsx


@dataclass(frozen=True)
class Runtime:
    """Stack settings that are not in the build: per workstation or secret."""

    ssh_public_key: str | None = None
    admin_cidr: str | None = None  # SSH to the controller's public address from here; none: no public address
    cluster_id: str | None = None  # apply/secrets.ensure_cluster_id(); kept out of the build (made per state dir)


@dataclass(frozen=True)
class StackConfig:
    cluster: str
    region: str
    admin_user: str
    network: NetworkConfig
    controller: ControllerConfig
    pools: tuple[PoolConfig, ...]
    fsx: tuple[FsxConfig, ...]
    checkpoint_bucket: str | None
    munge_parameter: str
    runtime: Runtime = field(default_factory=Runtime)

    @property
    def tags(self) -> dict[str, str]:
        if not self.runtime.cluster_id:
            raise ValueError(f"no cluster id for {self.cluster}: set clusterctl:cluster_id (clusterctl up does)")
        return {"clusterctl:cluster": self.cluster, CLUSTER_ID_TAG: self.runtime.cluster_id}

    def pool(self, name: str) -> PoolConfig:
        return next(p for p in self.pools if p.name == name)

    @classmethod
    def from_mapping(cls, cfg: dict, runtime: Runtime | None = None) -> "StackConfig":
        """cfg: the rendered config, keys with or without the 'clusterctl:' namespace, plus 'aws:region'."""
        c = {k.split(":", 1)[1] if k.startswith(PROJECT + ":") else k: v for k, v in cfg.items()}
        net = c["network"]
        return cls(
            cluster=c["cluster"],
            region=c.get("aws:region") or c["region"],
            admin_user=c["admin_user"],
            network=NetworkConfig(
                vpc_cidr=net["vpc_cidr"],
                public_subnet=SubnetConfig(**net["public_subnet"]),
                subnets=tuple(SubnetConfig(**s) for s in net["subnets"]),
                ssh_ingress_cidrs=tuple(net["ssh_ingress_cidrs"]),
            ),
            controller=ControllerConfig(**c["controller"]),
            pools=tuple(_pool(p) for p in c["pools"]),
            fsx=tuple(FsxConfig(**f) for f in c.get("fsx") or ()),
            checkpoint_bucket=c.get("checkpoint_bucket") or None,
            munge_parameter=c["munge_parameter"],
            runtime=runtime or _runtime(c.get),
        )

    @classmethod
    def from_plan(cls, plan: ClusterPlan, runtime: Runtime | None = None) -> "StackConfig":
        cfg = cloud_config(plan)
        if cfg is None:
            raise ValueError(f"cluster {plan.name} has no aws pools")
        return cls.from_mapping(cfg, runtime)

    @classmethod
    def from_pulumi_config(cls) -> "StackConfig":
        """Inside a Pulumi program: read the stack config (a rendered Pulumi.<stack>.yaml or clusterctl's settings)."""
        import pulumi

        ns = pulumi.Config(PROJECT)
        cfg = {k: ns.require_object(k) for k in OBJECT_KEYS}
        cfg.update({k: ns.get(k) for k in STRING_KEYS})
        cfg["aws:region"] = pulumi.Config("aws").require("region")
        return cls.from_mapping(cfg, _runtime(ns.get))


def _runtime(get: Callable[[str], str | None]) -> Runtime:
    return Runtime(**{k: get(k) or None for k in RUNTIME_KEYS})


def _pool(p: dict) -> PoolConfig:
    return PoolConfig(
        name=p["name"],
        instance_type=p["instance_type"],
        market=p["market"],
        capacity_reservation_id=p.get("capacity_reservation_id"),
        fallback_markets=tuple(p.get("fallback_markets") or ()),
        availability_zones=tuple(p["availability_zones"]),
        ami=p.get("ami"),
        static_nodes=tuple(p.get("static_nodes") or ()),
        max_nodes=p["max_nodes"],
        efa=p["efa"],
        placement_strategy=p.get("placement_strategy"),
        root_volume_gib=p["root_volume_gib"],
        network_interfaces=tuple(EniSlot(**s) for s in p["network_interfaces"]),
    )


def automation_config(cfg: dict) -> dict[str, str]:
    """The rendered config as Automation API values: objects as JSON text (pulumi.Config.require_object parses both)."""
    return {k: json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else str(v) for k, v in cfg.items() if v is not None}
