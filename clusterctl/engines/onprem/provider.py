"""The onprem provider: owned hosts exist before clusterctl and outlive it. Nothing is created or destroyed; the
hosts are configured (Ansible) and, on `down`, drained with Slurm stopped, which ops.down does for every host."""

from __future__ import annotations

from typing import Callable

from clusterctl.compile.model import ClusterPlan
from clusterctl.engines.provider import Context, SshIdentity
from clusterctl.state import ClusterState


class OnpremProvider:
    name = "onprem"

    def check_tools(self) -> None:
        """Ansible and ssh come with clusterctl and the workstation."""

    def prepare(self, ctx: Context) -> None:
        return None

    def identity(self, plan: ClusterPlan, state: ClusterState, log: Callable[[str], None]) -> SshIdentity | None:
        return None  # the user's agent / ~/.ssh/config, plus the spec's keys and pins in the inventory

    def boot(self, ctx: Context, identity: SshIdentity) -> None:
        """Owned machines are already running."""

    def preview(self, plan: ClusterPlan, state: ClusterState) -> None:
        return None

    def teardown(self, ctx: Context, identity: SshIdentity | None, result: dict) -> None:
        """Never: no data, disk or package of an owned host is removed."""
