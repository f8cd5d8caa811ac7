"""Ansible inventory and group_vars: who is where, and every fact the roles need (roles decide nothing)."""

from __future__ import annotations

from dataclasses import replace

from clusterctl.compile.model import ClusterPlan, Mount, Node, PoolPlan, Repo
from clusterctl.core.providers import traits
from clusterctl.spec.effective import lnet_line
from clusterctl.render import layout
from clusterctl.render.slurm import runs_slurmdbd
from clusterctl.render.yamlout import dump_ansible_yaml
from clusterctl.render.sshargs import common_args_string


def _host_vars(n: Node) -> dict:
    hv: dict = {}
    if n.address:
        hv["ansible_host"] = n.address
    hv["ansible_user"] = n.ssh.user
    if n.ssh.port != 22:
        hv["ansible_port"] = n.ssh.port
    if n.ssh.become:
        hv["ansible_become"] = True
    common = common_args_string(n.ssh)
    if common:
        hv["ansible_ssh_common_args"] = common
    if n.ssh.private_key_file:
        hv["ansible_ssh_private_key_file"] = n.ssh.private_key_file
    hv["clusterctl_node_provider"] = n.provider
    return hv


def inventory(plan: ClusterPlan) -> dict:
    ctl = plan.controller
    pools = {}
    for p in plan.pools:
        # Cloud nodes exist only while Slurm has them powered up; they configure themselves (cloud-init).
        hosts = {n.name: _host_vars(n) for n in plan.nodes_of(p.name) if not n.cloud}
        pools[layout.pool_group(p.name)] = {"hosts": hosts} if hosts else {}
    return {
        "all": {
            "children": {
                "slurm_controller": {"hosts": {ctl.name: _host_vars(ctl)}},
                "compute": {"children": pools},
            }
        }
    }


def builder_inventory(plan: ClusterPlan, pool: PoolPlan, name: str, address: str) -> str:
    """The inventory of an image build: one throwaway node `name` in the pool's group, reached as the pool's nodes
    are, so the pool's group_vars (and nothing of another node) apply to it."""
    like = next(iter(plan.nodes_of(pool.name)), None)
    node = (replace(like, name=name, address=address) if like is not None
            else Node(name=name, pool=pool.name, provider=pool.provider, role="compute", address=address))
    group = {"hosts": {name: _host_vars(node)}}
    # The controller's group is there, empty: the roles ask who is in it (groups['slurm_controller']).
    children = {"slurm_controller": {}, "compute": {"children": {layout.pool_group(pool.name): group}}}
    return dump_ansible_yaml({"all": {"children": children}}, f"image build inventory of pool {pool.name}")


def all_vars(plan: ClusterPlan) -> dict:
    return {
        "clusterctl_cluster": plan.name,
        "clusterctl_controller": plan.controller.name,
        "clusterctl_slurm_version": "%d.%02d" % plan.slurm.version,
        "clusterctl_software": plan.software,
        "clusterctl_accounting": plan.slurm.accounting,
        "clusterctl_slurmdbd": runs_slurmdbd(plan),
        "clusterctl_has_cloud_nodes": any(n.cloud for n in plan.nodes),
        "clusterctl_has_static_spot_nodes": bool(plan.static_spot_nodes),  # the sync timer replaces them
        "clusterctl_lab_users": [{"name": u, "uid": uid} for u, uid in plan.lab.users] if plan.lab else [],
        "clusterctl_monitoring": plan.monitoring,
        "clusterctl_configless_files": list(layout.CONFIGLESS_FILES),
        "clusterctl_files": {
            "slurm_conf": layout.SLURM_CONF,
            "gres_conf": layout.GRES_CONF,
            "cgroup_conf": layout.CGROUP_CONF,
            "topology_conf": layout.TOPOLOGY_CONF,
            "slurmd_dropin": layout.SLURMD_DROPIN,
            "slurmdbd_conf": layout.SLURMDBD_CONF,
            "accounts": layout.SLURM_ACCOUNTS if plan.slurm.accounts else None,
            "hosts": layout.HOSTS,
        },
        "clusterctl_paths": {
            "health_program": layout.HEALTH_PROGRAM,
            "burst_resume": layout.BURST_RESUME,
            "burst_suspend": layout.BURST_SUSPEND,
            "burst_resume_fail": layout.BURST_RESUME_FAIL,
            "task_prolog": layout.TASK_PROLOG,
            "slurmd_dropin": layout.NODE_SLURMD_DROPIN,
            "prolog": layout.PROLOG,
            "nccl_env": layout.NODE_NCCL_ENV,
            "health_conf": layout.NODE_HEALTH_CONF,
        },
    }


def _mount(m: Mount) -> dict:
    return {"kind": m.kind, "source": m.source, "path": m.mount_point, "options": m.options, "lnet_networks": m.lnet_networks}


def _cache(plan: ClusterPlan, pool_name: str | None) -> dict | None:
    c = plan.local_cache
    if c is None or pool_name not in c.pools:
        return None
    return {
        "devices": list(c.devices) if c.devices is not None else "auto",
        "filesystem": c.filesystem,
        "path": c.mount_point,
        "raid0": c.raid0,
        "reformat": c.reformat,
    }


def repo_vars(r: Repo) -> dict:
    """One repository or tarball as the roles read it (vendor_repo, efa)."""
    out = {"component": r.component, "kind": r.kind, "url": r.url, "suite": r.suite, "key_url": r.key_url,
           "keyring": r.keyring, "mirror": r.mirror}
    if r.kind == "tarball":
        out["key_fingerprint"] = r.key_fingerprint
    return out


def _repos(repos: tuple[Repo, ...]) -> dict:
    """Vendor repositories as data: apt ones for the vendor_repo role, tarballs (EFA installer) by component."""
    return {
        "clusterctl_repos": [repo_vars(r) for r in repos if r.kind == "apt"],
        "clusterctl_downloads": {r.component: repo_vars(r) for r in repos if r.kind == "tarball"},
    }


def controller_vars(plan: ClusterPlan) -> dict:
    # The login node mounts every shared filesystem (users stage data there); it has no dataset cache.
    return {
        "clusterctl_node_mounts": [_mount(m) for m in plan.mounts],
        "clusterctl_lnet_networks": lnet_line(m.lnet_networks for m in plan.mounts),
        "clusterctl_node_cache": None,
        "clusterctl_os": plan.controller_os,
        "clusterctl_own_kernel": not traits(plan.controller).lab,
        **_repos(plan.controller_repos),
    }


def pool_vars(plan: ClusterPlan, pool: PoolPlan) -> dict:
    return {
        "clusterctl_node_mounts": [_mount(m) for m in plan.mounts if pool.name in m.pools],
        "clusterctl_lnet_networks": lnet_line(m.lnet_networks for m in plan.mounts if pool.name in m.pools),
        "clusterctl_node_cache": _cache(plan, pool.name),
        "clusterctl_pool": pool.name,
        "clusterctl_gpus": pool.gpus_per_node,
        "clusterctl_gpu_model": pool.gpu_model,
        "clusterctl_fabric": pool.fabric,
        "clusterctl_rails": pool.rails,
        "clusterctl_nccl_env_file": layout.NCCL_ENV.format(pool=pool.name),
        "clusterctl_health_file": layout.HEALTH_CONF.format(pool=pool.name),
        "clusterctl_os": pool.os,
        "clusterctl_nvidia_stack": pool.nvidia_stack,
        "clusterctl_own_kernel": not traits(pool).lab,
        **_repos(pool.repos),
    }


def render_ansible(plan: ClusterPlan) -> dict[str, str]:
    data = {
        layout.INVENTORY: inventory(plan),
        f"{layout.GROUP_VARS}/all.yml": all_vars(plan),
        f"{layout.GROUP_VARS}/slurm_controller.yml": controller_vars(plan),
    }
    for p in plan.pools:
        data[f"{layout.GROUP_VARS}/{layout.pool_group(p.name)}.yml"] = pool_vars(plan, p)
    return {path: dump_ansible_yaml(d, path) for path, d in data.items()}
