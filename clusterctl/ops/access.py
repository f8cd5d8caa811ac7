"""How clusterctl reaches a cluster's nodes: lab nodes with the lab's own key and known_hosts, owned hosts with
the user's SSH setup (agent, ~/.ssh/config, jump hosts from the spec), aws instances with the cluster's admin key.
Host keys are always checked (clusterctl.engines.ssh.hostkeys): hosts the spec does not pin are recorded in the cluster's own
known_hosts on first contact."""

from __future__ import annotations

from dataclasses import dataclass

from clusterctl.engines.ssh import hostkeys
from clusterctl.engines.ansible.settings import SshOptions
from clusterctl.compile.model import ClusterPlan
from clusterctl.engines.ssh.remote import Remote
from clusterctl.state import ClusterState


@dataclass
class Access:
    ssh: SshOptions
    lab: object | None  # clusterctl.engines.local.Lab when the cluster has lab nodes

    def remote(self, node) -> Remote:
        return Remote(node, self.ssh)


def ssh_hosts(plan: ClusterPlan) -> set[tuple[str, int]]:
    """(host, port) of every machine ssh may be asked to reach: the nodes with an address and their jump hosts."""
    out = set()
    for n in plan.all_nodes:
        if n.address:
            out.add((n.address, n.ssh.port))
        if n.ssh.jump_host:
            hop = n.ssh.jump_host.rpartition("@")[2]
            host, _, port = hop.rpartition(":") if ":" in hop else (hop, "", "22")
            out.add((host, int(port)))
    return out


def ssh_options(plan: ClusterPlan, state: ClusterState, private_key=None, known_hosts=None, tofu=True) -> SshOptions:
    known = known_hosts or state.known_hosts_path
    config = hostkeys.write_config(state.dir / "ssh_config", known, ssh_hosts(plan), tofu=tofu)
    return SshOptions(private_key=private_key, known_hosts=known, config=config)


def access_for(plan: ClusterPlan, state: ClusterState, log=print) -> Access:
    if plan.lab is None:
        if plan.controller.provider == "aws" or plan.aws_pools:
            # The cluster's own admin key (made by the cloud engine, installed by cloud-init).
            return Access(ssh_options(plan, state, private_key=state.secret_file("aws_admin_ed25519")), None)
        return Access(ssh_options(plan, state), None)
    from clusterctl.ops.lab import lab_for

    lab = lab_for(plan, state, log)
    # The lab writes every node's key itself: nothing is accepted on first use.
    return Access(ssh_options(plan, state, private_key=lab.ssh_key, known_hosts=lab.known_hosts, tofu=False), lab)
