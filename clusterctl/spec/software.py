"""Software versions, NCCL tuning and monitoring."""

from __future__ import annotations

from typing import Literal

from clusterctl.spec.base import SpecModel, UpdatePolicy, spec_field
from clusterctl.spec.types import EnvName, EnvValue, allowed

L, D = UpdatePolicy.LIVE, UpdatePolicy.DRAIN
VERSION = allowed(r"^\d+(\.\d+){0,3}(-\d+)?$", "a version: numbers separated by dots, e.g. 570.172.08")


class Software(SpecModel):
    nvidia_driver: str = spec_field("570.172.08", pattern=VERSION, description="NVIDIA datacenter driver.", policy=D)
    nvidia_driver_flavor: Literal["open", "proprietary"] = spec_field(
        "open", description="Kernel modules: open (NVIDIA's default since the 560 series; required by Blackwell) or "
        "proprietary (only where the GPU allows it).", policy=D
    )
    cuda: str = spec_field("12.8", pattern=VERSION, description="CUDA toolkit.", policy=D)
    nccl: str = spec_field("2.26.2", pattern=VERSION, description="NCCL library.", policy=D)
    rdma_stack: Literal["distro", "doca"] = spec_field(
        "distro", description="RDMA userspace: distro (rdma-core) or doca (NVIDIA DOCA-OFED from the vendor repo).", policy=D
    )
    doca: str = spec_field("2.9.1", pattern=VERSION, description="DOCA-OFED version when rdma_stack is doca.", policy=D)
    efa_installer: str = spec_field("1.38.1", pattern=VERSION, description="AWS EFA installer on EFA pools.", policy=D)
    lustre_client: str = spec_field("2.15.6", pattern=VERSION, description="Lustre client version.", policy=D)
    slurm: str = spec_field(
        "22.05", pattern=allowed(r"^\d{2}\.\d{2}$", "a Slurm release YY.MM, e.g. 23.11"), description="Slurm release (major.minor); configs are rendered for it.", policy=D
    )


class Nccl(SpecModel):
    algo: Literal["auto", "Tree", "Ring"] = spec_field(
        "auto", description="A global NCCL_ALGO (a debugging knob in NCCL's docs). auto: unset; where a partition allows "
        "jobs of 256+ GPUs and NCCL is 2.24+, only all-reduce leaves ring (NCCL_ALGO=allreduce:^ring): the guide saw ring "
        "timeouts at 512 GPUs, not 128."
    )
    proto: Literal["auto", "Simple", "LL", "LL128"] = spec_field("auto", description="NCCL_PROTO (a debugging knob); auto: unset.")
    ib_timeout: int = spec_field(22, ge=1, le=31, description="NCCL_IB_TIMEOUT (4.096 us * 2^n) for IB/RoCE.")
    watchdog_timeout_seconds: int = spec_field(
        1800, ge=60, le=86400, description="TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC: how long a stuck collective may hang."
    )
    debug: Literal["WARN", "INFO", "VERSION", "TRACE"] = spec_field("WARN", description="NCCL_DEBUG.")
    extra_env: dict[EnvName, EnvValue] = spec_field(
        default_factory=dict,
        json_schema_extra={"additionalProperties": False},  # keys outside the name pattern are errors, as in validate
        description="Extra environment variables (NAME: value without spaces, quotes or shell metacharacters); these win.",
    )


class Alerts(SpecModel):
    gpu_util_min_percent: int = spec_field(80, ge=1, le=100, description="GPUStarving: utilization below this...")
    gpu_util_for_minutes: int = spec_field(5, ge=1, le=1440, description="...for this long fires the alert.")
    ecc_errors_per_hour: int = spec_field(1, ge=0, description="Alert when ECC errors per hour exceed this.")
    gpu_temp_max_c: int = spec_field(85, ge=40, le=110, description="Alert when GPU temperature exceeds this.")


class Monitoring(SpecModel):
    enabled: bool = spec_field(True, description="Prometheus, exporters, alert rules and dashboards.")
    retention_days: int = spec_field(15, ge=1, le=3650, description="Prometheus retention.")
    scrape_interval_seconds: int = spec_field(15, ge=1, le=600, description="Prometheus scrape interval.")
    alerts: Alerts = spec_field(default_factory=Alerts, description="Alert thresholds.")
    grafana: bool = spec_field(
        True,
        description="Install Grafana from Grafana Labs' apt repository on the controller. False where the site runs its own "
        "Grafana or the controller cannot reach that repository; the dashboard files are provisioned either way.",
    )
