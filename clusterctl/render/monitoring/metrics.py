"""The monitoring contract: ports, build-file paths, paths on the nodes and the metric names the alert rules and the
dashboard read. The renderer, the `monitoring` role (through its defaults, checked by a test) and `clusterctl check`
share these names.

Where each metric comes from
----------------------------
- `node_*`: Debian's `prometheus-node-exporter` (1.5 on Debian 12) on every node, :9100. IB/RoCE ports come from its
  default-on `infiniband` collector: `node_infiniband_state_id{device,port}` (4 = ACTIVE) and
  `node_infiniband_port_data_{received,transmitted}_bytes_total`.
- `clusterctl_efa_*`: EFA devices have no `counters/` directory (only `hw_counters/`), and node_exporter 1.5's procfs
  fails the whole infiniband collector on such a device. So EFA nodes run `clusterctl-node-metrics efa` (a systemd
  timer) writing `clusterctl_efa_state_id{device,port}` and `clusterctl_efa_port_data_{received,transmitted}_bytes_total`
  (from hw_counters rx_bytes/tx_bytes) into node_exporter's textfile directory.
- `slurm_*`: there is no Slurm exporter in Debian 12. The controller runs `clusterctl-node-metrics slurm` every 30 s
  (systemd timer): it parses `sinfo` and writes `slurm_node_state{node,state}` (1 for the node's current state),
  `slurm_node_reason_info{node,reason}` and `slurm_up` into the textfile directory; Prometheus reads them through the
  controller's node_exporter as a separate `slurm` job (`collect[]=textfile`, honor_labels so `node` is the Slurm node).
  No extra daemon or port, and nothing to download.
- `DCGM_FI_*`: NVIDIA's `dcgm-exporter` (package `datacenter-gpu-manager-exporter` from NVIDIA's CUDA repository) on
  GPU nodes, :9400, with our counters file (the exporter's packaged default set changes between releases and has left
  `DCGM_FI_PROF_GR_ENGINE_ACTIVE` out in some). Labels: `gpu` (index), `UUID`, `modelName`, `Hostname`.
- Job metrics (data pipeline latency, checkpoint duration): training jobs push them to the Prometheus Pushgateway on the
  controller (:9091, Debian's `prometheus-pushgateway`), grouped by Slurm job id and rank. Both are histograms in
  seconds; see JOB_METRICS for names and the bucket boundaries jobs should use.

A training job reports them with prometheus_client, e.g. once per step / per checkpoint:

    reg = CollectorRegistry()
    wait = Histogram("clusterctl_dataloader_wait_seconds", "Wait for the next batch", registry=reg,
                     buckets=JOB_METRICS["clusterctl_dataloader_wait_seconds"])
    ...
    push_to_gateway(f"{controller}:9091", job="clusterctl_train", registry=reg,
                    grouping_key={"slurm_job_id": os.environ["SLURM_JOB_ID"], "rank": os.environ["SLURM_PROCID"]})

and deletes its group when it ends (delete_from_gateway), or the last values stay on the Pushgateway.

Every scraped series also carries `node` (the cluster's node name) and `pool` labels set in prometheus.yml, so the
rules can join GPU, fabric and Slurm metrics on `node`.
"""

from __future__ import annotations

NODE_EXPORTER_PORT = 9100
DCGM_EXPORTER_PORT = 9400
PROMETHEUS_PORT = 9090
PUSHGATEWAY_PORT = 9091
GRAFANA_PORT = 3000

# Build directory (relative to the build root).
DIR = "monitoring"
PROMETHEUS_YML = f"{DIR}/prometheus/prometheus.yml"
RULES_YML = f"{DIR}/prometheus/rules/clusterctl.rules.yml"  # prometheus.yml names it relative: rules/...
PROMETHEUS_ARGS = f"{DIR}/prometheus/prometheus.default"  # installed as /etc/default/prometheus (ARGS=...)
NODE_EXPORTER_ARGS = f"{DIR}/node-exporter.default"  # installed as /etc/default/prometheus-node-exporter
DCGM_COUNTERS = f"{DIR}/dcgm/counters.csv"
DCGM_DROPIN = f"{DIR}/dcgm/clusterctl.conf"  # systemd drop-in for nvidia-dcgm-exporter.service
GRAFANA_DATASOURCE = f"{DIR}/grafana/provisioning/datasources/clusterctl.yml"
GRAFANA_DASHBOARD_PROVIDER = f"{DIR}/grafana/provisioning/dashboards/clusterctl.yml"
GRAFANA_DASHBOARD = f"{DIR}/grafana/dashboards/clusterctl-training.json"

# Paths on the nodes.
NODE_TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"  # Debian's default --collector.textfile.directory
NODE_PROMETHEUS_DIR = "/etc/prometheus"
NODE_DCGM_COUNTERS = "/etc/dcgm-exporter/clusterctl-counters.csv"
NODE_GRAFANA_DASHBOARDS = "/var/lib/grafana/dashboards/clusterctl"
DCGM_UNIT = "nvidia-dcgm-exporter.service"

# Metrics the textfile script writes (files in NODE_TEXTFILE_DIR).
SLURM_PROM_FILE = "clusterctl-slurm.prom"
EFA_PROM_FILE = "clusterctl-efa.prom"
SLURM_NODE_STATE = "slurm_node_state"
SLURM_NODE_REASON = "slurm_node_reason_info"
SLURM_UP = "slurm_up"
# Written by the health check (playbooks/roles/health/files/clusterctl-healthcheck) into clusterctl-health.prom.
HEALTH_PROBLEM = "clusterctl_health_problem_info"  # {severity="drain"|"warning", problem}
HEALTH_ECC_CORRECTED = "clusterctl_gpu_ecc_corrected_volatile_total"  # {gpu}
HEALTH_XID_TOTAL = "clusterctl_node_xid_total"  # XIDs seen this boot, all codes (per code: clusterctl_gpu_xid_total)

# dcgm-exporter: the guide's GPUStarving metric. A RATIO in 0..1 (fraction of time the graphics/compute engine was
# active over the sample), not a percentage: the guide's `< 80` would always be true.
GPU_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"
ECC_VOLATILE = ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")

# Job-side metrics (pushed by training jobs). Histograms, seconds.
DATALOADER_WAIT = "clusterctl_dataloader_wait_seconds"  # time a rank waited for its next batch (per step)
CHECKPOINT_DURATION = "clusterctl_checkpoint_duration_seconds"  # time training was blocked by a checkpoint save
JOB_METRICS = {
    DATALOADER_WAIT: (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    CHECKPOINT_DURATION: (1, 2, 5, 10, 30, 60, 120, 300, 600, 1200, 1800),
}
# Grouping key jobs push under: /metrics/job/clusterctl_train/slurm_job_id/<id>/rank/<rank>
PUSH_JOB = "clusterctl_train"
