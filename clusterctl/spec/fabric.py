"""Fabric: how nodes of a pool talk to each other for collectives."""

from __future__ import annotations

from typing import Literal

from clusterctl.spec.types import HcaPort, allowed
from clusterctl.spec.base import SpecModel, UpdatePolicy, spec_field

FabricType = Literal["infiniband", "roce", "efa", "ethernet"]
LinkSpeed = Literal["hdr", "ndr", "xdr", "100g", "200g", "400g", "800g"]
IB_SPEEDS = ("hdr", "ndr", "xdr")

R = UpdatePolicy.REPLACE


class Fabric(SpecModel):
    type: FabricType = spec_field("ethernet", description="Interconnect: infiniband, roce (RoCEv2), efa (AWS only) or ethernet.", policy=R)
    speed: LinkSpeed | None = spec_field(
        None, description="Per-port link speed: hdr/ndr/xdr for InfiniBand, 100g..800g for RoCE/Ethernet. Unused for EFA.", policy=R
    )
    rails: int | None = spec_field(
        None, ge=1, le=32, description="Fabric ports (HCAs) per node; defaults to GPUs per node for InfiniBand/RoCE.", policy=R
    )
    rail_optimized: bool = spec_field(
        False, description="Each GPU index has its own leaf switch (rail) across nodes; the guide measured +35% throughput.", policy=R
    )
    nodes_per_leaf: int = spec_field(
        32, ge=1, le=1024, description="Nodes under one leaf switch group (scalable unit); shapes topology.conf.", policy=UpdatePolicy.LIVE
    )
    interface: str | None = spec_field(
        None, pattern=allowed(r"^[A-Za-z0-9_.:-]{1,15}$", "an interface name: 1-15 letters, digits, _ . : -"), description="Bootstrap network interface for NCCL_SOCKET_IFNAME (e.g. eth0, ens5).",
        policy=UpdatePolicy.LIVE,
    )
    hcas: list[HcaPort] | None = spec_field(
        None, max_length=32,
        description="The compute rails' RDMA devices by name, in rail order (e.g. [mlx5_0, mlx5_3, ...], or mlx5_0:1 for a "
        "port other than 1). The health check judges each by name (state and rate) and NCCL_IB_HCA lists exactly these; "
        "storage and management ports are left out. Unset: every active port counts and NCCL picks the devices.",
        policy=R,
    )
    gid_index: int | None = spec_field(
        None, ge=0, le=255, description="RoCE: NCCL_IB_GID_INDEX. Unset: NCCL detects the RoCEv2 GID itself (2.21+).",
        policy=UpdatePolicy.LIVE,
    )
    sharp: bool = spec_field(
        False, description="The InfiniBand fabric runs SHARP (Quantum switches with the aggregation manager and NCCL's "
        "SHARP plugin on the nodes): CollNet is enabled only then.", policy=UpdatePolicy.LIVE,
    )
