"""SSH host keys are always verified. One policy for Ansible and clusterctl's own ssh commands, carried by an ssh
config file (`ssh -F`) written before each run:

- a host the spec pins (`known_hosts_file`) is checked strictly against that file: its `-o` options come on the
  command line, and command-line options beat any config file;
- any other host is checked against the cluster's own known_hosts in its state dir: `accept-new` the first time
  (trust on first use; OpenSSH's accept-new already refuses a CHANGED key), `yes` once recorded, so a later
  connection cannot even add a key of another type for a known host;
- the lab's known_hosts is written by the lab itself: `yes` for every host (tofu=False).

The user's own ~/.ssh/config and the system one are included after ours, so agents, users and jump host settings
still apply, but never ahead of the host key settings.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Iterable
from pathlib import Path

from clusterctl.core.errors import ClusterctlError


class HostKeyError(ClusterctlError):
    """A host's key is not the recorded (or pinned) one: the run stops before anything is sent to any host."""


def known_name(address: str, port: int = 22) -> str:
    """How ssh names a host in known_hosts."""
    return address if port == 22 else f"[{address}]:{port}"


def _matches(pattern: str, name: str) -> bool:
    if pattern.startswith("|1|"):  # hashed (HashKnownHosts): HMAC-SHA1 of the name keyed by the salt
        try:
            salt, digest = (base64.b64decode(p) for p in pattern[3:].split("|", 1))
        except (ValueError, TypeError):
            return False
        return hmac.compare_digest(hmac.new(salt, name.encode(), hashlib.sha1).digest(), digest)
    return pattern == name


def _lines(known_hosts: Path | None) -> list[str]:
    try:
        return known_hosts.read_text().splitlines() if known_hosts else []
    except FileNotFoundError:
        return []


def _host_patterns(line: str) -> list[str]:
    """The host patterns of a line that records a host's own key; none for comments, blank lines and @revoked /
    @cert-authority lines (they record no host's own key)."""
    fields = line.split()
    if not fields or fields[0].startswith("#") or fields[0].startswith("@"):
        return []
    return fields[0].split(",")


def recorded(known_hosts: Path, names: Iterable[str]) -> set[str]:
    """Which of these known_hosts names (see known_name) already have a key in the file."""
    wanted = set(names)
    found: set[str] = set()
    for line in _lines(known_hosts):
        for pattern in _host_patterns(line):
            found |= {n for n in wanted - found if _matches(pattern, n)}
    return found


def copy_without(known_hosts: Path | None, dest: Path, names: Iterable[str]) -> Path:
    """`dest`: a copy of known_hosts (none: empty) less every key recorded for these names (see known_name), plain
    or hashed; everything else, markers included, is kept as it is."""
    gone = set(names)
    keep = [line for line in _lines(known_hosts)
            if not any(_matches(pattern, n) for pattern in _host_patterns(line) for n in gone)]
    dest.write_text("".join(f"{line}\n" for line in keep))
    return dest


def _quote(path: Path) -> str:
    return '"' + str(path).replace('"', "") + '"'


def write_config(path: Path, known_hosts: Path, hosts: Iterable[tuple[str, int]], tofu: bool = True) -> Path:
    """The ssh config for one cluster. hosts: (address or name, port) of every host ssh may be asked to reach."""
    hosts = sorted(set(hosts))
    done = recorded(known_hosts, [known_name(h, p) for h, p in hosts])
    strict = sorted({h for h, p in hosts if known_name(h, p) in done})
    lines = ["# Written by clusterctl before each run (edits are lost): how ssh checks this cluster's host keys.",
             "# Hosts pinned by the spec get -o options on the command line, which win over this file."]
    if strict and tofu:
        lines += ["Host " + " ".join(strict), "    StrictHostKeyChecking yes"]
    lines += ["Host *",
              f"    UserKnownHostsFile {_quote(known_hosts)}",
              f"    StrictHostKeyChecking {'accept-new' if tofu else 'yes'}",
              "    HashKnownHosts no",  # recorded() reads plain names; Debian's ssh_config turns hashing on
              "Match all",
              "Include ~/.ssh/config",
              "Include /etc/ssh/ssh_config", ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(lines)
    if not path.exists() or path.read_text() != text:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    known_hosts.parent.mkdir(parents=True, exist_ok=True)  # a lab writes its known_hosts only when it boots
    known_hosts.touch(exist_ok=True)
    return path


_OFFENDING = re.compile(r"Offending \S+ key in (\S+):(\d+)")
_CHANGED_FOR = re.compile(r"Host key for (\S+) has changed")
_UNKNOWN = re.compile(r"No \S+ host key is known for (\S+) and you have requested strict checking")


def problem(host: str, text: str, known_hosts: Path | None = None) -> HostKeyError | None:
    """The error to raise when ssh's output (stderr, or Ansible's unreachable message) says the host key check
    failed; None for any other failure."""
    if "Host key verification failed" not in text and "REMOTE HOST IDENTIFICATION HAS CHANGED" not in text:
        return None
    offending = _OFFENDING.search(text)
    where = offending.group(1) if offending else str(known_hosts or "your known_hosts")
    changed = _CHANGED_FOR.search(text)
    if changed or offending:
        name = changed.group(1) if changed else host
        line = f" (line {offending.group(2)})" if offending else ""
        return HostKeyError(
            f"{host}: its SSH host key is not the one recorded for {name} in {where}{line}; clusterctl stopped and sent it nothing. "
            f"Someone may be intercepting the connection; if the machine was reinstalled or "
            f"its keys regenerated, compare the new key on its console (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub), "
            f"then remove the old one with `ssh-keygen -R {name} -f {where}` and run again.")
    unknown = _UNKNOWN.search(text)
    name = unknown.group(1) if unknown else host
    return HostKeyError(
        f"{host}: no host key for {name} in {where}, which the spec pins (known_hosts_file): add the host's key "
        f"to that file (checked on its console), then run again. clusterctl stopped and sent it nothing.")
