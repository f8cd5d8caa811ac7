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
    accounts:
      - {{name: research, share: 3, users: [alice]}}
      - {{name: infra, share: 1}}
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
    # The spec's accounts, applied with sacctmgr: fair-share weights and users as sshare shows them.
    shares = on(lab, "own-ctl", "sshare -n -P -a -o Account,User,RawShares").stdout.splitlines()
    assert {"research||3", "research|alice|1", "infra||1"} <= {r.strip() for r in shares}, shares
    # A job run by the spec's user is recorded.
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


def test_plan_on_one_runner_apply_from_another_through_s3_state(owned, aws, tmp_path):
    """GitOps on ephemeral runners (issue 14): runner A (this module's state dir) moves its state to an s3 backend
    (moto), plans a change; runner B, with an empty state directory, applies that plan to the owned hosts; A then sees
    the applied build and its copy of the plan is stale. Only the spec, the SSH key file and the bucket are shared."""
    lab, spec, env = owned
    boto3 = pytest.importorskip("boto3")
    bucket, alias = "clusterctl-state", "alias/clusterctl-state"
    boto3.client("s3").create_bucket(Bucket=bucket)
    kms = boto3.client("kms")
    kms.create_alias(AliasName=alias, TargetKeyId=kms.create_key()["KeyMetadata"]["KeyId"])
    url = f"s3://{bucket}/gitops"
    shared = f"state:\n  kms_key: {alias}\n"
    same = tmp_path / "same.yaml"
    same.write_text(spec.read_text() + shared)
    changed = tmp_path / "changed.yaml"
    changed.write_text(spec.read_text().replace("health_check_interval_seconds: 60",
                                                "health_check_interval_seconds: 90") + shared)
    aws_env = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    runner_a = {**env, **aws_env, "CLUSTERCTL_STATE_BACKEND": url}
    runner_b = {**runner_a, "CLUSTERCTL_STATE_DIR": str(tmp_path / "runner-b")}

    clusterctl("state", "migrate", same, "--to", url, env={**env, **aws_env})
    assert clusterctl("plan", same, "--no-cloud", env=runner_b, check=False).returncode == 0
    r = clusterctl("plan", changed, "--no-cloud", "--out", tmp_path / "plan.json", env=runner_a, check=False)
    assert r.returncode == 2, r.stdout + r.stderr

    r = clusterctl("apply", changed, "--plan", tmp_path / "plan.json", "--output", "json", env=runner_b, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["ok"]
    # Applied for real on the hosts, with the munge key and database password runner B only had from the bucket.
    assert on(lab, "own-ctl", "grep -x 'HealthCheckInterval=90' /etc/slurm/slurm.conf").returncode == 0
    assert on(lab, "own01", "systemctl is-active slurmd").stdout.strip() == "active"
    assert not (tmp_path / "runner-b" / "owned" / "secrets").exists() or not any(
        (tmp_path / "runner-b" / "owned" / "secrets").iterdir())

    # Runner A sees B's apply: nothing left to change, no drift; its copy of the plan is stale now.
    r = clusterctl("plan", changed, "--no-cloud", env=runner_a, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    r = clusterctl("drift", changed, env=runner_a, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    r = clusterctl("apply", changed, "--plan", tmp_path / "plan.json", env=runner_a, check=False)
    assert r.returncode == 1 and "stale plan" in r.stderr, r.stdout + r.stderr
    history = json.loads(clusterctl("history", changed, "--output", "json", env=runner_a).stdout)
    assert history["ok"] and [e["action"] for e in history["history"]][-1] == "apply", history

    # Back to the module's spec (and local state) for the tests after this one.
    r = clusterctl("apply", same, "--yes", env=runner_b, check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_down_drains_and_stops_but_keeps_everything_else(owned):
    lab, spec, env = owned
    r = clusterctl("down", spec, env=env)
    assert "time: stop slurm" in r.stdout, r.stdout  # where the time went: draining and stopping over SSH
    for node in ("own01", "own02"):
        assert on(lab, node, "systemctl is-active slurmd").stdout.strip() == "inactive"
        assert on(lab, node, "cat /srv/data/file").stdout.strip() == "keep"
        # Configless: a node's Slurm setup is the slurmd drop-in (--conf-server); slurm.conf lives on the controller.
        assert on(lab, node, "dpkg -s slurmd >/dev/null && test -f /etc/systemd/system/slurmd.service.d/clusterctl-configless.conf "
                             "&& echo kept").stdout.strip() == "kept"
    # Everything else clusterctl started is stopped too; the accounting data stays (MariaDB keeps running).
    assert on(lab, "own-ctl", "systemctl is-active slurmctld slurmdbd prometheus prometheus-node-exporter").stdout.split() \
        == ["inactive"] * 4
    assert on(lab, "own01", "systemctl is-active prometheus-node-exporter").stdout.strip() == "inactive"
    assert on(lab, "own-ctl", "systemctl is-active mariadb && test -d /var/lib/mysql/slurm_acct_db && echo kept").stdout.split() \
        == ["active", "kept"]
    # The machines themselves are untouched: still running and reachable.
    assert all(s.running and s.ssh_reachable for s in lab.status())
