"""`clusterctl size --params 70B --tokens 2T --gpu h100`: how big a cluster a training run needs, and for how long.

Memory lower bound (training state only; activations, buffers and fragmentation come on top):
  mixed-precision Adam keeps, per parameter, bf16 weights (2 bytes) + bf16 gradients (2) + fp32 master weights (4)
  + Adam first and second moments (4 + 4) = 16 bytes (the ZeRO paper's accounting). 70B parameters -> 1.12 TB.
  The guide's "140 GB of weights + 2x for Adam = 420 GB" counts only bf16 weights and two bf16 moments: a real
  mixed-precision run needs 16 bytes/parameter, 8x the weights.
- without sharding (plain data parallelism): every GPU holds all of it -> fits only if 16 N <= GPU memory.
- with full sharding (FSDP FULL_SHARD / ZeRO-3): the state is split over the GPUs -> ceil(16 N / GPU memory) GPUs.
Compute: training takes about 6 N T FLOPs (forward 2NT + backward 4NT); days = 6NT / (GPUs x peak bf16 x MFU).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from clusterctl.core import hostlist
from clusterctl.catalog.fabrics import ETHERNET_GPU_LIMIT
from clusterctl.catalog.gpus import GPUS, GpuModel
from clusterctl.catalog.instances import INSTANCE_TYPES
from clusterctl.core.errors import ClusterctlError

if TYPE_CHECKING:
    from rich.console import Console

STATE_BYTES_PER_PARAM = {
    "bf16 weights": 2,
    "bf16 gradients": 2,
    "fp32 master weights": 4,
    "Adam first moment (fp32)": 4,
    "Adam second moment (fp32)": 4,
}
BYTES_PER_PARAM = sum(STATE_BYTES_PER_PARAM.values())  # 16
FLOPS_PER_PARAM_TOKEN = 6
DEFAULT_MFU = 0.4  # the guide: below 40% "something is wrong"; 50-65% for well-tuned production clusters
GPU_ALIASES = {"h100": "h100-sxm", "a100": "a100-80gb", "mi300": "mi300x"}
_SUFFIX = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15}
_COUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?\d+)?)\s*([KMBGTP]?)\s*$", re.I)
COMMON_GPU_COUNTS = (64, 128, 256, 512, 1024, 2048, 4096)


class SizeError(ClusterctlError):
    pass


def parse_count(text: str | float | int) -> float:
    """'70B' -> 7e10, '2T' -> 2e12, '1.5e9' -> 1.5e9, '350M' -> 3.5e8 (decimal prefixes, as model sizes are quoted)."""
    if isinstance(text, (int, float)):
        return float(text)
    mt = _COUNT.match(text)
    if not mt:
        raise SizeError(f"{text!r}: give a number with an optional K, M, B (or G), T suffix, e.g. 70B or 2T")
    value = float(mt.group(1)) * _SUFFIX[mt.group(2).upper()]
    if value <= 0:
        raise SizeError(f"{text!r} must be positive")
    return value


def gpu_model(name: str) -> GpuModel:
    key = GPU_ALIASES.get(name.lower(), name.lower())
    if key not in GPUS:
        raise SizeError(f"unknown GPU {name!r}; one of: {', '.join(sorted(set(GPUS) | set(GPU_ALIASES)))}")
    return GPUS[key]


@dataclass
class SizeEstimate:
    params: float
    tokens: float
    gpu: str  # catalog key
    gpu_memory_gb: int
    gpu_bf16_tflops: float
    gpus_per_node: int
    mfu: float
    breakdown_bytes: dict
    state_bytes: float  # 16 N
    weights_bytes: float  # 2 N (bf16)
    unsharded_fits: bool
    min_gpus: int  # with full sharding
    min_nodes: int
    flops: float
    gpus: int  # the GPU count `days` is for
    days: float
    days_by_gpus: list = field(default_factory=list)  # [(gpus, days)]
    notes: list = field(default_factory=list)

    @property
    def per_gpu_sharded_bytes(self) -> float:
        return self.state_bytes / self.gpus

    def to_dict(self) -> dict:
        d = dict(vars(self))
        d["per_gpu_sharded_bytes"] = self.per_gpu_sharded_bytes
        d["days_by_gpus"] = [{"gpus": g, "days": round(x, 2)} for g, x in self.days_by_gpus]
        return d


def training_days(flops: float, gpus: int, tflops: float, mfu: float) -> float:
    return flops / (gpus * tflops * 1e12 * mfu) / 86400


def estimate_size(params: str | float, tokens: str | float, gpu: str = "h100", mfu: float = DEFAULT_MFU, gpus: int | None = None,
                  gpus_per_node: int = 8) -> SizeEstimate:
    n, t = parse_count(params), parse_count(tokens)
    if not 0 < mfu <= 1:
        raise SizeError(f"MFU {mfu} must be in (0, 1]")
    g = gpu_model(gpu)
    mem = g.memory_gb * 1e9  # datasheet GB are decimal
    state = BYTES_PER_PARAM * n
    min_gpus = max(1, math.ceil(state / mem))
    min_nodes = math.ceil(min_gpus / gpus_per_node)
    flops = FLOPS_PER_PARAM_TOKEN * n * t
    use = gpus if gpus is not None else min_nodes * gpus_per_node
    if use < min_gpus:
        raise SizeError(f"{use} GPUs cannot hold the {state / 1e12:.2f} TB of training state even fully sharded: "
                        f"at least {min_gpus} x {g.key} ({g.memory_gb} GB)")
    counts = sorted({min_nodes * gpus_per_node, use, *(c for c in COMMON_GPU_COUNTS if c > min_nodes * gpus_per_node)})
    notes = [
        "lower bound: training state only; activations (use activation checkpointing), NCCL buffers and "
        "fragmentation need more, so plan 20-30% headroom",
    ]
    return SizeEstimate(
        params=n, tokens=t, gpu=g.key, gpu_memory_gb=g.memory_gb, gpu_bf16_tflops=g.bf16_dense_tflops,
        gpus_per_node=gpus_per_node, mfu=mfu,
        breakdown_bytes={k: v * n for k, v in STATE_BYTES_PER_PARAM.items()},
        state_bytes=state, weights_bytes=2 * n, unsharded_fits=state <= mem,
        min_gpus=min_gpus, min_nodes=min_nodes, flops=flops, gpus=use,
        days=training_days(flops, use, g.bf16_dense_tflops, mfu),
        days_by_gpus=[(c, training_days(flops, c, g.bf16_dense_tflops, mfu)) for c in counts],
        notes=notes,
    )


# --- starter spec -----------------------------------------------------------------------------------------------

def aws_instance_for(gpu_key: str, gpus_per_node: int = 8) -> str | None:
    names = sorted(t.name for t in INSTANCE_TYPES.values() if t.gpu == gpu_key and t.gpus == gpus_per_node)
    return names[0] if names else None


def _host_groups(nodes: int) -> list[tuple[str, str]]:
    """Placeholder names and addresses, up to 250 hosts per /24 (10.0.1.0/24, 10.0.2.0/24, ...)."""
    groups = []
    for k, start in enumerate(range(0, nodes, 250)):
        count = min(250, nodes - start)
        names = hostlist.compress([f"gpu{i:03d}" for i in range(start + 1, start + count + 1)])
        addrs = f"10.0.{k + 1}.1" if count == 1 else f"10.0.{k + 1}.[1-{count}]"
        groups.append((names, addrs))
    return groups


def _aws_body(est: SizeEstimate, name: str, region: str, nodes: int, gpus: int) -> list[str]:
    itype = aws_instance_for(est.gpu, est.gpus_per_node)
    if itype is None:
        raise SizeError(f"no AWS instance type in the catalog has {est.gpus_per_node} x {est.gpu}: use --provider onprem")
    return [
        "controller:",
        "  provider: aws",
        "  instance_type: m7i.4xlarge",
        "pools:",
        "  - name: gpu",
        "    provider: aws",
        f"    instance_type: {itype}",
        f"    region: {region}",
        f"    availability_zones: [{region}a]",
        "    market: on-demand          # or capacity-block (with capacity_reservation_id) for a fixed run",
        f"    count: {nodes}",
        "storage:",
        "  local_cache:",
        "    devices: auto",
        "    mount_point: /mnt/nvme",
        "  checkpoints:",
        f"    s3_bucket: {name}-checkpoints",
        "    interval_minutes: 10",
    ]


def _onprem_body(est: SizeEstimate, name: str, region: str, nodes: int, gpus: int) -> list[str]:
    ib = gpus >= ETHERNET_GPU_LIMIT
    return [
        "controller:",
        "  provider: onprem",
        f"  hostname: {name}-ctl",
        "  address: 10.0.0.2            # placeholder: your controller",
        "fabric:",
        *(["  type: infiniband             # the guide: InfiniBand from 64 GPUs up",
           "  speed: ndr",
           f"  rails: {est.gpus_per_node}",
           "  rail_optimized: true"] if ib else
          ["  type: roce                   # the guide: Ethernet (RoCEv2) is fine below 64 GPUs",
           "  speed: 400g"]),
        "pools:",
        "  - name: gpu",
        "    provider: onprem",
        f"    gpu: {est.gpu}",
        f"    gpus_per_node: {est.gpus_per_node}",
        "    hosts:                     # placeholders: your hosts' names and addresses",
        *[line for names, addrs in _host_groups(nodes) for line in (f"      - names: {names}", f"        addresses: {addrs}")],
        "storage:",
        "  local_cache:",
        "    devices: auto",
        "    mount_point: /mnt/nvme",
        "  checkpoints:",
        "    path: /srv/checkpoints",
        "    interval_minutes: 10",
    ]


# The starter spec's pools, by the provider asked for.
STARTER_BODIES = {"aws": _aws_body, "onprem": _onprem_body}


def starter_spec(est: SizeEstimate, name: str, provider: str = "aws", region: str = "us-east-1",
                 command: str = "") -> str:
    """A valid cluster spec sized for the estimate (est.gpus GPUs), as commented YAML."""
    nodes = math.ceil(est.gpus / est.gpus_per_node)
    gpus = nodes * est.gpus_per_node
    if provider not in STARTER_BODIES:
        raise SizeError(f"provider {provider!r}: {' or '.join(STARTER_BODIES)}")
    head = [
        f"# Starter spec written by `{command or 'clusterctl size'}`.",
        f"# {est.params / 1e9:g}B parameters x {est.tokens / 1e12:g}T tokens on {gpus} x {est.gpu}: "
        f"{est.state_bytes / 1e12:.2f} TB of training state (16 bytes/param), fully sharded (FSDP / ZeRO-3)",
        f"# {est.state_bytes / gpus / 1e9:.0f} GB per GPU before activations; about "
        f"{training_days(est.flops, gpus, est.gpu_bf16_tflops, est.mfu):.0f} days at {est.mfu:.0%} MFU.",
        "# Review every value, then: clusterctl validate <this file> && clusterctl cost <this file>",
        "apiVersion: clusterctl/v1",
        f"name: {name}",
    ]
    body = STARTER_BODIES[provider](est, name, region, nodes, gpus)
    tail = [
        "scheduler:",
        "  slurm:",
        "    partitions:",
        "      - name: train",
        "        pools: [gpu]",
        "        default: true",
    ]
    return "\n".join(head + body + tail) + "\n"




# --- printer ----------------------------------------------------------------------------------------------------

def _tb(b: float) -> str:
    return f"{b / 1e12:.2f} TB" if b >= 1e12 else f"{b / 1e9:.1f} GB"


def print_size(console: Console, est: SizeEstimate) -> None:
    from rich.table import Table

    console.print(f"[bold]{est.params / 1e9:g}B parameters, {est.tokens / 1e12:g}T tokens, {est.gpu} "
                  f"({est.gpu_memory_gb} GB, {est.gpu_bf16_tflops:g} TFLOPS bf16 dense)[/]")
    mem = Table(title="training state (mixed-precision Adam)", show_footer=True)
    mem.add_column("what", footer="total (lower bound)")
    mem.add_column("bytes/param", justify="right", footer=str(BYTES_PER_PARAM))
    mem.add_column("size", justify="right", footer=_tb(est.state_bytes))
    for k, v in est.breakdown_bytes.items():
        mem.add_row(k, str(STATE_BYTES_PER_PARAM[k]), _tb(v))
    console.print(mem)
    if est.unsharded_fits:
        console.print(f"without sharding: fits on one {est.gpu} ({_tb(est.state_bytes)} of {est.gpu_memory_gb} GB)")
    else:
        console.print(f"without sharding: does not fit: every GPU would hold {_tb(est.state_bytes)} "
                      f"({est.state_bytes / (est.gpu_memory_gb * 1e9):.0f}x its {est.gpu_memory_gb} GB)")
    console.print(f"with full sharding (FSDP / ZeRO-3): at least {est.min_gpus} GPUs = {est.min_nodes} node(s) of "
                  f"{est.gpus_per_node}; {est.gpus} GPUs hold {_tb(est.per_gpu_sharded_bytes)} each")
    t = Table(title=f"training time: 6·N·T = {est.flops:.3g} FLOPs at {est.mfu:.0%} MFU")
    t.add_column("GPUs", justify="right")
    t.add_column("nodes", justify="right")
    t.add_column("days", justify="right")
    for g, d in est.days_by_gpus:
        t.add_row(str(g), str(math.ceil(g / est.gpus_per_node)), f"{d:,.1f}", style="bold" if g == est.gpus else None)
    console.print(t)
    for n in est.notes:
        console.print(f"note: {n}", highlight=False)
