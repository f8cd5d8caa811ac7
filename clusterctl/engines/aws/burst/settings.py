"""Where the burst programs find things on the controller (installed by playbooks/roles/burst).

slurmctld runs ResumeProgram & co. with an almost empty environment (SLURM_CONF, SLURM_RESUME_FILE, no PATH, no
HOME), so the programs read their settings from one systemd-style environment file, /etc/clusterctl/burst.env
(KEY=VALUE lines; the sync timer's unit uses the same file as EnvironmentFile). It holds the AWS settings in the
standard boto3 variables (AWS_DEFAULT_REGION, AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID/SECRET or AWS_PROFILE, ...)
and any CLUSTERCTL_BURST_* override below, among them the cluster's unique id (CLUSTER_ID, written by `up`).
Credentials must be given here even on an aws controller: the programs run as SlurmUser, and on clusterctl's aws
nodes IMDS (where an instance profile's credentials are) answers root only; the principal needs
stacks/aws/burst-policy.json. Variables already in
the environment win over the file, so a person running `clusterctl burst sync` by hand can point it elsewhere.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

ENV_FILE = "/etc/clusterctl/burst.env"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines as systemd's EnvironmentFile reads them (comments, blank lines, optional quotes)."""
    out: dict[str, str] = {}
    try:
        text = path.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")) or "=" not in line:
            continue
        key, value = line.split("=", 1)
        key = key.strip()
        if key.startswith("export "):
            key = key[len("export "):].strip()
        value = value.strip()
        if value[:1] in ("'", '"'):
            try:
                value = shlex.split(value)[0] if value.strip("'\"") else ""
            except ValueError:
                value = value.strip("'\"")
        out[key] = value
    return out


def load_environment(env_file: str | None = None) -> Path:
    """Fill os.environ from the env file (existing variables win) and give slurmctld's children a PATH."""
    path = Path(env_file or os.environ.get("CLUSTERCTL_BURST_ENV_FILE") or ENV_FILE)
    for k, v in read_env_file(path).items():
        os.environ.setdefault(k, v)
    os.environ.setdefault("PATH", DEFAULT_PATH)
    return path


def _env(name: str, default: str) -> str:
    return os.environ.get(f"CLUSTERCTL_BURST_{name}") or default


@dataclass(frozen=True)
class Settings:
    plan: Path  # the build's plan.json, copied by the role
    log_file: Path
    state_dir: Path  # lock, per-instance known_hosts
    kit_dir: Path  # files pushed to new nodes (spot watcher, bootstrap script, per-pool env files)
    ssh_key: Path  # reaches new instances (the cluster's admin key; the lab's key in the lab)
    ssh_user: str  # "" = the plan's user for the pool (admin + sudo on AWS images)
    munge_key: Path  # a copy of the cluster's munge key readable by SlurmUser
    imds_endpoint: str  # what the nodes' spot watcher polls
    bootstrap: str  # detach (default: resume returns at once) | inline (resume waits) | off (launch only)
    sync_grace_seconds: int  # instances younger than this are left alone by sync (a launch may be in flight)
    spot_signal: str  # what the spot watcher sends running jobs so they can checkpoint
    spot_grace_seconds: int  # between that signal and the requeue
    cluster_id: str = ""  # the cluster's unique id (tag clusterctl:cluster-id); nothing is touched without it

    @classmethod
    def from_env(cls) -> "Settings":
        return cls(
            plan=Path(_env("PLAN", "/etc/clusterctl/plan.json")),
            log_file=Path(_env("LOG", "/var/log/clusterctl/burst.log")),
            state_dir=Path(_env("STATE", "/var/lib/clusterctl/burst")),
            kit_dir=Path(_env("KIT", "/usr/local/lib/clusterctl/burst-node")),
            ssh_key=Path(_env("SSH_KEY", "/etc/clusterctl/burst/ssh_key")),
            ssh_user=_env("SSH_USER", ""),
            munge_key=Path(_env("MUNGE_KEY", "/etc/clusterctl/burst/munge.key")),
            imds_endpoint=_env("IMDS_ENDPOINT", "http://169.254.169.254"),
            bootstrap=_env("BOOTSTRAP", "detach"),
            sync_grace_seconds=int(_env("SYNC_GRACE", "300")),
            spot_signal=_env("SPOT_SIGNAL", "USR1"),
            spot_grace_seconds=int(_env("SPOT_GRACE", "60")),
            cluster_id=_env("CLUSTER_ID", ""),
        )
