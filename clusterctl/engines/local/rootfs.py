"""The shared base root filesystem: one debootstrap per recipe, cached, built so an interruption never leaves a
half-built tree where a complete one is expected (build in a temp dir, rename when complete, under a lock)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from clusterctl.engines.local.errors import LabError
from clusterctl.engines.local.mounts import remove_tree
from clusterctl.engines.local.proc import host_env, run

# What a node needs beyond minbase: systemd as init, sshd for Ansible, python3 + python3-apt for Ansible's
# apt module, sudo/gpg/ca-certificates for roles adding repositories, ping/procs for debugging and tests.
PACKAGES = (
    "systemd", "systemd-sysv", "dbus", "openssh-server", "python3", "python3-apt", "iproute2", "iputils-ping",
    "sudo", "ca-certificates", "gpg", "procps", "less", "netbase",
)
# Bump when the post-debootstrap tweaks below change, so caches rebuild instead of silently differing.
RECIPE = 1


def recipe_id(suite: str, mirror: str) -> str:
    blob = json.dumps({"suite": suite, "mirror": mirror, "packages": PACKAGES, "recipe": RECIPE}, sort_keys=True)
    return f"{suite}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


def base_path(cache_dir: Path, suite: str, mirror: str) -> Path:
    return Path(cache_dir) / "rootfs" / recipe_id(suite, mirror)


def ensure_base(cache_dir: Path, suite: str, mirror: str, log: Callable[[str], None]) -> Path:
    final = base_path(cache_dir, suite, mirror)
    if final.is_dir():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a concurrent `up` waits here and then finds the finished tree
        if final.is_dir():
            return final
        # Holding the lock, any leftover build dir is from an interrupted build: remove it (mounts first).
        for stale in final.parent.glob(".build-*"):
            log(f"removing interrupted base rootfs build {stale}")
            remove_tree(stale)
        tmp = final.parent / f".build-{final.name}"
        logfile = final.parent / f"{final.name}.debootstrap.log"
        log(f"building base rootfs {final.name} with debootstrap ({suite}, {mirror}); takes a minute or two")
        t0 = time.monotonic()
        argv = ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", suite, str(tmp), mirror]
        with open(logfile, "w") as out:
            import subprocess  # local: only this step streams output to a log file

            rc = subprocess.run(argv, check=False, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=host_env(DEBIAN_FRONTEND="noninteractive")).returncode
        if rc != 0:
            tail = "\n".join(logfile.read_text(errors="replace").splitlines()[-15:])
            remove_tree(tmp)
            raise LabError(f"debootstrap of {suite} from {mirror} failed (exit {rc}); log: {logfile}\n{tail}")
        _customize(tmp, suite, mirror)
        os.rename(tmp, final)  # atomic: the cache either has the complete tree or none
        log(f"base rootfs ready in {time.monotonic() - t0:.0f}s: {final}")
        return final


def _customize(root: Path, suite: str, mirror: str) -> None:
    """Make the tree a neutral template: no identity (keys, machine-id, hostname), full apt sources."""
    (root / "etc/ssh/sshd_config.d").mkdir(exist_ok=True)
    (root / "etc/ssh/sshd_config.d/clusterctl-lab.conf").write_text(
        "# clusterctl lab node: only the per-node ed25519 host key exists\nHostKey /etc/ssh/ssh_host_ed25519_key\n")
    dbus_id = root / "var/lib/dbus/machine-id"
    if dbus_id.exists() and not dbus_id.is_symlink():
        dbus_id.unlink()
        dbus_id.symlink_to("/etc/machine-id")
    _without_identity(root)  # debootstrap copied the build host's name; the packages made host keys
    # contrib: Debian puts slurm-wlm-nvml-plugin there. Security updates only from the official host:
    # a local mirror rarely carries them under a guessable path.
    sources = f"deb {mirror} {suite} main contrib\ndeb {mirror} {suite}-updates main contrib\n"
    if "deb.debian.org" in mirror:
        sources += f"deb http://deb.debian.org/debian-security {suite}-security main contrib\n"
    (root / "etc/apt/sources.list").write_text(sources)
    run(["chroot", str(root), "apt-get", "clean"], check=False)
    lists = root / "var/lib/apt/lists"
    for stale in lists.glob("*"):
        if stale.is_file() and stale.name != "lock":
            stale.unlink()  # stale the day after; nodes run apt-get update (Ansible: update_cache) anyway


def _without_identity(root: Path) -> None:
    """What makes a root one machine's: host keys, machine-id, hostname, resolver, the munge key. Each node gets its
    own at boot (the lab writes them) or from the converge (the cluster's munge key)."""
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()  # each node gets its own host keys; sharing them would defeat StrictHostKeyChecking
    (root / "etc/machine-id").write_text("")  # written per node; empty means "not yet set"
    (root / "etc/hostname").write_text("localhost\n")
    for f in ("etc/resolv.conf", "etc/munge/munge.key"):
        (root / f).unlink(missing_ok=True)


def bake(root: Path, dest: Path, log: Callable[[str], None]) -> Path:
    """A node image from a converged, stopped builder's root: copied whole, its identity removed, then renamed into
    place, so `dest` is either a complete image or absent. An image of the same inputs already there is kept."""
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".build-{dest.name}"
    remove_tree(tmp)
    t0 = time.monotonic()
    run(["cp", "-a", "--one-file-system", f"{root}/.", str(tmp)], what=f"copying the image builder's root to {tmp}")
    _without_identity(tmp)
    os.rename(tmp, dest)
    log(f"node image baked in {time.monotonic() - t0:.0f}s: {dest}")
    return dest
