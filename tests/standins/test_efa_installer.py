"""The stand-in EFA installer release itself, without lab nodes: AWS's file names and tarball layout, reproducible
bytes, and a signature gpgv accepts with the published key and refuses once the tarball changes."""

from __future__ import annotations

import shutil
import subprocess
import tarfile

import pytest

from tests.standins import efa_installer as efa

pytestmark = pytest.mark.skipif(not (shutil.which("gpg") and shutil.which("gpgv") and shutil.which("dpkg-deb")),
                                reason="gpg, gpgv (gnupg) and dpkg-deb build and check the release")


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return efa.build(tmp_path_factory.mktemp("efa") / "repos")


def _gpgv(release, tmp_path):
    key = tmp_path / "key.gpg"
    subprocess.run(["gpg", "--batch", "--yes", "--dearmor", "-o", str(key), str(release / efa.KEY_FILE)], check=True)
    name = f"aws-efa-installer-{efa.VERSION}.tar.gz"
    return subprocess.run(["gpgv", "--status-fd", "1", "--keyring", str(key), str(release / f"{name}.sig"),
                           str(release / name)], capture_output=True, text=True)


def test_release_files_and_tarball_layout_are_aws(release):
    name = f"aws-efa-installer-{efa.VERSION}.tar.gz"
    assert sorted(p.name for p in release.iterdir()) == sorted([name, f"{name}.sig", "aws-efa-installer.key"])
    with tarfile.open(release / name) as tar:
        members = {m.name: m for m in tar.getmembers()}
        listed = tar.extractfile("aws-efa-installer/package_list.txt").read().decode().split()
        env = tar.extractfile("aws-efa-installer/env.sh").read().decode()
    assert members["aws-efa-installer/efa_installer.sh"].mode == 0o755
    assert env == f'EFA_INSTALLER_VERSION="{efa.VERSION}"\n'
    debs = sorted(n.removeprefix("aws-efa-installer/") for n in members if n.endswith(".deb"))
    assert debs == sorted(listed)  # the installer refuses any package not in package_list.txt, as AWS's does
    assert "DEBS/DEBIAN12/x86_64/efa-config_1.17-1_amd64.deb" in debs
    assert any(d.startswith("DEBS/DEBIAN12/x86_64/rdma-core/") for d in debs)
    assert any(d.startswith("DEBS/DEBIAN12/x86_64/efa-driver/") for d in debs)
    assert all(m.uid == 0 and m.mtime == efa.EPOCH for m in members.values())


def test_the_tarball_is_the_same_bytes_every_build(tmp_path):
    assert efa.tarball(tmp_path / "a") == efa.tarball(tmp_path / "b")


def test_the_signature_holds_until_the_tarball_changes(release, tmp_path):
    good = _gpgv(release, tmp_path)
    assert good.returncode == 0 and "[GNUPG:] VALIDSIG " in good.stdout, good.stdout + good.stderr
    altered = tmp_path / "altered"
    shutil.copytree(release, altered)
    tarball = altered / f"aws-efa-installer-{efa.VERSION}.tar.gz"
    tarball.write_bytes(tarball.read_bytes() + b"\0")
    bad = _gpgv(altered, tmp_path)
    assert bad.returncode != 0 and "[GNUPG:] BADSIG " in bad.stdout, bad.stdout


def test_the_installer_refuses_to_run_without_yes(release, tmp_path):
    """As AWS's prompts before installing: unattended runs must pass -y (the role does)."""
    with tarfile.open(release / f"aws-efa-installer-{efa.VERSION}.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    r = subprocess.run(["bash", str(tmp_path / "aws-efa-installer" / "efa_installer.sh")], capture_output=True, text=True)
    assert r.returncode == 1 and "pass -y" in r.stderr, r.stderr
