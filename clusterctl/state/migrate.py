"""`clusterctl state migrate`: move a cluster's local state (applied build, secrets) into another backend.

Both locks are held throughout, so no apply moves either side meanwhile. The target must be empty or already hold
this very cluster (same cluster id: a rerun after an interruption finishes the move); a target holding another
cluster of the same name (another cluster id, or state without one) is refused before anything is written.
The local directory is left as it was: removing it is the user's call once the spec names the new backend.
"""

from __future__ import annotations

from typing import Callable

from clusterctl.state import ClusterState
from clusterctl.state.backend import StateError


def migrate(source: ClusterState, target: ClusterState) -> dict:
    if source.backend.url == target.backend.url:
        raise StateError(f"the state of {source.cluster} is already in {target.backend.url}")
    with source.lock("state migrate"), target.lock("state migrate"):
        _refuse_other_cluster(source, target)
        moved = []
        for name in source.backend.secret_names():
            data = source.secret(name)
            if data is None:
                continue
            kept = target.secret(name, _given(data))  # created once: an existing value is kept, and compared
            if kept != data:
                raise StateError(f"{target.backend.url} holds a different secret {name} for cluster "
                                 f"{source.cluster}; nothing more was moved")
            moved.append(name)
        applied = source.applied_build()
        recorded = None
        if applied and target.applied_build() != applied:
            recorded = target.record_applied(applied)
        return {"cluster": source.cluster, "from": source.backend.url, "to": target.backend.url,
                "secrets": moved, "applied_version": recorded or target.applied().version}


def _given(data: bytes) -> Callable[[], bytes]:
    return lambda: data


def _refuse_other_cluster(source: ClusterState, target: ClusterState) -> None:
    from clusterctl.state.secrets import CLUSTER_ID_RE

    mine = (source.secret("cluster-id") or b"").decode().strip()
    theirs = (target.secret("cluster-id") or b"").decode().strip()
    if theirs and theirs != mine:
        raise StateError(f"{target.backend.url} holds another cluster named {source.cluster} (cluster id {theirs}, "
                         f"this one's is {mine or 'not made yet'}); refusing to mix their state")
    if not theirs and (target.applied_build() or target.history()):
        raise StateError(f"{target.backend.url} already holds state of a cluster named {source.cluster} with no "
                         "cluster id to tell whether it is this one; refusing to overwrite it")
    if mine and not CLUSTER_ID_RE.match(mine):
        raise StateError(f"the local cluster id of {source.cluster} is malformed ({mine!r})")
