"""A fake local NVMe disk per lab node: a sparse file on a host loop device, /dev/nvme0n1 inside the node.

The image lives in the node's state dir and is kept across up() re-runs and node reboots (it holds the node's
cache filesystem); only down() (or removing the disk from the spec) deletes it. The host attaches it to a loop
device and mknods a block device with the loop device's major:minor in the node's /dev through
/proc/<leader>/root (like gpus.py), after every boot: nspawn gives each boot a fresh /dev.
Nodes have no devices-cgroup limit (nspawn runs with --keep-unit in a cgroup of our own), so the node can open,
mkfs and mount it. What the node does not get: udev (no /dev/disk/by-*), and a /sys/block entry of its own
(the kernel still calls it loopN there); tools that read /dev directly (blkid, mkfs, mount) work.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Iterator

from clusterctl.engines.local.errors import LabError
from clusterctl.engines.local.proc import run

DEVICE = "nvme0n1"  # what the node sees: the first namespace of the first NVMe controller
MIB = 1024 * 1024
_SYS_BLOCK = Path("/sys/block")
_DELETED = " (deleted)"


# --- the image -----------------------------------------------------------------------------------------

@contextmanager
def _image_lock(image: Path) -> Iterator[None]:
    """Serialises attach/detach of one image between up()/down() and the node's supervisor (after a reboot):
    without it both could find the image unattached and attach it twice."""
    with open(image, "rb") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def ensure_image(image: Path, size_mb: int) -> bool:
    """Create the sparse image once; grow it (never shrink) when the spec asks for more. True when created."""
    want = size_mb * MIB
    try:
        have = image.stat().st_size
    except FileNotFoundError:
        image.parent.mkdir(parents=True, exist_ok=True)
        tmp = image.with_suffix(".tmp")
        with open(tmp, "wb") as fh:
            fh.truncate(want)  # sparse: costs no disk space until the node writes to it
        tmp.replace(image)
        return True
    if have > want:
        raise LabError(f"{image}: the disk is {have // MIB} MiB, the spec asks for {size_mb} MiB; shrinking would "
                       f"destroy the filesystem on it (down() the lab, or remove the node, to start over)")
    if have < want:
        with _image_lock(image):
            os.truncate(image, want)
            for dev in attached(image):
                run(["losetup", "--set-capacity", dev], what=f"growing {dev} to {size_mb} MiB")
    return False


# --- loop devices --------------------------------------------------------------------------------------

def attached(image: Path) -> list[str]:
    """Loop devices backed by this very file (losetup -j compares device and inode, not the path)."""
    if not image.exists():
        return []
    out = run(["losetup", "--list", "--noheadings", "--output", "NAME", "--associated", str(image)],
              what=f"looking up loop devices of {image}").stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def loops_under(directory: Path) -> list[tuple[str, str]]:
    """(loop device, backing file) for every loop device whose backing file is (or was, if since deleted) below
    directory. Read from sysfs, so loop devices whose file was deleted while they stayed busy count too."""
    root = os.path.realpath(directory).rstrip("/") + "/"
    found = []
    for backing in sorted(_SYS_BLOCK.glob("loop*/loop/backing_file")):
        try:
            path = backing.read_text().rstrip("\n")
        except OSError:
            continue  # detached meanwhile
        if _strip(path).startswith(root):
            found.append((f"/dev/{backing.parent.parent.name}", path))
    return found


def attach(image: Path) -> str:
    """The loop device of image: the existing attachment if there is one, else a new one."""
    with _image_lock(image):
        devs = attached(image)
        if devs:
            return devs[0]
        dev = run(["losetup", "--find", "--show", str(image)], what=f"attaching {image} to a loop device "
                  "(the kernel needs loop support: modprobe loop)").stdout.strip()
        if not dev.startswith("/dev/"):
            raise LabError(f"losetup --find --show {image} printed {dev!r}, not a loop device")
        return dev


def in_use(dev: str) -> bool:
    """Something holds the block device exclusively: a mounted filesystem (in any mount namespace), swap, ..."""
    try:
        fd = os.open(dev, os.O_RDONLY | os.O_EXCL | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.EBUSY:
            return True
        if exc.errno in (errno.ENOENT, errno.ENXIO):
            return False
        raise
    os.close(fd)
    return False


def detach_candidates(image: Path) -> list[str]:
    """Loop devices of image: attached to it now, or to a file of that name since deleted."""
    want = os.path.realpath(image)
    devs = attached(image) + [dev for dev, backing in loops_under(image.parent) if _strip(backing) == want]
    return list(dict.fromkeys(devs))


def detach(image: Path) -> list[str]:
    """Detach every loop device of image; returns those still busy (mounted somewhere): for those the kernel only
    sets autoclear and detaches them by itself once released."""
    busy = []
    with _image_lock(image) if image.exists() else nullcontext():
        for dev in detach_candidates(image):
            if in_use(dev):
                busy.append(dev)
            run(["losetup", "--detach", dev], check=False)
    return busy


def detach_all_under(directory: Path) -> list[str]:
    """Detach every loop device backed by a file below directory (sweep for down()); returns the busy ones."""
    busy = []
    for dev, _ in loops_under(directory):
        if in_use(dev):
            busy.append(dev)
        run(["losetup", "--detach", dev], check=False)
    return busy


def _strip(backing: str) -> str:
    return backing[: -len(_DELETED)] if backing.endswith(_DELETED) else backing


def remove(image: Path) -> None:
    """Detach and delete the image (the disk's data is gone afterwards)."""
    busy = detach(image)
    if busy:
        raise LabError(f"{image}: loop device {', '.join(busy)} is still in use (a filesystem on it is mounted "
                       f"somewhere); unmount it, then run down() again")
    image.unlink(missing_ok=True)


# --- inside the node -----------------------------------------------------------------------------------

def _node_dev(leader: int) -> Path:
    return Path(f"/proc/{leader}/root/dev") / DEVICE


def in_node(leader: int, dev: str) -> bool:
    """The node's /dev/nvme0n1 is the block device of dev."""
    try:
        want = os.stat(dev).st_rdev
        st = _node_dev(leader).lstat()
    except FileNotFoundError:
        return False
    return stat.S_ISBLK(st.st_mode) and st.st_rdev == want


def _disk_gid(leader: int) -> int:
    """The node's `disk` group (real /dev/nvme0n1 is brw-rw---- root:disk); root if it has none."""
    try:
        for line in Path(f"/proc/{leader}/root/etc/group").read_text().splitlines():
            fields = line.split(":")
            if fields[0] == "disk" and len(fields) > 2:
                return int(fields[2])
    except (OSError, ValueError):
        pass
    return 0


def expose(leader: int, dev: str) -> bool:
    """Make /dev/nvme0n1 inside the node the block device of dev; leaves a correct one alone (it may be mounted).
    True when it had to be created."""
    if in_node(leader, dev):
        return False
    rdev = os.stat(dev).st_rdev
    path = _node_dev(leader)
    if path.is_symlink() or path.exists():
        path.unlink()
    os.mknod(path, 0o660 | stat.S_IFBLK, rdev)
    os.chown(path, 0, _disk_gid(leader))
    path.chmod(0o660)  # mknod's mode is filtered by the umask
    return True


def hide(leader: int) -> None:
    """Remove /dev/nvme0n1 from the node (the disk was removed from the spec)."""
    _node_dev(leader).unlink(missing_ok=True)
