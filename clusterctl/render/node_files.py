"""Small per-cluster and per-pool files the roles install as they are: /etc/hosts lines, NCCL env, health config."""

from __future__ import annotations

import shlex

from clusterctl.compile.model import ClusterPlan
from clusterctl.render import layout

HEADER = "# Rendered by clusterctl for cluster {name}.\n"


def hosts_file(plan: ClusterPlan) -> str:
    lines = [f"{n.address} {n.name}" for n in plan.all_nodes if n.address]
    return HEADER.format(name=plan.name) + "".join(line + "\n" for line in lines)


def nccl_env_file(plan: ClusterPlan, pool) -> str:
    # NAME=value lines, values verbatim: Slurm's TaskProlog protocol ("export NAME=value") takes them literally.
    body = "".join(f"{k}={v}\n" for k, v in pool.nccl_env)
    return HEADER.format(name=plan.name) + f"# NCCL environment of pool {pool.name} ({pool.fabric}).\n" + body


def health_file(plan: ClusterPlan, pool) -> str:
    h = pool.health
    return HEADER.format(name=plan.name) + (
        f"# What the health check expects on nodes of pool {pool.name}.\n"
        f"EXPECTED_GPUS={h.gpus}\n"
        f"EXPECTED_IB_PORTS={h.ib_ports}\n"
        f"EXPECTED_EFA_DEVICES={h.efa_devices}\n"
        f"REQUIRED_MOUNTS={shlex.quote(' '.join(h.mounts))}\n"
    )


def render_node_files(plan: ClusterPlan) -> dict[str, str]:
    files = {layout.HOSTS: hosts_file(plan)}
    for p in plan.pools:
        files[layout.NCCL_ENV.format(pool=p.name)] = nccl_env_file(plan, p)
        files[layout.HEALTH_CONF.format(pool=p.name)] = health_file(plan, p)
    return files
