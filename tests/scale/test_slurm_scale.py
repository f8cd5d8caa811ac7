"""The rendered 1,024-node cluster (tests/scale/scale-1024.yaml) on real Slurm 22.05: one slurmctld, 1,024 slurmds on
127.0.0.1, and up to 256 more for the elastic p5 pool's CLOUD nodes when Slurm resumes them (tests/scale/rig.py says
what differs from the rendered config). About two minutes on 2 cores, most of it starting slurmds and waiting out the
preemption grace time; figures are printed by benchmarks/slurm_scale.py, not asserted here."""

from __future__ import annotations

import time

import pytest

from clusterctl.core import hostlist
from tests.helpers import needs_root
from tests.scale import rig as scale

pytestmark = [pytest.mark.slurm, needs_root(scale.ROOT_WHY),
              pytest.mark.skipif(scale.slurm_missing() is not None, reason=str(scale.slurm_missing()))]

NODES = 1024
CLOUD = 256


@pytest.fixture(scope="module")
def rig():
    r = scale.make_rig()
    assert len(r.plan.nodes) == NODES + CLOUD
    try:
        r.start_munge()
        r.start_controller()
        r.start_power()
        r.start_nodes()
        r.wait_idle(NODES, timeout=300)
        yield r
    finally:
        r.stop()
        if not any(r.dir.glob("core*")):
            import shutil

            shutil.rmtree(r.dir, ignore_errors=True)


def test_all_nodes_idle_with_their_gpus(rig):
    assert rig.node_states() == {"idle": NODES, "idle~": CLOUD}  # ~: powered down until a job needs them
    node = rig.run("scontrol", "-o", "show", "node", "b200-0512").stdout
    assert "Gres=gpu:b200:8" in node and "CoresPerSocket=56" in node and "MemSpecLimit=32768" in node


def test_whole_cluster_gpu_job_completes(rig):
    job_id = rig.sbatch("-N", str(NODES), "--gres=gpu:8", "--wrap", "true")
    job = rig.wait_job(job_id, ("COMPLETED",), timeout=120)
    assert job["JobState"] == "COMPLETED", job
    assert job["NumNodes"] == str(NODES) and job["TresPerNode"] == "gres:gpu:8"


def test_two_half_node_gpu_jobs_share_a_node(rig):
    """DefMemPerGPU (and MemSpecLimit) leave room for a second 4-GPU job on an 8-GPU node."""
    jobs = [rig.sbatch("-N", "1", "-w", "b200-0200", "--gres=gpu:4", "--wrap", "sleep 300") for _ in range(2)]
    try:
        for job_id in jobs:
            job = rig.wait_job(job_id, ("RUNNING",), timeout=60)
            assert job["JobState"] == "RUNNING" and job["NodeList"] == "b200-0200", job
    finally:
        rig.run("scancel", *jobs, check=False)


def test_switches_one_keeps_a_32_node_job_in_one_leaf(rig):
    job_id = rig.sbatch("-N", "32", "--switches=1", "--gres=gpu:8", "--wrap", "sleep 300")
    try:
        job = rig.wait_job(job_id, ("RUNNING",), timeout=60)
        assert job["JobState"] == "RUNNING", job
        nodes = set(hostlist.expand(job["NodeList"]))
        leaves = [s for s in rig.plan.switches if s.nodes and nodes <= set(s.nodes)]
        assert len(nodes) == 32 and len(leaves) == 1, job["NodeList"]
    finally:
        rig.run("scancel", job_id, check=False)


def test_critical_job_preempts_experiment_job_which_is_requeued(rig):
    """The experiment job keeps running through its GraceTime (30 s in the rig's spec), then Slurm requeues it; the
    next periodic check (every 30 s) does it, so this takes up to a minute. (Jobs that exit within the grace time:
    the two tests below.)"""
    nodes = "h100-[0101-0102]"
    exp = rig.sbatch("-p", "experiment", "-N", "2", "-w", nodes, "--gres=gpu:8", "--wrap", "sleep 600")
    try:
        assert rig.wait_job(exp, ("RUNNING",), timeout=60)["JobState"] == "RUNNING"
        crit = rig.sbatch("-p", "critical", "-N", "2", "-w", nodes, "--gres=gpu:8", "--wrap", "sleep 600")
        job = rig.wait_job(crit, ("RUNNING",), timeout=150)
        assert job["JobState"] == "RUNNING" and job["NodeList"] == nodes, job
        preempted = rig.job(exp)
        assert preempted["JobState"] == "PENDING" and int(preempted["Restarts"]) >= 1, preempted
    finally:
        rig.run("scancel", exp, check=False)
        rig.run("scancel", "--user=root", check=False)


def _preempt(rig, nodes: str, experiment_script: str) -> tuple[dict, dict]:
    """Run the script as an experiment job on `nodes`, preempt it with a critical job; both jobs' records."""
    script = rig.dir / f"exp-{nodes.replace('[', '').replace(']', '')}.sh"
    script.write_text("#!/bin/sh\n" + experiment_script + "\n")
    exp = rig.sbatch("-p", "experiment", "-N", "2", "-w", nodes, "--gres=gpu:8", str(script))
    try:
        assert rig.wait_job(exp, ("RUNNING",), timeout=60)["JobState"] == "RUNNING"
        time.sleep(1)  # let srun start the step the grace-time SIGTERM goes to
        crit = rig.sbatch("-p", "critical", "-N", "2", "-w", nodes, "--gres=gpu:8", "--wrap", "sleep 600")
        return rig.wait_job(crit, ("RUNNING",), timeout=20), rig.job(exp)
    finally:
        rig.run("scancel", "--user=root", check=False)


def test_checkpointing_job_requeues_itself_within_the_grace_time(rig):
    """What the rendered slurm.conf tells checkpointing jobs to do: requeue themselves on SIGTERM; the critical job
    then starts at once instead of after the grace time."""
    crit, exp = _preempt(rig, "h100-[0201-0202]",
                         "srun sh -c 'trap \"scontrol requeue $SLURM_JOB_ID; exit 0\" TERM; sleep 600 & wait'")
    assert crit["JobState"] == "RUNNING", crit
    assert exp["JobState"] == "PENDING" and int(exp["Restarts"]) >= 1, exp


def test_job_exiting_within_the_grace_time_is_not_requeued(rig):
    """The Slurm 22.05 behaviour the rendered slurm.conf warns about: exiting on the SIGTERM ends the job FAILED."""
    crit, exp = _preempt(rig, "h100-[0301-0302]", "srun sleep 600")
    assert crit["JobState"] == "RUNNING", crit
    assert exp["JobState"] == "FAILED" and exp["Restarts"] == "0", exp


def test_burst_job_resumes_cloud_nodes_and_completes(rig):
    """Slurm power saving calls ResumeProgram (the rig's: it starts those nodes' slurmds); the job runs once they
    register. Slurm checks powering-up nodes every 30 s or so, hence the timeout."""
    job_id = rig.sbatch("-p", "burst", "-N", "32", "--gres=gpu:8", "--wrap", "true")
    job = rig.wait_job(job_id, ("COMPLETED",), timeout=150)
    assert job["JobState"] == "COMPLETED", job
    resumed = [names for _, action, names in rig.power_log if action == "resume"]
    assert resumed and set(hostlist.expand(job["NodeList"])) <= {n for h in resumed for n in hostlist.expand(h)}
