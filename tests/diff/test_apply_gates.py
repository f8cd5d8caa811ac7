"""apply's gates without a cluster: stale plans, forbidden and replace changes, and which nodes a rolling change drains."""

import pytest

from clusterctl.ops.apply import PolicyRefused, StalePlan, check_fresh, check_policy
from clusterctl.ops.rolling import affected_nodes, batches
from clusterctl.compile import compile_plan
from clusterctl.diff import build_report
from clusterctl.render import render_spec
from tests.helpers import spec_of


def _report(edit, name="lab.yaml"):
    old_spec, new_spec = spec_of(name), spec_of(name, edit)
    _, old = render_spec(old_spec)
    _, new = render_spec(new_spec)
    return build_report(new_spec.name, old, new), compile_plan(new_spec)


def test_fresh_plan_passes_and_each_kind_of_staleness_is_named():
    report, _ = _report(lambda d: d["pools"][0].update(count=3))
    saved = {"fingerprint": dict(report.fingerprint)}
    check_fresh(saved, report)
    for key, words in (("spec", "spec changed"), ("build", "rendered build"), ("applied", "applied since")):
        stale = {"fingerprint": {**report.fingerprint, key: "0" * 64}}
        with pytest.raises(StalePlan, match=words):
            check_fresh(stale, report)


def test_replace_needs_allow_replace_and_forbidden_is_refused():
    report, _ = _report(lambda d: d["pools"][0].update(gpu="h200"))
    with pytest.raises(PolicyRefused, match="--allow-replace"):
        check_policy(report, allow_replace=False)
    check_policy(report, allow_replace=True)
    forbidden, _ = _report(lambda d: d["controller"].update(hostname="other-ctl"))
    with pytest.raises(PolicyRefused, match="cannot change"):
        check_policy(forbidden, allow_replace=True)


def test_live_change_passes_the_gate():
    report, _ = _report(lambda d: d["pools"][0].update(count=3))
    check_policy(report, allow_replace=False)


def test_drain_change_on_a_pool_drains_its_nodes_in_batches():
    report, plan = _report(lambda d: d["pools"][0].update(cpus=1))
    assert report.policy == "drain"
    assert affected_nodes(report, plan) == ["gpu001", "gpu002"]
    assert batches(["a", "b", "c"], 2) == [["a", "b"], ["c"]]


def test_live_change_drains_nothing():
    report, plan = _report(lambda d: d["pools"][0].update(count=3))
    assert affected_nodes(report, plan) == []


# --- apply --plan: the cloud preview must be the reviewed one ------------------------------------------------------

def _preview(*steps):
    from clusterctl.engines.aws.automation import Preview

    return Preview({"update": len(steps)}, list(steps))


LT_STEP = ("update", "aws:ec2/launchTemplate:LaunchTemplate", "p5spot-p5-lt")
INSTANCE_STEP = ("replace", "aws:ec2/instance:Instance", "p5001")


def test_apply_goes_ahead_when_pulumi_previews_what_was_reviewed():
    from clusterctl.ops.apply import reviewed_cloud

    saved = {"cloud": {"checked": True, "steps": [{"op": op, "type": t, "name": n} for op, t, n in (INSTANCE_STEP, LT_STEP)]}}
    asked = []
    gate = reviewed_cloud(saved, lambda p: asked.append(p) or True)
    assert gate(_preview(LT_STEP, INSTANCE_STEP)) is True and len(asked) == 1


def test_apply_refuses_a_plan_whose_cloud_preview_moved():
    from clusterctl.ops.apply import reviewed_cloud

    saved = {"cloud": {"checked": True, "steps": [{"op": op, "type": t, "name": n} for op, t, n in (LT_STEP,)]}}
    asked = []
    gate = reviewed_cloud(saved, lambda p: asked.append(p) or True)
    with pytest.raises(StalePlan, match="now also replace p5001.*Nothing was changed"):
        gate(_preview(LT_STEP, INSTANCE_STEP))
    assert asked == []  # refused before anyone is asked, so nothing was made


def test_a_plan_without_a_preview_leaves_it_to_the_confirmation():
    from clusterctl.ops.apply import reviewed_cloud

    confirm = lambda p: True  # noqa: E731
    assert reviewed_cloud({"cloud": {"checked": False, "reason": "no pulumi CLI"}}, confirm) is confirm
    assert reviewed_cloud(None, confirm) is confirm
