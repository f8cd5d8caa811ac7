"""clusterctl-node-metrics (the textfile-collector script the monitoring role installs), run for real against a fake
`sinfo` on PATH and a fake /sys tree; promtool checks the exposition format it writes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SCRIPT = ROOT / "playbooks/roles/monitoring/files/clusterctl-node-metrics"
PROMTOOL = shutil.which("promtool")

SINFO = r"""#!/bin/sh
# sinfo -h -N -o '%N|%T|%E': one line per node and partition
cat <<'EOF'
gpu001|drained|clusterctl-health: GPU count 7, expected 8
gpu001|drained|clusterctl-health: GPU count 7, expected 8
gpu002|idle*|none
gpu003|allocated|none
gpu003|allocated|none
gpu004|idle~|none
gpu005|down*|Not responding "since" 10:00 | really
EOF
"""


def run_script(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, env=env, timeout=60)


@pytest.fixture
def fake_sinfo(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "sinfo").write_text(SINFO)
    (bindir / "sinfo").chmod(0o755)
    return dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")


def check_format(path):
    if PROMTOOL:
        r = subprocess.run([PROMTOOL, "check", "metrics"], stdin=open(path), capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr


def test_slurm_states(tmp_path, fake_sinfo):
    out = tmp_path / "textfile"
    r = run_script("slurm", "--out", out, env=fake_sinfo)
    assert r.returncode == 0, r.stderr
    text = (out / "clusterctl-slurm.prom").read_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert "slurm_up 1" in lines
    assert 'slurm_node_state{node="gpu001",state="drained"} 1' in lines
    assert 'slurm_node_state{node="gpu002",state="idle"} 1' in lines  # '*' (not responding) stripped
    assert 'slurm_node_state{node="gpu004",state="idle"} 1' in lines  # '~' (powered down) stripped
    assert 'slurm_node_state{node="gpu005",state="down"} 1' in lines
    assert sum(ln.startswith("slurm_node_state{node=\"gpu003\"") for ln in lines) == 1  # one line per node
    assert 'slurm_node_reason_info{node="gpu001",reason="clusterctl-health: GPU count 7, expected 8"} 1' in lines
    assert 'slurm_node_reason_info{node="gpu005",reason="Not responding \\"since\\" 10:00 | really"} 1' in lines
    assert not any('reason_info{node="gpu002"' in ln for ln in lines)
    assert 'slurm_nodes{state="idle"} 2' in lines and 'slurm_nodes{state="allocated"} 1' in lines
    assert not list(out.glob(".*.tmp"))  # written atomically
    check_format(out / "clusterctl-slurm.prom")


def test_slurmctld_unreachable(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "sinfo").write_text("#!/bin/sh\necho 'slurm_load_partitions: Unable to contact slurm controller' >&2\nexit 1\n")
    (bindir / "sinfo").chmod(0o755)
    out = tmp_path / "textfile"
    r = run_script("slurm", "--out", out, env=dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}"))
    assert r.returncode == 1 and "Unable to contact" in r.stderr
    text = (out / "clusterctl-slurm.prom").read_text()
    assert "slurm_up 0" in text.splitlines() and "slurm_node_state{" not in text
    check_format(out / "clusterctl-slurm.prom")


def make_sysfs(root):
    ib = root / "class" / "infiniband"
    drivers = root / "bus" / "pci" / "drivers"
    for name, driver, state, counters in (
        ("rdmap16s27", "efa", "4: ACTIVE", {"tx_bytes": 1000, "rdma_write_bytes": 200, "rdma_read_resp_bytes": 30,
                                             "rx_bytes": 4000, "rdma_read_bytes": 500, "rdma_write_recv_bytes": 60}),
        ("rdmap32s27", "efa", "1: DOWN", {"tx_bytes": 7, "rx_bytes": 9}),
        ("mlx5_0", "mlx5_core", "4: ACTIVE", None),
    ):
        port = ib / name / "ports" / "1"
        port.mkdir(parents=True)
        (port / "state").write_text(state + "\n")
        (drivers / driver).mkdir(parents=True, exist_ok=True)
        (ib / name / "device").mkdir()
        os.symlink(drivers / driver, ib / name / "device" / "driver")
        if counters is None:
            (port / "counters").mkdir()
            (port / "counters" / "port_xmit_data").write_text("123\n")
        else:
            (port / "hw_counters").mkdir()
            for k, v in counters.items():
                (port / "hw_counters" / k).write_text(f"{v}\n")


def test_efa_ports(tmp_path):
    sysfs = tmp_path / "sys"
    make_sysfs(sysfs)
    out = tmp_path / "textfile"
    r = run_script("efa", "--out", out, "--sysfs", sysfs)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in (out / "clusterctl-efa.prom").read_text().splitlines() if not ln.startswith("#")]
    assert 'clusterctl_efa_state_id{device="rdmap16s27",port="1"} 4' in lines
    assert 'clusterctl_efa_state_id{device="rdmap32s27",port="1"} 1' in lines
    assert 'clusterctl_efa_port_data_transmitted_bytes_total{device="rdmap16s27",port="1"} 1230' in lines
    assert 'clusterctl_efa_port_data_received_bytes_total{device="rdmap16s27",port="1"} 4560' in lines
    assert 'clusterctl_efa_port_data_transmitted_bytes_total{device="rdmap32s27",port="1"} 7' in lines
    assert not any("mlx5_0" in ln for ln in lines)  # InfiniBand HCAs are node_exporter's
    check_format(out / "clusterctl-efa.prom")


def test_no_efa_devices(tmp_path):
    out = tmp_path / "textfile"
    r = run_script("efa", "--out", out, "--sysfs", tmp_path / "empty")
    assert r.returncode == 0
    assert [ln for ln in (out / "clusterctl-efa.prom").read_text().splitlines() if not ln.startswith("#")] == []
