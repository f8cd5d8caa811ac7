"""A stand-in for NVIDIA's CUDA apt repository (Debian 12), built by the tests and served over HTTP to lab nodes.

Laid out as catalog/vendor_repos.py expects below a mirror root: `<root>/debian12/x86_64/`, a flat repository with
suite "/", signed (InRelease and Release.gpg by a throw-away key made here, published as `3bf863cc.pub`, the file name
of NVIDIA's key). Package names and version strings are NVIDIA's:
- the open-module driver meta-package `nvidia-open-<branch>` and `nvidia-persistenced`, Fabric Manager
  `nvidia-fabricmanager-<branch>` and NSCQ `libnvidia-nscq-<branch>`, all `<driver>-1` (NVIDIA's own packaging revision,
  e.g. nvidia-fabricmanager-460_460.32.03-1_amd64.deb in NVIDIA's apt-packaging-fabric-manager README);
- two driver branches, 570.172.08 (Ubuntu's fabric-manager-570 source package carries this release) and 575.57.08,
  each with its matching Fabric Manager and NSCQ;
- a NEWER 570 driver, 570.211.01 (a later Fabric Manager 570 release on packages.ubuntu.com), published WITHOUT its
  Fabric Manager: what a repository looks like mid-sync, or when a site mirrors only part of a release. A pinned
  install must not take it.
- `cuda-toolkit-12-8` 12.8.1-1, `libnccl2`/`libnccl-dev` `2.26.2-1+cuda12.8` and a newer `2.27.3-1+cuda12.9`.

The packages install stand-ins: nvidia-smi (tests/standins/nvidia-smi, answering from the node's fake /dev/nvidiaN),
nvidia-persistenced and nv-fabricmanager daemons as systemd units that stay up. Like the real Fabric Manager, the
stand-in refuses to start when the installed driver is not its exact version. No kernel module is shipped.

Packages are built reproducibly (`dpkg-deb --build --root-owner-group`, every mtime and SOURCE_DATE_EPOCH fixed): the
same inputs give the same .deb bytes. The signature is not reproducible (a new key per run), by design.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import os
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

STANDINS = Path(__file__).parent
EPOCH = 1735689600  # 2025-01-01T00:00:00Z: every file's mtime and SOURCE_DATE_EPOCH
KEY_FILE = "3bf863cc.pub"  # NVIDIA's key file name in each CUDA repository index (catalog/vendor_repos.CUDA_INDEX)
REPO_PATH = "debian12/x86_64"  # below the mirror root (catalog/vendor_repos._cuda's path for debian12)
VERSION_FILE = "/usr/share/clusterctl-standin/nvidia-driver.version"

# Driver branch -> (driver version, whether its Fabric Manager and NSCQ are published).
DRIVERS: tuple[tuple[str, bool], ...] = (("570.172.08", True), ("570.211.01", False), ("575.57.08", True))
CUDA = ("12.8", "12.8.1-1")
NCCL = (("2.26.2", "12.8"), ("2.27.3", "12.9"))


@dataclass(frozen=True)
class Deb:
    name: str
    version: str
    description: str
    depends: tuple[str, ...] = ()
    provides: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()  # also Replaces: the branch packages take over each other's files
    files: dict[str, tuple[str, int]] = field(default_factory=dict)  # path -> (content, mode)
    postinst: str | None = None


def _daemon(name: str, body: str) -> str:
    return f"#!/bin/sh\n# clusterctl stand-in {name}: stays up like the real daemon; does nothing else.\n{body}exec sleep infinity\n"


def _unit(description: str, program: str) -> str:
    return (f"[Unit]\nDescription={description} (clusterctl stand-in)\n\n[Service]\nType=simple\nExecStart={program}\n"
            "Restart=no\n\n[Install]\nWantedBy=multi-user.target\n")


RELOAD = "#!/bin/sh\nset -e\nif [ -d /run/systemd/system ]; then systemctl daemon-reload; fi\n"


def driver_debs(version: str, with_fabric_manager: bool) -> list[Deb]:
    branch, rev = version.split(".")[0], f"{version}-1"
    # One branch at a time, as in NVIDIA's packaging: Fabric Manager's branch packages Provide, Conflict with and
    # Replace the unbranched name (NVIDIA/apt-packaging-fabric-manager, debian/templates/control.in); NSCQ follows
    # the same scheme here; the driver meta-packages conflict with the other branches' (both ship nvidia-smi here).
    others = tuple(sorted({f"nvidia-open-{v.split('.')[0]}" for v, _ in DRIVERS} - {f"nvidia-open-{branch}"}))
    smi = (STANDINS / "nvidia-smi").read_text()
    out = [
        Deb("nvidia-persistenced", rev, "NVIDIA Persistence Daemon", files={
            "usr/bin/nvidia-persistenced": (_daemon("nvidia-persistenced", ""), 0o755),
            "lib/systemd/system/nvidia-persistenced.service": (_unit("NVIDIA Persistence Daemon",
                                                                     "/usr/bin/nvidia-persistenced"), 0o644),
        }, postinst=RELOAD),
        Deb(f"nvidia-open-{branch}", rev, f"NVIDIA driver {branch} with open kernel modules (meta-package)",
            depends=(f"nvidia-persistenced (= {rev})",), conflicts=others, files={
                "usr/bin/nvidia-smi": (smi, 0o755),
                VERSION_FILE.lstrip("/"): (version + "\n", 0o644),
            }),
    ]
    if with_fabric_manager:
        # The real Fabric Manager exits when the loaded driver is not its version; the stand-in reads the installed one.
        check = (f'v=$(cat {VERSION_FILE} 2>/dev/null)\nif [ "$v" != "{version}" ]; then\n'
                 f'    echo "nv-fabricmanager {version}: driver version \'$v\' does not match" >&2; exit 1\nfi\n')
        out += [
            Deb(f"nvidia-fabricmanager-{branch}", rev, "Fabric Manager for NVSwitch based systems.",
                provides=("nvidia-fabricmanager",), conflicts=("nvidia-fabricmanager",), files={
                "usr/bin/nv-fabricmanager": (_daemon("nv-fabricmanager", check), 0o755),
                "lib/systemd/system/nvidia-fabricmanager.service": (_unit("NVIDIA fabric manager service",
                                                                          "/usr/bin/nv-fabricmanager"), 0o644),
            }, postinst=RELOAD),
            Deb(f"libnvidia-nscq-{branch}", rev, "NVSwitch Configuration and Query library",
                provides=("libnvidia-nscq",), conflicts=("libnvidia-nscq",), files={
                f"usr/lib/x86_64-linux-gnu/libnvidia-nscq.so.{version}": ("clusterctl stand-in\n", 0o644),
            }),
        ]
    return out


def cuda_debs() -> list[Deb]:
    cuda, rev = CUDA
    out = [Deb(f"cuda-toolkit-{cuda.replace('.', '-')}", rev, f"CUDA Toolkit {cuda} meta-package", files={
        # No nvcc: the nccl role builds nccl-tests only where /usr/local/cuda/bin/nvcc exists (it would download them).
        f"usr/local/cuda-{cuda}/version.json": (f'{{"cuda": {{"name": "CUDA SDK", "version": "{rev.split("-")[0]}"}}}}\n',
                                                 0o644),
    })]
    for nccl, for_cuda in NCCL:
        rev = f"{nccl}-1+cuda{for_cuda}"
        out += [
            Deb("libnccl2", rev, "NVIDIA Collective Communication Library (NCCL) Runtime", files={
                f"usr/lib/x86_64-linux-gnu/libnccl.so.{nccl}": ("clusterctl stand-in\n", 0o644),
            }),
            Deb("libnccl-dev", rev, "NVIDIA Collective Communication Library (NCCL) Development Files",
                depends=(f"libnccl2 (= {rev})",), files={"usr/include/nccl.h": (f"/* stand-in NCCL {nccl} */\n", 0o644)}),
        ]
    return out


def all_debs() -> list[Deb]:
    return [d for v, fm in DRIVERS for d in driver_debs(v, fm)] + cuda_debs()


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)


def build_deb(deb: Deb, out_dir: Path, work: Path) -> Path:
    tree = work / f"{deb.name}_{deb.version}"
    (tree / "DEBIAN").mkdir(parents=True)
    control = [f"Package: {deb.name}", f"Version: {deb.version}", "Architecture: amd64",
               "Maintainer: clusterctl tests <standin@invalid>", "Section: multiverse/devel", "Priority: optional"]
    if deb.depends:
        control.append("Depends: " + ", ".join(deb.depends))
    if deb.provides:
        control.append("Provides: " + ", ".join(deb.provides))
    if deb.conflicts:
        control += ["Conflicts: " + ", ".join(deb.conflicts), "Replaces: " + ", ".join(deb.conflicts)]
    control.append(f"Description: {deb.description}")
    (tree / "DEBIAN" / "control").write_text("\n".join(control) + "\n")
    entries = dict(deb.files)
    if deb.postinst:
        entries["DEBIAN/postinst"] = (deb.postinst, 0o755)
    for rel, (content, mode) in entries.items():
        p = tree / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)
        p.chmod(mode)
    for p in sorted(tree.rglob("*"), reverse=True) + [tree]:
        if p.is_dir():
            p.chmod(0o755)
        os.utime(p, (EPOCH, EPOCH))
    deb_path = out_dir / f"{deb.name}_{deb.version.replace(':', '%3a')}_amd64.deb"
    env = dict(os.environ, SOURCE_DATE_EPOCH=str(EPOCH))
    _run(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", str(tree), str(deb_path)], env=env)
    return deb_path


def run_gpg(home: Path, *args: str) -> subprocess.CompletedProcess:
    return _run(["gpg", "--homedir", str(home), "--batch", "--no-tty", "--pinentry-mode", "loopback", "--passphrase", "",
                 *args])


def build(root: Path) -> Path:
    """Build the signed repository below `root` (the mirror root: what mirrors.cuda.url names). Returns its index dir."""
    return signed_repo(root, REPO_PATH, all_debs(), "clusterctl stand-in (NVIDIA CUDA layout)", KEY_FILE)


def scratch(root: Path, tag: str) -> tuple[Path, Path]:
    """A build's work directory and its throw-away GnuPG home, beside `root` (never served)."""
    work, home = root.parent / f"{root.name}.{tag}-work", root.parent / f"{root.name}.{tag}-gnupg"
    work.mkdir()
    home.mkdir(mode=0o700)
    return work, home


def signed_repo(root: Path, path: str, debs: list[Deb], origin: str, key_file: str) -> Path:
    """The packages built into `root/path` and published there as a signed flat repository; returns that directory."""
    index = root / path
    index.mkdir(parents=True)
    # short but one per path: gpg-agent's socket path must fit in 107 characters
    work, home = scratch(root, f"{path.split('/')[0]}-{hashlib.sha1(path.encode()).hexdigest()[:6]}")
    for deb in debs:
        build_deb(deb, index, work)
    publish(index, home, origin, key_file)
    return index


def publish(index: Path, home: Path, origin: str, key_file: str) -> None:
    """Make `index` (a directory of .debs) a flat apt repository signed by a throw-away key (InRelease and
    Release.gpg), the key published in it as `key_file` (armored; binary where the name ends in .gpg)."""
    packages = _run(["apt-ftparchive", "packages", "."], cwd=index).stdout
    (index / "Packages").write_text(packages)
    release = _run(["apt-ftparchive", "-o", f"APT::FTPArchive::Release::Origin={origin}",
                    "-o", "APT::FTPArchive::Release::Label=clusterctl stand-in", "release", "."], cwd=index).stdout
    (index / "Release").write_text(release)
    run_gpg(home, "--quick-generate-key", "clusterctl stand-in vendor repository <standin@invalid>", "rsa2048", "sign", "never")
    run_gpg(home, "--clearsign", "-o", str(index / "InRelease"), str(index / "Release"))
    run_gpg(home, "--armor", "--detach-sign", "-o", str(index / "Release.gpg"), str(index / "Release"))
    if key_file.endswith(".gpg"):  # published as a binary keyring, as NVIDIA's DOCA repositories do
        run_gpg(home, "--output", str(index / key_file), "--export")
    else:
        (index / key_file).write_text(run_gpg(home, "--armor", "--export").stdout)
    stop_agent(home)


def stop_agent(home: Path) -> None:
    """Signing started a gpg-agent for this throw-away home: stop it (nothing may stay running after the tests)."""
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"], check=False, capture_output=True)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass


@contextlib.contextmanager
def serve(root: Path, address: str) -> Iterator[str]:
    """Serve `root` over HTTP on address (a port the kernel picks); yields the base URL. Stops on exit."""
    server = http.server.ThreadingHTTPServer((address, 0), functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{address}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
