"""Run a command on a cluster node over SSH (the controller, for Slurm commands), as Ansible would reach it."""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass

from clusterctl.engines.ssh import hostkeys
from clusterctl.engines.ansible.settings import SshOptions
from clusterctl.compile.model import Node
from clusterctl.core.errors import ClusterctlError
from clusterctl.render.sshargs import option_args


class RemoteError(ClusterctlError):
    pass


@dataclass(frozen=True)
class Remote:
    node: Node
    opts: SshOptions = SshOptions()

    def argv(self, command: str) -> list[str]:
        n = self.node
        if not n.address:
            raise RemoteError(f"{n.name} has no address yet")
        # The same host key policy as Ansible's (the -F file); the spec's pinned options are -o and win over it.
        argv = ["ssh", *self.opts.config_args, "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-p", str(n.ssh.port)]
        argv += option_args(n.ssh)
        if self.opts.private_key:
            argv += ["-i", str(self.opts.private_key), "-o", "IdentitiesOnly=yes"]
        remote = f"sudo -n sh -c {shlex.quote(command)}" if n.ssh.become else command
        return argv + [f"{n.ssh.user}@{n.address}", remote]

    def run(self, command: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
        try:
            r = subprocess.run(self.argv(command), capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RemoteError(f"{self.node.name}: `{command}` did not finish in {timeout:.0f}s") from None
        if r.returncode == 255:  # ssh's own failure: a host key problem stops the command, whatever `check` says
            err = hostkeys.problem(self.node.name, r.stderr, self.opts.known_hosts)
            if err:
                raise err
        if check and r.returncode != 0:
            msg = (r.stderr or r.stdout).strip().splitlines()
            raise RemoteError(f"{self.node.name}: `{command}` failed (rc={r.returncode}): {msg[-1] if msg else ''}")
        return r
