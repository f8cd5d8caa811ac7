"""`clusterctl image build`: bake each lab pool's node stack once; its nodes then boot from the image and their
converge applies only what is theirs (hostname, addresses, munge key, mounts, slurmd).

Per pool: a throwaway builder node on the lab's network runs the same playbook as `up` with
clusterctl_image_build set, which leaves out what belongs to one node (the munge key and the daemons that need it,
slurmd, shared mounts, the NVMe cache); the stopped builder's root is baked (identity removed) and recorded with
the hash of its inputs. A pool whose recorded image is current is not rebuilt; a failed build records nothing. The
images a build replaces are removed once no node boots from them (kept in the record as retired until then).
Once a pool has an image, `up` rebuilds it first when it went stale and the pool gets a new node (stale_for_new_nodes).
aws pools get an AMI the same way, from a builder instance in the cluster's network (clusterctl.ops.image_aws).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from clusterctl.compile.model import PoolPlan
from clusterctl.core.errors import ClusterctlError
from clusterctl.core.providers import traits
from clusterctl.engines import images
from clusterctl.engines.ansible.progress import Progress
from clusterctl.engines.ansible.runner import PlaybookRun, run_playbook
from clusterctl.engines.ansible.settings import SshOptions
from clusterctl.engines.provider import providers_for
from clusterctl.ops.access import access_for
from clusterctl.render.ansible import builder_inventory
from clusterctl.render.compiled import Compiled
from clusterctl.render.write import write_build
from clusterctl.state import ClusterState
from clusterctl.state.secrets import ensure_munge_key, playbook_vars

if TYPE_CHECKING:
    from rich.console import Console

    from clusterctl.engines.local.spec import LabNode

IMAGE_VAR = "clusterctl_image_build"  # the roles' image mode (see the module docstring)


class ImageError(ClusterctlError):
    pass


@dataclass
class PoolImage:
    pool: str
    image: str
    inputs_hash: str
    built: bool  # False: the recorded image was current
    seconds: float

    def to_dict(self) -> dict:
        return dict(vars(self))


def _imaged(pool: PoolPlan) -> bool:
    """Pools whose nodes boot an image: lab pools (a baked root) and aws pools (an AMI). Owned hosts are installed
    in place."""
    t = traits(pool)
    return t.lab or t.rented


def chosen_pools(compiled: Compiled, names: list[str]) -> list[str]:
    """The pools to build (every lab and aws pool when none is named); a named pool that is not one is refused by
    name."""
    pools = {p.name: p for p in compiled.plan.pools}
    unknown = [n for n in names if n not in pools]
    if unknown:
        raise ImageError(f"--pool {', '.join(unknown)}: no such pool in cluster {compiled.name} "
                         f"(pools: {', '.join(pools)})")
    owned = [n for n in names if not _imaged(pools[n])]
    if owned:
        raise ImageError(f"--pool {', '.join(owned)}: owned hosts are installed in place by `clusterctl up`; "
                         f"`clusterctl image build` bakes images for lab and aws pools")
    chosen = names or [p.name for p in compiled.plan.pools if _imaged(p)]
    if not chosen:
        raise ImageError(f"cluster {compiled.name} has no lab or aws pool to build an image for")
    return chosen


def converge_builder(compiled: Compiled, build: Path, pool: PoolPlan, name: str, address: str, extravars: dict,
                     ssh: SshOptions, console: Console, quiet: bool, fast: bool) -> None:
    """The node roles in image mode on one builder (`name` at `address`, in the pool's group): what `up` runs on
    the pool's nodes, less what belongs to one node. Raises ImageError with the first failures."""
    inventory = build / "ansible" / f"image-{pool.name}.yml"
    inventory.write_text(builder_inventory(compiled.plan, pool, name, address))
    run = PlaybookRun(build_dir=build, extravars={**extravars, IMAGE_VAR: True}, ssh=ssh, fast=fast, limit=name,
                      inventory=inventory)
    with Progress(console, f"image of pool {pool.name}", quiet=quiet) as progress:
        result = run_playbook(run, on_event=progress.event)
    if not result.ok:
        why = "; ".join(f"{f.task}: {f.message}" for f in result.failures[:3]) or result.status
        raise ImageError(f"the image build of pool {pool.name} failed, nothing recorded: {why}")


def stale_for_new_nodes(compiled: Compiled, state: ClusterState) -> list[str]:
    """Lab pools `up` rebuilds the image of before booting: a pool that has an image (its user ran `image build`),
    whose recorded image is no longer what the spec and roles make, and that gets a node this `up` creates. Nodes
    that exist keep the root they were made on; a pool never built boots the base rootfs, as before."""
    from clusterctl.engines.local import image as lab_image
    from clusterctl.engines.local.provider import lab_for

    plan = compiled.plan
    pools = [p for p in plan.pools if traits(p).lab and images.recorded(state.backend, p.name)]
    if not pools:
        return []
    lab = lab_for(plan, state, lambda msg: None)
    made = lab.made_nodes()
    return [p.name for p in pools if lab_image.current_image(state.backend, plan, p, lab.spec) is None
            and any(n.name not in made for n in plan.nodes_of(p.name))]


def build_pools(compiled: Compiled, state: ClusterState, console: Console, chosen: list[str], quiet: bool,
                fast: bool = True) -> list[PoolImage]:
    """Build the chosen lab pools' images (a current one is kept); the caller holds the cluster's lock."""
    from clusterctl.engines.local import image as lab_image

    plan = compiled.plan
    log = (lambda msg: None) if quiet else (lambda msg: console.print(f"  {msg}", highlight=False, markup=False))
    out = []
    build = state.dir / "image-build"  # not the applied build's directory: `up` and `plan` own that one
    write_build(compiled.files, build)
    access = access_for(plan, state, log, [p for p in providers_for(compiled.spec) if p.name == "local"])
    lab = access.lab
    assert lab is not None  # the chosen pools are lab pools
    extravars = playbook_vars(ensure_munge_key(state))
    for pool in (plan.pool(n) for n in chosen):
        t0 = time.monotonic()
        digest = lab_image.inputs(plan, pool, lab.spec)
        current = lab_image.current_image(state.backend, plan, pool, lab.spec)
        if current:
            log(f"pool {pool.name}: image {current} is current")
            out.append(PoolImage(pool.name, current, digest, False, 0.0))
            continue
        node = lab_image.builder(pool, lab.spec)

        def converge(pool: PoolPlan = pool, node: LabNode = node) -> None:
            converge_builder(compiled, build, pool, node.name, node.address, extravars, access.ssh, console, quiet, fast)

        path = lab.build_image(node, converge, lab_image.image_dir(lab.spec, pool.name, digest))
        retired = lab_image.retire(images.recorded(state.backend, pool.name), str(path), lab.lowers_in_use(),
                                   lab.spec, log)
        images.record(state.backend, pool.name,
                      {"image": str(path), "inputs_hash": digest, **({"retired": retired} if retired else {})})
        out.append(PoolImage(pool.name, str(path), digest, True, round(time.monotonic() - t0, 1)))
    return out
