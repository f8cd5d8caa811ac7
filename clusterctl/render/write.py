"""Write a rendered build to a directory: each file atomically, stale files of the previous build removed."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from clusterctl.core.errors import RenderError
from clusterctl.render import layout


def read_manifest(outdir: Path) -> dict:
    try:
        return json.loads((outdir / layout.MANIFEST).read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise RenderError(f"{outdir / layout.MANIFEST}: unreadable manifest ({e}); remove the directory and render again") from None


def write_build(files: dict[str, str], outdir: str | Path) -> list[str]:
    """Write `files` under outdir; return the paths whose content changed. Only files the old manifest listed are removed."""
    outdir = Path(outdir)
    old = read_manifest(outdir).get("files", {})
    changed = []
    try:
        outdir.mkdir(parents=True, exist_ok=True)
        # The manifest goes last: a build interrupted half-way still names the previous files, so a rerun cleans up.
        for rel in sorted(files, key=lambda p: p == layout.MANIFEST):
            target = outdir / rel
            text = files[rel]
            if target.is_file() and target.read_text() == text:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
            changed.append(rel)
        for rel in sorted(set(old) - set(files)):
            (outdir / rel).unlink(missing_ok=True)
            changed.append(rel)
    except OSError as e:
        raise RenderError(f"cannot write the build to {outdir}: {e}") from None
    return changed


def read_build(outdir: str | Path) -> dict[str, str]:
    """The files a build directory's manifest lists (plus the manifest), as written."""
    outdir = Path(outdir)
    listed = read_manifest(outdir).get("files", {})
    out = {}
    for rel in listed:
        try:
            out[rel] = (outdir / rel).read_text()
        except OSError:
            continue  # a file removed by hand shows up as deleted in the diff
    if listed:
        out[layout.MANIFEST] = (outdir / layout.MANIFEST).read_text()
    return dict(sorted(out.items()))
