"""How clusterctl reaches a cluster's nodes: lab nodes with the lab's own key and known_hosts, owned hosts with
the user's SSH setup (agent, ~/.ssh/config, jump hosts from the spec)."""

from __future__ import annotations

from dataclasses import dataclass

from clusterctl.ansible.settings import SshOptions
from clusterctl.compile.model import ClusterPlan
from clusterctl.remote import Remote
from clusterctl.state import ClusterState


@dataclass
class Access:
    ssh: SshOptions
    lab: object | None  # clusterctl.local.Lab when the cluster has lab nodes

    def remote(self, node) -> Remote:
        return Remote(node, self.ssh)


def access_for(plan: ClusterPlan, state: ClusterState, log=print) -> Access:
    if plan.lab is None:
        if plan.controller.provider == "aws" or plan.aws_pools:
            # The cluster's own admin key (made by the cloud engine, installed by cloud-init) and its own known_hosts.
            key = state.secrets_dir / "aws_admin_ed25519"
            return Access(SshOptions(private_key=key, known_hosts=state.dir / "known_hosts", accept_new=True), None)
        return Access(SshOptions(), None)
    from clusterctl.apply.lab import lab_for

    lab = lab_for(plan, state, log)
    return Access(SshOptions(private_key=lab.ssh_key, known_hosts=lab.known_hosts), lab)
