"""What the controller needs to run `clusterctl burst`, bundled on the machine that runs Ansible.

    python -m clusterctl.engines.aws.burst.bundle OUTDIR --python-version 3.11 --arch x86_64

writes OUTDIR/clusterctl.tar (this clusterctl's package and templates, byte-identical for the same sources),
OUTDIR/requirements.txt (the burst programs' dependencies pinned to the versions installed here, i.e. the versions
clusterctl was tested with on this workstation) and OUTDIR/wheels/ (those wheels and their dependencies for the
controller's Python and CPU, from this machine's pip index). The burst role copies OUTDIR to the controller and
installs it into a venv with `pip --no-index`: the controller needs no PyPI access, and it never gets Pulumi or
Ansible (the burst programs do not use them). Prints "rebuilt" when something changed, "unchanged" otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import subprocess
import sys
import tarfile
from importlib import metadata
from pathlib import Path
from typing import cast

# What `clusterctl burst` imports (the spec/compile/render modules the plan types live in, boto3 for EC2);
# pulumi, pulumi-aws, ansible-core and ansible-runner are engines of `up`, not needed on the controller.
REQUIREMENTS = ("pydantic", "jinja2", "typer", "rich", "ruamel.yaml", "boto3")


def _package_dir() -> Path:
    import clusterctl

    return Path(clusterctl.__file__).resolve().parent


def source_tar() -> bytes:
    """The clusterctl package (+ templates as clusterctl/_templates, as in the wheel), deterministic bytes."""
    from clusterctl.core.resources import resource_dir

    pkg = _package_dir()
    entries: list[tuple[str, Path]] = []
    for p in sorted(pkg.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo"):
            entries.append((f"clusterctl/{p.relative_to(pkg).as_posix()}", p))
    templates = resource_dir("templates")
    if templates.resolve() != (pkg / "_templates").resolve():
        for p in sorted(templates.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                entries.append((f"clusterctl/_templates/{p.relative_to(templates).as_posix()}", p))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, path in sorted(entries):
            data = path.read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.uid, info.gid, info.uname, info.gname = len(data), 0, 0, 0, "root", "root"
            info.mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def closure(python_version: str) -> dict[str, str]:
    """REQUIREMENTS and everything they need (for the controller's Python), at the versions installed here."""
    from packaging.markers import default_environment
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    env: dict[str, str] = {**cast("dict[str, str]", default_environment()), "python_version": python_version, "python_full_version": f"{python_version}.0",
           "extra": ""}
    out: dict[str, str] = {}
    todo = list(REQUIREMENTS)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in out:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # not installed here (an optional dependency); pip resolves it
        out[name] = dist.version
        for r in dist.requires or []:
            req = Requirement(r)
            if req.marker is None or req.marker.evaluate(env):
                todo.append(req.name)
    return dict(sorted(out.items()))


def requirements(python_version: str) -> str:
    return "".join(f"{name}=={version}\n" for name, version in closure(python_version).items())


def platforms(arch: str) -> list[str]:
    return [f"manylinux{tag}_{arch}" for tag in ("_2_28", "_2_17", "2014")] + [f"linux_{arch}"]


def build(outdir: Path, python_version: str, arch: str) -> bool:
    """Write the bundle; True when anything changed."""
    outdir.mkdir(parents=True, exist_ok=True)
    tar = source_tar()
    reqs = requirements(python_version)
    stamp = hashlib.sha256(json.dumps([hashlib.sha256(tar).hexdigest(), reqs, python_version, arch]).encode()).hexdigest()
    stamp_file = outdir / "stamp"
    wheels = outdir / "wheels"
    if stamp_file.is_file() and stamp_file.read_text().strip() == stamp and wheels.is_dir():
        return False
    (outdir / "requirements.txt").write_text(reqs)
    pyver = python_version.replace(".", "")
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--only-binary=:all:",
           "--python-version", python_version, "--implementation", "cp",
           "--abi", f"cp{pyver}", "--abi", "abi3", "--abi", "none", "-d", str(wheels), "-r", str(outdir / "requirements.txt")]
    for p in platforms(arch):
        cmd += ["--platform", p]
    cp = subprocess.run(cmd, capture_output=True, text=True)
    if cp.returncode != 0:
        raise SystemExit(f"pip download failed ({cp.returncode}):\n{cp.stderr[-3000:]}")
    old_tar = outdir / "clusterctl.tar"
    if not old_tar.is_file() or old_tar.read_bytes() != tar:
        old_tar.write_bytes(tar)
    stamp_file.write_text(stamp + "\n")
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m clusterctl.engines.aws.burst.bundle", description=__doc__.splitlines()[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--python-version", default=f"{sys.version_info.major}.{sys.version_info.minor}")
    ap.add_argument("--arch", default="x86_64")
    args = ap.parse_args(argv)
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(args.arch, args.arch)
    print("rebuilt" if build(args.outdir, args.python_version, arch) else "unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
