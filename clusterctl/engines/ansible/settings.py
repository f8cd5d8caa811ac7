"""Environment for ansible-playbook: where things are, SSH options, and the speed settings.

Speed settings: Mitogen's strategies (one Python interpreter per host for the whole run, modules cached there, instead
of a new interpreter and a module upload per task), pipelining (one SSH round trip per task instead of put+exec) where
Mitogen is off, forks sized to the cluster and SSH ControlPersist (one TCP+auth per host for the whole run).
benchmarks/converge.py measures the lab with them.

Facts are gathered once per run (the first play, `min` subset), never taken from an earlier run: a host can change
kernel or distribution under the same name (a reimage, a driver upgrade's new kernel), and the roles pick packages
by both.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path


# A fork mostly waits on SSH, so one core drives many; the cap keeps a 4,096-node run from starting 4,096 processes
# on a laptop. Floor 10: Ansible's own default is 5, too few for a controller plus a handful of nodes.
FORKS_PER_CPU = 50
MIN_FORKS = 10


def forks_for(hosts: int, cpus: int | None = None) -> int:
    """One fork per host, up to FORKS_PER_CPU per core of the machine running Ansible."""
    cap = FORKS_PER_CPU * (cpus or os.cpu_count() or 1)
    return max(MIN_FORKS, min(hosts, cap))


# Set to 0 to run the same playbooks on Ansible's own strategies (a Mitogen bug, or an ansible-core it does not support).
MITOGEN_SWITCH = "CLUSTERCTL_MITOGEN"


def mitogen_strategy_dir() -> Path | None:
    """Where Mitogen's strategy plugins are, or None when it is not installed or switched off."""
    if os.environ.get(MITOGEN_SWITCH, "1") == "0":
        return None
    spec = importlib.util.find_spec("ansible_mitogen")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "plugins" / "strategy"


def strategy_vars(mitogen: Path | None) -> dict[str, str]:
    """The plays' strategies (site.yml names them through these extra vars): Mitogen's where `mitogen` (its strategy
    plugins, from mitogen_strategy_dir, decided once per run with ansible_env's) is given.

    playbooks/hostkeys.yml keeps Ansible's own linear strategy and ssh connection whatever these say: Mitogen's ssh
    puts StrictHostKeyChecking=yes ahead of the -F file, which would refuse a host's first contact (accept-new)."""
    return {
        "clusterctl_free_strategy": "mitogen_free" if mitogen else "free",
        "clusterctl_linear_strategy": "mitogen_linear" if mitogen else "linear",
    }


@dataclass(frozen=True)
class SshOptions:
    private_key: Path | None = None
    known_hosts: Path | None = None  # where the keys of hosts the spec does not pin are recorded and checked
    config: Path | None = None  # `ssh -F` file from clusterctl.engines.ssh.hostkeys: the host key policy, host by host

    @property
    def config_args(self) -> list[str]:
        return ["-F", str(self.config)] if self.config else []


def ansible_env(hosts: int, ssh: SshOptions, fast: bool = True, mitogen: Path | None = None) -> dict[str, str]:
    """Ansible's settings for a run; `mitogen`: Mitogen's strategy plugins (None: Ansible's own strategies)."""
    ssh_args = ["-o", "ControlMaster=auto", "-o", "ControlPersist=120s"] if fast else ["-o", "ControlMaster=no"]
    # Host key options live in the -F file, not here: Ansible puts these args first and ssh keeps the first value
    # of an option, so an -o here would override the spec's pinned known_hosts_file (in ssh_common_args).
    ssh_args += ssh.config_args
    env = {
        # ansible-playbook lives next to the interpreter running clusterctl (venv, pyenv or system).
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_PYTHON_INTERPRETER": "auto_silent",
        # Never False: Ansible would then add StrictHostKeyChecking=no ahead of every other host key option.
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "ANSIBLE_SSH_ARGS": shlex.join(ssh_args),
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_NOCOWS": "1",
        "ANSIBLE_DEPRECATION_WARNINGS": "False",
        "ANSIBLE_LOCALHOST_WARNING": "False",
    }
    if ssh.private_key:
        env["ANSIBLE_PRIVATE_KEY_FILE"] = str(ssh.private_key)
    if fast:
        env.update({"ANSIBLE_PIPELINING": "True", "ANSIBLE_FORKS": str(forks_for(hosts)), "ANSIBLE_GATHERING": "smart"})
        if mitogen is not None:
            env["ANSIBLE_STRATEGY_PLUGINS"] = str(mitogen)
    else:
        env.update({"ANSIBLE_PIPELINING": "False", "ANSIBLE_FORKS": "5", "ANSIBLE_GATHERING": "implicit"})
    return env
