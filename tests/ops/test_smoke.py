"""The smoke job's decision: it runs only on idle nodes, in a partition that can preempt nobody, with --immediate;
with no idle node it is skipped (with the reason) and `up` still succeeds. Driven through a stand-in controller."""

from __future__ import annotations

import subprocess

from clusterctl.engines.ansible.result import RunResult
from clusterctl.ops.smoke import idle_nodes, run_smoke, smoke_partition
from clusterctl.ops.up import UpReport
from clusterctl.engines.ssh.remote import RemoteError
from clusterctl.render import render_spec
from clusterctl.validate import load_valid
from tests.conftest import ROOT

PLAN, _ = render_spec(load_valid(ROOT / "examples" / "lab.yaml"))  # gpu001, gpu002; critical + experiment


class Controller:
    """Answers sinfo with fixed node states; records srun and answers it with `srun_result`."""

    def __init__(self, states: dict[str, str], srun_result=None):
        self.states, self.srun_result, self.sruns = states, srun_result, []

    def run(self, command: str, timeout: float = 0, check: bool = True):
        if command.startswith("sinfo"):
            out = "" if " -R " in command else "".join(f"{n} {s}\n" for n, s in self.states.items())
            return subprocess.CompletedProcess(command, 0, out, "")
        self.sruns.append(command)
        if isinstance(self.srun_result, Exception):
            raise self.srun_result
        return subprocess.CompletedProcess(command, 0, self.srun_result, "")


def test_idle_nodes_only():
    assert idle_nodes(["a", "b"], {"a": "idle", "b": "idle"}) == (["a", "b"], None)
    assert idle_nodes(["a", "b", "c"], {"a": "mixed", "b": "idle", "c": "allocated"}) == (["b"], None)
    nodes, why = idle_nodes(["a", "b"], {"a": "mixed", "b": "allocated"})
    assert nodes == [] and "no idle node" in why and "allocated b" in why and "mixed a" in why


def test_smoke_runs_in_the_partition_that_preempts_nobody():
    assert smoke_partition(PLAN, ["gpu001"]) == "experiment"


def test_all_busy_is_skipped_without_submitting_and_up_still_ok():
    ctl = Controller({"gpu001": "allocated", "gpu002": "mixed"})
    [result] = run_smoke(PLAN, ctl, timeout=1)
    assert result.skipped and result.ok and "no idle node" in result.detail
    assert ctl.sruns == []
    report = UpReport("lab", converge=RunResult(status="successful", rc=0), smoke=[result])
    assert report.ok and report.to_dict(PLAN, None)["smoke"][0]["skipped"]


def test_runs_only_on_idle_nodes_immediately():
    ctl = Controller({"gpu001": "idle", "gpu002": "allocated"}, srun_result="gpu001\n")
    [result] = run_smoke(PLAN, ctl, timeout=1)
    assert result.ok and not result.skipped and result.detail == "ran on gpu001"
    [cmd] = ctl.sruns
    assert " -p experiment " in cmd and " --immediate=" in cmd and " -w gpu001 -N 1 --gres=gpu:8 " in cmd


def test_nodes_taken_before_start_is_skipped():
    busy = RemoteError("lab-ctl: `srun ...` failed (rc=1): srun: error: Unable to allocate resources: Requested nodes are busy")
    [result] = run_smoke(PLAN, Controller({"gpu001": "idle", "gpu002": "idle"}, srun_result=busy), timeout=1)
    assert result.ok and result.skipped and "taken by users' jobs" in result.detail


def test_other_srun_failure_fails():
    bad = RemoteError("lab-ctl: `srun ...` failed (rc=1): srun: error: Invalid generic resource (gres) specification")
    [result] = run_smoke(PLAN, Controller({"gpu001": "idle", "gpu002": "idle"}, srun_result=bad), timeout=1)
    assert not result.ok and not result.skipped


def test_down_nodes_still_fail():
    [result] = run_smoke(PLAN, Controller({"gpu001": "down", "gpu002": "idle"}), timeout=0.1)
    assert not result.ok and not result.skipped and "gpu001 down" in result.detail
