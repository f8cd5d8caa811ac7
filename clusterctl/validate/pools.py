"""Rules about pools: instance types, GPU counts, hosts, markets."""

from __future__ import annotations

from typing import Iterable

from clusterctl.core.findings import Finding
from clusterctl.spec.cluster import ClusterSpec

import difflib

from clusterctl.core import hostlist
from clusterctl.catalog import GPUS, INSTANCE_TYPES
from clusterctl.spec import effective as eff
from clusterctl.spec.pools import AwsPool, OnpremPool
from clusterctl.validate.base import Validator
from clusterctl.core.providers import traits


class KnownInstanceType(Validator):
    code = "instance-type-unknown"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        for i, p in enumerate(spec.pools):
            if isinstance(p, AwsPool) and p.instance_type not in INSTANCE_TYPES:
                near = difflib.get_close_matches(p.instance_type, INSTANCE_TYPES, n=1)
                hint = f"; did you mean {near[0]}?" if near else f"; known: {', '.join(INSTANCE_TYPES)}"
                yield self.error(("pools", i, "instance_type"), f"{p.instance_type!r} is not a GPU instance type clusterctl knows{hint}")


class GpusPerNodeMatchesInstance(Validator):
    code = "gpus-per-node-mismatch"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        for i, p in enumerate(spec.pools):
            it = eff.instance_type(p)
            if isinstance(p, AwsPool) and it and p.gpus_per_node is not None and p.gpus_per_node != it.gpus:
                yield self.error(
                    ("pools", i, "gpus_per_node"), f"{p.instance_type} has {it.gpus} GPUs per node, not {p.gpus_per_node}"
                )


class GpuModelMatchesInstance(Validator):
    code = "gpu-model-mismatch"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        for i, p in enumerate(spec.pools):
            it = eff.instance_type(p)
            if isinstance(p, AwsPool) and it and p.gpu is not None and p.gpu != it.gpu:
                yield self.error(("pools", i, "gpu"), f"{p.instance_type} has {it.gpu} GPUs, not {p.gpu}")


class GpuCountNeedsModel(Validator):
    code = "gpu-model-missing"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        for i, p in enumerate(spec.pools):
            n = eff.gpus_per_node(p)
            if n > 0 and eff.gpu_key(p) is None:
                yield self.error(("pools", i, "gpu"), f"gpus_per_node is {n} but no GPU model is given")
            if p.gpu is not None and n == 0:
                yield self.error(("pools", i, "gpus_per_node"), f"gpu is {p.gpu} but gpus_per_node is 0")
            key = eff.gpu_key(p)
            if key is not None and key in GPUS and GPUS[key].vendor != "nvidia":
                yield self.warning(
                    ("pools", i, "gpu"), f"{eff.gpu_key(p)} is not an NVIDIA GPU: the nvidia_driver/cuda/nccl roles are skipped on it"
                )


class OnpremHostsValid(Validator):
    code = "hosts-invalid"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        for i, p in enumerate(spec.pools):
            if not isinstance(p, OnpremPool):
                continue
            for j, g in enumerate(p.hosts):
                try:
                    names = hostlist.expand(g.names)
                except hostlist.HostlistError as e:
                    yield self.error(("pools", i, "hosts", j, "names"), str(e))
                    continue
                if g.addresses is not None:
                    try:
                        addrs = hostlist.expand(g.addresses)
                    except hostlist.HostlistError as e:
                        yield self.error(("pools", i, "hosts", j, "addresses"), str(e))
                        continue
                    bad = next((a for a in addrs if not _valid_address(a)), None)
                    if bad:
                        yield self.error(("pools", i, "hosts", j, "addresses"), f"{bad} is not a valid IPv4 address or hostname")
                        continue
                    if len(addrs) != len(names):
                        yield self.error(
                            ("pools", i, "hosts", j, "addresses"), f"{len(names)} names ({g.names}) but {len(addrs)} addresses"
                        )
                else:
                    assert g.address_map is not None  # HostGroup._one_address_source: addresses or address_map
                    missing = [n for n in names if n not in g.address_map]
                    extra = [n for n in g.address_map if n not in names]
                    if missing:
                        yield self.error(("pools", i, "hosts", j, "address_map"), f"no address for {hostlist.compress(missing)}")
                    if extra:
                        yield self.error(
                            ("pools", i, "hosts", j, "address_map"), f"{', '.join(extra)} not in names {g.names}"
                        )


def _valid_address(a: str) -> bool:
    """Dotted quads must be real IPv4 addresses (10.0.1.256 is a typo, not a hostname); otherwise a DNS name."""
    import ipaddress
    import re

    if re.fullmatch(r"[\d.]+", a):
        try:
            ipaddress.IPv4Address(a)
            return True
        except ValueError:
            return False
    return bool(re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?", a))


class MarketNeedsReservation(Validator):
    code = "market-reservation"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        for i, p in enumerate(spec.pools):
            if not isinstance(p, AwsPool):
                continue
            if p.market in ("capacity-block", "reserved") and not p.capacity_reservation_id:
                yield self.error(
                    ("pools", i, "capacity_reservation_id"),
                    f"market {p.market} needs capacity_reservation_id (the cr-... id of the {p.market.replace('-', ' ')})",
                )
            if p.market == "spot" and p.capacity_reservation_id:
                yield self.warning(("pools", i, "capacity_reservation_id"), "spot instances do not use capacity reservations; ignored")
            if p.market == "capacity-block" and len(p.availability_zones) > 1:
                yield self.warning(
                    ("pools", i, "availability_zones"), "a capacity block lives in one AZ; only the block's AZ is used"
                )


class MarketFallbacks(Validator):
    """Fallback markets serve Slurm's resume only: static nodes are created once, by the stack, in the pool's market."""

    code = "market-fallback"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        for i, p in enumerate(spec.pools):
            if not isinstance(p, AwsPool) or not p.fallback_markets:
                continue
            if not p.elastic:
                yield self.error(("pools", i, "fallback_markets"),
                                 "only elastic pools (min/max) fall back to another market: static nodes are launched once, "
                                 f"in the pool's market ({p.market})")
            seen = {p.market}
            for j, m in enumerate(p.fallback_markets):
                if m in seen:
                    what = "the pool's own market" if m == p.market else "listed twice"
                    yield self.error(("pools", i, "fallback_markets", j), f"{m} is {what}")
                seen.add(m)


class SpotNeedsCheckpoints(Validator):
    code = "spot-no-checkpoints"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        if spec.storage.checkpoints is not None:
            return
        for i, p in enumerate(spec.pools):
            if isinstance(p, AwsPool) and "spot" in (p.market, *p.fallback_markets):
                where = "market" if p.market == "spot" else "fallback_markets"
                yield self.warning(
                    ("pools", i, where),
                    "spot pool without storage.checkpoints: an interruption loses all work since the job started "
                    "(checkpoint every 5-10 minutes on spot)",
                )


class BurstImageHasGpuStack(Validator):
    """Nodes Slurm powers up get Slurm, munge and the spot watcher pushed at resume, not the full roles (that would
    take most of ResumeTimeout on every power-up): the GPU stack must already be in the image they boot."""

    code = "burst-image"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        for i, p in enumerate(spec.pools):
            if isinstance(p, AwsPool) and p.elastic and not p.ami:
                yield self.info(
                    ("pools", i, "ami"),
                    "burst nodes boot the stock Debian 12 image and get only Slurm, munge and the spot watcher at "
                    "power-up; for GPU jobs bake the driver, CUDA, NCCL and EFA into an AMI (e.g. from a node "
                    "`clusterctl up` converged) and set it here",
                )


class UniqueNodes(Validator):
    """Pool names, node names and addresses must be unique across the whole cluster."""

    code = "duplicate-node"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        seen_pool: dict[str, int] = {}
        for i, p in enumerate(spec.pools):
            if p.name in seen_pool:
                yield self.error(("pools", i, "name"), f"pool name {p.name!r} is already used by pools[{seen_pool[p.name]}]")
            seen_pool.setdefault(p.name, i)
        names: dict[str, str] = {eff.controller_name(spec): "the controller"}
        addrs: dict[str, str] = {}
        if spec.controller.address:
            addrs[spec.controller.address] = "the controller"
        for i, p in enumerate(spec.pools):
            try:
                pairs = eff.onprem_hosts(p) if isinstance(p, OnpremPool) else [(n, None) for n in eff.generated_names(p)]
            except ValueError:
                continue  # reported by OnpremHostsValid
            where = ("pools", i, "hosts") if isinstance(p, OnpremPool) else ("pools", i, "name")
            for n, _ in pairs:
                if n in names:
                    yield self.error(where, f"node name {n} is used twice ({names[n]} and pool {p.name})")
                    break
                names[n] = f"pool {p.name}"
            for n, a in pairs:
                if a is not None and a in addrs:
                    yield self.error(where, f"address {a} of {n} is used twice ({addrs[a]} and pool {p.name})")
                    break
                if a is not None:
                    addrs[a] = f"pool {p.name}"


class ProviderMix(Validator):
    """Lab nodes live in namespaces on this machine: only a local controller can reach them; onprem needs an address."""

    code = "controller-provider"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        c = spec.controller
        has_local = any(traits(p).lab for p in spec.pools)
        if has_local and not traits(c).lab:
            yield self.error(("controller", "provider"), "local pools need controller.provider: local (lab nodes live on this machine)")
        if traits(c).lab and any(traits(p).owned for p in spec.pools):
            yield self.error(("controller", "provider"), "onprem pools need an onprem or aws controller, not a lab one")
        if traits(c).owned and not c.address:
            yield self.error(("controller", "address"), "an onprem controller needs its address")
        if traits(c).rented and not any(traits(p).rented for p in spec.pools):
            yield self.error(("controller", "provider"), "controller.provider is aws but no pool is on aws")


class LabFits(Validator):
    code = "lab-subnet-full"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        wanted = 1 + sum(eff.max_nodes(p) for p in spec.pools if traits(p).lab)
        if any(traits(p).lab for p in spec.pools) and wanted > len(eff.lab_addresses(spec)):
            yield self.error(("lab", "subnet"), f"{spec.lab.subnet} has room for {len(eff.lab_addresses(spec))} lab nodes, {wanted} wanted")


class OneAwsRegion(Validator):
    """One Pulumi stack (and one VPC) per cluster: every aws pool and an aws controller share a region."""

    code = "aws-regions"

    def check(self, spec: ClusterSpec) -> Iterable[Finding]:
        first = None
        for i, p in enumerate(spec.pools):
            if not isinstance(p, AwsPool):
                continue
            if first is None:
                first = (i, p.region)
            elif p.region != first[1]:
                yield self.error(
                    ("pools", i, "region"), f"{p.region} differs from pools[{first[0]}].region {first[1]}; one cluster is one region"
                )
            for k, az in enumerate(p.availability_zones):
                if not az.startswith(p.region):
                    yield self.error(("pools", i, "availability_zones", k), f"{az} is not in region {p.region}")
        region = spec.controller.region
        if first and region and region != first[1]:
            yield self.error(("controller", "region"), f"{region} differs from the aws pools' region {first[1]}")
