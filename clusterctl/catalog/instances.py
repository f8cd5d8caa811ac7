"""AWS GPU instance types, with the ENI layout a launch template must request to get full EFA bandwidth.

Sources: EC2 accelerated-computing instance specifications page and the EC2 user guide
"Maximize network bandwidth on Amazon EC2 instances with multiple network cards" / "EFA configuration for
P5 and P5e instances": the primary ENI (card 0, device 0) must be an ENA `interface`; when card 0 supports EFA,
card 0 device 1 is `efa-only`; every other card gets one `efa-only` ENI at device 0.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NetworkInterfaceSlot:
    network_card_index: int
    device_index: int
    interface_type: str  # "interface" (ENA) | "efa" (EFA with ENA) | "efa-only"


@dataclass(frozen=True)
class InstanceType:
    name: str
    gpu: str  # catalog.gpus key
    gpus: int
    gpu_memory_gb: int  # total across GPUs
    vcpus: int
    memory_gib: int
    network_cards: int
    efa_gbps: int  # aggregate EFA bandwidth
    efa_only_supported: bool  # p4d predates efa-only ENIs: every card gets a full "efa" ENI
    nvme_disks: int
    nvme_disk_gb: int
    # EFA RDMA read (GPUDirect RDMA, FI_EFA_USE_DEVICE_RDMA=1): p4d and later P instances; not p3dn/g-family EFA.
    efa_device_rdma: bool = True

    @property
    def efa_supported(self) -> bool:
        return self.efa_gbps > 0

    def eni_layout(self) -> tuple[NetworkInterfaceSlot, ...]:
        """The ENIs a launch template lists for maximum EFA bandwidth, in card order."""
        if not self.efa_only_supported:
            return tuple(NetworkInterfaceSlot(c, 0, "efa") for c in range(self.network_cards))
        slots = [NetworkInterfaceSlot(0, 0, "interface"), NetworkInterfaceSlot(0, 1, "efa-only")]
        slots += [NetworkInterfaceSlot(c, 0, "efa-only") for c in range(1, self.network_cards)]
        return tuple(slots)


INSTANCE_TYPES: dict[str, InstanceType] = {
    t.name: t
    for t in (
        # p4d.24xlarge: 8x A100 40GB, 96 vCPU, 1152 GiB, 4x100 Gbps EFA, 8x1000 GB NVMe.
        InstanceType("p4d.24xlarge", "a100-40gb", 8, 320, 96, 1152, 4, 400, False, 8, 1000),
        # p4de.24xlarge: as p4d with A100 80GB.
        InstanceType("p4de.24xlarge", "a100-80gb", 8, 640, 96, 1152, 4, 400, False, 8, 1000),
        # p5.48xlarge: 8x H100 80GB, 192 vCPU, 2048 GiB, 32 network cards / 3200 Gbps EFA, 8x3840 GB NVMe.
        InstanceType("p5.48xlarge", "h100-sxm", 8, 640, 192, 2048, 32, 3200, True, 8, 3840),
        # p5e.48xlarge: 8x H200 141GB, otherwise as p5.
        InstanceType("p5e.48xlarge", "h200", 8, 1128, 192, 2048, 32, 3200, True, 8, 3840),
        # p5en.48xlarge: 8x H200, EFAv3 on 16 network cards (3200 Gbps), 8x3840 GB NVMe.
        InstanceType("p5en.48xlarge", "h200", 8, 1128, 192, 2048, 16, 3200, True, 8, 3840),
        # p6-b200.48xlarge: 8x B200 179GB (1432 GB), EFAv4 on 8 network cards x 400 Gbps, 8x3840 GB NVMe.
        InstanceType("p6-b200.48xlarge", "b200", 8, 1432, 192, 2048, 8, 3200, True, 8, 3840),
    )
}


# How long an elastic node takes from Slurm's resume to a registered slurmd, which ResumeTimeout must exceed or Slurm
# marks every burst node DOWN. Estimates, not measurements made here (no GPU instance is reachable from this machine):
# a P-family GPU instance is billed and passes EC2's boot in minutes, then initialises its GPUs and EFA devices;
# AWS ParallelCluster gives compute nodes ResumeTimeout 1800 s by default for this reason. The join part is
# clusterctl's own burst bootstrap over SSH (munge key, slurmd, spot watcher) on an image that holds the GPU stack.
GPU_INSTANCE_BOOT_SECONDS = 600
BURST_JOIN_SECONDS = 180
