"""The Grafana dashboard (JSON model, provisioned as a file): the guide's four panels.

1. GPU activity per node (heatmap: one row per node, colour = DCGM_FI_PROF_GR_ENGINE_ACTIVE, 0..1)
2. Network bandwidth per IB/EFA port (tx up, rx down)
3. Data pipeline latency P50/P99 (clusterctl_dataloader_wait_seconds, pushed by jobs)
4. Checkpoint duration (clusterctl_checkpoint_duration_seconds, pushed by jobs)
"""

from __future__ import annotations

from typing import Iterable

from clusterctl.compile.model import ClusterPlan
from clusterctl.render.monitoring import metrics as m

DATASOURCE_UID = "clusterctl-prometheus"
DS = {"type": "prometheus", "uid": DATASOURCE_UID}
POOL = 'pool=~"$pool"'


def _target(ref: str, expr: str, legend: str) -> dict:
    return {"refId": ref, "datasource": DS, "expr": expr, "legendFormat": legend, "range": True}


def _timeseries(title: str, desc: str, unit: str, targets: list[dict], pos: dict, overrides: Iterable[dict] = ()) -> dict:
    return {
        "type": "timeseries",
        "title": title,
        "description": desc,
        "datasource": DS,
        "gridPos": pos,
        "targets": targets,
        "fieldConfig": {
            "defaults": {"unit": unit, "custom": {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "spanNulls": False}},
            "overrides": list(overrides),
        },
        "options": {"legend": {"displayMode": "table", "placement": "right", "calcs": ["mean", "max"]},
                    "tooltip": {"mode": "multi", "sort": "desc"}},
    }


def panels() -> list[dict]:
    gpu = {
        "type": "heatmap",
        "title": "GPU activity per node",
        "description": (f"{m.GPU_ACTIVE} averaged over each node's GPUs: one row per node, 0 (idle) .. 1 (busy). "
                        "The GPUStarving alert fires below the spec's threshold on allocated nodes."),
        "datasource": DS,
        "gridPos": {"h": 10, "w": 24, "x": 0, "y": 0},
        "targets": [_target("A", f"avg by (node) ({m.GPU_ACTIVE}{{{POOL}}})", "{{node}}") | {"format": "time_series"}],
        "fieldConfig": {"defaults": {"unit": "percentunit", "min": 0, "max": 1}, "overrides": []},
        "options": {
            "calculate": False,
            "cellGap": 1,
            "color": {"mode": "scheme", "scheme": "RdYlGn", "min": 0, "max": 1, "steps": 32, "exponent": 0.5,
                      "fill": "dark-green", "reverse": False},
            "yAxis": {"axisPlacement": "left", "reverse": True},
            "rowsFrame": {"layout": "auto"},
            "legend": {"show": True},
            "tooltip": {"mode": "single", "yHistogram": False},
            "cellValues": {"unit": "percentunit"},
        },
    }
    rate = "[$__rate_interval]"
    net = _timeseries(
        "Network bandwidth per IB/EFA port",
        "Bytes per second per RDMA port: InfiniBand/RoCE from node_exporter's infiniband collector, EFA from "
        "clusterctl-node-metrics (hw_counters). Transmit above the axis, receive below.",
        "Bps",
        [
            _target("A", f"sum by (node, device, port) (rate(node_infiniband_port_data_transmitted_bytes_total{{{POOL}}}{rate}))",
                    "{{node}} {{device}}:{{port}} tx"),
            _target("B", f"sum by (node, device, port) (rate(node_infiniband_port_data_received_bytes_total{{{POOL}}}{rate}))",
                    "{{node}} {{device}}:{{port}} rx"),
            _target("C", f"sum by (node, device, port) (rate(clusterctl_efa_port_data_transmitted_bytes_total{{{POOL}}}{rate}))",
                    "{{node}} {{device}}:{{port}} tx"),
            _target("D", f"sum by (node, device, port) (rate(clusterctl_efa_port_data_received_bytes_total{{{POOL}}}{rate}))",
                    "{{node}} {{device}}:{{port}} rx"),
        ],
        {"h": 9, "w": 24, "x": 0, "y": 10},
        overrides=[{"matcher": {"id": "byRegexp", "options": ".* rx$"},
                    "properties": [{"id": "custom.transform", "value": "negative-Y"}]}],
    )
    wait = f"{m.DATALOADER_WAIT}_bucket"
    data = _timeseries(
        "Data pipeline latency (P50, P99)",
        f"{m.DATALOADER_WAIT}: how long a rank waited for its next batch, per Slurm job. Jobs push it (histogram, "
        f"seconds) to the Pushgateway on the controller (:{m.PUSHGATEWAY_PORT}). P99 far above P50: stragglers or "
        "a storage tier that cannot keep up.",
        "s",
        [
            _target("A", f"histogram_quantile(0.5, sum by (le, slurm_job_id) (rate({wait}{rate})))", "job {{slurm_job_id}} P50"),
            _target("B", f"histogram_quantile(0.99, sum by (le, slurm_job_id) (rate({wait}{rate})))", "job {{slurm_job_id}} P99"),
        ],
        {"h": 9, "w": 12, "x": 0, "y": 19},
    )
    ckpt = f"{m.CHECKPOINT_DURATION}"
    checkpoint = _timeseries(
        "Checkpoint duration",
        f"{ckpt}: how long training was blocked by each checkpoint save, per Slurm job (mean and P99 over the last "
        "hour; checkpoints come every few minutes). Jobs push it to the Pushgateway.",
        "s",
        [
            _target("A", f"sum by (slurm_job_id) (increase({ckpt}_sum[1h])) / sum by (slurm_job_id) (increase({ckpt}_count[1h]))",
                    "job {{slurm_job_id}} mean"),
            _target("B", f"histogram_quantile(0.99, sum by (le, slurm_job_id) (increase({ckpt}_bucket[1h])))",
                    "job {{slurm_job_id}} P99"),
        ],
        {"h": 9, "w": 12, "x": 12, "y": 19},
    )
    out = [gpu, net, data, checkpoint]
    for i, p in enumerate(out, start=1):
        p["id"] = i
    return out


def dashboard(plan: ClusterPlan) -> dict:
    return {
        "uid": f"clusterctl-{plan.name}"[:40],
        "title": f"{plan.name}: GPU training cluster",
        "description": f"Rendered by clusterctl for cluster {plan.name}; provisioned as a file (edit the renderer, not the UI).",
        "tags": ["clusterctl", plan.name],
        "editable": False,
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [{
            "name": "pool",
            "label": "pool",
            "type": "query",
            "datasource": DS,
            "query": {"query": 'label_values(up{job="node"}, pool)', "refId": "pool"},
            "definition": 'label_values(up{job="node"}, pool)',
            "refresh": 2,
            "multi": True,
            "includeAll": True,
            "allValue": ".*",
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
            "sort": 1,
        }]},
        "annotations": {"list": []},
        "panels": panels(),
    }
