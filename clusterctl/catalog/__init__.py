"""Facts the compiler and validators need. Each table cites where its numbers come from."""

from clusterctl.catalog.fabrics import FABRIC_LINKS, FabricLink
from clusterctl.catalog.gpus import GPUS, GpuModel
from clusterctl.catalog.instances import INSTANCE_TYPES, InstanceType, NetworkInterfaceSlot

__all__ = [
    "FABRIC_LINKS",
    "FabricLink",
    "GPUS",
    "GpuModel",
    "INSTANCE_TYPES",
    "InstanceType",
    "NetworkInterfaceSlot",
]
