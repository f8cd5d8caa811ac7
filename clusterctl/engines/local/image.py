"""Lab node images: each lab pool's node stack (the roles in image mode) baked once into a root filesystem its nodes
boot from instead of the bare debootstrap base, so their converge applies only what is theirs. Built by
`clusterctl image build` (ops/image.py) through Lab.build_image; recorded in the cluster's state per pool."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from pathlib import Path

from clusterctl.compile.model import ClusterPlan, PoolPlan
from clusterctl.core.resources import resource_dir
from clusterctl.engines import images
from clusterctl.engines.local import rootfs
from clusterctl.engines.local.mounts import remove_tree
from clusterctl.engines.local.errors import LabError
from clusterctl.engines.local.spec import LabNode, LabSpec
from clusterctl.render.ansible import all_vars, pool_vars
from clusterctl.state.backend import Backend

BUILDER_SUFFIX = "-image"  # the builder of pool P is the throwaway node P-image


def inputs(plan: ClusterPlan, pool: PoolPlan, lab: LabSpec) -> str:
    """What the pool's image is made of: the base rootfs recipe, the cluster's and the pool's role variables and
    every playbook file. A change to any of them makes the recorded image stale."""
    return images.inputs_hash({"base": rootfs.recipe_id(lab.suite, lab.mirror), "all": all_vars(plan),
                               "pool": pool_vars(plan, pool)}, resource_dir("playbooks"))


def image_dir(lab: LabSpec, pool: str, digest: str) -> Path:
    """Next to the base rootfs in the machine's cache: named by cluster, pool and inputs, so a stale one is never
    taken for a current one."""
    return lab.cache_dir / "images" / f"{lab.cluster}-{pool}-{digest[:16]}"


def current_image(state: Backend, plan: ClusterPlan, pool: PoolPlan, lab: LabSpec) -> str | None:
    """The pool's recorded image when it is still what the spec and roles make and is still on disk, else None
    (the node boots from the base rootfs, as without an image)."""
    rec = images.recorded(state, pool.name)
    if not rec or rec.get("inputs_hash") != inputs(plan, pool, lab) or not Path(rec.get("image", "")).is_dir():
        return None
    return str(rec["image"])


def builder(pool: PoolPlan, lab: LabSpec) -> LabNode:
    """A node of the lab's network for the build: the pool's GPU count, the subnet's highest free address."""
    taken = {lab.gateway, *(n.address for n in lab.nodes)}
    net = ipaddress.IPv4Network(lab.subnet)
    free = next((str(a) for a in reversed(list(net.hosts())) if str(a) not in taken), None)
    if free is None:
        raise LabError(f"lab subnet {lab.subnet} has no free address for the image builder of pool {pool.name}")
    return LabNode(f"{pool.name}{BUILDER_SUFFIX}"[:63].rstrip("-"), free, pool.gpus_per_node)


def retire(previous: dict | None, new: str, in_use: set[str], lab: LabSpec, log: Callable[[str], None]) -> list[str]:
    """After `new` is built: remove the pool's images it replaces (the previously recorded one and those retired
    before) that no node of the lab boots from; a node's overlay keeps its image as lower while the node exists, so
    one in use is kept and returned, to be retired by a later build. Only directories of the lab's image cache are
    ever removed, whatever the record says."""
    if not previous:
        return []
    kept = []
    for old in dict.fromkeys([*previous.get("retired", []), previous.get("image", "")]):
        path = Path(old)
        if not old or old == new or path.parent != lab.cache_dir / "images" or not path.is_dir():
            continue
        if old in in_use:
            kept.append(old)
            continue
        remove_tree(path)
        log(f"removed the image it replaces: {old}")
    return kept
