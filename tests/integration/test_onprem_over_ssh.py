"""`up` and `down` for owned hosts, for real: the onprem provider path (SSH as a non-root user with sudo `become`,
compute nodes reached through a jump host, pinned host keys) against lab containers standing in for bare metal.

The stand-ins are booted with the local provider only (no clusterctl converge); everything after that goes through
`clusterctl up/down SPEC` exactly as for owned machines.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from clusterctl.engines.local import Lab, LabNode, LabSpec
from clusterctl.engines.local.provider import cache_dir
from tests.helpers import needs_root, clusterctl

pytestmark = [
    pytest.mark.integration,
    needs_root(),
]

SUBNET, GATEWAY = "10.218.0.0/24", "10.218.0.1"
HOSTS = {"own-ctl": "10.218.0.10", "own01": "10.218.0.11", "own02": "10.218.0.12"}


def spec_text(lab: Lab) -> str:
    ssh = (f"user: ops, become: true, private_key_file: {lab.ssh_key}, known_hosts_file: {lab.known_hosts}")
    return f"""apiVersion: clusterctl/v1
name: owned
controller:
  provider: onprem
  hostname: own-ctl
  address: {HOSTS['own-ctl']}
  ssh: {{{ssh}}}
pools:
  - name: cpu
    provider: onprem
    cpus: 1
    memory_mb: 512
    hosts:
      - names: own[01-02]
        addresses: 10.218.0.[11-12]
    ssh: {{{ssh}, jump_host: ops@{HOSTS['own-ctl']}}}
scheduler:
  slurm:
    partitions:
      - {{name: batch, pools: [cpu], default: true}}
    health_check_interval_seconds: 60
    accounting: {{enabled: true}}  # slurmdbd + MariaDB on own-ctl
monitoring:
  grafana: false  # Grafana Labs' repository is not reachable from this machine
"""


@pytest.fixture(scope="module")
def owned(tmp_path_factory):
    state = tmp_path_factory.mktemp("owned")
    lab = Lab(LabSpec("owned", SUBNET, GATEWAY, tuple(LabNode(n, a) for n, a in HOSTS.items()), state / "lab", cache_dir()),
              log=lambda m: None)
    lab.up()
    # What an owned machine looks like: an admin account with sudo, and some data of its own.
    for node in HOSTS:
        subprocess.run(lab.ssh_command(node) + [
            "useradd -m -s /bin/bash ops 2>/dev/null; install -d -o ops -m 700 /home/ops/.ssh && "
            "install -o ops -m 600 /root/.ssh/authorized_keys /home/ops/.ssh/authorized_keys && "
            "echo 'ops ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/ops && mkdir -p /srv/data && echo keep > /srv/data/file"],
            check=True, capture_output=True)
    spec = state / "owned.yaml"
    spec.write_text(spec_text(lab))
    env = dict(os.environ, CLUSTERCTL_STATE_DIR=str(state / "clusterctl"))
    yield lab, spec, env
    lab.down()


def on(lab, node, command):
    return subprocess.run(lab.ssh_command(node) + [command], capture_output=True, text=True, timeout=60)


def test_up_over_ssh_with_become_and_jump_host(owned):
    lab, spec, env = owned
    report = json.loads(clusterctl("up", spec, "--output", "json", env=env).stdout)
    assert report["ok"], report
    assert report["smoke"][0]["detail"] == "ran on own[01-02]"
    # Logged in as ops and became root: the daemons run, configured from the build.
    assert on(lab, "own01", "systemctl is-active slurmd").stdout.strip() == "active"
    assert on(lab, "own-ctl", "systemctl is-active slurmctld").stdout.strip() == "active"
    inventory = (Path(env["CLUSTERCTL_STATE_DIR"]) / "owned" / "build" / "ansible" / "inventory.yml").read_text()
    assert "ProxyCommand" in inventory and "ansible_become: true" in inventory


def test_accounting_records_jobs_in_slurmdbd(owned):
    lab, spec, env = owned
    assert on(lab, "own-ctl", "systemctl is-active slurmdbd mariadb").stdout.split() == ["active", "active"]
    assert on(lab, "own-ctl", "sacctmgr -n -P list cluster format=cluster").stdout.split() == ["owned"]
    # The database password never leaves the cluster's secrets: not in the build, only in the 0600 slurmdbd.conf.
    secrets = Path(env["CLUSTERCTL_STATE_DIR"]) / "owned" / "secrets" / "slurmdbd.password"
    password = secrets.read_text().strip()
    assert len(password) == 32 and oct(secrets.stat().st_mode & 0o777) == "0o600"
    build = Path(env["CLUSTERCTL_STATE_DIR"]) / "owned" / "build"
    assert not any(password in p.read_text(errors="replace") for p in build.rglob("*") if p.is_file())
    conf = on(lab, "own-ctl", "stat -c '%U %a' /etc/slurm/slurmdbd.conf && grep -c '^StoragePass=' /etc/slurm/slurmdbd.conf")
    assert conf.stdout.split() == ["slurm", "600", "1"]
    # A job run as a user with no sacctmgr association (associations are not enforced) is recorded.
    on(lab, "own-ctl", "id alice >/dev/null 2>&1 || useradd -m alice")
    for node in ("own01", "own02"):
        on(lab, node, "id alice >/dev/null 2>&1 || useradd -m alice")
    job = on(lab, "own-ctl", "cd /tmp && su alice -c \"sbatch --parsable -N2 --wrap 'srun hostname'\"")
    assert job.returncode == 0, job.stderr
    job_id = job.stdout.strip().split(";")[0]  # --parsable: "jobid[;cluster]"
    assert job_id.isdigit(), (job.stdout, job.stderr)
    deadline = time.time() + 120
    row = None
    while time.time() < deadline:
        # -u alice: the row of this submission even if the database also holds an older job with the same id
        out = on(lab, "own-ctl", f"sacct -n -P -X -u alice -j {job_id} -o JobID,User,State,NNodes").stdout.split()
        row = next((r for r in out if r.split("|")[0] == job_id), None)
        if row and row.split("|")[2] in ("COMPLETED", "FAILED", "CANCELLED"):
            break
        time.sleep(2)
    assert row == f"{job_id}|alice|COMPLETED|2", (row, on(lab, "own-ctl", "sacct -a -D -n -P -X -o JobID,User,State,Submit").stdout)


def test_second_up_changes_nothing(owned):
    _, spec, env = owned
    report = json.loads(clusterctl("up", spec, "--output", "json", env=env).stdout)
    assert report["ok"]
    assert {h: r["changed"] for h, r in report["converge"]["recap"].items()} == {"own-ctl": 0, "own01": 0, "own02": 0}, \
        report["converge"]["changes"]


def test_down_drains_and_stops_but_keeps_everything_else(owned):
    lab, spec, env = owned
    clusterctl("down", spec, env=env)
    for node in ("own01", "own02"):
        assert on(lab, node, "systemctl is-active slurmd").stdout.strip() == "inactive"
        assert on(lab, node, "cat /srv/data/file").stdout.strip() == "keep"
        assert on(lab, node, "dpkg -s slurmd >/dev/null && test -f /etc/slurm/slurm.conf && echo kept").stdout.strip() == "kept"
    # Everything else clusterctl started is stopped too; the accounting data stays (MariaDB keeps running).
    assert on(lab, "own-ctl", "systemctl is-active slurmctld slurmdbd prometheus prometheus-node-exporter").stdout.split() \
        == ["inactive"] * 4
    assert on(lab, "own01", "systemctl is-active prometheus-node-exporter").stdout.strip() == "inactive"
    assert on(lab, "own-ctl", "systemctl is-active mariadb && test -d /var/lib/mysql/slurm_acct_db && echo kept").stdout.split() \
        == ["active", "kept"]
    # The machines themselves are untouched: still running and reachable.
    assert all(s.running and s.ssh_reachable for s in lab.status())
