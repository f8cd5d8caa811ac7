"""Which vendor repositories each node group installs from: the catalog's table, with `mirrors:` applied.

Pure data for the roles (rendered into group_vars): URLs are joined here from allow-listed spec strings and the
catalog, never in a template. A repository without a signing key is left out (validate reports it as an error).
"""

from __future__ import annotations

from clusterctl.catalog import vendor_repos as vr
from clusterctl.catalog.gpus import GPUS
from clusterctl.compile.model import Repo
from clusterctl.core.providers import traits
from clusterctl.spec import effective as eff
from clusterctl.spec import vendor_needs
from clusterctl.spec.cluster import ClusterSpec
from clusterctl.spec.pools import Pool

VERSION_FIELD = {"cuda": "cuda", "doca": "doca", "lustre": "lustre_client", "efa": "efa_installer", "slurm": "slurm"}


def _join(root: str, path: str) -> str:
    return root.rstrip("/") + "/" + path


def resolve(spec: ClusterSpec, component: str, os: str) -> Repo | None:
    """The repository of one component on one distro; None where there is none to add (no row, no key, no mirror)."""
    version = getattr(spec.software, VERSION_FIELD[component])
    mirror = spec.mirrors.get(component)
    row = vr.row(component, os)
    if row is None and mirror is not None:  # no vendor build for this distro: the site's own, laid out per distro
        path = vr.SITE_BUILD_PATH.format(os=os)
        return Repo(component, "apt", _join(mirror.url, path), "./", mirror.key_url, vr.keyring_name(component), True)
    if row is None:
        return None
    path = row.path.format(version=version)
    root = mirror.url if mirror is not None else row.root
    url = _join(root, path)
    # The vendor's key: an apt repository's inside its directory, a tarball's beside the tarballs (a mirror of them
    # carries it too); a mirror's own key_url replaces it, and then the site's key signs, not the vendor's.
    vendor_key = (url if row.kind == "apt" else _join(root, "")) + row.key_file if row.key_file else None
    own_key = mirror is not None and (mirror.key_url is not None or row.kind == "apt")
    key = mirror.key_url if mirror is not None and own_key else vendor_key
    if key is None:
        return None  # never an unsigned repository or tarball
    pinned = None if own_key else row.key_fingerprint
    return Repo(component, row.kind, url, row.suite, key, vr.keyring_name(component), mirror is not None, pinned)


def installs_nvidia_stack(spec: ClusterSpec, pool: Pool, repos: tuple[Repo, ...]) -> bool:
    """Whether clusterctl installs the NVIDIA driver, CUDA and NCCL on the pool's nodes: NVIDIA GPU nodes that are real
    hosts, or lab nodes (containers) given a CUDA mirror, which is how the tests run the stack against a stand-in.
    The roles run on this answer (group_vars clusterctl_nvidia_stack) and the health check judges the driver by it."""
    model = GPUS.get(eff.gpu_key(pool) or "")
    if model is None or model.vendor != "nvidia" or eff.gpus_per_node(pool) == 0:
        return False
    return not traits(pool).lab or any(r.component == "cuda" for r in repos)


def repos(spec: ClusterSpec, pool: Pool | None) -> tuple[Repo, ...]:
    """A node group's repositories. Lab nodes reach no vendor: they get a repository only through `mirrors:`."""
    lab = traits(pool if pool is not None else spec.controller).lab
    os = vendor_needs.os_of(spec, pool)
    out = []
    for component in vendor_needs.components(spec, pool):
        if lab and spec.mirrors.get(component) is None:
            continue
        repo = resolve(spec, component, os)
        if repo is not None:
            out.append(repo)
    return tuple(out)
