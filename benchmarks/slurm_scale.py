"""Slurm at scale on the rendered config (tests/scale/rig.py: real slurmctld, one real slurmd per node on 127.0.0.1).

For 256 nodes (the 1,024-node spec's first 256, re-rendered) and 1,024: time from starting the slurmds to all nodes
idle (split into spawning and registering), slurmctld's RSS once idle, and for the 1,024-node cluster sbatch ->
RUNNING -> COMPLETED of a whole-cluster `-N 1024 --gres=gpu:8` job over a few runs (min/median/max), and once (a cold
start: the nodes are powered down) a 256-node burst job on the elastic p5 pool's 512 CLOUD nodes, powered up by the
product's `clusterctl burst resume` against moto_server: sbatch -> ResumeProgram called -> RUNNING -> COMPLETED, the
resume program's own time (its log's "done in") in all and per 64 nodes, then the release after SuspendTime
(`clusterctl burst suspend`, instances terminated in moto). Also prints the settings the rig changes from the
rendered config.
Needs root and Debian's slurmctld, slurmd, slurm-client, munge, and a C compiler (the rig's uptime preload).

Prints figures; asserts nothing. Run: python benchmarks/slurm_scale.py [--sizes 256 1024] [--runs 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clusterctl.core import hostlist  # noqa: E402
from tests.scale import rig as scale  # noqa: E402


def whole_cluster_job(rig, nodes: int) -> tuple[float, float]:
    """Seconds from sbatch to RUNNING and to COMPLETED."""
    t0 = time.monotonic()
    job_id = rig.sbatch("-N", str(nodes), "--gres=gpu:8", "--wrap", "true")
    running = None
    while True:
        state = rig.job(job_id).get("JobState")
        if running is None and state in ("RUNNING", "COMPLETING", "COMPLETED"):
            running = time.monotonic() - t0
        if state in scale.FINAL:
            if state != "COMPLETED":
                raise RuntimeError(f"job {job_id} ended {state}")
            return running, time.monotonic() - t0
        time.sleep(0.05)


BURST = 256  # nodes of the burst job


def cold_burst(rig) -> None:
    cloud = len(rig.cloud_nodes)
    head = f"{len(rig.plan.nodes) - cloud:5d} nodes + {cloud} CLOUD: -p burst -N {BURST} --gres=gpu:8 (cold)"
    t0 = time.time()
    job_id = rig.sbatch("-p", "burst", "-N", str(BURST), "--gres=gpu:8", "--wrap", "true")
    running = None
    while (state := rig.job(job_id).get("JobState")) not in scale.FINAL:
        if running is None and state in ("RUNNING", "COMPLETING"):
            running = time.time() - t0
        time.sleep(0.1)
    done = time.time() - t0
    while any(r.exit is None for r in rig.burst_runs() if r.action == "resume") and time.time() - t0 < 600:
        time.sleep(0.5)  # the program may still be setting NodeAddrs after the job ended
    resumes = [r for r in rig.burst_runs() if r.action == "resume"]
    called = f"{resumes[0].started - t0:.1f}" if resumes else "n/a"
    running_s = f"{running:.1f}" if running is not None else "n/a"
    print(f"{head}: ResumeProgram called {called} s after sbatch, RUNNING {running_s} s, {state} {done:.1f} s")
    for r in resumes:
        n = len(hostlist.expand(r.nodes))
        own = f"{r.seconds:.2f} s, {r.seconds / n * 64:.2f} s per 64 nodes" if r.seconds is not None else "did not finish"
        print(f"{head}: clusterctl burst resume {r.nodes} ({n} nodes, exit {r.exit}): {own}")
    idle_since = t0 + done  # when the job was seen ending
    while rig.cloud.instances() and time.time() - idle_since < 300:
        time.sleep(1)
    suspends = [r for r in rig.burst_runs() if r.action == "suspend"]
    left = len(rig.cloud.instances())
    called = f"{suspends[0].started - idle_since:.1f}" if suspends else "n/a"
    own = ", ".join(f"{r.seconds:.2f} s" for r in suspends if r.seconds is not None) or "n/a"
    print(f"{head}: SuspendProgram called {called} s after the job ended (SuspendTime "
          f"{rig.plan.slurm.suspend_time} s), its own time {own}; all instances terminated in moto "
          f"{time.time() - idle_since:.1f} s after the job ended ({left} left)")


def spread(xs: list[float]) -> str:
    return f"min {min(xs):.2f}  median {statistics.median(xs):.2f}  max {max(xs):.2f} s  (n={len(xs)})"


def one_size(nodes: int, runs: int, show_differences: bool) -> None:
    rig = scale.make_rig(nodes=nodes)
    if show_differences:
        print("rig settings that differ from the rendered slurm.conf/gres.conf:")
        print("\n".join(f"  {d}" for d in rig.differences()))
    try:
        rig.start_munge()
        rig.start_controller()
        if rig.cloud_nodes:
            rig.start_cloud()
        t0 = time.monotonic()
        rig.start_nodes()
        spawned = time.monotonic() - t0
        rig.wait_idle(nodes, timeout=600)
        idle = time.monotonic() - t0
        print(f"{nodes:5d} nodes: all idle {idle:.1f} s after the first slurmd started "
              f"(spawning {spawned:.1f} s, then registering {idle - spawned:.1f} s); "
              f"slurmctld RSS {rig.slurmctld_rss_kib() / 1024:.1f} MiB")
        if runs:
            times = [whole_cluster_job(rig, nodes) for _ in range(runs)]
            print(f"{nodes:5d} nodes: -N {nodes} --gres=gpu:8: sbatch -> RUNNING   {spread([t[0] for t in times])}")
            print(f"{nodes:5d} nodes: -N {nodes} --gres=gpu:8: sbatch -> COMPLETED {spread([t[1] for t in times])}")
            print(f"{nodes:5d} nodes: slurmctld RSS after the jobs {rig.slurmctld_rss_kib() / 1024:.1f} MiB")
        if rig.cloud_nodes:
            cold_burst(rig)
    finally:
        rig.stop()
        shutil.rmtree(rig.dir, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--runs", type=int, default=3, help="whole-cluster jobs per size (0: none)")
    args = ap.parse_args()
    why = scale.available()
    if why:
        sys.exit(f"cannot run: {why}")
    for i, n in enumerate(args.sizes):
        one_size(n, args.runs, show_differences=i == len(args.sizes) - 1)  # the last: the whole spec, CLOUD nodes too


if __name__ == "__main__":
    main()
