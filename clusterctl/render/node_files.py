"""Small per-cluster and per-pool files the roles install as they are: /etc/hosts lines, NCCL env, health config."""

from __future__ import annotations

import shlex

from clusterctl.compile.model import ClusterPlan
from clusterctl.render import layout
from clusterctl.render.lines import lines_text

HEADER = "# Rendered by clusterctl for cluster {name}."


def hosts_file(plan: ClusterPlan) -> str:
    lines = [f"{n.address} {n.name}" for n in plan.all_nodes if n.address]
    return lines_text(layout.HOSTS, [HEADER.format(name=plan.name), *lines])


def nccl_env_file(plan: ClusterPlan, pool, path: str) -> str:
    # NAME=value lines, values verbatim: Slurm's TaskProlog protocol ("export NAME=value") takes them literally.
    head = [HEADER.format(name=plan.name), f"# NCCL environment of pool {pool.name} ({pool.fabric})."]
    return lines_text(path, head + [f"{k}={v}" for k, v in pool.nccl_env])


def health_file(plan: ClusterPlan, pool, path: str) -> str:
    h = pool.health
    return lines_text(path, [
        HEADER.format(name=plan.name),
        f"# What the health check expects on nodes of pool {pool.name}.",
        f"EXPECTED_GPUS={h.gpus}",
        f"EXPECTED_IB_PORTS={h.ib_ports}",
        f"EXPECTED_EFA_DEVICES={h.efa_devices}",
        f"REQUIRED_MOUNTS={shlex.quote(' '.join(h.mounts))}",  # quoted, yet a newline is still refused: one line each
    ])


def render_node_files(plan: ClusterPlan) -> dict[str, str]:
    files = {layout.HOSTS: hosts_file(plan)}
    for p in plan.pools:
        nccl, health = layout.NCCL_ENV.format(pool=p.name), layout.HEALTH_CONF.format(pool=p.name)
        files[nccl] = nccl_env_file(plan, p, nccl)
        files[health] = health_file(plan, p, health)
    return files
