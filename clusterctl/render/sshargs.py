"""SSH options for reaching a node as the spec describes (key, pinned host keys, jump host), shared by the
rendered Ansible inventory and clusterctl's own ssh commands so both connect the same way."""

from __future__ import annotations

import shlex

from clusterctl.compile.model import SshTarget


def _pinning(t: SshTarget) -> list[str]:
    out = []
    if t.private_key_file:
        out += ["-i", t.private_key_file, "-o", "IdentitiesOnly=yes"]
    if t.known_hosts_file:
        out += ["-o", f"UserKnownHostsFile={t.known_hosts_file}", "-o", "StrictHostKeyChecking=yes"]
    return out


def jump_options(t: SshTarget) -> list[str]:
    """How to go through the jump host. ProxyJump does not pass -i/-o on to the jump hop, so with a key or pinned
    host keys the hop is an explicit ProxyCommand using the same options."""
    if not t.jump_host:
        return []
    if not (t.private_key_file or t.known_hosts_file):
        return ["-o", f"ProxyJump={t.jump_host}"]
    target, _, port = t.jump_host.rpartition(":") if ":" in t.jump_host else (t.jump_host, "", "")
    hop = ["ssh", "-W", "%h:%p", *_pinning(t), "-o", "BatchMode=yes"] + (["-p", port] if port else []) + [target]
    return ["-o", "ProxyCommand=" + shlex.join(hop)]


def option_args(t: SshTarget) -> list[str]:
    """ssh arguments (argv form) for this target, jump host included."""
    return _pinning(t) + jump_options(t)


def common_args_string(t: SshTarget) -> str | None:
    """The same for Ansible's ansible_ssh_common_args (one shell-quoted string), or None when nothing is needed."""
    extra = option_args(t)
    if t.private_key_file:  # Ansible passes the key itself (ansible_ssh_private_key_file)
        i = extra.index("-i")
        del extra[i : i + 2]
    return shlex.join(extra) if extra else None
