"""The rendered 1,024-node cluster (tests/scale/scale-1024.yaml) on real Slurm 22.05: one slurmctld, 1,024 slurmds on
127.0.0.1, and the elastic p5 pool's 512 CLOUD nodes, powered up by the product's `clusterctl burst resume` against
moto_server (a slurmd started for each instance moto launched) and released by `clusterctl burst suspend`
(tests/scale/rig.py says what differs from the rendered config). A few minutes on 2 cores, most of it starting
slurmds and waiting out the preemption grace time and the 60 s SuspendTime (the burst job runs early, so the other
tests run while its nodes wait to be released); figures are printed by benchmarks/slurm_scale.py, not asserted here."""

from __future__ import annotations

import time

import pytest

from clusterctl.core import hostlist
from clusterctl.engines.aws.burst.slurm import parse_show_node
from tests.helpers import needs_root
from tests.scale import rig as scale

pytestmark = [pytest.mark.slurm, needs_root(scale.ROOT_WHY),
              pytest.mark.skipif(scale.slurm_missing() is not None, reason=str(scale.slurm_missing()))]

NODES = 1024
CLOUD = 512
BURST = 256  # nodes of the burst job


@pytest.fixture(scope="module")
def rig():
    r = scale.make_rig()
    assert len(r.plan.nodes) == NODES + CLOUD
    try:
        r.start_munge()
        r.start_controller()
        r.start_cloud()
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


@pytest.fixture(scope="module")
def burst_job(rig):
    """A 256-node job on the burst partition, run once for the module: (its record, when it was submitted)."""
    submitted = time.time()
    job_id = rig.sbatch("-p", "burst", "-N", str(BURST), "--gres=gpu:8", "--wrap", "true")
    # Slurm looks at powering-up nodes every 30 s or so; the resume itself takes seconds.
    return rig.wait_job(job_id, ("COMPLETED",), timeout=240), submitted


def test_burst_job_powers_up_cloud_nodes_through_clusterctl_burst_resume(rig, burst_job):
    """The rendered ResumeProgram (`clusterctl burst resume`) launched the job's nodes in moto in one all-or-nothing
    RunInstances, tagged with their node names; a slurmd started for each instance registered and the job ran."""
    job, submitted = burst_job
    assert job["JobState"] == "COMPLETED", job
    nodes = set(hostlist.expand(job["NodeList"]))
    assert len(nodes) == BURST and nodes <= set(rig.cloud_nodes)

    def resumes() -> list:
        return [r for r in rig.burst_runs() if r.action == "resume" and r.started >= submitted - 1]

    # The job may end before the program does: after the launch it sets each node's NodeAddr with scontrol.
    scale._wait(lambda: resumes() and all(r.exit is not None for r in resumes()), 180, "the resume program to finish",
                detail=lambda: [r.lines[-1:] for r in resumes()])
    runs = resumes()
    assert runs and all(r.exit == 0 for r in runs), [(r.nodes, r.lines[-3:]) for r in runs]
    assert {n for r in runs for n in hostlist.expand(r.nodes)} == nodes
    assert any(ln == f"job {job['JobId']}: launching {hostlist.compress(sorted(nodes))} ({BURST} x p5.48xlarge, "
               f"on-demand, AZs us-east-1a, us-east-1b)" for r in runs for ln in r.lines)
    # In moto: one reservation (one RunInstances) of exactly the job's nodes, each with the product's tags.
    reservations = rig.cloud.ec2.describe_instances(Filters=[{"Name": "tag:clusterctl:cluster", "Values": ["scale"]}])[
        "Reservations"]
    assert [len(r["Instances"]) for r in reservations] == [BURST]
    tags = [{t["Key"]: t["Value"] for t in i["Tags"]} for i in reservations[0]["Instances"]]
    assert {t["Name"] for t in tags} == nodes
    assert {(t["clusterctl:pool"], t["clusterctl:cluster-id"]) for t in tags} == {("burst", rig.cloud.cluster_id)}
    # The rig booted each launched instance (a slurmd for its node), none other.
    started = {e.node: e.instance_id for e in rig.instances.events if e.what == "started"}
    assert started == {t["Name"]: i["InstanceId"] for t, i in zip(tags, reservations[0]["Instances"], strict=True)}
    assert not rig.instances.errors, rig.instances.errors[-3:]


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


def test_burst_nodes_released_after_suspend_time_and_instances_terminated(rig, burst_job):
    """Last in the module, so the 60 s SuspendTime (plus Slurm's power-save scan, up to 60 s more) mostly passed
    while the other tests ran: `clusterctl burst suspend` terminated the instances in moto and the rig stopped
    their slurmds; Slurm has the nodes powering down (or down), never DOWN."""
    job, _ = burst_job
    nodes = set(hostlist.expand(job["NodeList"]))
    scale._wait(lambda: not rig.cloud.instances(), 180, "moto to have no live instance",
                detail=lambda: [i.name for i in rig.cloud.instances()][:5])
    gone = rig.cloud.instances(states=("shutting-down", "terminated"))
    assert {i.name for i in gone} == nodes
    suspends = [r for r in rig.burst_runs() if r.action == "suspend"]
    assert suspends and all(r.exit == 0 for r in suspends), [(r.nodes, r.lines[-3:]) for r in suspends]
    assert {n for r in suspends for n in hostlist.expand(r.nodes)} == nodes
    scale._wait(lambda: not rig.instances.running, 30, "the rig to stop the burst slurmds")
    assert {e.node for e in rig.instances.events if e.what == "stopped"} == nodes
    assert not set(rig.pids) & nodes
    out = rig.run("scontrol", "-o", "show", "node", hostlist.compress(sorted(nodes))).stdout
    states = parse_show_node(out)  # the product's reading of scontrol's node states
    assert len(states) == BURST
    assert all((s.powering_down or s.powered_down) and s.base != "DOWN" for s in states.values()), \
        sorted({s.state for s in states.values()})
