"""A lab's name is claimed per machine: its network namespaces, bridge, links and NAT rules are named after the
cluster alone, so a second lab of the same name from another state directory would take the first one's network
(its SSH then meets the first lab's host keys) and its `down` would remove the first one's namespaces.

The claim is a file under /run (gone at reboot, as the lab's network is) naming the state directory that holds the
name. It counts while that directory exists and the lab still has something on the host; a claim whose directory
was deleted, or whose lab left nothing behind, is stale and taken over.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from clusterctl.engines.local import names, network
from clusterctl.engines.local.errors import LabError

CLAIMS_DIR = Path(os.environ.get("CLUSTERCTL_LAB_CLAIMS", "/run/clusterctl/labs"))


def _path(cluster: str) -> Path:
    return CLAIMS_DIR / f"{names.tag(cluster)}.json"


def holder(cluster: str) -> Path | None:
    """The state directory whose lab holds this name now, or None (unclaimed, or a stale claim)."""
    try:
        state_dir = Path(json.loads(_path(cluster).read_text())["state_dir"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    alive = network.cluster_netns(cluster) or network.link_exists(names.bridge(cluster))
    return state_dir if state_dir.is_dir() and alive else None


def check(cluster: str, state_dir: Path) -> None:
    """Refuse, changing nothing, when another state directory's lab holds the name."""
    other = holder(cluster)
    if other is not None and other.resolve() != state_dir.resolve():
        raise LabError(f"lab {cluster!r} is already running on this machine from the state directory {other} "
                       f"(this command's is {state_dir}); lab names are one per machine. Take that lab down with "
                       f"CLUSTERCTL_STATE_DIR={other.parent.parent} clusterctl down SPEC, or give this cluster "
                       "another name. Nothing was changed")


def claim(cluster: str, state_dir: Path) -> None:
    check(cluster, state_dir)
    CLAIMS_DIR.mkdir(parents=True, exist_ok=True)
    tmp = _path(cluster).with_suffix(".tmp")
    tmp.write_text(json.dumps({"cluster": cluster, "state_dir": str(state_dir.resolve())}))
    tmp.replace(_path(cluster))


def release(cluster: str, state_dir: Path) -> None:
    """After a complete down: only our own claim goes."""
    try:
        mine = Path(json.loads(_path(cluster).read_text())["state_dir"]) == state_dir.resolve()
    except (OSError, ValueError, KeyError, TypeError):
        return
    if mine:
        _path(cluster).unlink(missing_ok=True)
