"""apply's gates without a cluster: stale plans, forbidden and replace changes, and which nodes a rolling change drains."""

import pytest

from clusterctl.ops.apply import PolicyRefused, StalePlan, check_fresh, check_policy
from clusterctl.core import hostlist
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


class _Node:
    """What Rollout runs on one host, recorded; the controller answers sinfo with every asked node drained."""

    def __init__(self, name, log, health_rc=0, health_out=""):
        self.name, self.log, self.health = name, log, (health_rc, health_out)

    def run(self, command, timeout=120, check=True):
        import subprocess

        self.log.append((self.name, command))
        if command.startswith("sinfo"):
            nodes = command.split("-n ")[1].strip("'")
            return subprocess.CompletedProcess(command, 0, "".join(f"{n} drained\n" for n in hostlist.expand(nodes)), "")
        if "clusterctl-healthcheck" in command:
            return subprocess.CompletedProcess(command, self.health[0], self.health[1], "")
        return subprocess.CompletedProcess(command, 0, "", "")


def _rollout(monkeypatch, unhealthy):
    """A driver change on the lab (2 GPU nodes, batches of 1) rolled out against recorded hosts; `unhealthy`: {node:
    the health check's FAIL line}."""
    from clusterctl.engines.ansible.result import RunResult
    from clusterctl.ops import up
    from clusterctl.ops.rolling import Rollout

    report, plan = _report(lambda d: d.setdefault("software", {}).update(nvidia_driver="575.57.08"))
    assert report.policy == "drain"
    log, converged = [], []
    monkeypatch.setattr(up, "converge", lambda build, access, key, console, quiet, fast=True, title="", limit=None:
                        converged.append(limit) or RunResult(status="successful"))

    class Access:
        def remote(self, node):
            fail = unhealthy.get(node.name)
            return _Node(node.name, log, 1 if fail else 0, f"{fail}\n" if fail else f"OK {node.name}\n")

    result, timeline = Rollout(report, console=None, quiet=True)(plan, None, Access(), None)
    return result, timeline, log, converged


def test_each_batch_passes_the_health_check_before_it_is_resumed(monkeypatch):
    result, timeline, log, converged = _rollout(monkeypatch, {})
    assert result.ok and converged == ["lab-ctl", "gpu001", "gpu002"]
    assert [t["health"] for t in timeline] == [{"gpu001": "OK"}, {"gpu002": "OK"}]
    ctl = [c for host, c in log if host == "lab-ctl" and c.startswith("scontrol")]
    assert [c.split()[2:4] for c in ctl] == [["nodename=gpu001", "state=drain"], ["nodename=gpu001", "state=resume"],
                                              ["nodename=gpu002", "state=drain"], ["nodename=gpu002", "state=resume"]]
    health = [i for i, (h, c) in enumerate(log) if h == "gpu001" and "healthcheck --dry-run" in c]
    resume = [i for i, (h, c) in enumerate(log) if "nodename=gpu001 state=resume" in c]
    assert health and resume and health[0] < resume[0]


def test_a_batch_failing_its_health_check_stays_drained_and_the_rollout_stops(monkeypatch):
    why = "FAIL gpu001: clusterctl-health: driver 570.172.08 loaded, expected 575.57.08"
    result, timeline, log, converged = _rollout(monkeypatch, {"gpu001": why})
    assert not result.ok and converged == ["lab-ctl", "gpu001"]  # gpu002 never touched
    assert [(f.host, f.task) for f in result.failures] == [("gpu001", "health check")]
    assert why in result.failures[0].message and "left drained" in result.failures[0].message
    assert not any("state=resume" in c for _, c in log)
    assert not any("gpu002" in c for _, c in log)


def test_the_nodes_of_a_batch_are_health_checked_side_by_side(monkeypatch):
    """A batch can be a rack: its health checks run at once, not one after another (each waits here for the other)."""
    import subprocess
    import threading

    from clusterctl.engines.ansible.result import RunResult
    from clusterctl.ops import up
    from clusterctl.ops.rolling import Rollout

    def both(d):
        d.setdefault("software", {}).update(nvidia_driver="575.57.08")
        d["scheduler"]["slurm"]["drain_batch_size"] = 2

    report, plan = _report(both)
    monkeypatch.setattr(up, "converge", lambda *a, **k: RunResult(status="successful"))
    together = threading.Barrier(2, timeout=10)
    log = []

    class Together(_Node):
        def run(self, command, timeout=120, check=True):
            if "clusterctl-healthcheck" in command:
                together.wait()  # BrokenBarrierError, so a failed check, if the other node's check is not running
                return subprocess.CompletedProcess(command, 0, f"OK {self.name}\n", "")
            return super().run(command, timeout, check)

    class Access:
        def remote(self, node):
            return Together(node.name, log)

    result, timeline = Rollout(report, console=None, quiet=True)(plan, None, Access(), None)
    assert result.ok, result.failures
    assert [t["health"] for t in timeline] == [{"gpu001": "OK", "gpu002": "OK"}]
