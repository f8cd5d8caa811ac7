"""Fake NVIDIA device nodes inside a running node, so Slurm GRES (gres.conf File=/dev/nvidia[0-N]) is real.

The node's /dev is nspawn's private tmpfs, invisible from the host's mount namespace. /proc/<leader>/root is the
node's root as its init sees it (mounts included), so the host can mknod there directly: no tool inside the node,
no nsenter, and it works the instant init has exec'd. Nothing can be opened (no driver: ENXIO), but stat(),
slurmd's GRES file checks and the devices cgroup all see real character devices with NVIDIA's major number.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

NVIDIA_MAJOR = 195
NVIDIACTL_MINOR = 255
_GPU = re.compile(r"^nvidia(\d+)$")


def _dev(leader: int) -> Path:
    return Path(f"/proc/{leader}/root/dev")


def present(leader: int) -> list[int]:
    return sorted(int(m.group(1)) for name in os.listdir(_dev(leader)) if (m := _GPU.match(name)))


def _ensure_chardev(path: Path, minor: int) -> None:
    want = os.makedev(NVIDIA_MAJOR, minor)
    try:
        st = path.lstat()
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == want:
            path.chmod(0o666)
            return
        path.unlink()
    except FileNotFoundError:
        pass
    os.mknod(path, 0o666 | stat.S_IFCHR, want)
    path.chmod(0o666)  # mknod's mode is filtered by the umask; real nvidia nodes are crw-rw-rw-


def apply(leader: int, count: int) -> None:
    """Exactly /dev/nvidia0..count-1 afterwards (plus /dev/nvidiactl when count > 0)."""
    dev = _dev(leader)
    for i in range(count):
        _ensure_chardev(dev / f"nvidia{i}", i)
    for i in present(leader):
        if i >= count:
            (dev / f"nvidia{i}").unlink(missing_ok=True)
    ctl = dev / "nvidiactl"
    if count > 0:
        _ensure_chardev(ctl, NVIDIACTL_MINOR)
    else:
        ctl.unlink(missing_ok=True)
