"""NCCL environment per pool, decided from the partitions it serves, its fabric and the pinned NCCL version.

Every decision carries its reason; the rendered env file prints it as a comment above the line (or alone, for a
variable deliberately left to NCCL). The spec's explicit values and extra_env win.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from clusterctl.spec import effective as eff
from clusterctl.spec.cluster import ClusterSpec
from clusterctl.spec.fabric import Fabric
from clusterctl.spec.pools import Pool

# The guide ("NCCL Timeouts at Scale"): ring all-reduce was fine at 128 GPUs and timed out at 512; tree (O(log N)
# hops) cut the timeout rate from 15% to 0.3%. Applied from this job span up, to all-reduce only.
TREE_FROM_GPUS = 256
PER_COLLECTIVE_SINCE = (2, 24)  # NCCL_ALGO="<function>:<algos>" (NCCL 2.24 release; src parseList in tuning)
GID_AUTO_SINCE = (2, 21)  # NCCL_IB_GID_INDEX=-1 default: NCCL picks the RoCEv2 GID itself
ROCE_V2_GID_INDEX = "3"  # the RoCEv2/IPv4 GID on ConnectX ports with default GID tables (older NCCL only)
# Where the EFA installer puts libfabric and aws-ofi-nccl (the installer bundles the plugin since 1.38; newer
# installers put it under lib/<multiarch>/, older ones under lib/): both are listed, the multiarch one first.
# awsome-distributed-training's nccl-tests sbatch uses /opt/amazon/ofi-nccl/lib/$(uname -m)-linux-gnu.
EFA_LIB_DIRS = ("/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu", "/opt/amazon/ofi-nccl/lib", "/opt/amazon/efa/lib")
OFI_TUNER = "/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu/libnccl-ofi-tuner.so"


@dataclass(frozen=True)
class NcclEnv:
    env: tuple[tuple[str, str], ...]
    notes: tuple[tuple[str, str], ...]  # (variable or "" for a standalone note, why)


def _version(v: str) -> tuple[int, int]:
    parts = [int(x) for x in v.split("-")[0].split(".")[:2]]
    return (parts + [0])[0], (parts + [0, 0])[1]


def job_span(spec: ClusterSpec, pool: Pool) -> tuple[int, str]:
    """GPUs of the largest job a partition holding this pool allows (all its pools), and which partition."""
    gpus = {p.name: eff.max_nodes(p) * eff.gpus_per_node(p) for p in spec.pools}
    spans = [(sum(gpus.get(n, 0) for n in dict.fromkeys(part.pools)), f"partition {part.name}")
             for part in spec.scheduler.slurm.partitions if pool.name in part.pools]
    return max(spans or [(gpus[pool.name], f"pool {pool.name}")], key=lambda s: s[0])


def nccl_env(spec: ClusterSpec, pool: Pool) -> NcclEnv:
    cfg = spec.nccl
    fab, _ = eff.fabric(spec, pool)
    version = _version(spec.software.nccl)
    env: dict[str, str] = {}
    notes: list[tuple[str, str]] = []

    def put(name: str, value: str, why: str) -> None:
        env[name] = value
        notes.append((name, why))

    put("NCCL_DEBUG", cfg.debug, "nccl.debug in the spec")
    span, where = job_span(spec, pool)
    if cfg.algo != "auto":
        put("NCCL_ALGO", cfg.algo, "nccl.algo in the spec (NCCL's docs call a global NCCL_ALGO a debugging knob)")
    elif fab.type == "efa":
        notes.append(("", f"NCCL_ALGO unset: EFA pool, aws-ofi-nccl's tuner chooses algorithm and protocol (the "
                          f"largest job here, {where}, spans {span} GPUs)"))
    elif span < TREE_FROM_GPUS:
        notes.append(("", f"NCCL_ALGO unset: the largest job here ({where}) spans {span} GPUs, below the guide's "
                          f"{TREE_FROM_GPUS}; NCCL's tuner chooses (NVLS on NVSwitch systems)"))
    elif version >= PER_COLLECTIVE_SINCE:
        put("NCCL_ALGO", "allreduce:^ring",
            f"the largest job here ({where}) spans {span} GPUs; the guide saw ring all-reduce time out at 512. Ring is "
            f"taken from all-reduce only (per-collective list, NCCL {spec.software.nccl} >= 2.24): Tree, NVLS/NVLSTree "
            "and CollNet stay, every other collective keeps all algorithms")
    else:
        notes.append(("", f"NCCL_ALGO unset although the largest job ({where}) spans {span} GPUs: NCCL "
                          f"{spec.software.nccl} has no per-collective NCCL_ALGO (2.24+), and a global Tree would disable "
                          "NVLS and the collectives Tree lacks"))
    if cfg.proto != "auto":
        put("NCCL_PROTO", cfg.proto, "nccl.proto in the spec (a debugging knob in NCCL's docs)")
    if fab.type in ("infiniband", "roce"):
        _rdma(spec, fab, version, put, notes)
    elif fab.type == "efa":
        _efa(pool, put, notes)
    else:
        put("NCCL_IB_DISABLE", "1", f"fabric {fab.type}: no RDMA devices, NCCL uses sockets")
    if fab.interface:
        put("NCCL_SOCKET_IFNAME", fab.interface, "fabric.interface in the spec: the bootstrap network")
    put("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1", "a failed collective aborts the job instead of hanging it")
    put("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", str(cfg.watchdog_timeout_seconds), "nccl.watchdog_timeout_seconds in the spec")
    for k, v in cfg.extra_env.items():
        put(k, v, "nccl.extra_env in the spec")
    last = {k: why for k, why in notes if k}
    ordered = [(k, why) for k, why in notes if not k] + [(k, last[k]) for k in env]
    return NcclEnv(tuple(env.items()), tuple(ordered))


def _efa(pool: Pool, put: Callable[[str, str, str], None], notes: list[tuple[str, str]]) -> None:
    """aws-ofi-nccl over libfabric's EFA provider: make the plugin and its tuner findable, leave the algorithm to it."""
    it = eff.instance_type(pool)
    put("LD_LIBRARY_PATH", ":".join(EFA_LIB_DIRS),
        "aws-ofi-nccl (libnccl-net.so) and libfabric from the EFA installer; without them NCCL silently falls back to "
        "NET/Socket. The TaskProlog prepends this to the job's own LD_LIBRARY_PATH")
    put("NCCL_TUNER_PLUGIN", OFI_TUNER,
        "aws-ofi-nccl's algorithm/protocol tuner for AWS (aws-ofi-nccl wiki: Algorithm-and-Protocol-Tuner-for-AWS); "
        "it chooses per message size and rank count, so NCCL_ALGO/NCCL_PROTO stay unset here")
    put("FI_PROVIDER", "efa", "aws-ofi-nccl over libfabric's EFA provider")
    if it is not None and it.efa_device_rdma:
        put("FI_EFA_USE_DEVICE_RDMA", "1", f"GPUDirect RDMA over EFA: {it.name} supports RDMA read (p4d and later)")
    else:
        notes.append(("", "FI_EFA_USE_DEVICE_RDMA unset: the instance type is not known to support EFA RDMA read"))
    put("FI_EFA_FORK_SAFE", "1", "data loaders fork; libfabric must tolerate it")


def _rdma(spec: ClusterSpec, fab: Fabric, version: tuple[int, int], put: Callable[[str, str, str], None],
          notes: list[tuple[str, str]]) -> None:
    if fab.hcas:
        ports = ",".join(h if ":" in h else f"{h}:1" for h in fab.hcas)
        put("NCCL_IB_HCA", f"={ports}", "fabric.hcas: exactly the compute rails ('=' is NCCL's exact match; a bare "
            "prefix such as mlx5 also matches storage ports)")
    else:
        notes.append(("", "NCCL_IB_HCA unset: fabric.hcas names no compute rails, so NCCL uses every RDMA device "
                          "(storage ports included)"))
    put("NCCL_IB_TIMEOUT", str(spec.nccl.ib_timeout), "nccl.ib_timeout in the spec (4.096 us x 2^n)")
    if fab.type == "roce":
        if fab.gid_index is not None:
            put("NCCL_IB_GID_INDEX", str(fab.gid_index), "fabric.gid_index in the spec")
        elif version >= GID_AUTO_SINCE:
            notes.append(("", f"NCCL_IB_GID_INDEX unset: NCCL {spec.software.nccl} selects the RoCEv2 GID itself"))
        else:
            put("NCCL_IB_GID_INDEX", ROCE_V2_GID_INDEX, f"NCCL {spec.software.nccl} cannot select the GID: index 3 is "
                "RoCEv2/IPv4 with ConnectX default GID tables (set fabric.gid_index where it differs)")
    if fab.type == "infiniband" and fab.sharp:
        put("NCCL_COLLNET_ENABLE", "1", "fabric.sharp: the switches aggregate (SHARP), CollNet can use them")
    else:
        notes.append(("", "NCCL_COLLNET_ENABLE unset (off): the fabric declares no SHARP (fabric.sharp)"))
