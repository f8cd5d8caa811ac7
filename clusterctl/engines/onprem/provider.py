"""The onprem provider: owned hosts exist before clusterctl and outlive it. Nothing is created or destroyed; the
hosts are configured (Ansible) and, on `down`, drained with Slurm stopped, which ops.down does for every host."""

from __future__ import annotations

from clusterctl.engines.provider import Context, SshIdentity


class OnpremProvider:
    name = "onprem"

    def check_tools(self) -> None:
        """Ansible and ssh come with clusterctl and the workstation."""

    def prepare(self, ctx: Context):
        return None

    def identity(self, plan, state, log) -> SshIdentity | None:
        return None  # the user's agent / ~/.ssh/config, plus the spec's keys and pins in the inventory

    def boot(self, ctx: Context, identity: SshIdentity) -> None:
        """Owned machines are already running."""

    def preview(self, plan, state):
        return None

    def teardown(self, ctx: Context, identity, result: dict) -> None:
        """Never: no data, disk or package of an owned host is removed."""
