"""How clusterctl reaches a cluster's nodes: lab nodes with the lab's own key and known_hosts, owned hosts with
the user's SSH setup (agent, ~/.ssh/config, jump hosts from the spec), aws instances with the cluster's admin key.
Host keys are always checked (clusterctl.engines.ssh.hostkeys): hosts the spec does not pin are recorded in the cluster's own
known_hosts on first contact."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from clusterctl.engines.ssh import hostkeys
from clusterctl.engines.ansible.settings import SshOptions
from clusterctl.compile.model import ClusterPlan, Node
from clusterctl.engines.provider import Provider, SshIdentity, providers_for
from clusterctl.engines.ssh.remote import Remote
from clusterctl.state import ClusterState

if TYPE_CHECKING:
    from clusterctl.engines.local import Lab


@dataclass
class Access:
    ssh: SshOptions
    lab: Lab | None  # when the cluster has lab nodes
    identities: dict[str, SshIdentity | None] = field(default_factory=dict)  # provider name -> what it said

    def remote(self, node: Node) -> Remote:
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


def ssh_options(plan: ClusterPlan, state: ClusterState, private_key: Path | None = None, known_hosts: Path | None = None,
                tofu: bool = True) -> SshOptions:
    known = known_hosts or state.known_hosts_path
    config = hostkeys.write_config(state.dir / "ssh_config", known, ssh_hosts(plan), tofu=tofu)
    return SshOptions(private_key=private_key, known_hosts=known, config=config)


def access_for(plan: ClusterPlan, state: ClusterState, log: Callable[[str], None] = print,
               providers: Sequence[Provider] | None = None) -> Access:
    """One SSH setup for the whole cluster from what its providers say: a lab's own key and known_hosts when the
    cluster has lab nodes, else a cloud admin key when one is made, else the user's own setup."""
    ids = {p.name: p.identity(plan, state, log) for p in (providers if providers is not None else providers_for(plan))}
    given = [i for i in ids.values() if i is not None]
    lab = next((i for i in given if i.lab is not None), None)
    chosen = lab or next((i for i in given if i.private_key is not None), None) or SshIdentity()
    options = ssh_options(plan, state, private_key=chosen.private_key, known_hosts=chosen.known_hosts, tofu=chosen.tofu)
    return Access(options, chosen.lab, ids)


def controller_running(access: Access, plan: ClusterPlan) -> bool:
    """Whether the controller can be asked at all: a lab controller's container is running (a stopped lab answers no
    ssh); other controllers are assumed up (an ssh failure then says why)."""
    if access.lab is not None:
        return any(s.running for s in access.lab.status() if s.name == plan.controller.name)
    return True
