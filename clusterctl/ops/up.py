"""`clusterctl up`: from a spec to a converged cluster that runs a multi-node job.

Steps, each safe to repeat (a second `up` after a failure or a kill repairs what the first left):
render the build into the state dir -> lab nodes (local provider) -> munge key -> Ansible converge ->
smoke job -> the build is recorded as applied (what the next `plan` diffs against).
"""

from __future__ import annotations

from rich.markup import escape

from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from clusterctl.engines.ansible.progress import Progress, print_recap
from clusterctl.engines.ansible.result import RunResult
from clusterctl.engines.ansible.runner import PlaybookRun, run_playbook
from clusterctl.ops.access import Access, access_for
from clusterctl.ops.image import build_pools, stale_for_new_nodes
from clusterctl.ops.leaving import before_changes
from clusterctl.state.secrets import ensure_munge_key, playbook_vars
from clusterctl.ops.phases import Phases
from clusterctl.ops.smoke import SmokeResult, run_smoke
from clusterctl.compile.model import ClusterPlan
from clusterctl.core.errors import ClusterctlError
from clusterctl.engines.provider import Context, providers_for
from clusterctl.render.compiled import Compiled
from clusterctl.render.write import write_build
from clusterctl.state import ClusterState

if TYPE_CHECKING:
    from rich.console import Console

    from clusterctl.core.findings import Finding
    from clusterctl.engines.provider import Provider


class ApplyError(ClusterctlError):
    pass


@dataclass
class UpReport:
    cluster: str
    converge: RunResult | None = None
    smoke: list[SmokeResult] = field(default_factory=list)
    error: str | None = None
    batches: list[dict] = field(default_factory=list)  # rolling changes: each drained batch and when
    phases: Phases = field(default_factory=Phases)
    images: list[dict] = field(default_factory=list)  # node images rebuilt first (ops.image.stale_for_new_nodes)
    leaving: dict | None = None  # nodes the spec dropped, drained before they were removed (ops.leaving.vacate)

    @property
    def ok(self) -> bool:
        return self.error is None and self.converge is not None and self.converge.ok and all(s.ok for s in self.smoke)

    def to_dict(self, plan: ClusterPlan, access: Access | None) -> dict:
        return {
            "cluster": self.cluster,
            "ok": self.ok,
            "error": self.error,
            "converge": self.converge.to_dict() if self.converge else None,
            "smoke": [s.to_dict() for s in self.smoke],
            "batches": self.batches,
            "phases": self.phases.to_dict(),
            "images": self.images,
            "leaving": self.leaving,
            "plays": self.converge.plays if self.converge else [],
            "summary": summary_dict(plan, access),
        }


def summary_dict(plan: ClusterPlan, access: Access | None) -> dict:
    ctl = plan.controller
    login = f"ssh {ctl.ssh.user}@{ctl.address}"
    if access is not None and access.ssh.private_key:
        login = f"ssh -i {access.ssh.private_key} -o UserKnownHostsFile={access.ssh.known_hosts} root@{ctl.address}"
    elif ctl.ssh.jump_host:
        login = f"ssh -J {ctl.ssh.jump_host} {ctl.ssh.user}@{ctl.address}"
    return {
        "controller": {"name": ctl.name, "address": ctl.address},
        "login": login,
        "nodes": [
            {"name": n.name, "pool": n.pool, "address": n.address, "gpus": n.gpus, "gpu": n.gpu_model, "cloud": n.cloud}
            for n in plan.nodes
        ],
        "gpus": sum(n.gpus for n in plan.nodes if not n.cloud),
        "partitions": [{"name": p.name, "default": p.default, "nodes": len(p.nodes), "preempt": p.preempt_mode} for p in plan.partitions],
    }


def converge(plan_build: Path, access: Access, munge_key: Path, console: Console, quiet: bool, check: bool = False,
             diff: bool = False, fast: bool = True, title: str = "converging", limit: str | None = None) -> RunResult:
    run = PlaybookRun(
        build_dir=plan_build,
        extravars=playbook_vars(munge_key),
        ssh=access.ssh,
        check=check,
        diff=diff,
        fast=fast,
        limit=limit,
    )
    with Progress(console, title, quiet=quiet) as progress:
        return run_playbook(run, on_event=progress.event)


def check_tools(providers: Iterable[Provider]) -> None:
    """Before anything changes, the state dir included: every provider's tools are there (e.g. the Pulumi CLI)."""
    for p in providers:
        p.check_tools()


def up(compiled: Compiled, console: Console, quiet: bool = False, fast: bool = True,
       confirm: Callable[[Any], bool] | None = None,  # gets the provider's preview (aws: automation.Preview)
       on_findings: Callable[[list[Finding]], None] | None = None,
       locked: bool = False, rollout: Callable[[ClusterPlan, Path, Access, Path], tuple[RunResult, list[dict]]] | None = None,
       state: ClusterState | None = None, force: bool = False,
       drain_timeout: float | None = None) -> tuple[UpReport, ClusterPlan, Access]:
    """Bring the cluster to the spec. Raises (before converging) when the cloud part cannot go ahead.

    compiled: the spec compiled once by the caller; cloud outputs come back as facts, never as a second compile.
    confirm(preview) -> bool decides whether the previewed cloud changes are made (the CLI asks, or --yes).
    locked: the caller (apply) already holds the cluster's lock (through `state`, which it passes).
    rollout(plan, build, access, key) -> RunResult: converges in drained batches instead of all hosts at once.
    force, drain_timeout: for nodes the spec drops (ops.leaving): how long their jobs are waited for (default the
    spec's drain_timeout_seconds), and whether they are requeued instead of waited for.
    """
    providers = providers_for(compiled.spec)
    state = state or ClusterState.for_spec(compiled.spec)
    state.check_ready()  # every refusal before the first change: backend settings, then tools (and root)
    check_tools(providers)
    log = (lambda msg: None) if quiet else (lambda msg: console.print(f"  {msg}", highlight=False, markup=False))
    report = UpReport(compiled.name)
    timed = report.phases.phase
    with nullcontext() if locked else state.lock("up"):
        # Before any provider stops, terminates or forgets a node; timed only when nodes were leaving.
        with report.phases.phase_if("drain", lambda: report.leaving is not None):
            report.leaving = before_changes(compiled.plan, state, providers, force, drain_timeout, log)
        for p in providers:
            ctx = Context(compiled.plan, state, console, quiet, log, confirm, on_findings)
            with timed("capacity"):
                compiled = compiled.with_facts(p.prepare(ctx))
        plan, files = compiled.plan, compiled.files
        build = state.dir / "build"
        write_build(files, build)
        stale = stale_for_new_nodes(compiled, state)
        if stale:  # before access: the nodes' roots are chosen from the images current then
            log(f"node image of {', '.join(stale)} is stale and new nodes boot from it: rebuilding it first")
            with timed("image build"):
                report.images = [i.to_dict() for i in build_pools(compiled, state, console, stale, quiet, fast)]
        access = access_for(plan, state, log, providers)
        with timed("boot"):
            for p in providers:
                identity = access.identities.get(p.name)
                if identity is not None:
                    p.boot(Context(plan, state, console, quiet, log), identity)
        key = ensure_munge_key(state)
        with timed("converge"):
            if rollout is not None:
                report.converge, report.batches = rollout(plan, build, access, key)
            else:
                report.converge = converge(build, access, key, console, quiet, fast=fast, title=f"converging {plan.name}")
        if not quiet:
            print_recap(console, report.converge)
        if not report.converge.ok:
            report.error = f"converge failed on {len({f.host for f in report.converge.failures})} host(s); run `clusterctl up` again after fixing"
            return report, plan, access
        log(f"smoke job: a multi-node job on each pool's idle nodes, through {plan.controller.name}")
        with timed("smoke job"):
            report.smoke = run_smoke(plan, access.remote(plan.controller))
        if all(s.ok for s in report.smoke):
            from clusterctl.economics.cost import estimate_cost

            state.record_applied(files, estimate_cost(compiled.spec, compiled.plan).total_monthly_usd)
        else:
            report.error = "smoke job failed: " + "; ".join(s.detail for s in report.smoke if not s.ok)
        return report, plan, access


def _plays_line(result: RunResult | None) -> str:
    plays = [p for p in (result.plays if result else []) if p["seconds"] is not None]
    return ("; converge by play: " + ", ".join(f"{p['play']} {p['seconds']:.1f} s" for p in plays)) if plays else ""


def print_summary(console: Console, report: UpReport, plan: ClusterPlan, access: Access) -> None:
    from rich.table import Table

    console.print(report.phases.line() + _plays_line(report.converge), markup=False, highlight=False)
    if report.leaving:
        gone = ", ".join(report.leaving["nodes"])
        console.print(f"removed after drain: {gone}" + "".join(f"; requeued (--force): {j}" for j in report.leaving["requeued"]),
                      markup=False, highlight=False)
    for s in report.smoke:
        mark = "[yellow]skipped[/]" if s.skipped else "[green]ok[/]" if s.ok else "[red]FAILED[/]"
        console.print(f"smoke job ({escape(s.pool)}): {mark}  {escape(s.command)}  -> {escape(s.detail)}", highlight=False)
    if not report.ok:
        assert report.error is not None  # up() says why whenever the run is not ok
        console.print(f"[red]error:[/] {escape(report.error)}")
        return
    info = summary_dict(plan, access)
    t = Table(title=f"cluster {plan.name}: {len(plan.nodes)} nodes, {info['gpus']} GPUs")
    for col in ("node", "pool", "address", "GPUs"):
        t.add_column(col)
    for n in info["nodes"]:
        t.add_row(n["name"], n["pool"] or "", n["address"] or "(cloud)", f"{n['gpus']} x {n['gpu']}" if n["gpus"] else "0")
    console.print(t)
    parts = ", ".join(f"{p['name']}{'*' if p['default'] else ''} ({p['nodes']} nodes, preempt {p['preempt']})" for p in info["partitions"])
    console.print(f"partitions: {parts}", markup=False)
    console.print(f"login: {info['login']}", highlight=False, markup=False)
