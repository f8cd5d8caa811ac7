"""GPU models. bf16 figures are dense (no structured sparsity)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuModel:
    key: str  # spec value, e.g. "h100-sxm"
    gres_type: str  # Slurm GRES type name on NodeName/gres.conf lines
    vendor: str  # "nvidia" | "amd"
    memory_gb: int
    hbm_bandwidth_tbs: float
    bf16_dense_tflops: float
    nvlink_gbs: int  # per-GPU GPU-to-GPU bandwidth inside a node (NVLink / Infinity Fabric), GB/s; 0 = PCIe only
    pcie_gen: int = 0  # host link the health check expects (nvidia-smi -q "PCIe Generation / Current" under load)
    nvlinks: int = 0  # NVLink links per GPU on the SXM board (nvidia-smi nvlink -s); 0 = not checked
    nvswitch: bool = False  # 8-GPU baseboards of this model route NVLink through NVSwitches: Fabric Manager must run


GPUS: dict[str, GpuModel] = {
    g.key: g
    for g in (
        # PCIe generation, NVLink links per GPU and NVSwitch: the datasheets' interconnect rows (H100/H200/B200: PCIe
        # Gen5, NVLink 4/5 with 18 links; A100 SXM: PCIe Gen4, NVLink 3 with 12 links; HGX 8-GPU boards use NVSwitch).
        # NVIDIA H100 Tensor Core GPU datasheet (SXM5 column): 80 GB HBM3, 3.35 TB/s, 989 TF bf16 dense, NVLink 900 GB/s.
        GpuModel("h100-sxm", "h100", "nvidia", 80, 3.35, 989.0, 900, pcie_gen=5, nvlinks=18, nvswitch=True),
        # Same datasheet (PCIe column): 80 GB HBM2e, 2.0 TB/s, 756 TF bf16 dense, NVLink bridge 600 GB/s.
        GpuModel("h100-pcie", "h100", "nvidia", 80, 2.0, 756.0, 600, pcie_gen=5),
        # NVIDIA H200 datasheet: 141 GB HBM3e, 4.8 TB/s, same compute as H100 SXM, NVLink 900 GB/s.
        GpuModel("h200", "h200", "nvidia", 141, 4.8, 989.0, 900, pcie_gen=5, nvlinks=18, nvswitch=True),
        # NVIDIA DGX B200 datasheet: 1,440 GB HBM3e and 64 TB/s per 8 GPUs (180 GB, 8 TB/s each); HGX B200: 2.25 PF
        # bf16 dense per GPU (4.5 PF with sparsity), NVLink 5 1.8 TB/s.
        GpuModel("b200", "b200", "nvidia", 180, 8.0, 2250.0, 1800, pcie_gen=5, nvlinks=18, nvswitch=True),
        # NVIDIA A100 datasheet (80GB SXM): 2,039 GB/s, 312 TF bf16 dense, NVLink 600 GB/s.
        GpuModel("a100-80gb", "a100", "nvidia", 80, 2.039, 312.0, 600, pcie_gen=4, nvlinks=12, nvswitch=True),
        # NVIDIA A100 datasheet (40GB SXM): 1,555 GB/s.
        GpuModel("a100-40gb", "a100", "nvidia", 40, 1.555, 312.0, 600, pcie_gen=4, nvlinks=12, nvswitch=True),
        # NVIDIA L40S datasheet: 48 GB GDDR6, 864 GB/s, bf16 362.05 TF dense (733 with sparsity), no NVLink.
        GpuModel("l40s", "l40s", "nvidia", 48, 0.864, 362.05, 0, pcie_gen=4),
        # AMD Instinct MI300X datasheet: 192 GB HBM3, 5.3 TB/s, 1,307 TF bf16 dense, 7x128 GB/s Infinity Fabric = 896 GB/s.
        GpuModel("mi300x", "mi300x", "amd", 192, 5.3, 1307.4, 896, pcie_gen=5),
    )
}
