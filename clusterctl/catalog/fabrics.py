"""Fabric link speeds per port and what all-reduce actually reaches on them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FabricLink:
    key: str
    gbps_per_port: int
    note: str

    @property
    def gbytes_per_port(self) -> float:
        return self.gbps_per_port / 8


FABRIC_LINKS: dict[str, FabricLink] = {
    f.key: f
    for f in (
        # InfiniBand Trade Association roadmap: HDR 200 Gb/s, NDR 400 Gb/s, XDR 800 Gb/s per 4x port.
        FabricLink("hdr", 200, "InfiniBand HDR"),
        FabricLink("ndr", 400, "InfiniBand NDR"),
        FabricLink("xdr", 800, "InfiniBand XDR"),
        # Ethernet / RoCEv2 port speeds.
        FabricLink("100g", 100, "100GbE"),
        FabricLink("200g", 200, "200GbE"),
        FabricLink("400g", 400, "400GbE"),
        FabricLink("800g", 800, "800GbE"),
    )
}

# Reference guide, "The Networking Decision": 512 H100s, all-reduce 28 GB/s on 400GbE RoCEv2 vs 46 GB/s on NDR400.
ALLREDUCE_MEASURED_GBS = {"ethernet-400g": 28.0, "infiniband-ndr": 46.0}
ETHERNET_PENALTY_PERCENT = round((1 - ALLREDUCE_MEASURED_GBS["ethernet-400g"] / ALLREDUCE_MEASURED_GBS["infiniband-ndr"]) * 100)
# The guide: "For clusters under 32 GPUs, Ethernet is fine. Over 64? Don't bother."
ETHERNET_GPU_LIMIT = 64
