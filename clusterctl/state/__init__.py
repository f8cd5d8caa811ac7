"""Per-cluster state on the workstation: the last applied build, secrets, lab node state.

Lives in $CLUSTERCTL_STATE_DIR/<cluster> (default ~/.local/state/clusterctl/<cluster>), never in the git checkout:
the munge key and SSH keys are secrets.
"""

from __future__ import annotations

import os
from pathlib import Path

from clusterctl.render.write import read_build, write_build


def state_root() -> Path:
    env = os.environ.get("CLUSTERCTL_STATE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "clusterctl"


class ClusterState:
    def __init__(self, cluster: str, root: Path | None = None):
        self.cluster = cluster
        self.dir = (root or state_root()) / cluster

    @property
    def applied_dir(self) -> Path:
        return self.dir / "applied"

    @property
    def secrets_dir(self) -> Path:
        d = self.dir / "secrets"
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        return d

    def applied_build(self) -> dict[str, str]:
        return read_build(self.applied_dir) if self.applied_dir.is_dir() else {}

    def record_applied(self, files: dict[str, str]) -> None:
        """Called once an apply converged: the next plan diffs against exactly this build."""
        write_build(files, self.applied_dir)

    def forget_applied(self) -> None:
        """After `down`: the next plan is a fresh create again."""
        import shutil

        shutil.rmtree(self.applied_dir, ignore_errors=True)

    @property
    def known_hosts_path(self) -> Path:
        """Host keys of the cluster's hosts that the spec does not pin, recorded on first contact."""
        return self.dir / "known_hosts"

    @property
    def lock_path(self) -> Path:
        return self.dir / "lock"

    def lock(self, what: str):
        """One apply at a time per cluster (see clusterctl.state.lock)."""
        from clusterctl.state.lock import held

        return held(self.lock_path, self.cluster, what)

    def lock_holder(self) -> dict | None:
        """Who holds the lock now; None when it is free."""
        from clusterctl.state.lock import holder

        return holder(self.lock_path)

    def break_lock(self) -> dict | None:
        from clusterctl.state.lock import break_lock

        return break_lock(self.lock_path)
