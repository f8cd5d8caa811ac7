"""Small per-cluster and per-pool files the roles install as they are: /etc/hosts lines, NCCL env, health config."""

from __future__ import annotations

import shlex

from clusterctl.compile.model import ClusterPlan, PoolPlan
from clusterctl.render import layout
from clusterctl.render.lines import lines_text

HEADER = "# Rendered by clusterctl for cluster {name}."


def hosts_file(plan: ClusterPlan) -> str:
    lines = [f"{n.address} {n.name}" for n in plan.all_nodes if n.address]
    return lines_text(layout.HOSTS, [HEADER.format(name=plan.name), *lines])


def nccl_env_file(plan: ClusterPlan, pool: PoolPlan, path: str) -> str:
    # NAME=value lines, values verbatim: Slurm's TaskProlog protocol ("export NAME=value") takes them literally.
    # Each decision's reason is a comment above its line; decisions to leave a variable to NCCL come first.
    head = [HEADER.format(name=plan.name), f"# NCCL environment of pool {pool.name} ({pool.fabric})."]
    why = {k: text for k, text in pool.nccl_notes if k}
    lines = head + [f"# {text}" for k, text in pool.nccl_notes if not k]
    for k, v in pool.nccl_env:
        lines += ([f"# {k}: {why[k]}"] if k in why else []) + [f"{k}={v}"]
    return lines_text(path, lines)


def health_file(plan: ClusterPlan, pool: PoolPlan, path: str) -> str:
    h = pool.health
    q = shlex.quote  # quoted, yet a newline is still refused: one line each
    lines = [
        HEADER.format(name=plan.name),
        f"# What the health check (clusterctl-healthcheck) expects on nodes of pool {pool.name}.",
        f"EXPECTED_GPUS={h.gpus}",
        f"GPU_SOURCE={h.gpu_source}",
        f"PCIE_GEN={h.pcie_gen}",
        f"PCIE_WIDTH={h.pcie_width}",
        f"NVLINKS={h.nvlinks}",
        f"FABRIC_MANAGER={int(h.fabric_manager)}",
        f"EXPECTED_IB_PORTS={0 if h.rails else h.ib_ports}",
        f"EXPECTED_EFA_DEVICES={h.efa_devices}",
        f"REQUIRED_MOUNTS={q(' '.join(h.mounts))}",
        "# The NVIDIA driver nvidia-smi must report (empty: not judged, clusterctl does not install it here).",
        f"DRIVER_VERSION={h.driver or ''}",
    ]
    if h.rails:
        lines += ["# Compute rails by name (device:port:Gb/s): each must be ACTIVE at its rate; other ports never count.",
                  f"RAILS={q(' '.join(f'{d}:{p}:{r}' for d, p, r in h.rails))}"]
    elif h.ib_ports:
        lines.append("# Rails not named in the spec (fabric.hcas): ACTIVE ports on any device are counted.")
    if h.cache_mount:
        lines.append(f"CACHE_MOUNT={q(h.cache_mount)}")
    return lines_text(path, lines)


def render_node_files(plan: ClusterPlan) -> dict[str, str]:
    files = {layout.HOSTS: hosts_file(plan)}
    for p in plan.pools:
        nccl, health = layout.NCCL_ENV.format(pool=p.name), layout.HEALTH_CONF.format(pool=p.name)
        files[nccl] = nccl_env_file(plan, p, nccl)
        files[health] = health_file(plan, p, health)
    return files
