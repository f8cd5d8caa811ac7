"""Straggler hunting for `clusterctl check`: rank every node of a pool by NCCL all_reduce runs on small subsets.

The all-node figure says the pool is slow, not which node. Here each node runs all_reduce alone (its GPUs and
NVLink) and, with 3+ nodes, in ring pairs with its neighbours (its fabric rails); a node's fabric figure is its better
pair, since a good node has at least one good neighbour. A node below `tolerance` x the median of either figure is
named; --drain-stragglers drains it with the figure in the reason (tag clusterctl-check:, which the health check
never resumes: a person decides when it is fixed).
"""

from __future__ import annotations

import shlex
import statistics
from concurrent.futures import ThreadPoolExecutor

from clusterctl.core import hostlist
from clusterctl.compile.model import ClusterPlan, Node, PoolPlan
from clusterctl.ops import checkkit as c

DEFAULT_TOLERANCE = 0.9
TAG = "clusterctl-check:"


def pair_rounds(nodes: list[Node]) -> list[list[tuple[Node, Node]]]:
    """Ring pairs (i, i+1), grouped so no node is in two runs of one round (runs of a round go in parallel)."""
    if len(nodes) < 3:
        return []
    rounds: list[list[tuple[Node, Node]]] = []
    for i, a in enumerate(nodes):
        b = nodes[(i + 1) % len(nodes)]
        slot = next((r for r in rounds if not any(x in p for p in r for x in (a, b))), None)
        if slot is None:
            rounds.append(slot := [])
        slot.append((a, b))
    return rounds


def measure(plan: ClusterPlan, pool: PoolPlan, run: c.Runner, nodes: list[Node], probes: dict[str, c.Probe | None],
            workers: int = 16) -> tuple[dict[str, float], dict[str, float], dict[str, str]]:
    """-> (alone {node: busbw}, pair {node: best pair busbw}, errors {what: why})."""
    mpi = c.mpi_option(plan, run, nodes, probes)
    errors: dict[str, str] = {}

    def go(group: list[Node]) -> tuple[list[Node], tuple[dict | None, str]]:
        return group, c.run_all_reduce(plan, pool, run, group, mpi)

    alone: dict[str, float] = {}
    pair: dict[str, float] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(nodes)))) as ex:
        for group, (res, why) in ex.map(go, [[n] for n in nodes]):
            if res is None:
                errors[group[0].name] = why
            else:
                alone[group[0].name] = res["busbw"]
        for rnd in pair_rounds(nodes):
            for group, (res, why) in ex.map(go, [list(p) for p in rnd]):
                key = "+".join(n.name for n in group)
                if res is None:
                    errors[key] = why
                    continue
                for n in group:
                    pair[n.name] = max(pair.get(n.name, 0.0), res["busbw"])
    return alone, pair, errors


def rank(names: list[str], alone: dict, pair: dict, tolerance: float) -> list[tuple[str, float, str]]:
    """-> [(node, ratio to the median, detail)], slowest first. A node missing a figure ranks 0."""
    med_alone = statistics.median(alone.values()) if alone else None
    med_pair = statistics.median(pair.values()) if pair else None
    out = []
    for n in names:
        parts, ratios = [], []
        for label, figs, med in (("alone", alone, med_alone), ("best pair", pair, med_pair)):
            if med:
                got = figs.get(n)
                ratios.append((got or 0.0) / med)
                parts.append(f"{label} {got:.1f} GB/s" if got is not None else f"{label}: no figure")
                parts[-1] += f" (median {med:.1f})"
        ratio = min(ratios) if ratios else 0.0
        out.append((n, ratio, f"all_reduce bus bandwidth {', '.join(parts)}: {ratio:.0%} of the median"))
    return sorted(out, key=lambda r: (r[1], r[0]))


def straggler_rows(plan: ClusterPlan, pool: PoolPlan, run: c.Runner, nodes: list[Node], probes: dict,
                   tolerance: float = DEFAULT_TOLERANCE, drain: bool = False) -> list[c.CheckRow]:
    name = "nccl straggler"
    skip = c.nccl_skip(plan, pool, nodes, probes)
    where = hostlist.compress([n.name for n in nodes]) if nodes else pool.name
    if skip:
        return [c.CheckRow(name, where, c.SKIP, skip)]
    alone, pair, errors = measure(plan, pool, run, nodes, probes)
    rows = [c.CheckRow(name, what, c.FAIL, why) for what, why in sorted(errors.items())]
    for node, ratio, detail in rank([n.name for n in nodes], alone, pair, tolerance):
        slow = ratio < tolerance
        rows.append(c.CheckRow(name, node, c.FAIL if slow else c.PASS,
                               f"{detail}; {'below' if slow else 'within'} the {tolerance:.0%} tolerance"))
        if slow and drain:
            rows.append(drain_row(plan, run, node, f"{TAG} NCCL straggler: {detail} (tolerance {tolerance:.0%})"))
    return rows


def drain_row(plan: ClusterPlan, run: c.Runner, node: str, reason: str) -> c.CheckRow:
    cmd = f"scontrol update nodename={shlex.quote(node)} state=drain reason={shlex.quote(reason)}"
    r = c._safe(run, plan.controller, cmd, 60)
    if r.rc != 0:
        return c.CheckRow("drain", node, c.FAIL, f"scontrol failed: {c._last_line(r)}")
    return c.CheckRow("drain", node, c.PASS, f"drained: {reason}")
