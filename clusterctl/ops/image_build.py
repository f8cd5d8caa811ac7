"""The `clusterctl image build` command: the pools chosen, the cluster's lock held, lab pools' images baked
(clusterctl.ops.image), then aws pools' AMIs (clusterctl.ops.image_aws)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clusterctl.core.providers import traits
from clusterctl.ops.image import PoolImage, build_pools, chosen_pools
from clusterctl.ops.image_aws import build_aws_pools
from clusterctl.render.compiled import Compiled
from clusterctl.state import ClusterState

if TYPE_CHECKING:
    from rich.console import Console


def build_images(compiled: Compiled, console: Console, names: list[str], quiet: bool = False,
                 fast: bool = True) -> list[PoolImage]:
    chosen = chosen_pools(compiled, names)
    lab = [n for n in chosen if traits(compiled.plan.pool(n)).lab]
    rented = [n for n in chosen if n not in lab]
    state = ClusterState.for_spec(compiled.spec)
    with state.lock("image build"):
        built = build_pools(compiled, state, console, lab, quiet, fast) if lab else []
        return built + (build_aws_pools(compiled, state, console, rented, quiet, fast) if rented else [])
