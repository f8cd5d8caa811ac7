"""Switch layout for Slurm's topology/tree: leaf switches (or scalable units on rail-optimized fabrics) under a spine.

Rail-optimized fabrics connect GPU i of every node to rail switch i; Slurm's tree can only place a node under one
switch, so (as NVIDIA's SuperPOD reference does) a scalable unit of `nodes_per_leaf` nodes becomes one leaf.
Jobs packed inside a leaf keep all traffic one hop away.
"""

from __future__ import annotations

from dataclasses import replace

from clusterctl.compile.model import Node, Switch
from clusterctl.spec import effective as eff
from clusterctl.spec.cluster import ClusterSpec

ROOT = "spine"


def assign_leaves(spec: ClusterSpec, nodes: list[Node]) -> tuple[list[Node], tuple[Switch, ...]]:
    """Give each compute node its leaf switch; return the nodes and the switches (leaves first, then the root)."""
    leaves: list[Switch] = []
    placed: dict[str, str] = {}
    for pool in spec.pools:
        fab, _ = eff.fabric(spec, pool)
        names = [n.name for n in nodes if n.pool == pool.name]
        if not names:
            continue
        # EFA pools sit in one cluster placement group: one leaf per pool. Ethernet lab/owned pools: one per pool too.
        size = fab.nodes_per_leaf if fab.type in ("infiniband", "roce") else len(names)
        kind = "su" if fab.rail_optimized else "leaf"
        for k in range(0, len(names), size):
            leaf = Switch(name=f"{pool.name}-{kind}{k // size + 1}", nodes=tuple(names[k : k + size]))
            leaves.append(leaf)
            placed.update({n: leaf.name for n in leaf.nodes})
    switches = tuple(leaves)
    if leaves:
        switches += (Switch(name=ROOT, switches=tuple(s.name for s in leaves)),)
    return [replace(n, leaf=placed.get(n.name)) for n in nodes], switches
