"""`clusterctl drift`: has the live cluster moved away from the last apply? Ansible check mode with the applied build
on every host (a hand-edited slurm.conf shows up as that file on that host); the cloud stack through Pulumi.
Exit 0: no drift, 2: drift, 1: could not tell."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from clusterctl.ops.access import access_for
from clusterctl.state.secrets import ensure_munge_key
from clusterctl.core.errors import ClusterctlError
from clusterctl.core.providers import traits
from clusterctl.ops.phases import Phases
from clusterctl.ops.phases import line as phases_line
from clusterctl.state import ClusterState

if TYPE_CHECKING:
    from rich.console import Console

    from clusterctl.compile.model import ClusterPlan
    from clusterctl.ops.access import Access
    from clusterctl.render.compiled import Compiled


def drift(compiled: Compiled, console: Console | None = None) -> dict:
    from clusterctl.render.write import read_build

    state = ClusterState.for_spec(compiled.spec)
    applied = state.applied_dir
    if not read_build(applied):
        raise ClusterctlError(f"cluster {compiled.name} has not been applied (state: {state.backend.url}, {state.dir})")
    plan = compiled.plan
    phases = Phases()
    access = access_for(plan, state, lambda m: None)
    with phases.phase("hosts"):
        hosts = check_applied(applied, access, state, console)
    report: dict = {"cluster": compiled.name, "hosts": hosts, "cloud": None}
    with phases.phase("cloud"):
        if plan.aws_pools or traits(plan.controller).rented:
            from clusterctl.engines.aws.burst.plan import plan_from_json
            from clusterctl.render import layout

            # The baseline is the applied build's stack config, whatever a later `plan` left in Pulumi's workspace.
            report["cloud"] = cloud_drift(plan_from_json(read_build(applied)[layout.PLAN_JSON]), state)
    report["phases"] = phases.to_dict()
    drifted = any(h["changes"] for h in hosts["by_host"].values()) or bool((report["cloud"] or {}).get("changes"))
    report["drift"] = drifted
    report["complete"] = hosts["ok"] and (report["cloud"] is None or report["cloud"].get("checked", False))
    return report


def check_applied(applied: Path, access: Access, state: ClusterState, console: Console | None) -> dict:
    from clusterctl.ops.hostcheck import check_hosts

    return check_hosts(applied, access, ensure_munge_key(state), console)


def cloud_drift(applied_plan: ClusterPlan, state: ClusterState) -> dict:
    """A refresh-preview of the stack with the applied build's config: anything it would change has drifted."""
    from clusterctl.engines.aws import automation
    from clusterctl.engines.aws.up import existing_stack_or_reason, stack_settings

    stack, reason = existing_stack_or_reason(applied_plan, state)
    if stack is None:
        return {"checked": False, "reason": reason}
    preview = automation.preview(automation.open_stack(state, stack_settings(applied_plan, state)), refresh=True)
    changes = {k: v for k, v in preview.changes.items() if k != "same" and v}
    return {"checked": True, "changes": changes}


def print_drift(console: Console, report: dict) -> None:
    by_host = report["hosts"]["by_host"]
    for host, info in by_host.items():
        for c in info["changes"]:
            files = ", ".join(c["files"]) or "-"
            console.print(f"[yellow]drift[/] {escape(host + ': ' + c['task'] + ' (' + files + ')')}", highlight=False)
    for f in report["hosts"]["failures"]:
        console.print("[red]could not check[/] " + escape(f"{f['host']}: {f['task']}: {f['message']}"), highlight=False)
    cloud = report["cloud"]
    if cloud is not None:
        if not cloud.get("checked"):
            console.print(f"[red]cloud not checked:[/] {escape(cloud['reason'])}", highlight=False)
        elif cloud.get("changes"):
            console.print(f"[yellow]cloud drift:[/] {escape(str(cloud['changes']))}", highlight=False)
    if not report["drift"]:
        console.print(f"cluster {report['cluster']}: no drift" + ("" if report["complete"] else " found (check incomplete)"))
    console.print(phases_line(report.get("phases", {})), markup=False, highlight=False)
