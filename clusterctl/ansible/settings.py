"""Environment for ansible-playbook: where things are, SSH options, and the speed settings.

Speed settings (the benchmark compares with and without): pipelining (one SSH round trip per task instead of
put+exec), forks sized to the cluster, SSH ControlPersist (one TCP+auth per host for the whole run) and a fact cache
(facts gathered once, reused by later runs).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SshOptions:
    private_key: Path | None = None
    known_hosts: Path | None = None  # strict host key checking against this file when given
    # Cloud instances are new on every launch: their first key is recorded (accept-new), later changes refused.
    accept_new: bool = False

    @property
    def host_key_args(self) -> list[str]:
        if not self.known_hosts:
            return []
        return ["-o", f"UserKnownHostsFile={self.known_hosts}",
                "-o", f"StrictHostKeyChecking={'accept-new' if self.accept_new else 'yes'}"]


def ansible_env(hosts: int, fact_cache: Path, ssh: SshOptions, fast: bool = True) -> dict[str, str]:
    ssh_args = []
    if fast:
        ssh_args += ["-o ControlMaster=auto", "-o ControlPersist=120s"]
    else:
        ssh_args += ["-o ControlMaster=no"]
    args = ssh.host_key_args
    ssh_args += [f"{args[i]} {args[i + 1]}" for i in range(0, len(args), 2)]
    env = {
        # ansible-playbook lives next to the interpreter running clusterctl (venv, pyenv or system).
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_PYTHON_INTERPRETER": "auto_silent",
        "ANSIBLE_HOST_KEY_CHECKING": "True" if ssh.known_hosts else "False",
        "ANSIBLE_SSH_ARGS": " ".join(ssh_args),
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_NOCOWS": "1",
        "ANSIBLE_DEPRECATION_WARNINGS": "False",
        "ANSIBLE_LOCALHOST_WARNING": "False",
    }
    if ssh.private_key:
        env["ANSIBLE_PRIVATE_KEY_FILE"] = str(ssh.private_key)
    if fast:
        env.update(
            {
                "ANSIBLE_PIPELINING": "True",
                "ANSIBLE_FORKS": str(max(10, min(hosts, 100))),
                "ANSIBLE_GATHERING": "smart",
                "ANSIBLE_CACHE_PLUGIN": "jsonfile",
                "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(fact_cache),
                "ANSIBLE_CACHE_PLUGIN_TIMEOUT": "86400",
            }
        )
    else:
        env.update({"ANSIBLE_PIPELINING": "False", "ANSIBLE_FORKS": "5", "ANSIBLE_GATHERING": "implicit"})
    return env
