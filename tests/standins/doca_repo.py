"""A stand-in for NVIDIA's DOCA-Host apt repositories for Debian 12 (mirrors.doca), built by the tests.

NVIDIA's own, as catalog/vendor_repos._doca cites them:
- the layout `<root>/<release>/<distro label>/x86_64/`, a flat repository ("deb URL ./") per release; Debian 12's
  label for the 2.9 releases is `debian12.5`;
- the signing key published in that directory as `doca_keyring.gpg`, already a binary keyring (NVIDIA's DOCA Host key
  since 2026-01; the older armored GPG-KEY-Mellanox.pub no longer verifies the repositories);
- the profile meta-packages `doca-ofed` (drivers included) and `doca-ofed-userspace` (without them), at the
  `<release>-<build>` version form, the build part taken from each release's doca-host repository package
  (doca-host_2.9.1-018000-24.10-ubuntu2204_amd64.deb, doca-host_2.9.3-021000-24.10-debian125_amd64.deb);
- the MLNX_OFED members each release carries, with their version strings: 2.9.1 is MLNX_OFED 24.10-1.1.4.0
  (mlnx-ofed-kernel-dkms and -utils 24.10.OFED.24.10.1.1.4.1-1, ofed-scripts 24.10.OFED.24.10.1.1.4-1), 2.9.3 is
  24.10-3.2.5.0 (mlnx-ofed-kernel-dkms 24.10.OFED.24.10.3.2.5.1-1); both carry mlnx-tools 24.10-0.2410068, and
  rdma-core, ibverbs-utils and infiniband-diags 2410mlnx54-1.2410068, perftest 24.10.0-0.95.g370212b.2410325 (seen
  with the 24.10-3.2.5 sources). Not confirmed: 2.9.3's ofed-scripts (named after its kernel package's form) and the
  members of 2.9.1 that were only seen for 2.9.3 (perftest), and whether 2.9.3 changed rdma-core.
The stand-in's own: the dependency lines (doca-ofed's real Depends: were not found; here each profile depends on its
members' exact versions), the contents (marker files, an `ofed_info` that prints the release, an openibd unit that
loads nothing; no modules, no tools) and the key (one per release directory).
"""

from __future__ import annotations

from pathlib import Path

from tests.standins.vendor_repo import Deb, signed_repo

RELEASE = "2.9.1"  # the spec's default software.doca
NEXT = "2.9.3"  # the release a pin change moves to
KEY_FILE = "doca_keyring.gpg"
LABEL = "debian12.5/x86_64"
# release -> (doca-ofed build, MLNX_OFED release, kernel package version, ofed-scripts version)
RELEASES = {
    RELEASE: ("018000", "24.10-1.1.4.0", "24.10.OFED.24.10.1.1.4.1-1", "24.10.OFED.24.10.1.1.4-1"),
    NEXT: ("021000", "24.10-3.2.5.0", "24.10.OFED.24.10.3.2.5.1-1", "24.10.OFED.24.10.3.2.5-1"),
}
SHARED = {  # the same in both releases
    "mlnx-tools": "24.10-0.2410068",
    "rdma-core": "2410mlnx54-1.2410068",
    "ibverbs-utils": "2410mlnx54-1.2410068",
    "infiniband-diags": "2410mlnx54-1.2410068",
    "perftest": "24.10.0-0.95.g370212b.2410325",
}
OPENIBD_UNIT = ("[Unit]\nDescription=openibd - configure Mellanox devices (clusterctl stand-in: loads nothing)\n\n"
                "[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n\n[Install]\nWantedBy=multi-user.target\n")


def repo_path(release: str) -> str:
    """Below mirrors.doca: the catalog's `{version}/debian12.5/x86_64` for Debian 12."""
    return f"{release}/{LABEL}"


def version(release: str) -> str:
    return f"{release}-{RELEASES[release][0]}"


def members(release: str) -> dict[str, str]:
    """The userspace profile's members and versions (doca-ofed adds mlnx-ofed-kernel-dkms at `kernel`)."""
    _, _, kernel, scripts = RELEASES[release]
    return {"mlnx-ofed-kernel-utils": kernel, "ofed-scripts": scripts, **SHARED}


def _marker(name: str, release: str) -> dict[str, tuple[str, int]]:
    ofed = RELEASES[release][1]
    return {f"usr/share/doc/{name}/clusterctl-standin": (f"clusterctl stand-in, DOCA {release} (MLNX_OFED {ofed})\n", 0o644)}


def debs(release: str) -> list[Deb]:
    _, ofed, kernel, scripts = RELEASES[release]
    out = [Deb(name, v, f"{name} (DOCA-Host {release})", files=_marker(name, release)) for name, v in SHARED.items()]
    out += [
        Deb("mlnx-ofed-kernel-utils", kernel, "Userspace tools to restart and tune mlx5 (DOCA-Host)",
            files={**_marker("mlnx-ofed-kernel-utils", release), "lib/systemd/system/openibd.service": (OPENIBD_UNIT, 0o644)}),
        Deb("ofed-scripts", scripts, "MLNX_OFED utilities (DOCA-Host)",
            files={"usr/bin/ofed_info": (f"#!/bin/sh\n# clusterctl stand-in\necho MLNX_OFED_LINUX-{ofed}:\n", 0o755)}),
        Deb("mlnx-ofed-kernel-dkms", kernel, "DKMS support for mlnx-ofed kernel modules (DOCA-Host)",
            depends=(f"mlnx-ofed-kernel-utils (= {kernel})",),
            files={f"usr/src/mlnx-ofed-kernel-{kernel.rsplit('-', 1)[0]}/clusterctl-standin": ("stand-in\n", 0o644)}),
        Deb("doca-ofed-userspace", version(release), "DOCA-OFED profile, userspace only",
            depends=tuple(f"{n} (= {v})" for n, v in members(release).items()), files=_marker("doca-ofed-userspace", release)),
        Deb("doca-ofed", version(release), "DOCA-OFED profile", files=_marker("doca-ofed", release),
            depends=(f"doca-ofed-userspace (= {version(release)})", f"mlnx-ofed-kernel-dkms (= {kernel})")),
    ]
    return out


def build(root: Path) -> Path:
    """The signed repositories of both releases below `root/doca` (what mirrors.doca.url names). Returns RELEASE's
    index directory."""
    for release in (NEXT, RELEASE):
        index = signed_repo(root, f"doca/{repo_path(release)}", debs(release),
                            f"clusterctl stand-in (NVIDIA DOCA-Host {release} layout)", KEY_FILE)
    return index
