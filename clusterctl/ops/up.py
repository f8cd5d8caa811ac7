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

from clusterctl.engines.ansible.progress import Progress, print_recap
from clusterctl.engines.ansible.result import RunResult
from clusterctl.engines.ansible.runner import PlaybookRun, run_playbook
from clusterctl.ops.access import Access, access_for
from clusterctl.state.secrets import ensure_munge_key, playbook_vars
from clusterctl.ops.smoke import SmokeResult, run_smoke
from clusterctl.compile.model import ClusterPlan
from clusterctl.core.errors import ClusterctlError
from clusterctl.render import render_spec
from clusterctl.render.write import write_build
from clusterctl.state import ClusterState


class ApplyError(ClusterctlError):
    pass


@dataclass
class UpReport:
    cluster: str
    converge: RunResult | None = None
    smoke: list[SmokeResult] = field(default_factory=list)
    error: str | None = None
    batches: list[dict] = field(default_factory=list)  # rolling changes: each drained batch and when

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


def converge(plan_build: Path, access: Access, munge_key: Path, console, quiet: bool, check: bool = False,
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


def has_aws(spec) -> bool:
    return spec.controller.provider == "aws" or any(p.provider == "aws" for p in spec.pools)


def up(spec, console, quiet: bool = False, fast: bool = True, confirm=None, on_findings=None, locked: bool = False,
       rollout=None, state: ClusterState | None = None) -> tuple[UpReport, ClusterPlan, Access]:
    """Bring the cluster to the spec. Raises (before converging) when the cloud part cannot go ahead.

    confirm(preview) -> bool decides whether the previewed AWS changes are made (the CLI asks, or --yes).
    locked: the caller (apply) already holds the cluster's lock (through `state`, which it passes).
    rollout(plan, build, access, key) -> RunResult: converges in drained batches instead of all hosts at once.
    """
    if has_aws(spec):
        from clusterctl.engines.aws.automation import require_pulumi_cli

        require_pulumi_cli()  # before anything, the state dir included: without the CLI nothing may change
    state = state or ClusterState.for_spec(spec)
    log = (lambda msg: None) if quiet else (lambda msg: console.print(f"  {msg}", highlight=False, markup=False))
    with nullcontext() if locked else state.lock("up"):
        plan, files = render_spec(spec)
        if has_aws(spec):
            from clusterctl.ops.cloud import cloud_facts
            from clusterctl.engines.aws.up import cloud_up

            result = cloud_up(plan, state, confirm=confirm or (lambda preview: False), console=console, quiet=quiet,
                              on_findings=on_findings)
            plan, files = render_spec(spec, cloud_facts(result.outputs))
        build = state.dir / "build"
        write_build(files, build)
        access = access_for(plan, state, log)
        report = UpReport(plan.name)
        if access.lab is not None:
            if not quiet:
                console.print(f"lab nodes: {', '.join(n.name for n in plan.all_nodes if n.provider == 'local')}", markup=False)
            access.lab.up()
        key = ensure_munge_key(state)
        if rollout is not None:
            report.converge, report.batches = rollout(plan, build, access, key)
        else:
            report.converge = converge(build, access, key, console, quiet, fast=fast, title=f"converging {plan.name}")
        if not quiet:
            print_recap(console, report.converge)
        if not report.converge.ok:
            report.error = f"converge failed on {len({f.host for f in report.converge.failures})} host(s); run `clusterctl up` again after fixing"
            return report, plan, access
        report.smoke = run_smoke(plan, access.remote(plan.controller))
        if all(s.ok for s in report.smoke):
            state.record_applied(files)
        else:
            report.error = "smoke job failed: " + "; ".join(s.detail for s in report.smoke if not s.ok)
        return report, plan, access


def print_summary(console, report: UpReport, plan: ClusterPlan, access: Access) -> None:
    from rich.table import Table

    for s in report.smoke:
        mark = "[green]ok[/]" if s.ok else "[red]FAILED[/]"
        console.print(f"smoke job ({escape(s.pool)}): {mark}  {escape(s.command)}  -> {escape(s.detail)}", highlight=False)
    if not report.ok:
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
