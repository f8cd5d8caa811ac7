"""A stand-in for AWS's EFA installer release, laid out as a mirror of efa-installer.amazonaws.com holds it, built by the
tests and served over HTTP to lab nodes (the same server as the stand-in CUDA repository).

What is AWS's, kept as AWS publishes it:
- the files beside each other at the root: `aws-efa-installer-<version>.tar.gz`, its detached signature
  `aws-efa-installer-<version>.tar.gz.sig` and the signing key `aws-efa-installer.key` (EC2 User Guide, "Get started
  with EFA and NCCL", step "Install the EFA software");
- inside the tarball, `aws-efa-installer/` with `efa_installer.sh`, `env.sh` (EFA_INSTALLER_VERSION),
  `package_list.txt`, and the packages in `DEBS/<DISTRO>/<arch>/`, rdma-core's in its `rdma-core/` and the kernel
  module's in `efa-driver/` (AWS's efa_installer.sh, setup_install_package_paths: DEBS/DEBIAN11/x86_64 and the like;
  DEBIAN12 follows that scheme);
- the installer's options -y/--yes, -k/--skip-kmod, -n/--no-verify, and its record /opt/amazon/efa_installed_packages:
  "# EFA installer version: X", "# Debug packages installed: no", "# Packages installed:" and the package file names
  (AWS's efa_installer.sh, write_package_file); libfabric under /opt/amazon/efa, aws-ofi-nccl under
  /opt/amazon/ofi-nccl (the same guide).

What is the stand-in's own: the installer script (small, written here: it installs the packages with dpkg and writes
the record; it refuses to run without -y as the real one prompts), the package versions and most Debian package names
(only efa-config, efa-profile and the rdma-core/efa-driver directories are confirmed from the real script), and the
signing key (a throw-away key made per build, like the stand-in repository's). The packages hold no libraries, only
marker files at the real paths.
"""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

from tests.standins.vendor_repo import EPOCH, Deb, build_deb, run_gpg, scratch, stop_agent

VERSION = "1.38.1"  # the spec's default software.efa_installer
KEY_FILE = "aws-efa-installer.key"
DISTRO_DIR = "DEBS/DEBIAN12/x86_64"
RECORD = "/opt/amazon/efa_installed_packages"

INSTALLER = r"""#!/bin/bash
# clusterctl stand-in for AWS's efa_installer.sh: same options and record, dpkg instead of the real package logic.
set -euo pipefail
cd "$(dirname "$0")"
source ./env.sh
YES=0; SKIP_KMOD=0
for a in "$@"; do
	case "$a" in
	-y|--yes) YES=1 ;;
	-k|--skip-kmod) SKIP_KMOD=1 ;;
	-n|--no-verify|-l|--skip-limit-conf|-g|--enable-gdr|--mpi=*) ;;
	*) echo "unknown option: $a" >&2; exit 1 ;;
	esac
done
if [ "$YES" -ne 1 ]; then
	echo "This script will install EFA ${EFA_INSTALLER_VERSION}. Continue? (stand-in: pass -y)" >&2
	exit 1
fi
base=DEBS/DEBIAN12/$(uname -m)
pkgs=("$base"/*.deb "$base"/rdma-core/*.deb)
if [ "$SKIP_KMOD" -eq 0 ]; then pkgs+=("$base"/efa-driver/*.deb); fi
for p in "${pkgs[@]}"; do
	grep -Fxq "$p" package_list.txt || { echo "Error: unknown package found: $p" >&2; exit 1; }
done
dpkg -i "${pkgs[@]}"
mkdir -p /opt/amazon
names=()
for p in "${pkgs[@]}"; do n=$(basename "$p"); names+=("${n%.deb}"); done
cat > /opt/amazon/efa_installed_packages <<EOF
# EFA installer version: ${EFA_INSTALLER_VERSION}
# Debug packages installed: no
# Packages installed:
${names[*]}
EOF
echo "===================================================="
echo "EFA installation complete."
echo "===================================================="
"""


def debs(version: str = VERSION) -> dict[str, list[Deb]]:
    """The packages by directory below DISTRO_DIR ('' for the top)."""
    marker = f"clusterctl stand-in, EFA installer {version}\n"
    return {
        "": [
            Deb("efa-config", "1.17-1", "Configuration for EFA", files={
                "etc/modprobe.d/efa.conf": ("# clusterctl stand-in\n", 0o644)}),
            Deb("efa-profile", "1.7-1", "Environment for EFA", files={
                "etc/profile.d/zippy_efa.sh": ("PATH=/opt/amazon/efa/bin:$PATH\n", 0o644)}),
            Deb("libfabric-aws", "1.22.0amzn4.0-1", "Libfabric with the EFA provider", files={
                "opt/amazon/efa/bin/fi_info": ("#!/bin/sh\necho 'provider: efa (clusterctl stand-in)'\n", 0o755),
                "opt/amazon/efa/lib/libfabric.so.1": (marker, 0o644)}),
            Deb("libnccl-ofi", "1.13.2-1", "aws-ofi-nccl: the NCCL network plugin over libfabric", files={
                "opt/amazon/ofi-nccl/lib/x86_64-linux-gnu/libnccl-net-ofi.so": (marker, 0o644),
                "opt/amazon/ofi-nccl/lib/x86_64-linux-gnu/libnccl-ofi-tuner.so": (marker, 0o644)}),
        ],
        "rdma-core": [Deb("rdma-core", "54.0-1", "RDMA core userspace", files={
            "usr/share/doc/rdma-core/clusterctl-standin": (marker, 0o644)})],
        "efa-driver": [Deb("efa", "2.13.0-1", "EFA kernel module (DKMS)", files={
            "usr/src/efa-2.13.0/clusterctl-standin": (marker, 0o644)})],
    }


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, EPOCH
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    tar.addfile(info, io.BytesIO(data))


def _dir(tar: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, EPOCH
    info.uname = info.gname = "root"
    tar.addfile(info)


def tarball(work: Path, version: str = VERSION) -> bytes:
    """The release tarball, byte for byte the same for the same inputs (fixed mtimes, owners and gzip header)."""
    top = "aws-efa-installer"
    files: dict[str, tuple[bytes, int]] = {
        "efa_installer.sh": (INSTALLER.encode(), 0o755),
        "env.sh": (f'EFA_INSTALLER_VERSION="{version}"\n'.encode(), 0o644),
    }
    listed = []
    for sub, group in debs(version).items():
        out = work / (sub or "top")
        out.mkdir(parents=True, exist_ok=True)
        for deb in group:
            path = build_deb(deb, out, work / "tree" / (sub or "top"))
            rel = "/".join(x for x in (DISTRO_DIR, sub, path.name) if x)
            files[rel] = (path.read_bytes(), 0o644)
            listed.append(rel)
    files["package_list.txt"] = ("".join(f"{p}\n" for p in sorted(listed)).encode(), 0o644)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        dirs = sorted({"/".join(rel.split("/")[:i]) for rel in files for i in range(1, rel.count("/") + 1)})
        _dir(tar, top)
        for d in dirs:
            _dir(tar, f"{top}/{d}")
        for rel in sorted(files):
            data, mode = files[rel]
            _add(tar, f"{top}/{rel}", data, mode)
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="") as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def build(root: Path, version: str = VERSION) -> Path:
    """The release below `root/efa` (what mirrors.efa.url names): tarball, its signature and the key. Returns the
    directory."""
    where = root / "efa"
    where.mkdir(parents=True)
    work, home = scratch(root, "efa")
    name = f"aws-efa-installer-{version}.tar.gz"
    (where / name).write_bytes(tarball(work, version))
    run_gpg(home, "--quick-generate-key", "Amazon EC2 EFA (clusterctl stand-in) <standin@invalid>", "rsa2048", "sign",
            "never")
    run_gpg(home, "--detach-sign", "-o", str(where / f"{name}.sig"), str(where / name))
    (where / KEY_FILE).write_text(run_gpg(home, "--armor", "--export").stdout)
    stop_agent(home)
    return where
