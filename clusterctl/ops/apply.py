"""`clusterctl apply`: apply exactly the reviewed plan, with its policies enforced.

Refused when the plan is stale (the spec, the rendered build or the applied state moved since it was made), when a
change is `forbidden`, and when a change is `replace` without --allow-replace. `drain` changes roll out in batches.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from clusterctl.diff import build_report
from clusterctl.diff.report import PlanReport
from clusterctl.core.errors import ClusterctlError
from clusterctl.render.compiled import Compiled
from clusterctl.state import Applied, ClusterState

if TYPE_CHECKING:
    from rich.console import Console

    from clusterctl.compile.model import ClusterPlan
    from clusterctl.core.findings import Finding
    from clusterctl.engines.aws.automation import Preview
    from clusterctl.ops.access import Access
    from clusterctl.ops.up import UpReport


class StalePlan(ClusterctlError):
    pass


class PolicyRefused(ClusterctlError):
    pass


def current_report(compiled: Compiled, state: ClusterState | None = None) -> PlanReport:
    return report_against(compiled.name, (state or ClusterState.for_spec(compiled.spec)).applied(), compiled.files)


def report_against(cluster: str, applied: Applied, files: dict[str, str]) -> PlanReport:
    """The plan of `files` over the applied build, stamped with the applied version: a plan made against version N
    is stale once N+1 is recorded (from any runner), even when N+1 holds the same build."""
    report = build_report(cluster, applied.files, files)
    report.fingerprint["applied_version"] = applied.version
    return report


def check_fresh(saved: dict, report: PlanReport) -> None:
    was, now = saved.get("fingerprint") or {}, report.fingerprint
    if was.get("spec") != now["spec"]:
        raise StalePlan("stale plan: the spec changed since the plan was made; run `clusterctl plan` again and review it")
    if was.get("build") != now["build"]:
        raise StalePlan("stale plan: the rendered build differs from the reviewed one (templates or clusterctl changed); "
                        "run `clusterctl plan` again")
    if was.get("applied") != now["applied"] or was.get("applied_version") != now.get("applied_version"):
        raise StalePlan("stale plan: the cluster was applied since the plan was made (its applied state moved); "
                        "run `clusterctl plan` again")


def check_policy(report: PlanReport, allow_replace: bool) -> None:
    forbidden = [c for c in report.spec_changes if c.policy.value == "forbidden"]
    if forbidden:
        raise PolicyRefused("refused: " + "; ".join(f"{c.path} cannot change on an existing cluster ({c.old} -> {c.new})"
                                                    for c in forbidden))
    replace = [c for c in report.spec_changes if c.policy.value == "replace"]
    if replace and not allow_replace:
        raise PolicyRefused(
            "refused: these changes replace nodes or cloud resources: "
            + "; ".join(f"{c.path} ({c.old} -> {c.new})" for c in replace)
            + ". Pass --allow-replace to go ahead."
        )


def reviewed_cloud(saved: dict | None, confirm: Callable[[Preview], bool] | None) -> Callable[[Preview], bool] | None:
    """apply --plan: what Pulumi previews now must be what the plan's reviewers saw (the same resources, each with
    the same operation); a stack that moved since (a console edit, a plain `pulumi up`) makes the plan stale.
    Plans made where no preview was possible (no CLI, no stack yet) said so; for those the confirmation decides."""
    cloud = (saved or {}).get("cloud") or {}
    if not cloud.get("checked"):
        return confirm

    reviewed = sorted((s["op"], s["type"], s["name"]) for s in cloud.get("steps", []))

    def gate(preview: Preview) -> bool:
        now = sorted(tuple(s) for s in preview.steps)
        if now != reviewed:
            extra, gone = sorted(set(now) - set(reviewed)), sorted(set(reviewed) - set(now))
            detail = "; ".join([f"now also {op} {name}" for op, _, name in extra[:3]] +
                               [f"no longer {op} {name}" for op, _, name in gone[:3]])
            raise StalePlan(f"stale plan: the cloud preview differs from the reviewed one ({detail}); the stack moved "
                            "since the plan was made: run `clusterctl plan` again and review it. Nothing was changed")
        return confirm(preview) if confirm else False

    return gate


def load_saved(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ClusterctlError(f"{path}: not a saved plan ({e}); save one with `clusterctl plan SPEC --out {path}`") from None


def apply(compiled: Compiled, console: Console, plan_file: Path | None = None, allow_replace: bool = False,
          quiet: bool = False, confirm: Callable[[Preview], bool] | None = None,
          on_findings: Callable[[list[Finding]], None] | None = None, force: bool = False,
          drain_timeout: float | None = None,
          ) -> tuple[PlanReport, UpReport | None, ClusterPlan | None, Access | None]:
    """Returns (report, up_report, plan, access); up_report is None when there was nothing to do.
    compiled: the spec compiled once by the caller; the gates and the converge all use it.
    force, drain_timeout: for nodes the change removes, as `up` takes them (ops.leaving)."""
    from clusterctl.engines.provider import providers_for
    from clusterctl.ops.rolling import Rollout
    from clusterctl.ops.up import check_tools, up

    saved = load_saved(plan_file) if plan_file else None

    state = ClusterState.for_spec(compiled.spec)

    def gates() -> PlanReport:
        report = current_report(compiled, state)
        if saved is not None:
            check_fresh(saved, report)
        check_policy(report, allow_replace)
        return report

    state.check_ready()  # a backend that cannot keep secrets is refused before anything, the state read included
    gates()  # read-only: a stale or refused plan is named as such, even where the pulumi CLI is missing
    check_tools(providers_for(compiled.spec))  # before the lock and the state dir: without them nothing may change
    # The whole apply holds the lock: the plan is judged again against an applied state nobody else can move meanwhile.
    with state.lock("apply"):
        report = gates()
        if not report.has_changes:
            return report, None, None, None
        log = (lambda m: None) if quiet else (lambda m: console.print(f"  {m}", markup=False))
        needs_rolling = report.policy in ("drain", "replace") or any(n.kind == "removed" for n in report.nodes)
        up_report, plan, access = up(compiled, console, quiet=quiet, confirm=reviewed_cloud(saved, confirm),
                                     on_findings=on_findings, locked=True, state=state, force=force,
                                     drain_timeout=drain_timeout,
                                     rollout=Rollout(report, console, quiet, log=log) if needs_rolling else None)
    return report, up_report, plan, access
