"""Cluster secrets kept in the state directory (never in git): the munge key, made once, reused forever."""

from __future__ import annotations

import os
from pathlib import Path

from clusterctl.state import ClusterState

MUNGE_KEY_BYTES = 1024  # what `mungekey` makes by default


def ensure_munge_key(state: ClusterState) -> Path:
    """The cluster's munge key (0400). Created once: regenerating it would cut every node off from slurmctld."""
    path = state.secrets_dir / "munge.key"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o400)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(MUNGE_KEY_BYTES))
        os.replace(tmp, path)
    return path
