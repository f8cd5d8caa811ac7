"""Vendor repositories by component and distro: where each vendor publishes its packages, and the signing key.

One table, read by compile/vendor.py (which applies `mirrors:`) and validate/vendor.py (which refuses combinations
the vendor does not build). A mirror replaces `root`; `path` (the vendor's own layout below it) is kept, so an
internal mirror of the vendor's tree, or the test suite's stand-in repository, works unchanged.

Each row names the page it was checked against (`source`). `confirmed=False` marks a row whose exact path could
not be confirmed there: validate warns about it instead of trusting it silently.
"""

from __future__ import annotations

from dataclasses import dataclass

OS_NAMES: tuple[str, ...] = ("debian12", "ubuntu2204", "ubuntu2404")

# The Slurm release each distro ships (Debian 12: 22.05, see DESIGN.md; Ubuntu 24.04: 23.11 per issue 16's review;
# Ubuntu 22.04: 21.08, from Ubuntu's archive, not re-checked in this session's corpus).
DISTRO_SLURM: dict[str, str] = {"debian12": "22.05", "ubuntu2204": "21.08", "ubuntu2404": "23.11"}

CUDA_INDEX = {  # each index lists 3bf863cc.pub, InRelease, Release.gpg (a signed repository with suite "/")
    "debian12": "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/",
    "ubuntu2204": "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/",
    "ubuntu2404": "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64",
}
# NVIDIA's own container builder writes `deb [signed-by=...] <root>/<release>/<label>/x86_64/ ./` (ubuntu22.04,
# ubuntu24.04); Azure's AKS node image builder fetches doca_keyring.gpg from that directory after the key rotation.
DOCA_LAYOUT_SOURCE = "https://github.com/NVIDIA/hpc-container-maker/blob/master/hpccm/building_blocks/doca_ofed.py"
DOCA_KEY_SOURCE = "https://github.com/Azure/AgentBaker/pull/9256"
# Debian 12's label for the 2.9 releases is debian12.5 (a site script's URL for 2.9.0; DOCA 2.9.3's
# doca-host_..._debian125 repository package); DOCA 2.5.2's release notes first list Debian 12.5 for DOCA-Host.
DOCA_DEBIAN_SOURCE = "https://github.com/ZJUSCT/jenkins.clusters.zjusct.io/blob/main/debian/modules-disabled/02-doca-apt.sh"
DOCA_GUIDE = "https://docs.nvidia.com/doca/sdk/DOCA-Host+Installation+and+Upgrade"
# The installer URL: AWS ParallelCluster's cookbook; the distros: AWS's EFA release notes, which drop Debian 10
# (1.40.0), Ubuntu 20.04 (1.43.0) and Debian 11 (1.51.0), leaving Debian 12 and Ubuntu 22.04/24.04 supported.
EFA_SOURCE = "https://github.com/aws/aws-parallelcluster-cookbook/pull/1481.patch"
EFA_OS_SOURCE = "https://docs.amazonaws.cn/en_us/AWSEC2/latest/UserGuide/efa-changelog.md"
# The installer's signing key beside the tarballs, a detached `<tarball>.sig` per release, and the key's fingerprint:
# AWS's EC2 User Guide, "Get started with EFA and NCCL", step "Install the EFA software" (optional verification).
EFA_KEY_SOURCE = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start-nccl.html"
EFA_KEY_FILE = "aws-efa-installer.key"
EFA_KEY_FINGERPRINT = "4E9091BCBB97A96B26B15E59A05480B1DD2D3CCC"
LUSTRE_SOURCE = "https://web-docs.gsi.de/~vpenso/notes/posts/hpc/storage/lustre.html"


@dataclass(frozen=True)
class VendorRepo:
    component: str
    os: str
    root: str  # the vendor's host and top directory: what `mirrors.<component>.url` replaces
    path: str  # below root; may hold {version} (the component's pinned version from software:)
    key_file: str | None  # the signing key's file name (apt: inside path; tarball: beside it, at root); None: the
    # vendor publishes none we could confirm
    suite: str = "./"  # flat repositories ("deb URL ./"); CUDA's uses "/"
    kind: str = "apt"  # apt | tarball (EFA installer)
    confirmed: bool = True
    source: str = ""
    note: str = ""
    key_fingerprint: str | None = None  # tarball: the vendor key's primary fingerprint, pinned (its own key only)


def _cuda(os: str) -> VendorRepo:
    return VendorRepo(
        "cuda", os, "https://developer.download.nvidia.com/compute/cuda/repos", f"{os}/x86_64/", "3bf863cc.pub", suite="/",
        source=CUDA_INDEX[os],
    )


def _doca(os: str, label: str, confirmed: bool, note: str = "") -> VendorRepo:
    # A flat repository per release, distro label (with a dot) and architecture; its key in the same directory as
    # doca_keyring.gpg, a binary keyring (NVIDIA's DOCA Host key since 2026-01, fingerprint 70454E6BF5D9C2D3B78709E8DC
    # 726C5E41B9CC50; the older GPG-KEY-Mellanox.pub no longer verifies these repositories).
    return VendorRepo(
        "doca", os, "https://linux.mellanox.com/public/repo/doca", f"{{version}}/{label}/x86_64/", "doca_keyring.gpg",
        confirmed=confirmed, source=f"{DOCA_LAYOUT_SOURCE} {DOCA_KEY_SOURCE}" + (f" {DOCA_DEBIAN_SOURCE}" if os == "debian12" else ""),
        note=note,
    )


def _efa(os: str) -> VendorRepo:
    return VendorRepo(
        "efa", os, "https://efa-installer.amazonaws.com", "aws-efa-installer-{version}.tar.gz", EFA_KEY_FILE,
        kind="tarball", source=f"{EFA_SOURCE} {EFA_OS_SOURCE} {EFA_KEY_SOURCE}", key_fingerprint=EFA_KEY_FINGERPRINT,
    )


TABLE: dict[tuple[str, str], VendorRepo | None] = {
    ("cuda", "debian12"): _cuda("debian12"),
    ("cuda", "ubuntu2204"): _cuda("ubuntu2204"),
    ("cuda", "ubuntu2404"): _cuda("ubuntu2404"),
    ("doca", "debian12"): _doca("debian12", "debian12.5", confirmed=False,
                                note="debian12.5 was seen for the 2.9 releases; the label of 3.x releases was not"),
    ("doca", "ubuntu2204"): _doca("ubuntu2204", "ubuntu22.04", confirmed=True),
    ("doca", "ubuntu2404"): _doca("ubuntu2404", "ubuntu24.04", confirmed=True),
    # Whamcloud builds Lustre clients for EL and Ubuntu, not Debian (issue 16's review); its Ubuntu client directory is
    # a flat directory the old role could only add as [trusted=yes]: no signing key was confirmed, so only a signed
    # mirror (mirrors.lustre with key_url) is accepted.
    ("lustre", "debian12"): None,
    ("lustre", "ubuntu2204"): VendorRepo(
        "lustre", "ubuntu2204", "https://downloads.whamcloud.com/public/lustre", "lustre-{version}/ubuntu2204/client/",
        None, confirmed=False, source=LUSTRE_SOURCE, note="packages from downloads.whamcloud.com; no signing key confirmed",
    ),
    ("lustre", "ubuntu2404"): None,
    # The EFA installer is a tarball, not a repository: verified with its detached signature against AWS's key.
    ("efa", "debian12"): _efa("debian12"),
    ("efa", "ubuntu2204"): _efa("ubuntu2204"),
    ("efa", "ubuntu2404"): _efa("ubuntu2404"),
    # SchedMD publishes no apt repository: Slurm comes from the distro, or from a site mirror (mirrors.slurm) laid out
    # as <url>/<os>/ (SITE_BUILD_PATH) where the pinned release is not the distro's.
    ("slurm", "debian12"): None,
    ("slurm", "ubuntu2204"): None,
    ("slurm", "ubuntu2404"): None,
}

# Where the vendor builds nothing for a distro (Slurm anywhere, Lustre on Debian), a mirror holds the site's own signed
# build as a flat repository per distro: <url>/<os>/.
SITE_BUILD_PATH = "{os}/"


def row(component: str, os: str) -> VendorRepo | None:
    return TABLE[(component, os)]


def keyring_name(component: str) -> str:
    """/usr/share/keyrings/<name>.gpg: one per component, whichever URL it came from."""
    return f"clusterctl-{component}"
