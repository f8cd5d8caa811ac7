"""The monitoring role and `clusterctl check` on a real lab cluster (3 nspawn nodes, real Slurm, real Prometheus).

Its own lab (cluster `mon`, subnet 10.217.0.0/24, its own state dir) so it never touches another lab. In order:
- the vendor parts (dcgm-exporter from NVIDIA's repository, Grafana from Grafana's) in check mode on the fresh nodes,
  with the on-prem example's build pointed at the lab (they cannot be installed here: no vendor repositories);
- the role for real: Debian's prometheus, prometheus-pushgateway and prometheus-node-exporter, the Slurm metrics
  timer, Grafana's provisioning files; a second run changes nothing;
- Prometheus on the controller reports up == 1 for node_exporter on every node (its HTTP API, over SSH);
- the health check drains a node whose fake GPU device is gone, and SlurmNodeDrained fires with the reason;
- `clusterctl check` (run_checks) passes with the NCCL row skipped for a stated reason, and fails naming the node
  while its GPU device is missing;
- with a stand-in nvidia-smi replaying public outputs (tests/standins/scenarios.py), switching a node to "XID 79 on
  GPU 3" drains it with that reason within one health interval, switching back resumes it, a person's drain stays;
- with a stand-in all_reduce_perf that reports gpu002 as slow, `clusterctl check` names it and --drain-stragglers
  drains it with the figure in the reason.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from clusterctl.engines.ansible.runner import PlaybookRun, run_playbook
from clusterctl.ops.access import access_for
from clusterctl.compile import compile_plan
from clusterctl.ops import check as c
from clusterctl.render.monitoring import render_monitoring
from clusterctl.render import render_spec
from clusterctl.render.write import write_build
from clusterctl.state import ClusterState
from clusterctl.validate import load_text, load_valid
from tests.conftest import ROOT
from tests.helpers import check_mode_on_lab, clusterctl, example_dict, needs_root, to_yaml, wait_for
from tests.standins import scenarios

pytestmark = [
    pytest.mark.integration,
    needs_root("lab nodes: network namespaces, systemd-nspawn"),
]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("mon")
    data = example_dict("lab.yaml")
    data["name"] = "mon"
    data["lab"]["subnet"] = "10.217.0.0/24"
    data["storage"].pop("local_cache", None)  # not what this test is about
    spec = d / "mon.yaml"
    spec.write_text(to_yaml(data))
    assert load_text(spec.read_text()).ok
    e = dict(os.environ, CLUSTERCTL_STATE_DIR=str(d / "state"))
    yield e, spec
    clusterctl("down", spec, "--force", env=e, check=False)


@pytest.fixture(scope="module")
def lab(env):
    e, spec_path = env
    os.environ["CLUSTERCTL_STATE_DIR"] = e["CLUSTERCTL_STATE_DIR"]
    r = clusterctl("up", spec_path, "--output", "json", env=e)
    assert json.loads(r.stdout)["ok"]
    spec = load_valid(spec_path)
    plan = compile_plan(spec)
    state = ClusterState(spec.name)
    access = access_for(plan, state, lambda m: None)
    build = state.dir / "build"
    # Until render_monitoring is part of render_plan, put its files into the build `up` rendered (same bytes if it is).
    for rel, text in render_monitoring(plan).items():
        (build / rel).parent.mkdir(parents=True, exist_ok=True)
        (build / rel).write_text(text)
    return spec, plan, access, build


def checks(lab, **kw):
    """run_checks as the CLI calls it, on this module's lab (the autouse fixture points the state dir elsewhere)."""
    spec, plan, access, build = lab
    return c.run_checks(spec, state=ClusterState(spec.name, root=build.parents[1]), **kw)


def on(access, plan, node, command, timeout=120, check=True):
    target = next(n for n in plan.all_nodes if n.name == node)
    return access.remote(target).run(command, timeout=timeout, check=check)


def prom(access, plan, path):
    r = on(access, plan, plan.controller.name, f"curl -sf -m 10 'http://localhost:9090{path}'", check=False)
    return json.loads(r.stdout)["data"] if r.returncode == 0 and r.stdout else None


def test_vendor_parts_in_check_mode(lab, tmp_path):
    """dcgm-exporter and Grafana come from vendor repositories not reachable here: check mode, on-prem build."""
    spec, plan, access, _ = lab
    oplan, files = render_spec(load_valid(ROOT / "examples" / "onprem-64xh100-ib.yaml"))
    files.update(render_monitoring(oplan))
    build = tmp_path / "onprem"
    write_build(files, build)
    addr = {n.name: n.address for n in plan.all_nodes}
    result, tasks = check_mode_on_lab(build, ("atlas-ctl", addr["mon-ctl"]), "pool_gpu",
                                      {"gpu001": addr["gpu001"], "gpu002": addr["gpu002"]}, access.ssh, "onprem",
                                      playbook="monitoring.yml")
    assert result.ok, result.failures
    # The CUDA repository that carries DCGM is the vendor_repo role's (site.yml), not monitoring.yml's.
    for name in ("DCGM and dcgm-exporter", "clusterctl's DCGM counter set (the fields the rules and dashboard read)",
                 "Grafana repository key", "Grafana repository", "Grafana",
                 "Prometheus and the Pushgateway (Debian packages)", "node_exporter (Debian's prometheus-node-exporter)"):
        assert "ok" in tasks.get(name, set()), (name, tasks.get(name))
    r = on(access, plan, "gpu001", "dpkg -l datacenter-gpu-manager-exporter 2>&1 | grep -c '^ii' || true",
           check=False)
    assert r.stdout.strip() == "0"  # check mode installed no vendor package (node-exporter is the lab's own, for real)
    print("\nvendor tasks in check mode:", {t: sorted(st) for t, st in sorted(tasks.items()) if "DCGM" in t or "Grafana" in t})


def test_role_converges_and_is_idempotent(lab):
    spec, plan, access, build = lab
    first = run_playbook(PlaybookRun(build_dir=build, playbook="monitoring.yml", ssh=access.ssh))
    assert first.ok, first.failures
    second = run_playbook(PlaybookRun(build_dir=build, playbook="monitoring.yml", ssh=access.ssh))
    assert second.ok, second.failures
    changed = {h: r["changed"] for h, r in second.recap.items()}
    assert changed == {"mon-ctl": 0, "gpu001": 0, "gpu002": 0}, changed
    r = on(access, plan, plan.controller.name,
           "systemctl is-active prometheus prometheus-pushgateway prometheus-node-exporter clusterctl-slurm-metrics.timer")
    assert r.stdout.split() == ["active"] * 4
    r = on(access, plan, plan.controller.name, "test -s /etc/grafana/provisioning/datasources/clusterctl.yml && "
           "test -s /var/lib/grafana/dashboards/clusterctl/clusterctl-training.json && grep retention /etc/default/prometheus")
    assert "--storage.tsdb.retention.time=7d" in r.stdout


def test_prometheus_sees_every_node_exporter_up(lab):
    spec, plan, access, _ = lab
    names = sorted(n.name for n in plan.all_nodes)

    def node_up():
        data = prom(access, plan, "/api/v1/query?query=up%7Bjob%3D%22node%22%7D")
        if not data:
            return None
        up = {s["metric"]["node"]: s["value"][1] for s in data["result"] if "node" in s["metric"]}
        return up if sorted(up) == names and set(up.values()) == {"1"} else None

    up = wait_for(node_up, 120)
    assert up == {n: "1" for n in names}, prom(access, plan, "/api/v1/query?query=up")
    print(f"\nup{{job=\"node\"}}: {up}")
    slurm = prom(access, plan, "/api/v1/query?query=slurm_node_state")
    states = {s["metric"]["node"]: s["metric"]["state"] for s in slurm["result"]}
    assert set(states) == {"gpu001", "gpu002"}


def test_drained_node_alert_fires(lab):
    spec, plan, access, _ = lab
    on(access, plan, "gpu001", "mv /dev/nvidia3 /root/nvidia3.away")
    try:
        # The chain is real from the drain on: Slurm's state -> metrics service -> scrape -> rule with `for: 1m`.
        # The health check and the metrics service are started at once rather than waited for on their timers
        # (60 s and 30 s): slurmd's own HealthCheckInterval cadence is proven by the next test.
        assert on(access, plan, "gpu001", HEALTH, check=False).returncode == 1
        on(access, plan, plan.controller.name, "systemctl start clusterctl-slurm-metrics.service")
        t0 = time.monotonic()
        def firing():
            data = prom(access, plan, "/api/v1/alerts")
            return next((a for a in (data or {}).get("alerts", []) if a["labels"]["alertname"] == "SlurmNodeDrained"
                         and a["labels"]["node"] == "gpu001" and a["state"] == "firing"), None)

        alert = wait_for(firing, 240)
        assert alert, prom(access, plan, "/api/v1/alerts")
        assert alert["annotations"]["description"] == "Reason: clusterctl-health: GPU count 7, expected 8"
        print(f"\nalert after {time.monotonic() - t0:.0f}s of the drain: {alert['labels']} {alert['annotations']}")

        rows, ok = checks(lab)
        assert not ok
        gpu = next(r for r in rows if r.check == "gpus" and r.node == "gpu001")
        assert gpu.status == c.FAIL and gpu.detail == "7 /dev/nvidiaN (expected 8)"
        assert next(r for r in rows if r.check == "slurm state" and r.node == "gpu001").status == c.FAIL
    finally:
        on(access, plan, "gpu001", "mv /root/nvidia3.away /dev/nvidia3 && /usr/local/sbin/clusterctl-healthcheck", check=False)


def test_check_passes_with_nccl_skipped(lab):
    spec, plan, access, _ = lab

    def settled():
        rows, ok = checks(lab)
        return (rows, ok) if ok else None

    got = wait_for(settled, 120, interval=10)
    assert got, checks(lab)[0]
    rows, _ = got
    nccl = next(r for r in rows if r.check == "nccl all_reduce")
    assert nccl.status == c.SKIP and "fake /dev/nvidiaN" in nccl.detail
    assert next(r for r in rows if r.check == "slurm job").status == c.PASS
    assert next(r for r in rows if r.check == "exporters").status == c.PASS
    print("\n" + "\n".join(f"{r.check:16} {r.node:14} {r.status:5} {r.detail}" for r in rows))


HEALTH = "/usr/local/sbin/clusterctl-healthcheck"


def node_state(access, plan, node):
    r = on(access, plan, plan.controller.name, f"sinfo -h -N -n {node} -o '%T|%E' | head -1")
    state, _, reason = r.stdout.strip().partition("|")
    return state, reason


def test_health_check_judges_nvidia_smi_stand_in(lab):
    spec, plan, access, _ = lab
    interval = plan.slurm.health_check_interval
    for n in ("gpu001", "gpu002"):
        on(access, plan, n, scenarios.install_script())
    try:
        assert on(access, plan, "gpu001", HEALTH).stdout.strip() == "OK gpu001"  # learns which bus is GPU 3
        on(access, plan, "gpu001", scenarios.switch_script("xid79-gpu3"))
        t0 = time.monotonic()
        want = ("clusterctl-health: XID 79 on GPU 3 (0000:06:00): fallen off the bus; "
                "nvidia-smi lists 7 GPUs, expected 8 (missing GPU 3 (0000:06:00))")
        drained = wait_for(lambda: node_state(access, plan, "gpu001")[1] == want, interval + 30, interval=2)
        took = time.monotonic() - t0
        assert drained, node_state(access, plan, "gpu001")
        assert "drain" in node_state(access, plan, "gpu001")[0]
        metrics = on(access, plan, "gpu001", "cat /var/lib/prometheus/node-exporter/clusterctl-health.prom").stdout
        assert 'clusterctl_gpu_xid_total{xid="79"} 1' in metrics and "clusterctl_health_ok 0" in metrics

        on(access, plan, "gpu001", scenarios.switch_script("healthy"))
        t1 = time.monotonic()
        resumed = wait_for(lambda: node_state(access, plan, "gpu001")[0] in ("idle", "mixed", "allocated"), interval + 30, interval=2)
        assert resumed, node_state(access, plan, "gpu001")
        print(f"\nXID 79 on GPU 3 -> drained after {took:.0f}s, healthy -> resumed after {time.monotonic() - t1:.0f}s "
              f"(HealthCheckInterval={interval}s)")

        on(access, plan, plan.controller.name, "scontrol update nodename=gpu002 state=drain reason='ops: reseating cables'")
        on(access, plan, "gpu002", scenarios.switch_script("xid79-gpu3"))
        assert on(access, plan, "gpu002", HEALTH, check=False).returncode == 1
        on(access, plan, "gpu002", scenarios.switch_script("healthy"))
        assert on(access, plan, "gpu002", HEALTH).returncode == 0
        state, reason = node_state(access, plan, "gpu002")
        assert "drain" in state and reason == "ops: reseating cables"
    finally:
        on(access, plan, plan.controller.name, "scontrol update nodename=gpu002 state=resume", check=False)
        for n in ("gpu001", "gpu002"):
            on(access, plan, n, f"{scenarios.REMOVE_SCRIPT} && {HEALTH}", check=False)


def test_check_names_the_slow_node_and_drains_it(lab):
    spec, plan, access, _ = lab
    for n in ("gpu001", "gpu002"):
        on(access, plan, n, scenarios.install_script() + "echo gpu002 > /etc/clusterctl-standin/slow-node\n")
    try:
        rows, ok = checks(lab, drain_stragglers=True)
        ranked = {r.node: r for r in rows if r.check == "nccl straggler"}
        table = "\n".join(f"{r.check:16} {r.node:14} {r.status:5} {r.detail}" for r in rows)
        assert ranked["gpu002"].status == c.FAIL and ranked["gpu001"].status == c.PASS, table
        assert "alone 10.0 GB/s (median 25.0): 40% of the median" in ranked["gpu002"].detail
        assert next(r for r in rows if r.check == "drain" and r.node == "gpu002").status == c.PASS
        state, reason = node_state(access, plan, "gpu002")
        assert "drain" in state and reason.startswith("clusterctl-check: NCCL straggler: all_reduce bus bandwidth alone 10.0 GB/s")
        assert next(r for r in rows if r.check == "nccl all_reduce").status == c.PASS
        print("\n" + table)
    finally:
        on(access, plan, plan.controller.name, "scontrol update nodename=gpu002 state=resume", check=False)
        for n in ("gpu001", "gpu002"):
            on(access, plan, n, f"{scenarios.REMOVE_SCRIPT} && {HEALTH}", check=False)

