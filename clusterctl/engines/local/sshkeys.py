"""SSH identity: one client key per cluster (host -> root@node), one host key per node, a strict known_hosts."""

from __future__ import annotations

from pathlib import Path

from clusterctl.engines.local.proc import run


def ensure_client_key(ssh_dir: Path, cluster: str) -> Path:
    ssh_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = ssh_dir / "id_ed25519"
    if not key.exists() or not key.with_suffix(".pub").exists():
        key.unlink(missing_ok=True)
        key.with_suffix(".pub").unlink(missing_ok=True)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"clusterctl-lab-{cluster}", "-f", str(key)],
            what="generating the lab ssh key")
    return key


def ensure_host_key(root: Path, node: str) -> str:
    """Generate the node's own host key in its overlay (the base rootfs has none); return the public key."""
    key = root / "etc/ssh/ssh_host_ed25519_key"
    if not key.exists() or not key.with_suffix(".pub").exists():
        key.unlink(missing_ok=True)
        key.with_suffix(".pub").unlink(missing_ok=True)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{node}", "-f", str(key)],
            what=f"generating host key of {node}")
    key.chmod(0o600)
    kind, blob = key.with_suffix(".pub").read_text().split()[:2]
    return f"{kind} {blob}"


def write_known_hosts(path: Path, entries: dict[str, tuple[str, str]]) -> None:
    """entries: node name -> (address, "ssh-ed25519 AAAA..."); both name and address are accepted hosts."""
    lines = [f"{name},{addr} {pub}\n" for name, (addr, pub) in sorted(entries.items())]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(lines))
    tmp.replace(path)


def read_known_hosts(path: Path) -> dict[str, tuple[str, str]]:
    """What write_known_hosts wrote: node name -> (address, public key); empty when there is no file."""
    out = {}
    if path.exists():
        for line in path.read_text().splitlines():
            hosts, _, pub = line.partition(" ")
            name, _, addr = hosts.partition(",")
            if pub:
                out[name] = (addr, pub)
    return out


def ssh_argv(key: Path, known_hosts: Path, address: str, connect_timeout: int = 5) -> list[str]:
    """Self-contained: no user ssh_config, no agent, strict host keys from our known_hosts only."""
    return [
        "ssh", "-F", "none", "-i", str(key),
        "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none", "-o", "BatchMode=yes",
        "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={known_hosts}",
        "-o", "GlobalKnownHostsFile=/dev/null", "-o", "CheckHostIP=no",
        "-o", f"ConnectTimeout={connect_timeout}", "-o", "LogLevel=ERROR",
        "-o", "ServerAliveInterval=15",
        f"root@{address}",
    ]
