"""The cloud stack's outputs as compile's LiveFacts: node addresses, the jump host, FSx mount sources."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterctl.compile.model import LiveFacts
from clusterctl.compile.nodes import aws_login

if TYPE_CHECKING:
    from clusterctl.engines.aws.up import CloudOutputs


def cloud_facts(outputs: CloudOutputs, controller_os: str = "debian12") -> LiveFacts:
    """outputs: clusterctl.engines.aws.up.CloudOutputs; controller_os: who logs in on the controller (the jump)."""
    addresses = dict(outputs.addresses)
    jump = None
    if outputs.controller:
        addresses[outputs.controller["name"]] = outputs.controller["private_ip"]
        if outputs.controller.get("public_ip"):
            jump = f"{aws_login(controller_os)}@{outputs.controller['public_ip']}"
    return LiveFacts(addresses=addresses, jump_host=jump, mount_sources=dict(outputs.fsx_sources))
