"""Host keys of owned hosts, for real: the first contact records each host's key in the cluster's own known_hosts
(accept-new); after the controller's keys are regenerated, `up` and `status` stop with an error naming it and the
file, and nothing reaches any host. Two lab containers stand in for owned machines (no pinned known_hosts_file)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from clusterctl.engines.local.provider import cache_dir
from clusterctl.engines.ssh.hostkeys import recorded
from clusterctl.engines.local import Lab, LabNode, LabSpec
from tests.helpers import needs_root, clusterctl

pytestmark = [
    pytest.mark.integration,
    needs_root(),
]

SUBNET, GATEWAY = "10.219.0.0/24", "10.219.0.1"
CTL, NODE = ("hk-ctl", "10.219.0.10"), ("hk01", "10.219.0.11")


def spec_text(lab: Lab) -> str:
    ssh = f"user: root, private_key_file: {lab.ssh_key}"  # no known_hosts_file: the cluster's own file is used
    return f"""apiVersion: clusterctl/v1
name: hkeys
controller:
  provider: onprem
  hostname: {CTL[0]}
  address: {CTL[1]}
  ssh: {{{ssh}}}
pools:
  - name: cpu
    provider: onprem
    cpus: 1
    memory_mb: 512
    hosts:
      - names: {NODE[0]}
        addresses: {NODE[1]}
    ssh: {{{ssh}}}
scheduler:
  slurm:
    partitions:
      - {{name: batch, pools: [cpu], default: true}}
monitoring:
  grafana: false
"""


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    state = tmp_path_factory.mktemp("hkeys")
    lab = Lab(LabSpec("hkeys", SUBNET, GATEWAY, (LabNode(*CTL), LabNode(*NODE)), state / "lab", cache_dir()),
              log=lambda m: None)
    lab.up()
    spec = state / "hkeys.yaml"
    spec.write_text(spec_text(lab))
    env = dict(os.environ, CLUSTERCTL_STATE_DIR=str(state / "clusterctl"))
    yield lab, spec, env, state / "clusterctl" / "hkeys" / "known_hosts"
    lab.down()


def on(lab, node, command):
    return subprocess.run(lab.ssh_command(node) + [command], capture_output=True, text=True, timeout=60)


def regenerate_host_keys(lab: Lab, node: str, address: str) -> None:
    """What a reinstall (or an impostor) looks like: new host keys. The lab's own known_hosts learns the new key so
    the test can still look inside; the cluster's file is left as clusterctl recorded it."""
    r = on(lab, node, "rm -f /etc/ssh/ssh_host_* && ssh-keygen -A >/dev/null && systemctl restart ssh && "
                      "cat /etc/ssh/ssh_host_ed25519_key.pub")
    assert r.returncode == 0, r.stderr
    for name in (node, address):
        subprocess.run(["ssh-keygen", "-R", name, "-f", str(lab.known_hosts)], capture_output=True, check=True)
    with lab.known_hosts.open("a") as f:
        f.write(f"{node},{address} {' '.join(r.stdout.split()[:2])}\n")


def test_first_contact_records_the_controllers_key(hosts):
    lab, spec, env, known = hosts
    r = clusterctl("status", spec, "--output", "json", env=env)
    assert "host key" not in r.stderr
    assert recorded(known, [CTL[1], NODE[1]]) == {CTL[1]}  # status reached the controller only


def test_changed_key_stops_up_before_anything_is_sent(hosts):
    lab, spec, env, known = hosts
    regenerate_host_keys(lab, *CTL)
    for node in (CTL[0], NODE[0]):
        assert on(lab, node, "touch /tmp/before-up").returncode == 0
    r = clusterctl("up", spec, env=env, check=False, timeout=600)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"{CTL[0]}: its SSH host key is not the one recorded for {CTL[1]} in {known}" in r.stderr, r.stderr
    assert f"ssh-keygen -R {CTL[1]} -f {known}" in r.stderr and "Traceback" not in r.stderr
    # hk01 was new: its key was accepted on first contact, in the same file.
    assert recorded(known, [NODE[1]]) == {NODE[1]}
    # Nothing reached either host: no file under /etc changed, no munge key or Slurm config arrived.
    for node in (CTL[0], NODE[0]):
        changed = on(lab, node, "find /etc -newer /tmp/before-up; test -e /etc/slurm/slurm.conf && echo slurm.conf")
        assert changed.stdout.strip() == "", (node, changed.stdout)
    key = (Path(env["CLUSTERCTL_STATE_DIR"]) / "hkeys" / "secrets" / "munge.key").read_bytes()
    for node in (CTL[0], NODE[0]):
        sums = on(lab, node, "cat /etc/munge/munge.key 2>/dev/null | sha256sum").stdout.split()[0]
        assert sums != hashlib.sha256(key).hexdigest()


def test_changed_key_stops_clusterctls_own_ssh_commands(hosts):
    lab, spec, env, known = hosts
    r = clusterctl("status", spec, env=env, check=False)
    assert r.returncode == 1 and f"{CTL[0]}: its SSH host key is not the one recorded" in r.stderr, r.stderr


def test_after_removing_the_old_key_the_new_one_is_recorded(hosts):
    lab, spec, env, known = hosts
    subprocess.run(["ssh-keygen", "-R", CTL[1], "-f", str(known)], capture_output=True, check=True)
    r = clusterctl("status", spec, "--output", "json", env=env)
    assert "host key" not in r.stderr and recorded(known, [CTL[1]]) == {CTL[1]}
