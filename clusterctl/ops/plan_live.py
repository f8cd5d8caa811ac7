"""The parts of a plan that look beyond the two builds: the cost delta and, on request, the live hosts."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from clusterctl.diff.report import PlanReport
from clusterctl.render import layout

if TYPE_CHECKING:
    from clusterctl.render.compiled import Compiled
    from clusterctl.state import ClusterState


def add_cost(report: PlanReport, old_build: dict[str, str], compiled: Compiled) -> None:
    """Monthly cost before and after (from the dated price table): what the change costs in money."""
    from clusterctl.economics.cost import estimate_cost
    from clusterctl.spec.cluster import ClusterSpec

    new = estimate_cost(compiled.spec, compiled.plan)
    old = estimate_cost(ClusterSpec.model_validate(json.loads(old_build[layout.SPEC_JSON]))) if old_build else None
    report.cost = {
        "old_monthly_usd": round(old.total_monthly_usd, 2) if old else 0.0,
        "new_monthly_usd": round(new.total_monthly_usd, 2),
        "delta_monthly_usd": round(new.total_monthly_usd - (old.total_monthly_usd if old else 0.0), 2),
        "complete": new.complete and (old is None or old.complete),
        "prices": new.prices,
    }


def add_hosts(report: PlanReport, compiled: Compiled, state: ClusterState) -> None:
    """Ansible check mode with the new build on the live hosts (needs the cluster to be up)."""
    from clusterctl.ops.access import access_for
    from clusterctl.ops.hostcheck import check_hosts
    from clusterctl.render.write import write_build
    from clusterctl.state.secrets import ensure_munge_key

    build = state.dir / "plan-build"
    write_build(compiled.files, build)
    report.hosts = check_hosts(build, access_for(compiled.plan, state, lambda m: None), ensure_munge_key(state))


def add_images(report: PlanReport, compiled: Compiled, state: ClusterState) -> None:
    """Each lab or aws pool's recorded node image, and whether it is still what the spec and roles make (for aws
    pools, as `image build` judges it: image_aws.is_current)."""
    from clusterctl.core.providers import traits
    from clusterctl.engines import images
    from clusterctl.engines.local import image as lab_image
    from clusterctl.engines.local.provider import lab_for
    from clusterctl.ops import image_aws

    plan = compiled.plan
    recorded = {p.name: rec for p in plan.pools if (traits(p).lab or traits(p).rented)
                and (rec := images.recorded(state.backend, p.name))}
    if not recorded:
        return
    lab = lab_for(plan, state, lambda m: None).spec if plan.lab else None
    report.images = []
    for name, rec in recorded.items():
        pool = plan.pool(name)
        if traits(pool).lab:
            assert lab is not None
            entry = {"pool": name, "image": rec.get("image"), "rebuilt_by_up": True,
                     "current": lab_image.current_image(state.backend, plan, pool, lab) is not None}
        else:
            entry = {"pool": name, "image": rec.get("image_id"), "rebuilt_by_up": False,
                     "current": image_aws.is_current(compiled, pool, rec)}
        report.images.append(entry)


def add_cloud(report: PlanReport, compiled: Compiled, state: ClusterState) -> None:
    """What each provider's own engine would change (the Pulumi preview of the aws stack); None where none has one."""
    from clusterctl.engines.provider import providers_for

    for p in providers_for(compiled.spec):
        preview = p.preview(compiled.plan, state)
        if preview is not None:
            report.cloud = preview
