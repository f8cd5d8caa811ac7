"""A stand-in for a site's own signed Lustre client build for Debian 12 (mirrors.lustre): Whamcloud builds no Debian
client, so an air-gapped site builds Lustre's Debian packaging itself and serves it as `<mirror>/debian12/` (the
layout catalog/vendor_repos.SITE_BUILD_PATH names), a flat repository signed with the site's key.

Lustre's own: the package names of its debian/control (lustre-client-utils, lustre-client-modules-dkms; its .dsc
"Binary:" line) and the `<release>-1` version form. The stand-in's own: the contents (marker files, no tools and no
module source) and the key. A newer 2.15.60-1 build of the utilities sits beside 2.15.6-1: a pin written as
`=2.15.6*` would take it, the role's `=2.15.6-*` must not.
"""

from __future__ import annotations

from pathlib import Path

from tests.standins.vendor_repo import Deb, signed_repo

RELEASE = "2.15.6"  # the spec's default software.lustre_client
NEWER = "2.15.60"
KEY_FILE = "lustre-site.asc"
REPO_PATH = "debian12"


def debs() -> list[Deb]:
    out = []
    for release in (RELEASE, NEWER):
        marker = f"clusterctl stand-in, Lustre client {release}\n"
        out.append(Deb("lustre-client-utils", f"{release}-1", "Userspace utilities for the Lustre filesystem (client)",
                       files={"usr/share/doc/lustre-client-utils/clusterctl-standin": (marker, 0o644)}))
    out.append(Deb("lustre-client-modules-dkms", f"{RELEASE}-1", "Lustre Linux kernel module (DKMS)",
                   depends=(f"lustre-client-utils (= {RELEASE}-1)",),
                   files={f"usr/src/lustre-client-modules-{RELEASE}/clusterctl-standin": (
                       f"clusterctl stand-in, Lustre client {RELEASE}\n", 0o644)}))
    return out


def build(root: Path) -> Path:
    """The signed repository below `root/lustre` (what mirrors.lustre.url names). Returns its index directory."""
    return signed_repo(root, f"lustre/{REPO_PATH}", debs(), "clusterctl stand-in (a site's Lustre client build)", KEY_FILE)
