"""The repository of every vendor component on every supported distro, as the vendors publish them.

Each row of EXPECTED cites the page it was read from (the vendor's repository index or documentation). Versions are
the spec's defaults (CUDA repo, DOCA 2.9.1, Lustre 2.15.6, EFA installer 1.38.1). None: the vendor builds nothing for
that distro (or, for Lustre on Ubuntu, publishes no signing key that could be confirmed), so no repository is added
without a mirror.
"""

from __future__ import annotations

import pytest

from clusterctl.catalog import vendor_repos as vr
from clusterctl.compile.vendor import resolve
from clusterctl.spec.cluster import ClusterSpec

CUDA = "https://developer.download.nvidia.com/compute/cuda/repos"
DOCA = "https://linux.mellanox.com/public/repo/doca"
EFA = "https://efa-installer.amazonaws.com"

# (component, os): (url, key_url, kind, the page the row was checked against)
EXPECTED = {
    ("cuda", "debian12"): (f"{CUDA}/debian12/x86_64/", f"{CUDA}/debian12/x86_64/3bf863cc.pub", "apt",
                           "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"),
    ("cuda", "ubuntu2204"): (f"{CUDA}/ubuntu2204/x86_64/", f"{CUDA}/ubuntu2204/x86_64/3bf863cc.pub", "apt",
                             "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"),
    ("cuda", "ubuntu2404"): (f"{CUDA}/ubuntu2404/x86_64/", f"{CUDA}/ubuntu2404/x86_64/3bf863cc.pub", "apt",
                             "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64"),
    # DOCA-Host: <release>/<distro label>/x86_64/, a flat repository with its binary keyring doca_keyring.gpg in the
    # same directory: NVIDIA's hpc-container-maker (hpccm/building_blocks/doca_ofed.py) writes the repository line,
    # Azure/AgentBaker PR #9256 fetches doca_keyring.gpg there after NVIDIA's 2026-01 key rotation. Debian 12's
    # label for 2.9 is debian12.5 (ZJUSCT/jenkins.clusters.zjusct.io debian/modules-disabled/02-doca-apt.sh, for
    # 2.9.0); that row stays unconfirmed for 3.x (validate warns).
    ("doca", "debian12"): (f"{DOCA}/2.9.1/debian12.5/x86_64/", f"{DOCA}/2.9.1/debian12.5/x86_64/doca_keyring.gpg", "apt",
                           "https://github.com/ZJUSCT/jenkins.clusters.zjusct.io/blob/main/debian/modules-disabled/02-doca-apt.sh"),
    ("doca", "ubuntu2204"): (f"{DOCA}/2.9.1/ubuntu22.04/x86_64/", f"{DOCA}/2.9.1/ubuntu22.04/x86_64/doca_keyring.gpg",
                             "apt", "https://github.com/NVIDIA/hpc-container-maker/blob/master/hpccm/building_blocks/doca_ofed.py"),
    ("doca", "ubuntu2404"): (f"{DOCA}/2.9.1/ubuntu24.04/x86_64/", f"{DOCA}/2.9.1/ubuntu24.04/x86_64/doca_keyring.gpg",
                             "apt", "https://github.com/Azure/AgentBaker/pull/9256"),
    # Whamcloud: no Debian client builds (issue 16's review); Ubuntu client directory without a confirmed key.
    ("lustre", "debian12"): None,
    ("lustre", "ubuntu2204"): None,
    ("lustre", "ubuntu2404"): None,
    # EFA installer URL: https://github.com/aws/aws-parallelcluster-cookbook/pull/1481.patch; distros supported:
    # https://docs.amazonaws.cn/en_us/AWSEC2/latest/UserGuide/efa-changelog.md (Debian 10, Ubuntu 20.04, Debian 11
    # dropped; Debian 12 and Ubuntu 22.04/24.04 remain). Its key, aws-efa-installer.key beside the tarballs, and the
    # detached <tarball>.sig: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start-nccl.html.
    ("efa", "debian12"): (f"{EFA}/aws-efa-installer-1.38.1.tar.gz", f"{EFA}/aws-efa-installer.key", "tarball",
                          "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start-nccl.html"),
    ("efa", "ubuntu2204"): (f"{EFA}/aws-efa-installer-1.38.1.tar.gz", f"{EFA}/aws-efa-installer.key", "tarball",
                            "https://docs.amazonaws.cn/en_us/AWSEC2/latest/UserGuide/efa-changelog.md"),
    ("efa", "ubuntu2404"): (f"{EFA}/aws-efa-installer-1.38.1.tar.gz", f"{EFA}/aws-efa-installer.key", "tarball",
                            "https://docs.amazonaws.cn/en_us/AWSEC2/latest/UserGuide/efa-changelog.md"),
    # SchedMD publishes no apt repository: the distro's Slurm, or a site mirror.
    ("slurm", "debian12"): None,
    ("slurm", "ubuntu2204"): None,
    ("slurm", "ubuntu2404"): None,
}


def _spec(**mirrors) -> ClusterSpec:
    return ClusterSpec.model_validate({
        "name": "t", "pools": [{"name": "gpu", "provider": "local", "count": 1}],
        "scheduler": {"slurm": {"partitions": [{"name": "p", "pools": ["gpu"]}]}}, "mirrors": mirrors,
    })


def test_table_covers_every_component_and_distro():
    assert set(vr.TABLE) == set(EXPECTED) == {(c, o) for c in ("cuda", "doca", "lustre", "efa", "slurm") for o in vr.OS_NAMES}


@pytest.mark.parametrize("key", sorted(EXPECTED), ids=lambda k: f"{k[0]}-{k[1]}")
def test_upstream_repository(key):
    repo = resolve(_spec(), *key)
    want = EXPECTED[key]
    if want is None:
        assert repo is None
        return
    url, key_url, kind, source = want
    assert (repo.url, repo.key_url, repo.kind, repo.mirror) == (url, key_url, kind, False)
    assert source in vr.row(*key).source  # the catalog cites the same page


def test_every_catalog_row_cites_a_page():
    for key, row in vr.TABLE.items():
        assert row is None or row.source.startswith("https://"), key


@pytest.mark.parametrize("os_name", vr.OS_NAMES)
def test_a_mirror_keeps_the_vendor_layout_below_its_url(os_name):
    spec = _spec(cuda={"url": "http://10.213.0.1:8080/nvidia/", "key_url": "http://10.213.0.1:8080/keys/cuda.asc"})
    repo = resolve(spec, "cuda", os_name)
    assert repo.url == f"http://10.213.0.1:8080/nvidia/{os_name}/x86_64/"
    assert repo.key_url == "http://10.213.0.1:8080/keys/cuda.asc" and repo.mirror


def test_slurm_mirror_is_laid_out_per_distro():
    spec = _spec(slurm={"url": "https://mirror.example.com/slurm", "key_url": "https://mirror.example.com/slurm.asc"})
    assert resolve(spec, "slurm", "ubuntu2204").url == "https://mirror.example.com/slurm/ubuntu2204/"


def test_a_site_build_where_the_vendor_has_none():
    spec = _spec(lustre={"url": "https://mirror.example.com/lustre", "key_url": "https://mirror.example.com/lustre.asc"})
    assert resolve(spec, "lustre", "debian12").url == "https://mirror.example.com/lustre/debian12/"


def test_a_mirror_without_a_key_adds_no_repository():
    assert resolve(_spec(lustre={"url": "https://mirror.example.com/lustre"}), "lustre", "ubuntu2204") is None


def test_the_efa_installer_is_verified_against_aws_key_unless_the_site_names_its_own():
    """AWS's key (fingerprint from the EC2 User Guide's EFA install steps) is pinned wherever the key is AWS's: at
    AWS, or beside the tarballs on a mirror that copies them; a mirror naming its own key_url is the site's to sign."""
    aws = resolve(_spec(), "efa", "debian12")
    assert aws.key_fingerprint == "4E9091BCBB97A96B26B15E59A05480B1DD2D3CCC"
    copied = resolve(_spec(efa={"url": "https://mirror.example.com/efa/"}), "efa", "debian12")
    assert copied.url == "https://mirror.example.com/efa/aws-efa-installer-1.38.1.tar.gz"
    assert copied.key_url == "https://mirror.example.com/efa/aws-efa-installer.key"
    assert copied.key_fingerprint == aws.key_fingerprint and copied.mirror
    own = resolve(_spec(efa={"url": "https://mirror.example.com/efa", "key_url": "https://mirror.example.com/site.asc"}),
                  "efa", "debian12")
    assert own.key_url == "https://mirror.example.com/site.asc" and own.key_fingerprint is None
    # The site's key, even where it sits under AWS's file name: named by the site, so not pinned to AWS's.
    renamed = resolve(_spec(efa={"url": "https://m.example.com/efa", "key_url": "https://m.example.com/efa/aws-efa-installer.key"}),
                      "efa", "debian12")
    assert renamed.key_fingerprint is None
    assert resolve(_spec(), "cuda", "debian12").key_fingerprint is None  # apt repositories: keyring per repository
