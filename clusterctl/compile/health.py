"""What the node health check expects on a pool's nodes: every figure from the spec and the catalog, none from the node."""

from __future__ import annotations

from clusterctl.core.providers import traits
from clusterctl.catalog.fabrics import FABRIC_LINKS
from clusterctl.catalog.gpus import GPUS
from clusterctl.compile.model import Health, LocalCache, Mount
from clusterctl.spec import effective as eff
from clusterctl.spec.cluster import ClusterSpec
from clusterctl.spec.fabric import Fabric
from clusterctl.spec.pools import Pool

FABRIC_MANAGER_GPUS = 8  # HGX baseboards with NVSwitch carry 8 GPUs; 4-GPU boards link GPUs directly


def rails(fab: Fabric) -> tuple[tuple[str, int, int], ...]:
    """The spec's compute rails by name, each at the fabric's per-port rate (0 = rate not checked)."""
    rate = FABRIC_LINKS[fab.speed].gbps_per_port if fab.speed in FABRIC_LINKS else 0
    out = []
    for h in fab.hcas or ():
        name, _, port = h.partition(":")
        out.append((name, int(port or 1), rate))
    return tuple(out)


def health(spec: ClusterSpec, pool: Pool, all_mounts: tuple[Mount, ...], cache: LocalCache | None,
           nvidia_stack: bool) -> Health:
    fab, _ = eff.fabric(spec, pool)
    rdma = fab.type in ("infiniband", "roce")
    ib_ports = (fab.rails or eff.gpus_per_node(pool) or 1) if rdma else 0
    it = eff.instance_type(pool)
    efa = sum(1 for s in it.eni_layout() if s.interface_type != "interface") if (it and fab.type == "efa") else 0
    required = [m.mount_point for m in all_mounts if pool.name in m.pools]
    cache_mount = cache.mount_point if cache is not None and pool.name in cache.pools else None
    if cache_mount:
        required.append(cache_mount)
    gpus = eff.gpus_per_node(pool)
    model = GPUS.get(eff.gpu_key(pool) or "")
    nvidia = model is not None and model.vendor == "nvidia"
    # lab GPUs are device files: link, NVLink and FM figures mean nothing there
    real = model if (model is not None and nvidia and not traits(pool).lab) else None
    return Health(
        gpus=gpus if (nvidia or model is None) else 0,  # AMD GPUs: no nvidia-smi; rocm-smi is not judged here
        ib_ports=ib_ports, efa_devices=efa, mounts=tuple(required),
        gpu_source="devices" if traits(pool).lab else "nvidia-smi",
        rails=rails(fab) if rdma else (),
        pcie_gen=real.pcie_gen if real else 0,
        pcie_width=16 if real else 0,
        nvlinks=real.nvlinks if real else 0,
        fabric_manager=bool(real and real.nvswitch and gpus == FABRIC_MANAGER_GPUS),
        cache_mount=cache_mount,
        # Judged where clusterctl installs the driver (vendor.installs_nvidia_stack). A node that boots the old driver
        # after an upgrade (a DKMS build that failed) drains.
        driver=spec.software.nvidia_driver if nvidia_stack else None,
    )
