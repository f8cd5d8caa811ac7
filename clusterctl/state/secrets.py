"""Cluster secrets kept in the state directory (never in git): the munge key, made once, reused forever.

Next to them, the cluster id: not a secret, but like the key it is made once here and never comes from the spec.
Cloud resources carry it as a tag, and the burst programs and their IAM policy act only on resources that carry
it; the cluster name cannot serve (two stacks or two accounts can hold clusters of the same name).
"""

from __future__ import annotations

import os
import re
import secrets as pysecrets
from pathlib import Path

from clusterctl.core.errors import ClusterctlError
from clusterctl.state import ClusterState

MUNGE_KEY_BYTES = 1024  # what `mungekey` makes by default
CLUSTER_ID_RE = re.compile(r"^[0-9a-f]{16}$")


def _create_once(path: Path, data: bytes, mode: int) -> None:
    """Write `path` atomically unless it exists (a second writer's file wins over ours, never half of one)."""
    if path.exists():
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def ensure_munge_key(state: ClusterState) -> Path:
    """The cluster's munge key (0400). Created once: regenerating it would cut every node off from slurmctld."""
    path = state.secrets_dir / "munge.key"
    _create_once(path, os.urandom(MUNGE_KEY_BYTES), 0o400)
    return path


def ensure_cluster_id(state: ClusterState) -> str:
    """The cluster's unique id (16 hex digits), made once. Changing it would orphan every tagged instance."""
    return _cluster_id_in(state.secrets_dir)


def playbook_vars(munge_key: Path) -> dict[str, str]:
    """Extra vars of every playbook run: the munge key's path and the cluster id (the burst role's burst.env)."""
    return {"clusterctl_munge_key": str(munge_key), "clusterctl_cluster_id": _cluster_id_in(munge_key.parent)}


def _cluster_id_in(secrets_dir: Path) -> str:
    path = secrets_dir / "cluster-id"
    _create_once(path, (pysecrets.token_hex(8) + "\n").encode(), 0o600)
    value = path.read_text().strip()
    if not CLUSTER_ID_RE.match(value):  # it ends up in tag filters and IAM conditions: only this exact shape
        raise ClusterctlError(f"{path} does not hold a cluster id (16 lowercase hex digits)")
    return value
