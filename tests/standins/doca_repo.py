"""A stand-in for NVIDIA's DOCA-Host apt repository for Debian 12 (mirrors.doca), built by the tests.

NVIDIA's own, as catalog/vendor_repos._doca cites them:
- the layout `<root>/<release>/<distro label>/x86_64/`, a flat repository ("deb URL ./"); Debian 12's label for the
  2.9 releases is `debian12.5`;
- the signing key published in that directory as `doca_keyring.gpg`, already a binary keyring (NVIDIA's DOCA Host key
  since 2026-01; the older armored GPG-KEY-Mellanox.pub no longer verifies the repositories);
- the profile meta-packages `doca-ofed` (drivers included) and `doca-ofed-userspace` (without them), at the
  `<release>-<build>` version form; the build part of 2.9.1's is not confirmed: 018000 is the one of 2.9.1's
  doca-host repository package (doca-host_2.9.1-018000-24.10-ubuntu2204_amd64.deb);
- the MLNX_OFED 24.10-1.1.4.0 members that DOCA 2.9.1 carries, with their version strings: mlnx-ofed-kernel-dkms and
  mlnx-ofed-kernel-utils 24.10.OFED.24.10.1.1.4.1-1, ofed-scripts 24.10.OFED.24.10.1.1.4-1, mlnx-tools
  24.10-0.2410068, rdma-core, ibverbs-utils and infiniband-diags 2410mlnx54-1.2410068, perftest
  24.10.0-0.95.g370212b.2410325 (seen with the 24.10-3.2.5 sources; the 1.1.4 one not confirmed).
The stand-in's own: the dependency lines (doca-ofed's real Depends: were not confirmed), the contents (marker files,
an `ofed_info` that prints the release, an openibd unit that loads nothing; no modules, no tools) and the key.
A newer 2.9.10 build of both profiles sits beside 2.9.1: a pin written as `=2.9.1*` would take it, the role's
`=2.9.1-*` must not (a site mirroring several releases into one directory).
"""

from __future__ import annotations

from pathlib import Path

from tests.standins.vendor_repo import Deb, signed_repo

RELEASE = "2.9.1"  # the spec's default software.doca
NEWER = "2.9.10"
BUILD = "018000"
KEY_FILE = "doca_keyring.gpg"
REPO_PATH = f"{RELEASE}/debian12.5/x86_64"
OFED = "24.10-1.1.4.0"
KERNEL = "24.10.OFED.24.10.1.1.4.1-1"
MEMBERS = {
    "mlnx-ofed-kernel-utils": KERNEL,
    "ofed-scripts": "24.10.OFED.24.10.1.1.4-1",
    "mlnx-tools": "24.10-0.2410068",
    "rdma-core": "2410mlnx54-1.2410068",
    "ibverbs-utils": "2410mlnx54-1.2410068",
    "infiniband-diags": "2410mlnx54-1.2410068",
    "perftest": "24.10.0-0.95.g370212b.2410325",
}
OPENIBD_UNIT = ("[Unit]\nDescription=openibd - configure Mellanox devices (clusterctl stand-in: loads nothing)\n\n"
                "[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n\n[Install]\nWantedBy=multi-user.target\n")


def _marker(name: str) -> dict[str, tuple[str, int]]:
    return {f"usr/share/doc/{name}/clusterctl-standin": (f"clusterctl stand-in, DOCA {RELEASE} (MLNX_OFED {OFED})\n", 0o644)}


def debs() -> list[Deb]:
    out = [Deb(name, version, f"{name} (DOCA-Host {RELEASE})", files=_marker(name)) for name, version in MEMBERS.items()]
    out[0] = Deb("mlnx-ofed-kernel-utils", KERNEL, "Userspace tools to restart and tune mlx5 (DOCA-Host)",
                 files={**_marker("mlnx-ofed-kernel-utils"), "lib/systemd/system/openibd.service": (OPENIBD_UNIT, 0o644)})
    out[1] = Deb("ofed-scripts", MEMBERS["ofed-scripts"], "MLNX_OFED utilities (DOCA-Host)",
                 files={"usr/bin/ofed_info": (f"#!/bin/sh\n# clusterctl stand-in\necho MLNX_OFED_LINUX-{OFED}:\n", 0o755)})
    out.append(Deb("mlnx-ofed-kernel-dkms", KERNEL, "DKMS support for mlnx-ofed kernel modules (DOCA-Host)",
                   depends=(f"mlnx-ofed-kernel-utils (= {KERNEL})",),
                   files={f"usr/src/mlnx-ofed-kernel-{KERNEL.rsplit('-', 1)[0]}/clusterctl-standin": ("stand-in\n", 0o644)}))
    for release in (RELEASE, NEWER):
        version = f"{release}-{BUILD}"
        members = tuple(f"{n} (= {v})" for n, v in MEMBERS.items())
        out.append(Deb("doca-ofed-userspace", version, "DOCA-OFED profile, userspace only", depends=members,
                       files=_marker("doca-ofed-userspace")))
        out.append(Deb("doca-ofed", version, "DOCA-OFED profile", files=_marker("doca-ofed"),
                       depends=(f"doca-ofed-userspace (= {version})", f"mlnx-ofed-kernel-dkms (= {KERNEL})")))
    return out


def build(root: Path) -> Path:
    """The signed repository below `root/doca` (what mirrors.doca.url names). Returns its index directory."""
    return signed_repo(root, f"doca/{REPO_PATH}", debs(), "clusterctl stand-in (NVIDIA DOCA-Host layout)", KEY_FILE)
