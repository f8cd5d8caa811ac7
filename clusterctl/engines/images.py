"""Node images, whatever the provider: what an image is made of (the hash of its inputs, so a change shows it stale)
and the record of the image built for each pool, kept in the cluster's state. aws (engines/aws/image.py: an AMI) and
the lab (engines/local/image.py: a baked root filesystem) build them; `up` boots a pool from its recorded image while
the record's inputs match the spec's."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from clusterctl.state.backend import Backend

RECORD = "image-{pool}.json"  # a plain (non-secret) object of the cluster's state, one per pool


def inputs_hash(parts: dict, roles_dir: Path) -> str:
    """sha256 over what the image is made of: `parts` (versions, base image, anything the roles' choices follow)
    and every file of the node roles. Deterministic: keys sorted, files in sorted path order with their paths."""
    h = hashlib.sha256()
    h.update(json.dumps(parts, sort_keys=True).encode())
    for f in sorted(p for p in roles_dir.rglob("*") if p.is_file()):
        h.update(b"\0" + str(f.relative_to(roles_dir)).encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def record(state: Backend, pool: str, data: dict) -> None:
    """Written only once the image is complete: a failed build leaves the previous record (or none)."""
    state.put_plain(RECORD.format(pool=pool), (json.dumps(data, sort_keys=True) + "\n").encode())


def recorded(state: Backend, pool: str) -> dict | None:
    raw = state.plain(RECORD.format(pool=pool))
    return json.loads(raw) if raw else None
