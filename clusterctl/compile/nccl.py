"""NCCL environment per pool, derived from its size and fabric; the spec's explicit values and extra_env win."""

from __future__ import annotations

from clusterctl.spec import effective as eff
from clusterctl.spec.cluster import ClusterSpec

# The guide ("NCCL Timeouts at Scale"): ring all-reduce was fine at 128 GPUs and timed out at 512; tree
# (O(log N) hops) cut the timeout rate from 15% to 0.3%. Tree is chosen from this pool size up.
TREE_FROM_GPUS = 256
ROCE_V2_GID_INDEX = "3"  # the RoCEv2/IPv4 GID on ConnectX ports with default GID tables


def nccl_env(spec: ClusterSpec, pool) -> tuple[tuple[str, str], ...]:
    cfg = spec.nccl
    fab, _ = eff.fabric(spec, pool)
    env: dict[str, str] = {"NCCL_DEBUG": cfg.debug}
    algo = cfg.algo
    if algo == "auto" and eff.max_nodes(pool) * eff.gpus_per_node(pool) >= TREE_FROM_GPUS:
        algo = "Tree"
    if algo != "auto":
        env["NCCL_ALGO"] = algo
    proto = cfg.proto
    if proto == "auto" and algo == "Tree":
        proto = "Simple"  # the guide's pairing for large tree all-reduce
    if proto != "auto":
        env["NCCL_PROTO"] = proto
    if fab.type in ("infiniband", "roce"):
        env["NCCL_IB_HCA"] = "mlx5"
        env["NCCL_IB_TIMEOUT"] = str(cfg.ib_timeout)
        if fab.type == "roce":
            env["NCCL_IB_GID_INDEX"] = ROCE_V2_GID_INDEX
    elif fab.type == "efa":
        # aws-ofi-nccl over libfabric's EFA provider, with GPUDirect RDMA (p4d and later).
        env.update({"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "FI_EFA_FORK_SAFE": "1"})
    else:
        env["NCCL_IB_DISABLE"] = "1"
    if fab.interface:
        env["NCCL_SOCKET_IFNAME"] = fab.interface
    env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "1"
    env["TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"] = str(cfg.watchdog_timeout_seconds)
    env.update(cfg.extra_env)
    return tuple(env.items())
