"""Cluster secrets kept in the state (never in git; an s3 backend holds them only encrypted): the munge key and the
slurmdbd database password, made once, reused forever.

Next to them, the cluster id: not a secret, but like the key it is made once here and never comes from the spec.
Cloud resources carry it as a tag, and the burst programs and their IAM policy act only on resources that carry
it; the cluster name cannot serve (two stacks or two accounts can hold clusters of the same name).
"""

from __future__ import annotations

import os
import re
import secrets as pysecrets
import string
from pathlib import Path

from clusterctl.core.errors import ClusterctlError
from clusterctl.state import ClusterState

MUNGE_KEY_BYTES = 1024  # what `mungekey` makes by default
DB_PASSWORD_CHARS = string.ascii_letters + string.digits  # nothing a config line or SQL would need quoted
DB_PASSWORD_LENGTH = 32
CLUSTER_ID_RE = re.compile(r"^[0-9a-f]{16}$")


def ensure_munge_key(state: ClusterState) -> Path:
    """The cluster's munge key (0400). Created once: regenerating it would cut every node off from slurmctld.

    The cluster id is made first and lies next to it: playbook_vars() reads it from the key's directory. So does the
    slurmdbd password, which the slurmdbd role reads from there: made here, in the state, so that a runner with a
    fresh directory (an s3 backend) gets the password MariaDB already has instead of Ansible making a new one."""
    ensure_cluster_id(state)
    state.secret_file("slurmdbd.password", _new_db_password, 0o600)
    return state.secret_file("munge.key", lambda: os.urandom(MUNGE_KEY_BYTES), 0o400)


def ensure_cluster_id(state: ClusterState) -> str:
    """The cluster's unique id (16 hex digits), made once. Changing it would orphan every tagged instance."""
    return _checked(state.secret_file("cluster-id", _new_cluster_id))


def playbook_vars(munge_key: Path) -> dict[str, str]:
    """Extra vars of every playbook run: the munge key's path and the cluster id (the burst role's burst.env)."""
    return {"clusterctl_munge_key": str(munge_key), "clusterctl_cluster_id": _cluster_id_in(munge_key.parent)}


def _new_db_password() -> bytes:
    return ("".join(pysecrets.choice(DB_PASSWORD_CHARS) for _ in range(DB_PASSWORD_LENGTH)) + "\n").encode()


def _new_cluster_id() -> bytes:
    return (pysecrets.token_hex(8) + "\n").encode()


def _cluster_id_in(secrets_dir: Path) -> str:
    path = secrets_dir / "cluster-id"
    if not path.exists():  # a local state dir from before ensure_munge_key made the id too
        from clusterctl.state.local import create_once

        create_once(path, _new_cluster_id, 0o600)
    return _checked(path)


def _checked(path: Path) -> str:
    value = path.read_text().strip()
    if not CLUSTER_ID_RE.match(value):  # it ends up in tag filters and IAM conditions: only this exact shape
        raise ClusterctlError(f"{path} does not hold a cluster id (16 lowercase hex digits)")
    return value
