"""Rules about vendor software: what each vendor builds for which distro, signed mirrors, the driver flavour."""

from __future__ import annotations

from collections.abc import Iterator

from clusterctl.catalog import vendor_repos as vr
from clusterctl.core.findings import Finding
from clusterctl.core.providers import traits
from clusterctl.spec import effective as eff
from clusterctl.spec.cluster import ClusterSpec
from clusterctl.spec.pools import Pool
from clusterctl.spec.vendor_needs import components
from clusterctl.spec.vendor import COMPONENTS
from clusterctl.validate.base import Validator

VENDOR = {"cuda": "NVIDIA (CUDA repository)", "doca": "NVIDIA (DOCA-Host)", "lustre": "Whamcloud (Lustre client)",
          "efa": "AWS (EFA installer)", "slurm": "SchedMD (no apt repository)"}

# NVIDIA's driver installation guide, "Kernel Modules": open modules exist from the 515 series and need Turing or
# newer (every NVIDIA GPU in the catalog is); data center GPUs from Grace Hopper and Blackwell on support only them
# (NVIDIA, "NVIDIA Transitions Fully Towards Open-Source GPU Kernel Modules", as quoted by wiki.nixos.org/wiki/NVIDIA).
OPEN_ONLY_GPUS = ("b200",)
OPEN_FIRST_BRANCH = 515


def _groups(spec: ClusterSpec) -> Iterator[tuple[str, tuple[str | int, ...], str, Pool | None]]:
    """(node group label, yaml path of its os, os, pool or None for the controller)."""
    yield "controller", ("controller", "os"), spec.controller.os, None
    for i, p in enumerate(spec.pools):
        yield f"pool {p.name}", ("pools", i, "os"), p.os, p


class VendorBuildsForDistro(Validator):
    """A component a node group needs, on a distro its vendor does not build for (and no mirror given)."""

    code = "vendor-distro"

    def check(self, spec: ClusterSpec) -> Iterator[Finding]:
        for label, where, os, pool in _groups(spec):
            lab = traits(pool if pool is not None else spec.controller).lab
            for c in components(spec, pool):
                mirror = spec.mirrors.get(c)
                if lab and mirror is None:
                    continue  # lab nodes install vendor packages only through mirrors:
                row = vr.row(c, os)
                if row is None and mirror is None:
                    if c == "slurm":
                        yield self.error(
                            ("software", "slurm"),
                            f"{label} runs {os}, which ships Slurm {vr.DISTRO_SLURM[os]}, not {spec.software.slurm}: "
                            "give mirrors.slurm (a signed repository of that release) or pin the distro's release",
                        )
                    else:
                        yield self.error(where, f"{VENDOR[c]} builds no {c} packages for {os} ({label} needs {c}); "
                                                f"use another os or give mirrors.{c} with your own build")
                elif row is not None and not row.confirmed and mirror is None:
                    yield self.warning(where, f"the {c} repository for {os} follows the vendor's layout but could not be "
                                              f"confirmed against its documentation ({row.note}); check {row.source}")


class MirrorsSigned(Validator):
    """Every apt repository is signed: a mirror names its key, and an upstream without a published key needs a mirror.
    An EFA mirror may leave key_url out: it then copies AWS's release, key included, and AWS's fingerprint is pinned."""

    code = "repo-unsigned"

    def check(self, spec: ClusterSpec) -> Iterator[Finding]:
        for c in COMPONENTS:
            m = spec.mirrors.get(c)
            if m is not None and m.key_url is None and c != "efa":
                yield self.error(("mirrors", c, "key_url"), f"mirrors.{c} has no key_url: unsigned repositories are refused")
        for label, _where, os, pool in _groups(spec):
            lab = traits(pool if pool is not None else spec.controller).lab
            for c in components(spec, pool):
                row = vr.row(c, os)
                if lab or spec.mirrors.get(c) is not None or row is None or row.kind != "apt" or row.key_file:
                    continue
                yield self.error(
                    ("mirrors", c),
                    f"{label} needs {c} on {os}, and {VENDOR[c]} publishes no signing key for {row.root} that could be "
                    f"confirmed: give mirrors.{c} (url and key_url) pointing at a signed mirror",
                )


class DriverFlavor(Validator):
    code = "driver-flavor"

    def check(self, spec: ClusterSpec) -> Iterator[Finding]:
        flavor = spec.software.nvidia_driver_flavor
        branch = int(spec.software.nvidia_driver.split(".")[0])
        if flavor == "open" and branch < OPEN_FIRST_BRANCH:
            yield self.error(("software", "nvidia_driver"),
                             f"driver {spec.software.nvidia_driver} has no open kernel modules (from the {OPEN_FIRST_BRANCH} series)")
        if flavor != "proprietary":
            return
        for p in spec.pools:
            if eff.gpu_key(p) in OPEN_ONLY_GPUS:
                yield self.error(("software", "nvidia_driver_flavor"),
                                 f"pool {p.name} has {eff.gpu_key(p)} GPUs, which only the open kernel modules support")


class LabIsDebian12(Validator):
    """Lab nodes boot the machine's Debian 12 rootfs: another os would pick repositories the nodes cannot use."""

    code = "lab-os"

    def check(self, spec: ClusterSpec) -> Iterator[Finding]:
        if traits(spec.controller).lab and spec.controller.os != "debian12":
            yield self.error(("controller", "os"), f"a local (lab) controller runs Debian 12, not {spec.controller.os}")
        for i, p in enumerate(spec.pools):
            if traits(p).lab and p.os != "debian12":
                yield self.error(("pools", i, "os"), f"lab nodes run Debian 12, not {p.os}")


class OsMatchesImage(Validator):
    """Rented nodes boot the official Debian 12 AMI unless the pool names its own: another os needs that image."""

    code = "os-image"

    def check(self, spec: ClusterSpec) -> Iterator[Finding]:
        if traits(spec.controller).rented and spec.controller.os != "debian12":
            yield self.error(("controller", "os"), f"an aws controller boots the official Debian 12 AMI, not {spec.controller.os}")
        for i, p in enumerate(spec.pools):
            if traits(p).rented and p.os != "debian12" and getattr(p, "ami", None) is None:
                yield self.error(("pools", i, "os"), f"pool {p.name} boots the official Debian 12 AMI unless `ami` names "
                                                     f"an image of {p.os}: set ami, or os: debian12")
