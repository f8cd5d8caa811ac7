"""The stand-in vendor repository itself, without lab nodes: reproducible packages, and a real apt (a private state
directory on this machine, over HTTP on 127.0.0.1) that accepts it only with its own key and resolves the pins the
roles ask for to the versions the lab test expects."""

from __future__ import annotations

import hashlib
import shutil
import subprocess

import pytest

from tests.standins import vendor_repo as vr

pytestmark = pytest.mark.skipif(not (shutil.which("apt-ftparchive") and shutil.which("gpg")),
                                reason="apt-ftparchive (apt-utils) and gpg (gnupg) build the repository")


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("vendor") / "repos"
    vr.build(root)
    with vr.serve(root, "127.0.0.1") as url:
        yield root, url


def _apt(tmp_path, url, key, *args, program="apt-get", path=vr.REPO_PATH, suite="/"):
    """apt-get against only the stand-in repository, with a private state (this machine's apt is not touched)."""
    for d in ("state/lists/partial", "cache/archives/partial", "etc/sources.list.d", "etc/preferences.d"):
        (tmp_path / d).mkdir(parents=True, exist_ok=True)
    (tmp_path / "status").write_text("")
    (tmp_path / "etc/sources.list").write_text(f"deb [signed-by={key}] {url}/{path}/ {suite}\n")
    opts = ["-o", f"Dir::State={tmp_path / 'state'}", "-o", f"Dir::State::status={tmp_path / 'status'}",
            "-o", f"Dir::Cache={tmp_path / 'cache'}", "-o", f"Dir::Etc={tmp_path / 'etc'}",
            "-o", "Dir::Etc::Trusted=/nonexistent", "-o", "Dir::Etc::TrustedParts=/nonexistent", "-o", "APT::Architecture=amd64"]
    return subprocess.run([program, *opts, *args], capture_output=True, text=True, timeout=120)


def _keyring(root, tmp_path):
    key = tmp_path / "key.gpg"
    subprocess.run(["gpg", "--batch", "--yes", "--dearmor", "-o", str(key), str(root / vr.REPO_PATH / vr.KEY_FILE)],
                   check=True)
    return key


def test_layout_is_the_vendors(repo):
    root, _ = repo
    index = root / vr.REPO_PATH
    assert {p.name for p in index.iterdir()} >= {"InRelease", "Release.gpg", "Release", "Packages", vr.KEY_FILE}
    names = {p.name for p in index.glob("*.deb")}
    for expected in ("nvidia-open-570_570.172.08-1_amd64.deb", "nvidia-fabricmanager-570_570.172.08-1_amd64.deb",
                     "libnvidia-nscq-570_570.172.08-1_amd64.deb", "nvidia-open-575_575.57.08-1_amd64.deb",
                     "nvidia-fabricmanager-575_575.57.08-1_amd64.deb", "nvidia-open-570_570.211.01-1_amd64.deb",
                     "cuda-toolkit-12-8_12.8.1-1_amd64.deb", "libnccl2_2.26.2-1+cuda12.8_amd64.deb",
                     "libnccl-dev_2.26.2-1+cuda12.8_amd64.deb"):
        assert expected in names, expected
    # The newer 570 driver has no Fabric Manager: the mismatch the lab test relies on.
    assert not any(n.startswith("nvidia-fabricmanager-570_570.211.01") for n in names)


def test_packages_are_reproducible(tmp_path):
    for deb in (vr.driver_debs("570.172.08", True)[2], vr.cuda_debs()[1]):
        digests = set()
        for i in range(2):
            out, work = tmp_path / f"out{i}", tmp_path / f"work{i}"
            out.mkdir(exist_ok=True)
            work.mkdir(exist_ok=True)
            digests.add(hashlib.sha256(vr.build_deb(deb, out, work).read_bytes()).hexdigest())
        assert len(digests) == 1, deb.name


def test_apt_accepts_it_signed_and_resolves_the_pins(repo, tmp_path):
    root, url = repo
    r = _apt(tmp_path, url, _keyring(root, tmp_path), "update")
    assert r.returncode == 0 and "NO_PUBKEY" not in r.stderr, r.stdout + r.stderr
    # A package every branch shares (nvidia-persistenced) resolves to the newest branch's unless pinned too: apt
    # refuses the driver alone. The role pins it with the driver.
    r = _apt(tmp_path, url, _keyring(root, tmp_path), "install", "-s", "nvidia-open-570=570.172.08-*")
    assert r.returncode != 0 and "nvidia-persistenced (= 570.172.08-1) but 575.57.08-1" in r.stdout, r.stdout + r.stderr
    # What the nvidia_driver role asks for (driver, Fabric Manager, NSCQ at the driver's version, any revision).
    r = _apt(tmp_path, url, _keyring(root, tmp_path), "install", "-s", "nvidia-open-570=570.172.08-*",
             "nvidia-persistenced=570.172.08-*", "nvidia-fabricmanager-570=570.172.08-*", "libnvidia-nscq-570=570.172.08-*",
             "libnccl2=2.26.2-1+cuda12.8", "libnccl-dev=2.26.2-1+cuda12.8", "cuda-toolkit-12-8")
    assert r.returncode == 0, r.stdout + r.stderr
    inst = sorted(line.split()[1] + " " + line.split()[2] for line in r.stdout.splitlines() if line.startswith("Inst "))
    assert inst == ["cuda-toolkit-12-8 (12.8.1-1", "libnccl-dev (2.26.2-1+cuda12.8", "libnccl2 (2.26.2-1+cuda12.8",
                    "libnvidia-nscq-570 (570.172.08-1", "nvidia-fabricmanager-570 (570.172.08-1",
                    "nvidia-open-570 (570.172.08-1", "nvidia-persistenced (570.172.08-1"], inst
    # Unpinned, apt's candidate is the newer driver, which has no Fabric Manager of its version.
    r = _apt(tmp_path, url, _keyring(root, tmp_path), "policy", "nvidia-open-570", "nvidia-fabricmanager-570",
             program="apt-cache")
    assert "Candidate: 570.211.01-1" in r.stdout and "Candidate: 570.172.08-1" in r.stdout, r.stdout + r.stderr


def test_apt_refuses_it_with_another_key(repo, tmp_path):
    root, url = repo
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    subprocess.run(["gpg", "--homedir", str(home), "--batch", "--passphrase", "", "--quick-generate-key", "other <o@invalid>",
                    "rsa2048", "sign", "never"], check=True, capture_output=True)
    other = tmp_path / "other.gpg"
    subprocess.run(["gpg", "--homedir", str(home), "--batch", "-o", str(other), "--export"], check=True)
    vr.stop_agent(home)
    r = _apt(tmp_path, url, other, "update")
    assert "NO_PUBKEY" in r.stdout + r.stderr or "not signed" in r.stdout + r.stderr, r.stdout + r.stderr


def test_doca_stand_in_is_laid_out_as_the_catalog_says_and_its_binary_keyring_verifies_it(tmp_path):
    """NVIDIA's DOCA layout below mirrors.doca (catalog row for debian12), one repository per release, the key a binary
    keyring apt takes as it is; the role's pins resolve to the release's build, and doca-ofed alone is refused (apt
    takes the newest userspace profile it knows: the role pins both profiles where the drivers go in)."""
    from clusterctl.catalog import vendor_repos as catalog
    from tests.standins import doca_repo as dr

    root = tmp_path / "repos"
    dr.build(root)
    row = catalog.row("doca", "debian12")
    assert row is not None and row.key_file == dr.KEY_FILE
    for release in (dr.RELEASE, dr.NEXT):
        assert row.path.format(version=release) == f"{dr.repo_path(release)}/"
        assert not (root / "doca" / dr.repo_path(release) / dr.KEY_FILE).read_bytes().startswith(b"-----BEGIN")
    with vr.serve(root, "127.0.0.1") as url:
        apt = tmp_path / "apt"
        key = root / "doca" / dr.repo_path(dr.RELEASE) / dr.KEY_FILE
        kw = {"path": f"doca/{dr.repo_path(dr.RELEASE)}", "suite": "./"}
        r = _apt(apt, url, key, "update", **kw)
        assert r.returncode == 0 and "NO_PUBKEY" not in r.stderr, r.stdout + r.stderr
        r = _apt(apt, url, key, "install", "-s", f"doca-ofed-userspace={dr.RELEASE}-*", **kw)
        assert r.returncode == 0 and f"Inst doca-ofed-userspace ({dr.version(dr.RELEASE)}" in r.stdout, r.stdout + r.stderr
        assert "mlnx-ofed-kernel-dkms" not in r.stdout  # the userspace profile leaves the kernel modules out
        r = _apt(apt, url, key, "install", "-s", f"doca-ofed={dr.RELEASE}-*", f"doca-ofed-userspace={dr.RELEASE}-*", **kw)
        kernel = dr.RELEASES[dr.RELEASE][2]
        assert r.returncode == 0 and f"Inst mlnx-ofed-kernel-dkms ({kernel}" in r.stdout, r.stdout + r.stderr
