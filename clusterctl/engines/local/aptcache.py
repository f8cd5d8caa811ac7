"""One apt package pool for all lab nodes of this machine, so each .deb is downloaded once per machine instead of
once per node and lab: <cache_dir>/apt-archives on the host, bound (read-write) into every node at NODE_POOL.

Why not bind it over /var/cache/apt/archives itself: apt takes /var/cache/apt/archives/lock (fcntl) for a whole
install and does not wait for it, so with one shared archives dir an `apt-get install` in a second node fails at
once ("Could not get lock /var/cache/apt/archives/lock. It is held by process 0") while another node installs,
which is exactly what a parallel Ansible converge does. And `apt-get clean` in one node would delete .debs that
another node's running install is about to unpack. So each node keeps its own archives dir (own lock, own
partial/ owned by _apt, its own clean) and two apt hooks connect it to the pool:

- APT::Install::Pre-Invoke (runs before apt decides what to download): symlink every pool .deb missing from the
  node's archives dir into it. apt treats a present file of the right size as already downloaded, so it gets no
  "Get:" line and dpkg reads it through the link. `apt-get clean` removes only the node's links.
- DPkg::Pre-Invoke (downloads are complete and hash-verified, dpkg has not run yet): copy the node's own new
  downloads into the pool, atomically (temporary name, then rename), so a half-copied file is never visible.

Nodes downloading the same package at the same time each fetch it into their own partial/ and both publish the
same bytes; the pool stays consistent. down() leaves the pool alone: it is per machine, not per cluster.
"""

from __future__ import annotations

import time
from pathlib import Path

from clusterctl.engines.local.machine import bind_arg

NODE_POOL = "/var/cache/clusterctl-lab/apt-archives"
HOOK = "/usr/local/sbin/clusterctl-lab-apt-pool"
APT_CONF = "etc/apt/apt.conf.d/80clusterctl-lab-apt-pool"
_STALE_TMP = 24 * 3600  # a publish interrupted (node killed mid-copy) leaves its temporary file behind

HOOK_SCRIPT = f"""#!/bin/sh
# clusterctl lab node: share downloaded .deb files with every lab node of this machine (written by clusterctl).
# {NODE_POOL} is one host directory bound into all nodes; /var/cache/apt/archives stays this node's own.
#   seed:    before apt decides what to download, symlink pool .debs this node lacks into its archives dir
#   publish: after downloads (verified), before dpkg: copy this node's new .debs into the pool
# Never fails: a problem with the pool must not fail an install, apt then just downloads as usual.
POOL={NODE_POOL}
mountpoint -q "$POOL" 2>/dev/null || exit 0
ARCHIVES=/var/cache/apt/archives
eval "$(apt-config shell ARCHIVES Dir::Cache::Archives/d 2>/dev/null)"
ARCHIVES=${{ARCHIVES%/}}
[ -d "$ARCHIVES" ] || exit 0
case "$1" in
seed)
    find "$POOL" -maxdepth 1 -type f -name '*.deb' -exec cp -s -n -t "$ARCHIVES" {{}} + 2>/dev/null
    ;;
publish)
    for f in "$ARCHIVES"/*.deb; do
        [ -f "$f" ] && [ ! -L "$f" ] || continue
        name=${{f##*/}}
        [ -e "$POOL/$name" ] && continue
        tmp="$POOL/.$name.$(cat /etc/hostname 2>/dev/null).$$.tmp"
        if cp -p "$f" "$tmp" 2>/dev/null; then
            mv -f "$tmp" "$POOL/$name" 2>/dev/null || rm -f "$tmp"
        else
            rm -f "$tmp"
        fi
    done
    ;;
esac
exit 0
"""

APT_CONF_TEXT = f"""// clusterctl lab node: machine-wide .deb pool shared by all lab nodes (see {HOOK}).
APT::Install::Pre-Invoke {{ "{HOOK} seed"; }};
DPkg::Pre-Invoke {{ "{HOOK} publish"; }};
"""


def path(cache_dir: Path) -> Path:
    return Path(cache_dir) / "apt-archives"


def ensure(cache_dir: Path) -> Path:
    """The pool directory (root-owned, 0755: only root in the nodes writes it); drops stale temporary files."""
    pool = path(cache_dir)
    pool.mkdir(parents=True, exist_ok=True)
    pool.chmod(0o755)
    now = time.time()
    for tmp in pool.glob(".*.tmp"):
        try:
            if now - tmp.stat().st_mtime > _STALE_TMP:
                tmp.unlink()
        except FileNotFoundError:
            pass
    return pool


def binds(cache_dir: Path) -> tuple[str, ...]:
    """nspawn --bind value(s)."""
    return (bind_arg(path(cache_dir), NODE_POOL),)



def write_node_config(root: Path) -> None:
    """The hook script and the apt.conf snippet that runs it, in the node's root (before it boots)."""
    hook = root / HOOK.lstrip("/")
    hook.parent.mkdir(parents=True, exist_ok=True)
    if not hook.exists() or hook.read_text() != HOOK_SCRIPT:
        hook.write_text(HOOK_SCRIPT)
    hook.chmod(0o755)
    conf = root / APT_CONF
    conf.parent.mkdir(parents=True, exist_ok=True)
    if not conf.exists() or conf.read_text() != APT_CONF_TEXT:
        conf.write_text(APT_CONF_TEXT)
    (root / NODE_POOL.lstrip("/")).mkdir(parents=True, exist_ok=True)  # the bind's mount point


def pool_files(cache_dir: Path) -> list[str]:
    pool = path(cache_dir)
    return sorted(p.name for p in pool.glob("*.deb")) if pool.is_dir() else []
