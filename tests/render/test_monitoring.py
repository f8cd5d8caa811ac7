"""The rendered monitoring files: promtool accepts them for every example, the alert rules fire (and stay quiet) on
synthetic series as intended (`promtool test rules`), the dashboard has the guide's four panels with valid PromQL,
and the role reads the files where the renderer puts them.

promtool comes with Debian's `prometheus` package (CI: apt-get install prometheus)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from clusterctl.render.monitoring import metrics as m
from clusterctl.render.monitoring import render_monitoring
from clusterctl.render.write import write_build
from tests.conftest import EXAMPLES, ROOT
from tests.helpers import plan_of

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool missing: apt-get install prometheus (Debian package)")


def monitored_examples():
    return [p for p in EXAMPLES if plan_of(p).monitoring["enabled"]]


def promtool(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_every_example_monitors():
    assert len(monitored_examples()) == len(EXAMPLES) == 4


def test_disabled_renders_nothing():
    assert render_monitoring(plan_of("lab.yaml", lambda d: d.__setitem__("monitoring", {"enabled": False}))) == {}


@pytest.mark.parametrize("example", monitored_examples(), ids=lambda p: p.stem)
def test_deterministic(example):
    assert render_monitoring(plan_of(example)) == render_monitoring(plan_of(example))


@needs_promtool
@pytest.mark.parametrize("example", monitored_examples(), ids=lambda p: p.stem)
def test_promtool_accepts_config_and_rules(example, tmp_path):
    write_build(render_monitoring(plan_of(example)), tmp_path)
    config = tmp_path / m.PROMETHEUS_YML
    rules = tmp_path / m.RULES_YML
    r = promtool("check", "rules", rules)
    assert r.returncode == 0, r.stdout + r.stderr
    # check config also loads the rule files prometheus.yml names (relative to it): the layout must hold on the node too.
    r = promtool("check", "config", config)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 rule files found" in r.stdout + r.stderr


def test_scrape_targets_lab():
    text = render_monitoring(plan_of("lab.yaml"))[m.PROMETHEUS_YML]
    cfg = yaml.safe_load(text)
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    assert set(jobs) == {"prometheus", "pushgateway", "node", "slurm"}  # lab nodes: fake GPUs, no dcgm job
    node_targets = {sc["labels"]["node"]: sc["targets"][0] for sc in jobs["node"]["static_configs"]}
    assert node_targets == {"lab-ctl": "localhost:9100", "gpu001": "10.213.0.11:9100", "gpu002": "10.213.0.12:9100"}
    assert jobs["slurm"]["params"] == {"collect[]": ["textfile"]} and jobs["slurm"]["honor_labels"] is True
    assert cfg["global"]["scrape_interval"] == "15s"
    assert cfg["rule_files"] == ["rules/clusterctl.rules.yml"]


def test_scrape_targets_onprem_and_cloud():
    cfg = yaml.safe_load(render_monitoring(plan_of("onprem-64xh100-ib.yaml"))[m.PROMETHEUS_YML])
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    assert len(jobs["dcgm"]["static_configs"]) == 64
    assert jobs["dcgm"]["static_configs"][0] == {"targets": ["10.10.1.1:9400"], "labels": {"node": "gpu001", "pool": "gpu"}}
    assert len(jobs["node"]["static_configs"]) == 65
    # Cloud nodes get their address at launch: file_sd, filled by whoever learns it.
    cfg = yaml.safe_load(render_monitoring(plan_of("hybrid-burst.yaml"))[m.PROMETHEUS_YML])
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    assert jobs["node"]["file_sd_configs"] == [{"files": ["targets/node/burst-*.json"]}]
    assert jobs["dcgm"]["file_sd_configs"] == [{"files": ["targets/dcgm/burst-*.json"]}]
    assert len(jobs["dcgm"]["static_configs"]) == 8


def test_retention_is_a_flag():
    files = render_monitoring(plan_of("lab.yaml"))
    assert 'ARGS="--storage.tsdb.retention.time=7d ' in files[m.PROMETHEUS_ARGS]
    files = render_monitoring(plan_of("onprem-64xh100-ib.yaml"))
    assert "--storage.tsdb.retention.time=30d" in files[m.PROMETHEUS_ARGS]
    assert f"-f {m.NODE_DCGM_COUNTERS} -a :9400" in files[m.DCGM_DROPIN]
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE," in files[m.DCGM_COUNTERS]


def rules_of(plan) -> dict:
    doc = yaml.safe_load(render_monitoring(plan)[m.RULES_YML])
    return {r["alert"] + ("/" + r["labels"].get("pool", "") if "pool" in r["labels"] else ""): r
            for g in doc["groups"] for r in g["rules"]}


def test_thresholds_come_from_the_spec():
    rules = rules_of(plan_of("onprem-64xh100-ib.yaml", lambda d: d["monitoring"].update(
        {"alerts": {"gpu_util_min_percent": 90, "gpu_util_for_minutes": 7, "ecc_errors_per_hour": 3, "gpu_temp_max_c": 80}})))
    # DCGM_FI_PROF_GR_ENGINE_ACTIVE is a 0..1 ratio: 90% is 0.9, never the guide's literal 80/90.
    assert "< 0.9)" in rules["GPUStarving"]["expr"] and rules["GPUStarving"]["for"] == "7m"
    assert rules["GPUEccErrors"]["expr"].strip().endswith("[1h])) > 3")
    assert rules["GPUTemperatureHigh"]["expr"].endswith("> 80")
    assert rules["GPUMissing/gpu"]["expr"] == 'count by (node) (DCGM_FI_DEV_GPU_TEMP{pool="gpu"}) < 8'
    assert 'node_infiniband_state_id{pool="gpu"} == 4' in rules["FabricPortsMissing/gpu"]["expr"]
    assert ") < 8" in rules["FabricPortsMissing/gpu"]["expr"]
    efa = rules_of(plan_of("aws-p5-spot.yaml"))["FabricPortsMissing/p5"]
    assert 'clusterctl_efa_state_id{pool="p5"} == 4' in efa["expr"] and ") < 32" in efa["expr"]
    required = {"GPUStarving", "GPUEccErrors", "GPUTemperatureHigh", "NodeXidErrors", "NodeHealthWarning", "FabricPortDown", "SlurmNodeDrained", "SlurmNodeDown",
                "ExporterDown"}
    assert required <= {k.split("/")[0] for k in rules_of(plan_of("lab.yaml"))}


# --- the rules on synthetic series (promtool test rules) ---------------------------------------------------------

RULE_TESTS = """
rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  # A job's GPU at 50% for 10 minutes: starving. Another at 95%: not. An idle node's GPU at 0%: not (no job).
  - interval: 1m
    input_series:
      - series: 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{node="gpu001", gpu="0", pool="gpu"}'
        values: '0.5x15'
      - series: 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{node="gpu001", gpu="1", pool="gpu"}'
        values: '0.95x15'
      - series: 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{node="gpu002", gpu="0", pool="gpu"}'
        values: '0x15'
      - series: 'slurm_node_state{node="gpu001", state="allocated", job="slurm"}'
        values: '1x15'
      - series: 'slurm_node_state{node="gpu002", state="idle", job="slurm"}'
        values: '1x15'
    alert_rule_test:
      - eval_time: 3m
        alertname: GPUStarving
        exp_alerts: []
      - eval_time: 10m
        alertname: GPUStarving
        exp_alerts:
          - exp_labels: {severity: warning, node: gpu001, gpu: "0"}
            exp_annotations:
              summary: "GPU 0 on gpu001 busy 50% (< 80% for 5m) while its node runs a job"
              description: "The GPUs wait on something: data pipeline, network or stragglers. See the dashboard's data pipeline latency and fabric panels."

  # Three corrected ECC errors within the hour: more than 1 per hour.
  - interval: 5m
    input_series:
      - series: 'DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{node="gpu003", gpu="2", pool="gpu"}'
        values: '0 0 1 1 2 3 3 3 3 3 3 3 3'
      - series: 'DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{node="gpu004", gpu="0", pool="gpu"}'
        values: '0x12'
    alert_rule_test:
      - eval_time: 60m
        alertname: GPUEccErrors
        exp_alerts:
          - exp_labels: {severity: warning, node: gpu003, gpu: "2"}
            exp_annotations:
              summary: "GPU 2 on gpu003: 3 corrected ECC errors in the last hour (more than 1)"
              description: "Drain the node and run the DCGM diagnostics (dcgmi diag -r 3) before it corrupts a training run."

  # Without dcgm-exporter: the health check's corrected-ECC counter. 2 in the hour fires, 1 does not.
  - interval: 5m
    input_series:
      - series: 'clusterctl_gpu_ecc_corrected_volatile_total{node="gpu007", gpu="5", pool="gpu"}'
        values: '4 4 4 5 5 5 6 6 6 6 6 6 6'
      - series: 'clusterctl_gpu_ecc_corrected_volatile_total{node="gpu008", gpu="1", pool="gpu"}'
        values: '0 0 0 0 0 0 0 0 0 0 1 1 1'
    alert_rule_test:
      - eval_time: 60m
        alertname: GPUEccErrors
        exp_alerts:
          - exp_labels: {severity: warning, node: gpu007, gpu: "5"}
            exp_annotations:
              summary: "GPU 5 on gpu007: 2 corrected ECC errors in the last hour (more than 1)"
              description: "Drain the node and run the DCGM diagnostics (dcgmi diag -r 3) before it corrupts a training run."

  # A node's XID count rises (the health check's counter, 0 from its first run); another stays at 0.
  - interval: 1m
    input_series:
      - series: 'clusterctl_node_xid_total{node="gpu001", pool="gpu"}'
        values: '0 0 0 1 1 1 1 1'
      - series: 'clusterctl_node_xid_total{node="gpu002", pool="gpu"}'
        values: '0x7'
      - series: 'clusterctl_health_problem_info{node="gpu002", pool="gpu", severity="warning", problem="GPU 1: PCIe Gen4 under load, expected Gen5"}'
        values: '1x7'
    alert_rule_test:
      - eval_time: 5m
        alertname: NodeXidErrors
        exp_alerts:
          - exp_labels: {severity: warning, node: gpu001, pool: gpu}
            exp_annotations:
              summary: "gpu001 logged 1 new XID error(s) in 15 minutes"
              description: 'clusterctl_gpu_xid_total{node="gpu001"} has the codes; drain-class XIDs already drained the node.'
      - eval_time: 6m
        alertname: NodeHealthWarning
        exp_alerts:
          - exp_labels: {severity: info, node: gpu002, pool: gpu, problem: "GPU 1: PCIe Gen4 under load, expected Gen5"}
            exp_annotations:
              summary: "gpu002: GPU 1: PCIe Gen4 under load, expected Gen5"

  # The health check drained gpu001 (the reason comes from sinfo); gpu002 stays idle.
  - interval: 30s
    input_series:
      - series: 'slurm_node_state{node="gpu001", state="drained", job="slurm"}'
        values: '1x10'
      - series: 'slurm_node_reason_info{node="gpu001", reason="clusterctl-health: GPU count 7, expected 8", job="slurm"}'
        values: '1x10'
      - series: 'slurm_node_state{node="gpu002", state="idle", job="slurm"}'
        values: '1x10'
    alert_rule_test:
      - eval_time: 2m
        alertname: SlurmNodeDrained
        exp_alerts:
          - exp_labels: {severity: warning, node: gpu001, state: drained, job: slurm}
            exp_annotations:
              summary: "Slurm node gpu001 is drained"
              description: "Reason: clusterctl-health: GPU count 7, expected 8"

  # An IB port that was ACTIVE goes down; a never-used port stays quiet. 7 of 8 expected ports: missing.
  - interval: 1m
    input_series:
      - series: 'node_infiniband_state_id{node="gpu001", device="mlx5_0", port="1", pool="gpu"}'
        values: '4 4 4 1 1 1 1'
      - series: 'node_infiniband_state_id{node="gpu001", device="mlx5_9", port="1", pool="gpu"}'
        values: '1x6'
      - series: 'up{job="node", node="gpu001", pool="gpu"}'
        values: '1x6'
    alert_rule_test:
      - eval_time: 5m
        alertname: FabricPortDown
        exp_alerts:
          - exp_labels: {severity: critical, node: gpu001, device: mlx5_0, port: "1", pool: gpu}
            exp_annotations:
              summary: "gpu001: port mlx5_0/1 went down (state 1)"
      - eval_time: 5m
        alertname: FabricPortsMissing
        exp_alerts:
          - exp_labels: {severity: critical, node: gpu001, pool: gpu}
            exp_annotations:
              summary: "gpu001: 0 active infiniband ports, pool gpu expects 8"

  - interval: 1m
    input_series:
      - series: 'up{job="dcgm", node="gpu002", instance="10.10.1.2:9400", pool="gpu"}'
        values: '1 1 0 0 0 0 0'
      - series: 'DCGM_FI_DEV_GPU_TEMP{node="gpu005", gpu="3", pool="gpu"}'
        values: '70 80 90 91 92 93 94'
    alert_rule_test:
      - eval_time: 6m
        alertname: ExporterDown
        exp_alerts:
          - exp_labels: {severity: warning, job: dcgm, node: gpu002, instance: "10.10.1.2:9400", pool: gpu}
            exp_annotations:
              summary: "dcgm exporter on gpu002 (10.10.1.2:9400) is down"
      - eval_time: 6m
        alertname: GPUTemperatureHigh
        exp_alerts:
          - exp_labels: {severity: critical, node: gpu005, gpu: "3"}
            exp_annotations:
              summary: "GPU 3 on gpu005 at 94 C (above 85 C)"
"""


@needs_promtool
def test_rules_fire_as_intended(tmp_path):
    (tmp_path / "rules.yml").write_text(render_monitoring(plan_of("onprem-64xh100-ib.yaml"))[m.RULES_YML])
    (tmp_path / "tests.yml").write_text(RULE_TESTS)
    r = promtool("test", "rules", "tests.yml", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


@needs_promtool
def test_the_guides_literal_rule_would_always_fire(tmp_path):
    """Why the threshold is 0.8: the guide's `< 80` on a 0..1 ratio fires on a GPU busy 95% of the time."""
    (tmp_path / "rules.yml").write_text(
        "groups:\n- name: guide\n  rules:\n  - alert: GuideGPUStarving\n"
        "    expr: avg by (gpu) (DCGM_FI_PROF_GR_ENGINE_ACTIVE) < 80\n    for: 5m\n")
    (tmp_path / "tests.yml").write_text(
        "rule_files: [rules.yml]\ntests:\n- interval: 1m\n  input_series:\n"
        "  - series: 'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\"}'\n    values: '0.95x10'\n"
        "  alert_rule_test:\n  - eval_time: 8m\n    alertname: GuideGPUStarving\n    exp_alerts: []\n")
    r = promtool("test", "rules", "tests.yml", cwd=tmp_path)
    assert r.returncode != 0 and "GuideGPUStarving" in r.stdout + r.stderr


# --- dashboard ---------------------------------------------------------------------------------------------------

def dashboard_of(example) -> dict:
    return json.loads(render_monitoring(plan_of(example))[m.GRAFANA_DASHBOARD])


def test_dashboard_has_the_guides_four_panels():
    d = dashboard_of(ROOT / "examples" / "lab.yaml")
    titles = [p["title"] for p in d["panels"]]
    assert titles == ["GPU activity per node", "Network bandwidth per IB/EFA port", "Data pipeline latency (P50, P99)",
                      "Checkpoint duration"]
    heat, net, data, ckpt = d["panels"]
    assert heat["type"] == "heatmap" and "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in heat["targets"][0]["expr"]
    assert {t["legendFormat"].split()[-1] for t in net["targets"]} == {"tx", "rx"}
    assert [t["expr"].split("(")[1].split(",")[0] for t in data["targets"]] == ["0.5", "0.99"]
    assert all(m.DATALOADER_WAIT in t["expr"] for t in data["targets"])
    assert all(m.CHECKPOINT_DURATION in t["expr"] for t in ckpt["targets"])
    assert len({p["id"] for p in d["panels"]}) == 4
    assert all(p["datasource"]["uid"] == "clusterctl-prometheus" for p in d["panels"])
    ds = yaml.safe_load(render_monitoring(plan_of("lab.yaml"))[m.GRAFANA_DATASOURCE])
    assert ds["datasources"][0]["uid"] == "clusterctl-prometheus" and ds["datasources"][0]["url"] == "http://localhost:9090"
    prov = yaml.safe_load(render_monitoring(plan_of("lab.yaml"))[m.GRAFANA_DASHBOARD_PROVIDER])
    assert prov["providers"][0]["options"]["path"] == m.NODE_GRAFANA_DASHBOARDS


@needs_promtool
def test_dashboard_queries_are_valid_promql(tmp_path):
    """Every panel query, with Grafana's variables filled in, parses (as recording rules through promtool)."""
    d = dashboard_of(ROOT / "examples" / "onprem-64xh100-ib.yaml")
    exprs = [t["expr"] for p in d["panels"] for t in p["targets"]] + [d["templating"]["list"][0]["definition"]
                                                                       .replace("label_values(", "group by (pool) (").replace(", pool)", ")")]
    exprs = [e.replace("$__rate_interval", "1m").replace("$pool", ".*") for e in exprs]
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"panel:q{i}", "expr": e} for i, e in enumerate(exprs)]}]}
    (tmp_path / "q.yml").write_text(yaml.safe_dump(rules))
    r = promtool("check", "rules", tmp_path / "q.yml")
    assert r.returncode == 0, r.stdout + r.stderr


# --- the role reads what the renderer writes ------------------------------------------------------------------------

def test_role_paths_match_the_renderer():
    defaults = yaml.safe_load((ROOT / "playbooks/roles/monitoring/defaults/main.yml").read_text())
    assert defaults["monitoring_files"] == {
        "prometheus_yml": m.PROMETHEUS_YML, "rules_yml": m.RULES_YML, "prometheus_args": m.PROMETHEUS_ARGS,
        "node_exporter_args": m.NODE_EXPORTER_ARGS, "dcgm_counters": m.DCGM_COUNTERS, "dcgm_dropin": m.DCGM_DROPIN,
        "grafana_datasource": m.GRAFANA_DATASOURCE, "grafana_dashboard_provider": m.GRAFANA_DASHBOARD_PROVIDER,
        "grafana_dashboard": m.GRAFANA_DASHBOARD,
    }
    assert defaults["monitoring_textfile_dir"] == m.NODE_TEXTFILE_DIR
    assert defaults["monitoring_dcgm_counters"] == m.NODE_DCGM_COUNTERS
    assert defaults["monitoring_grafana_dashboards"] == m.NODE_GRAFANA_DASHBOARDS
    tasks = (ROOT / "playbooks/roles/monitoring/tasks/controller.yml").read_text()
    assert "/etc/prometheus/rules/" + Path(m.RULES_YML).name in tasks  # prometheus.yml names rules/<file>


def test_dcgm_nodes_agree_between_render_and_role():
    """The renderer scrapes dcgm on exactly the nodes the role installs it on (GPU, not AMD, not lab)."""
    dcgm = (ROOT / "playbooks/roles/monitoring/tasks/main.yml").read_text()  # the condition on dcgm.yml's include
    assert "clusterctl_gpus | default(0) > 0 and clusterctl_gpu_model not in ['mi300x'] and clusterctl_node_provider != 'local'" in dcgm
    from clusterctl.render.monitoring import NO_DCGM_MODELS
    assert NO_DCGM_MODELS == {"mi300x"}
