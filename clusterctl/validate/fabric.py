"""Rules about fabrics: what each provider can have, and Ethernet at scale."""

from __future__ import annotations

from typing import Iterable

from clusterctl.core.findings import Finding
from clusterctl.spec.cluster import ClusterSpec

from clusterctl.catalog.fabrics import ALLREDUCE_MEASURED_GBS, ETHERNET_GPU_LIMIT, ETHERNET_PENALTY_PERCENT
from clusterctl.spec import effective as eff
from clusterctl.spec.fabric import IB_SPEEDS
from clusterctl.spec.pools import AwsPool
from clusterctl.validate.base import Validator
from clusterctl.core.providers import traits


class EfaOnlyOnAws(Validator):
    code = "efa-not-aws"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        for p in spec.pools:
            fab, where = eff.fabric(spec, p)
            if fab.type == "efa" and not traits(p).rented:
                yield self.error(where + ("type",), f"EFA exists only on AWS instances; pool {p.name} is {p.provider}")


class NoInfinibandOnAws(Validator):
    code = "ib-on-aws"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        for p in spec.pools:
            fab, where = eff.fabric(spec, p)
            if traits(p).rented and fab.type in ("infiniband", "roce"):
                yield self.error(where + ("type",), f"AWS instances have no {fab.type}; pool {p.name} must use efa (or ethernet)")
            it = eff.instance_type(p)
            if isinstance(p, AwsPool) and fab.type == "efa" and it is not None and not it.efa_supported:
                yield self.error(where + ("type",), f"{p.instance_type} does not support EFA")


class FabricSpeedMatchesType(Validator):
    code = "fabric-speed"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        for p in spec.pools:
            fab, where = eff.fabric(spec, p)
            if fab.speed is None:
                continue
            if fab.type == "infiniband" and fab.speed not in IB_SPEEDS:
                yield self.error(where + ("speed",), f"{fab.speed} is an Ethernet speed; InfiniBand takes {'/'.join(IB_SPEEDS)}")
            if fab.type in ("roce", "ethernet") and fab.speed in IB_SPEEDS:
                yield self.error(where + ("speed",), f"{fab.speed} is an InfiniBand speed; {fab.type} takes 100g..800g")
            if fab.type == "efa":
                yield self.warning(where + ("speed",), "EFA bandwidth comes from the instance type; speed is ignored")


class EthernetAtScale(Validator):
    code = "ethernet-at-scale"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        eth_pools = [p for p in spec.pools if eff.fabric(spec, p)[0].type in ("ethernet", "roce")]
        gpus = eff.total_gpus(spec, eth_pools)
        if gpus >= ETHERNET_GPU_LIMIT:
            where = eff.fabric(spec, eth_pools[0])[1] + ("type",)
            yield self.warning(
                where,
                f"{gpus} GPUs on Ethernet/RoCE: the reference guide measured all-reduce at "
                f"{ALLREDUCE_MEASURED_GBS['ethernet-400g']:.0f} GB/s on 400GbE RoCEv2 vs "
                f"{ALLREDUCE_MEASURED_GBS['infiniband-ndr']:.0f} GB/s on InfiniBand NDR400 "
                f"(~{ETHERNET_PENALTY_PERCENT}% slower training) at this scale; use InfiniBand for {ETHERNET_GPU_LIMIT}+ GPUs",
            )
