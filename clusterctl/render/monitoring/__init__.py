"""render_monitoring(plan): Prometheus config, alert rules, exporter settings and Grafana provisioning + dashboard.

Pure and deterministic like every renderer: {build-relative path: text}. Empty when monitoring is disabled. The
`monitoring` role copies these files; it decides nothing (which nodes are scraped, for which exporter, what the
thresholds are, all come from here).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from clusterctl.compile.model import ClusterPlan, Node
from clusterctl.render.monitoring import metrics as m
from clusterctl.render.monitoring.dashboard import DATASOURCE_UID, dashboard
from clusterctl.core.providers import traits

if TYPE_CHECKING:
    import jinja2

# AMD GPUs have no DCGM; an AMD exporter is not part of this build.
NO_DCGM_MODELS = {"mi300x"}


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    from clusterctl.render.templates import environment

    # Prometheus alert templates and Grafana use {{ }}: monitoring templates use [[ ]] / [% %] instead.
    return environment().overlay(
        variable_start_string="[[", variable_end_string="]]",
        block_start_string="[%", block_end_string="%]",
        comment_start_string="[#", comment_end_string="#]",
    )


def _render(name: str, **ctx: Any) -> str:
    from clusterctl.render.templates import render_with

    return render_with(_env(), f"monitoring/{name}", **ctx)


def dcgm_scraped(node: Node) -> bool:
    """dcgm-exporter runs (and is scraped) on NVIDIA GPU nodes; lab nodes only have fake device files."""
    return node.gpus > 0 and node.gpu_model not in NO_DCGM_MODELS and not traits(node).lab


def _target(node: Node, port: int, controller: Node) -> dict:
    # Prometheus runs on the controller: its own exporters are scraped on localhost (works before its address is known).
    host = "localhost" if node is controller else node.address
    return {"target": f"{host}:{port}", "node": node.name, "pool": node.pool or "controller"}


def scrape_targets(plan: ClusterPlan) -> dict:
    """Static targets per job for nodes with a known address; pools whose nodes get one only at launch use file_sd."""
    ctl = plan.controller
    node_targets = [_target(ctl, m.NODE_EXPORTER_PORT, ctl)]
    dcgm_targets, node_file_sd, dcgm_file_sd = [], [], []
    for pool in plan.pools:
        for n in plan.nodes_of(pool.name):
            if n.cloud or not n.address:
                if pool.name not in node_file_sd:
                    node_file_sd.append(pool.name)
                if dcgm_scraped(n) and pool.name not in dcgm_file_sd:
                    dcgm_file_sd.append(pool.name)
                continue
            node_targets.append(_target(n, m.NODE_EXPORTER_PORT, ctl))
            if dcgm_scraped(n):
                dcgm_targets.append(_target(n, m.DCGM_EXPORTER_PORT, ctl))
    return {"node_targets": node_targets, "dcgm_targets": dcgm_targets,
            "node_file_sd": node_file_sd, "dcgm_file_sd": dcgm_file_sd}


def _ports() -> dict:
    return {"node": m.NODE_EXPORTER_PORT, "dcgm": m.DCGM_EXPORTER_PORT, "prometheus": m.PROMETHEUS_PORT,
            "pushgateway": m.PUSHGATEWAY_PORT}


def _fabric_pools(plan: ClusterPlan) -> list[dict]:
    out = []
    for p in plan.pools:
        h = p.health
        if h.efa_devices:
            out.append({"name": p.name, "fabric": "EFA", "ports": h.efa_devices, "metric": "clusterctl_efa_state_id"})
        elif h.ib_ports:
            out.append({"name": p.name, "fabric": p.fabric, "ports": h.ib_ports, "metric": "node_infiniband_state_id"})
    return out


def _gpu_pools(plan: ClusterPlan) -> list[dict]:
    return [{"name": p.name, "gpus": p.gpus_per_node} for p in plan.pools
            if any(dcgm_scraped(n) for n in plan.nodes_of(p.name))]


def prometheus_yml(plan: ClusterPlan) -> str:
    return _render("prometheus.yml.j2", cluster=plan.name, controller=plan.controller.name,
                   interval=plan.monitoring["scrape_interval_seconds"], ports=_ports(),
                   rules_file=m.RULES_YML.split("/prometheus/", 1)[1], **scrape_targets(plan))


def rules_yml(plan: ClusterPlan) -> str:
    alerts = plan.monitoring["alerts"]
    return _render(
        "clusterctl.rules.yml.j2",
        cluster=plan.name,
        alerts=alerts,
        starving_ratio=f"{alerts['gpu_util_min_percent'] / 100:g}",
        metrics={"gpu_active": m.GPU_ACTIVE, "gpu_temp": m.GPU_TEMP, "xid": "DCGM_FI_DEV_XID_ERRORS",
                 "ecc_corrected": m.ECC_VOLATILE[0], "health_ecc": m.HEALTH_ECC_CORRECTED, "xid_total": m.HEALTH_XID_TOTAL,
                 "health_problem": m.HEALTH_PROBLEM, "reason": m.SLURM_NODE_REASON, "slurm_file": m.SLURM_PROM_FILE},
        gpu_pools=_gpu_pools(plan),
        fabric_pools=_fabric_pools(plan),
    )


def render_monitoring(plan: ClusterPlan) -> dict[str, str]:
    mon = plan.monitoring
    if not mon.get("enabled"):
        return {}
    common = {"cluster": plan.name, "ports": _ports(), "interval": mon["scrape_interval_seconds"]}
    files = {
        m.PROMETHEUS_YML: prometheus_yml(plan),
        m.RULES_YML: rules_yml(plan),
        m.PROMETHEUS_ARGS: _render("prometheus.default.j2", retention_days=mon["retention_days"], **common),
        m.NODE_EXPORTER_ARGS: _render("node-exporter.default.j2", textfile_dir=m.NODE_TEXTFILE_DIR, **common),
        m.GRAFANA_DATASOURCE: _render("grafana-datasource.yml.j2", datasource_uid=DATASOURCE_UID, **common),
        m.GRAFANA_DASHBOARD_PROVIDER: _render("grafana-dashboards.yml.j2", dashboards_dir=m.NODE_GRAFANA_DASHBOARDS, **common),
        m.GRAFANA_DASHBOARD: json.dumps(dashboard(plan), indent=2, sort_keys=True) + "\n",
    }
    if any(dcgm_scraped(n) for n in plan.nodes):
        files[m.DCGM_COUNTERS] = _render("dcgm-counters.csv.j2", **common)
        files[m.DCGM_DROPIN] = _render("dcgm-exporter.conf.j2", counters=m.NODE_DCGM_COUNTERS, **common)
    return dict(sorted(files.items()))

