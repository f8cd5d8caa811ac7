"""Ansible's own ssh command line, as its ssh connection plugin builds it from clusterctl's environment, resolved by
`ssh -G`: the host key policy survives Ansible's argument order (ANSIBLE_SSH_ARGS first, then its own options,
then the inventory's ssh_common_args where the spec's pinned known_hosts_file lives)."""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from clusterctl.engines.ssh import hostkeys
from clusterctl.engines.ansible.settings import SshOptions, ansible_env
from clusterctl.compile.model import SshTarget
from clusterctl.render.sshargs import common_args_string

PINNED, TOFU, KNOWN = "127.0.0.2", "127.0.0.3", "127.0.0.4"  # port 1: refused at once, nothing is reached


def ansible_ssh_commands(tmp_path: Path, fast: bool) -> dict[str, list[str]]:
    known = tmp_path / "known_hosts"
    known.write_text(f"{KNOWN} ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDummy\n")
    config = hostkeys.write_config(tmp_path / "ssh_config", known, [(h, 1) for h in (PINNED, TOFU)] + [(KNOWN, 22)])
    hosts = {h: {"ansible_host": h, "ansible_port": 1} for h in (PINNED, TOFU, KNOWN)}
    hosts[PINNED]["ansible_ssh_common_args"] = common_args_string(SshTarget(known_hosts_file="/pinned/kh"))
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"all": {"hosts": hosts}}))
    env = {**os.environ, **ansible_env(3, SshOptions(known_hosts=known, config=config), fast=fast)}
    r = subprocess.run([str(Path(sys.executable).parent / "ansible"), "all", "-i", str(inventory), "-m", "raw",
                        "-a", "true", "-vvv"], capture_output=True, text=True, env=env, timeout=120)
    out = {}
    for line in r.stdout.splitlines():
        if "SSH: EXEC " in line and line.startswith("<"):
            out[line[1 : line.index(">")]] = shlex.split(line.split("SSH: EXEC ", 1)[1])
    assert set(out) == {PINNED, TOFU, KNOWN}, r.stdout[-3000:]
    return out


def resolved(argv: list[str]) -> dict[str, str]:
    args = [a for a in argv[1:-1] if a != "-vvv"]  # drop the remote command
    r = subprocess.run([argv[0], "-G", *args], capture_output=True, text=True, check=True)
    return dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)


def test_host_key_checking_is_never_turned_off():
    from clusterctl.engines.ansible.settings import ansible_env as env_of

    for ssh in (SshOptions(), SshOptions(known_hosts=Path("/k"), config=Path("/c"))):
        for fast in (True, False):
            env = env_of(1, ssh, fast=fast)
            assert env["ANSIBLE_HOST_KEY_CHECKING"] == "True"
            assert "StrictHostKeyChecking" not in env["ANSIBLE_SSH_ARGS"]


def test_ansible_keeps_pinned_strict_and_recorded_strict_and_new_accept_new(tmp_path):
    for fast in (True, False):
        cmds = ansible_ssh_commands(tmp_path, fast)
        assert not any("StrictHostKeyChecking=no" in a for argv in cmds.values() for a in argv)
        pinned, tofu, known = (resolved(cmds[h]) for h in (PINNED, TOFU, KNOWN))
        assert (pinned["stricthostkeychecking"], pinned["userknownhostsfile"]) == ("true", "/pinned/kh")
        assert (tofu["stricthostkeychecking"], tofu["userknownhostsfile"]) == ("accept-new", str(tmp_path / "known_hosts"))
        assert (known["stricthostkeychecking"], known["userknownhostsfile"]) == ("true", str(tmp_path / "known_hosts"))
