"""`clusterctl check`: acceptance tests on a live cluster, one row per (check, node or pool), pass / fail / skip.

What is checked, from the plan (never from the nodes' own idea of themselves):
- gpus:          /dev/nvidiaN device files per node = the pool's GPUs per node (and nvidia-smi's count where it exists)
- gpu driver:    nvidia-smi's driver version = software.nvidia_driver (skipped on lab nodes: fake device files)
- fabric ports:  active IB/RoCE ports / EFA devices >= the pool's health expectation
- mounts:        the pool's required mounts are mount points
- slurm state:   every static node is schedulable (not drained, down, ...); the reason when it is not
- slurm job:     one multi-node srun across each pool's static nodes runs on exactly those nodes
- nccl all_reduce: all_reduce_perf across the pool's nodes (one rank per GPU) reaches the fabric's expected bus
                 bandwidth; SKIPPED with the reason when there are no real GPUs, no nccl-tests or fewer than 2 nodes
- nccl straggler: every node ranked by all_reduce alone and in ring pairs; those below a tolerance of the median
                 are named (and drained with --drain-stragglers): clusterctl.ops.stragglers
- exporters:     Prometheus on the controller has every scrape target up (when monitoring is enabled)

The rows never pretend: a check that cannot run here is a SKIP with its reason. `ok` is False when any row FAILs.
Commands reach the nodes through a runner (node, command, timeout) -> CommandResult, so the row logic is tested with
a fake; `run_checks(spec)` uses SSH the way `up` does (clusterctl.ops.access).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable

from clusterctl.compile.model import ClusterPlan, Node, PoolPlan
from clusterctl.ops.phases import Phases
from clusterctl.ops.checkkit import (  # noqa: F401 - the checks' vocabulary, re-exported for callers and tests
    PASS,
    FAIL,
    SKIP,
    READY,
    NCCL_TESTS,
    LINK_EFFICIENCY,
    DEFAULT_NCCL_TOLERANCE,
    CheckRow,
    CommandResult,
    Runner,
    probe_command,
    Probe,
    parse_probe,
    expected_busbw_gbs,
    _ROW,
    parse_all_reduce,
    _safe,
    _last_line,
    static_nodes,
    _partition_for,
    node_rows,
    pool_skip_rows,
    slurm_state_rows,
    slurm_job_row,
    nccl_skip,
    tasks_per_node,
    run_all_reduce,
    mpi_option,
    nccl_row,
    exporters_row,
)

if TYPE_CHECKING:
    from rich.console import Console

    from clusterctl.ops.access import Access
    from clusterctl.spec.cluster import ClusterSpec
    from clusterctl.state import ClusterState


def check_cluster(plan: ClusterPlan, run: Runner, nccl_tolerance: float = DEFAULT_NCCL_TOLERANCE,
                  workers: int = 16, straggler_tolerance: float | None = None, drain_stragglers: bool = False,
                  phases: Phases | None = None) -> list[CheckRow]:
    """phases: where the time went (node probes, Slurm states, jobs, NCCL, stragglers, exporters) is added to it."""
    from clusterctl.ops import stragglers

    timed = (phases or Phases()).phase
    tol = stragglers.DEFAULT_TOLERANCE if straggler_tolerance is None else straggler_tolerance
    rows: list[CheckRow] = []
    targets = [(pool, n) for pool in plan.pools for n in static_nodes(plan, pool)]

    def probe(item: tuple[PoolPlan, Node]) -> CommandResult:
        pool, n = item
        return _safe(run, n, probe_command(pool.health.mounts), 120)

    with timed("node probes"), ThreadPoolExecutor(max_workers=max(1, min(workers, len(targets) or 1))) as ex:
        results = list(ex.map(probe, targets))
    probes: dict[str, Probe | None] = {}
    for (pool, n), r in zip(targets, results, strict=True):
        if r.rc != 0 or "gpu_devices=" not in r.stdout:
            probes[n.name] = None
            rows.append(CheckRow("reachable", n.name, FAIL, f"cannot run commands on {n.name}: {_last_line(r)}"))
            continue
        probes[n.name] = parsed = parse_probe(r.stdout)
        rows += node_rows(plan, pool, n, parsed)
    for pool in plan.pools:
        names = [n.name for n in static_nodes(plan, pool)]
        if not names:
            rows.append(CheckRow("slurm job", pool.name, SKIP, f"pool {pool.name} has no static nodes (elastic: powered up on demand)"))
            continue
        rows += pool_skip_rows(pool, names)
    all_names = [n.name for _, n in targets]
    with timed("slurm states"):
        rows += slurm_state_rows(plan, run, all_names)
    for pool in plan.pools:
        nodes = static_nodes(plan, pool)
        if nodes:
            with timed("slurm job"):
                rows.append(slurm_job_row(plan, pool, run, [n.name for n in nodes]))
            with timed("nccl"):
                rows.append(nccl_row(plan, pool, run, nodes, probes, nccl_tolerance))
            with timed("stragglers"):
                rows += stragglers.straggler_rows(plan, pool, run, nodes, probes, tol, drain_stragglers)
    with timed("exporters"):
        rows.append(exporters_row(plan, run))
    return rows


def rows_ok(rows: list[CheckRow]) -> bool:
    return not any(r.status == FAIL for r in rows)


def ssh_runner(plan: ClusterPlan, access: Access) -> Runner:
    def run(node: Node, command: str, timeout: float) -> CommandResult:
        r = access.remote(node).run(command, timeout=timeout, check=False)
        return CommandResult(r.returncode, r.stdout, r.stderr)

    return run


def run_checks(spec: ClusterSpec, log: Callable[[str], None] = lambda msg: None,
               nccl_tolerance: float = DEFAULT_NCCL_TOLERANCE, state: ClusterState | None = None,
               phases: Phases | None = None,
               **straggler_opts: Any) -> tuple[list[CheckRow], bool]:  # check_cluster's straggler options
    """The CLI's entry point: compile the spec, reach the nodes as `up` does, run every check.
    state: the cluster's ClusterState (default: ClusterState.for_spec(spec) under $CLUSTERCTL_STATE_DIR).
    phases: gets each phase's seconds (check_cluster's)."""
    from clusterctl.ops.access import access_for
    from clusterctl.compile import compile_plan
    from clusterctl.state import ClusterState

    plan = compile_plan(spec)
    access = access_for(plan, state or ClusterState.for_spec(spec), log)
    rows = check_cluster(plan, ssh_runner(plan, access), nccl_tolerance=nccl_tolerance, phases=phases,
                         **straggler_opts)
    return rows, rows_ok(rows)


# --- printers -------------------------------------------------------------------------------------------------

STYLE = {PASS: "green", FAIL: "bold red", SKIP: "yellow"}


def check_json(cluster: str, rows: list[CheckRow], phases: Phases | None = None) -> str:
    counts = {s: sum(1 for r in rows if r.status == s) for s in (PASS, FAIL, SKIP)}
    return json.dumps({"cluster": cluster, "ok": rows_ok(rows), "counts": counts, "rows": [r.to_dict() for r in rows],
                       "phases": (phases or Phases()).to_dict()}, indent=2) + "\n"


def print_checks(console: Console, cluster: str, rows: list[CheckRow], phases: Phases | None = None) -> None:
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=f"clusterctl check: {cluster}")
    for col in ("check", "node", "status", "detail"):
        t.add_column(col, overflow="fold")
    for r in rows:
        t.add_row(r.check, r.node, f"[{STYLE[r.status]}]{r.status.upper()}[/]", escape(r.detail))
    console.print(t)
    counts = {s: sum(1 for r in rows if r.status == s) for s in (PASS, FAIL, SKIP)}
    verdict = "[green]all checks passed[/]" if rows_ok(rows) else "[bold red]FAILED[/]"
    console.print(f"{verdict}: {counts[PASS]} passed, {counts[FAIL]} failed, {counts[SKIP]} skipped")
    if phases is not None:
        console.print(phases.line(), markup=False, highlight=False)
