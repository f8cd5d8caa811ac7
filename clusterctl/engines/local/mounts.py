"""Mount table queries and safe removal of directory trees that may still have something mounted inside.

A debootstrap killed half-way leaves /proc and /sys mounted inside its target; `rm -rf` on that would walk into
the host's /sys. So: unmount everything below a path first, then delete without crossing filesystems.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from clusterctl.engines.local.errors import LabError
from clusterctl.engines.local.proc import run

_OCTAL = re.compile(r"\\([0-7]{3})")


def _unescape(field: str) -> str:
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), field)


def mountpoints() -> list[str]:
    """Mount points of this mount namespace, in mount order."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        out.append(_unescape(line.split()[4]))
    return out


def is_mountpoint(path: Path | str) -> bool:
    return str(path).rstrip("/") in mountpoints()


def mounts_under(path: Path | str) -> list[str]:
    root = os.path.realpath(path).rstrip("/")
    return [m for m in mountpoints() if m == root or m.startswith(root + "/")]


def unmount_all_under(path: Path | str) -> None:
    """Unmount every mount at or below path, deepest first; lazily when busy so down() always finishes."""
    for _ in range(5):
        found = mounts_under(path)
        if not found:
            return
        for mp in sorted(set(found), key=len, reverse=True):
            if run(["umount", mp], check=False).returncode != 0:
                run(["umount", "-l", mp], check=False)
    left = mounts_under(path)
    if left:
        raise LabError(f"could not unmount {', '.join(left)}")


def remove_tree(path: Path) -> None:
    if not os.path.lexists(path):
        return
    unmount_all_under(path)
    run(["rm", "-rf", "--one-file-system", "--", str(path)], what=f"removing {path}")
