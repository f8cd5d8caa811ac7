"""Untrusted text in the compiled plan, where a spec's free strings end up. The plan is edited directly, so the spec's
validation is bypassed: the render layer has to hold on its own (defence in depth, DESIGN.md "Trust boundaries")."""

from __future__ import annotations

from dataclasses import replace

from clusterctl.compile import compile_plan
from clusterctl.compile.model import ClusterPlan, Mount
from clusterctl.validate import load_valid
from tests.conftest import example


def hybrid():
    """The hybrid-burst example (owned nodes, NFS, an aws pool: inventory, group_vars, cloud-init, monitoring)."""
    spec = load_valid(example("hybrid-burst.yaml"))
    return spec, compile_plan(spec)


def _ssh(plan: ClusterPlan, **change) -> ClusterPlan:
    def edit(n):
        return n if n.cloud else replace(n, ssh=replace(n.ssh, **change))

    return replace(plan, controller=edit(plan.controller), nodes=tuple(edit(n) for n in plan.nodes))


def _addresses(plan: ClusterPlan, text: str) -> ClusterPlan:
    def edit(n):
        return n if n.cloud else replace(n, address=text)

    return replace(plan, controller=edit(plan.controller), nodes=tuple(edit(n) for n in plan.nodes))


def _nfs(plan: ClusterPlan, **change) -> ClusterPlan:
    return replace(plan, mounts=tuple(replace(m, **change) if m.kind == "nfs" else m for m in plan.mounts))


def _lustre(plan: ClusterPlan, **change) -> ClusterPlan:
    m = Mount("lustre", "10.0.0.20@o2ib:/atlas", "/lustre", "flock", tuple(p.name for p in plan.pools), "o2ib(ib0)")
    return replace(plan, mounts=(*plan.mounts, replace(m, **change)))


def _accounting_host(plan: ClusterPlan, text: str) -> ClusterPlan:
    return replace(plan, slurm=replace(plan.slurm, accounting=True, accounting_host=text))


def _nccl_env(plan: ClusterPlan, text: str) -> ClusterPlan:
    return replace(plan, pools=tuple(replace(p, nccl_env=(*p.nccl_env, ("NCCL_SOCKET_IFNAME", text))) for p in plan.pools))


# Spec field -> (plan edit putting `text` where that field lands, the build file that refuses a line break in it).
SITES = {
    "ssh.user": (lambda p, t: _ssh(p, user=t), "ansible/inventory.yml"),
    "ssh.jump_host": (lambda p, t: _ssh(p, jump_host=t), "ansible/inventory.yml"),
    "address": (_addresses, "slurm/slurm.conf"),
    "nfs.server": (lambda p, t: _nfs(p, source=f"{t}:/export/home"), "ansible/group_vars/"),
    "nfs.options": (lambda p, t: _nfs(p, options=t), "ansible/group_vars/"),
    "lustre.mgs_nids": (lambda p, t: _lustre(p, source=f"{t}:/atlas"), "ansible/group_vars/"),
    "lustre.mount_options": (lambda p, t: _lustre(p, options=t), "ansible/group_vars/"),
    "lustre.lnet_networks": (lambda p, t: _lustre(p, lnet_networks=t), "ansible/group_vars/"),
    "accounting.storage_host": (_accounting_host, "slurm/slurm.conf"),
    "nccl.extra_env": (_nccl_env, "nccl/"),
}


def everywhere(plan: ClusterPlan, text: str) -> ClusterPlan:
    for edit, _ in SITES.values():
        plan = edit(plan, text)
    return plan
