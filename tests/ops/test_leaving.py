"""Nodes leave by drain (ops.leaving): against a controller stand-in that keeps Slurm's node and job states and answers
the commands the product sends (scontrol, sinfo, squeue) as Slurm 22.05 prints them. The lab test
(tests/integration/test_lab_cluster.py::test_shrink_*) runs the same paths against real Slurm."""

from __future__ import annotations

import subprocess

import pytest

from clusterctl.core import hostlist
from clusterctl.diff import build_report
from clusterctl.ops import draining
from clusterctl.ops.leaving import JobsHoldLeavingNodes, WHY, leaving_nodes, resume_returning, vacate
from clusterctl.ops.rolling import affected_nodes
from clusterctl.render.compiled import Compiled
from tests.helpers import spec_of


class FakeSlurm:
    """node -> state, reason; jobs: id -> (node, state). A job ends after `runs_for` polls of sinfo."""

    def __init__(self, nodes, jobs=None, runs_for=3, requeue_fails=()):
        self.nodes = {n: ["idle", ""] for n in nodes}
        self.jobs = dict(jobs or {})  # id -> node
        for n in self.jobs.values():
            self.nodes[n][0] = "mixed"
        self.runs_for, self.polls, self.requeue_fails = runs_for, 0, set(requeue_fails)
        self.commands: list[str] = []

    def _done(self, cmd, out="", rc=0, err=""):
        return subprocess.CompletedProcess(cmd, rc, out, err)

    def run(self, command, timeout=120, check=True):
        self.commands.append(command)
        words = command.split()
        if command.startswith("scontrol update"):
            names = hostlist.expand(words[2].removeprefix("nodename=").strip("'"))
            for n in names:
                if "state=drain" in command:
                    self.nodes[n][1] = command.split("reason=", 1)[1].strip("'")
                elif "state=resume" in command:
                    self.nodes[n][1] = ""
            return self._done(command)
        if command.startswith("scontrol requeue"):
            bad = [j for j in words[2:] if j in self.requeue_fails]
            for j in words[2:]:
                if j not in self.requeue_fails:
                    self.jobs.pop(j, None)  # back in the queue; the drain keeps it off these nodes
            return self._done(command, rc=1 if bad else 0,
                              err="".join(f"Requeue of JobId={j} returned an error: Job is not requeueable\n" for j in bad))
        if command.startswith("scancel"):
            self.jobs.pop(words[1], None)
            return self._done(command)
        if command.startswith("sinfo") and "-t drain" in command:
            return self._done(command, "".join(f"{n}|{r}\n" for n, (_, r) in self.nodes.items() if r))
        if command.startswith("sinfo"):
            self.polls += 1
            if self.polls > self.runs_for:
                self.jobs.clear()  # the user's jobs finish
            names = hostlist.expand(command.split("-n ")[1].strip("'"))
            return self._done(command, "".join(f"{n} {self._state(n)}\n" for n in names if n in self.nodes))
        if command.startswith("squeue"):
            names = set(hostlist.expand(words[words.index("-w") + 1].strip("'")))
            return self._done(command, "".join(f"{j}|alice|train|1:23|{n}\n" for j, n in self.jobs.items() if n in names))
        raise AssertionError(f"unexpected command {command}")

    def _state(self, n):
        busy = n in self.jobs.values()
        if self.nodes[n][1]:
            return "draining" if busy else "drained"
        return "mixed" if busy else "idle"


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch):
    monkeypatch.setattr(draining, "POLL_SECONDS", 0.01)


def _compiled(count):
    return Compiled.of(spec_of("lab.yaml", lambda d: d["pools"][0].update(count=count)))


def test_the_nodes_a_smaller_count_drops_are_the_leaving_ones():
    assert leaving_nodes(_compiled(3).files, _compiled(2).plan) == ["gpu003"]
    assert leaving_nodes(_compiled(2).files, _compiled(3).plan) == []
    assert leaving_nodes({}, _compiled(2).plan) == []  # never applied: nothing leaves


def test_a_shrink_drains_no_node_it_keeps():
    """The partition, gres and topology lines lose gpu003 too; that is no reason to roll through gpu001 and gpu002."""
    small = _compiled(2)
    report = build_report("lab", _compiled(3).files, small.files)
    assert [(n.name, n.kind) for n in report.nodes] == [("gpu003", "removed")]
    assert affected_nodes(report, small.plan) == []
    # A real drain change in the same pool still rolls through every node.
    both = Compiled.of(spec_of("lab.yaml", lambda d: d["pools"][0].update(count=2, cpus=1)))
    assert affected_nodes(build_report("lab", _compiled(3).files, both.files), both.plan) == ["gpu001", "gpu002"]


def test_leaving_nodes_are_drained_and_their_jobs_waited_for():
    slurm = FakeSlurm(["gpu001", "gpu002", "gpu003"], {"41": "gpu003"}, runs_for=5)
    said: list[str] = []
    entry = vacate(slurm, ["gpu003"], timeout=30, force=False, log=said.append)
    assert entry["waited_for"] == ["job 41 (train, user alice, running 1:23, on gpu003)"] and entry["requeued"] == []
    assert slurm.nodes["gpu003"][1] == f"clusterctl: {WHY}"
    assert not slurm.nodes["gpu001"][1] and not slurm.nodes["gpu002"][1]  # nothing else drained
    assert not any(c.startswith(("scancel", "scontrol requeue")) for c in slurm.commands)  # nothing killed
    assert "waiting for job 41" in said[0]


def test_a_drain_timeout_stops_the_command_naming_job_and_node_and_leaves_the_node_drained():
    slurm = FakeSlurm(["gpu001", "gpu003"], {"41": "gpu003"}, runs_for=10**9)
    with pytest.raises(JobsHoldLeavingNodes) as e:
        vacate(slurm, ["gpu003"], timeout=0.05, force=False, log=lambda m: None)
    msg = str(e.value)
    assert "gpu003 still run job(s)" in msg and "job 41 (train, user alice" in msg and "--force" in msg
    assert "Nothing else was changed" in msg
    assert slurm.nodes["gpu003"][1] == f"clusterctl: {WHY}" and "41" in slurm.jobs  # still draining, job alive


def test_force_requeues_the_jobs_and_cancels_only_those_slurm_cannot_requeue():
    slurm = FakeSlurm(["gpu003", "gpu004"], {"41": "gpu003", "42": "gpu004"}, runs_for=10**9, requeue_fails={"42"})
    said: list[str] = []
    entry = vacate(slurm, ["gpu003", "gpu004"], timeout=3600, force=True, log=said.append)
    assert entry["requeued"] == ["job 41 (train, user alice, running 1:23, on gpu003)"]
    assert "scontrol requeue 41 42" in slurm.commands and "scancel 42" in slurm.commands
    assert "scancel 41" not in slurm.commands
    assert any("requeued job 41" in m for m in said) and any("job 42" in m and "cancelled" in m for m in said)


def test_nodes_slurm_no_longer_knows_are_passed_over():
    slurm = FakeSlurm(["gpu001"])
    assert vacate(slurm, ["gpu003"], timeout=1, force=False, log=lambda m: None)["waited_for"] == []
    assert not any(c.startswith("scontrol") for c in slurm.commands)


def test_a_node_the_spec_keeps_after_a_stopped_shrink_is_resumed_but_no_admins_drain():
    slurm = FakeSlurm(["gpu001", "gpu002", "gpu003"])
    slurm.nodes["gpu002"][1] = "clusterctl: " + WHY
    slurm.nodes["gpu001"][1] = "bad DIMM, ticket 123"  # an administrator's drain stays
    assert resume_returning(slurm, _compiled(3).plan) == ["gpu002"]
    assert slurm.nodes["gpu001"][1] == "bad DIMM, ticket 123" and not slurm.nodes["gpu002"][1]
