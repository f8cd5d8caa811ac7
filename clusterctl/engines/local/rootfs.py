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
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()  # each node gets its own host keys; sharing them would defeat StrictHostKeyChecking
    (root / "etc/ssh/sshd_config.d").mkdir(exist_ok=True)
    (root / "etc/ssh/sshd_config.d/clusterctl-lab.conf").write_text(
        "# clusterctl lab node: only the per-node ed25519 host key exists\nHostKey /etc/ssh/ssh_host_ed25519_key\n")
    (root / "etc/machine-id").write_text("")  # written per node; empty means "not yet set"
    dbus_id = root / "var/lib/dbus/machine-id"
    if dbus_id.exists() and not dbus_id.is_symlink():
        dbus_id.unlink()
        dbus_id.symlink_to("/etc/machine-id")
    (root / "etc/hostname").write_text("localhost\n")  # debootstrap copied the build host's name
    for f in ("etc/resolv.conf",):
        (root / f).unlink(missing_ok=True)  # per node, from the host's at start
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
