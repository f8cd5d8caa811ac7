"""CPU layout of GPU servers and which socket each GPU hangs off: Slurm's Sockets/CoresPerSocket/ThreadsPerCore on
NodeName lines and gres.conf `Cores=` (the cores local to each GPU, so jobs get CPUs on the GPU's own socket).

Slurm co-allocates GRES with CPUs at socket/NUMA granularity (gres.conf(5), Cores), so a GPU's core range is its
whole socket. Every server here has two sockets with GPUs 0-3 on socket 0 and GPUs 4-7 on socket 1, which is what
`nvidia-smi topo -m` prints under "CPU Affinity" / "NUMA Affinity" on them.

Sources:
- AWS: EC2 user guide, "Supported CPU options" table (default vCPUs, cores, threads per core per instance type) and the
  accelerated-computing specifications page (processor per type): p4d/p4de 96 vCPUs = 48 cores x 2 threads (Intel
  Xeon Platinum 8275CL, 2 sockets); p5/p5e 192 vCPUs = 96 cores x 2 (AMD EPYC 7R13, 2 sockets); p5en 192 = 96 x 2
  (Intel Xeon Platinum 8488C, 2 sockets); p6-b200 192 = 96 x 2 (Intel Xeon Platinum 8559C, 2 sockets).
- NVIDIA: DGX H100/H200 user guide and datasheet: 2x Intel Xeon Platinum 8480C, 56 cores each (224 threads);
  DGX B200 datasheet: 2x Intel Xeon Platinum 8570, 56 cores each; DGX A100 user guide: 2x AMD EPYC 7742, 64 cores each.
  Owned HGX servers of other vendors differ: the spec overrides the layout (pool sockets/cores_per_socket/threads_per_core).
The AWS cores and threads per core are checked against DescribeInstanceTypes (moto's copy of EC2's data) in
tests/engines/aws/test_preflight_moto.py; that API has no socket count.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CpuLayout:
    sockets: int
    cores_per_socket: int
    threads_per_core: int

    @property
    def cpus(self) -> int:
        return self.sockets * self.cores_per_socket * self.threads_per_core

    def gpu_cores(self, gpus: int) -> tuple[str, ...]:
        """Slurm core index range local to each GPU: GPUs split evenly over the sockets in index order."""
        if not gpus or gpus % self.sockets:
            return ()
        per_socket = gpus // self.sockets
        c = self.cores_per_socket
        return tuple(f"{(g // per_socket) * c}-{(g // per_socket + 1) * c - 1}" for g in range(gpus))


_2x48x2 = CpuLayout(2, 48, 2)
_2x24x2 = CpuLayout(2, 24, 2)

INSTANCE_LAYOUTS: dict[str, CpuLayout] = {
    "p4d.24xlarge": _2x24x2,
    "p4de.24xlarge": _2x24x2,
    "p5.48xlarge": _2x48x2,
    "p5e.48xlarge": _2x48x2,
    "p5en.48xlarge": _2x48x2,
    "p6-b200.48xlarge": _2x48x2,
}

# The NVIDIA reference server (DGX) of each GPU model: owned SXM nodes whose CPU count matches get its layout.
REFERENCE_SERVER_LAYOUTS: dict[str, CpuLayout] = {
    "h100-sxm": CpuLayout(2, 56, 2),
    "h200": CpuLayout(2, 56, 2),
    "b200": CpuLayout(2, 56, 2),
    "a100-80gb": CpuLayout(2, 64, 2),
    "a100-40gb": CpuLayout(2, 64, 2),
}
