"""Slurm at scale on the rendered config (tests/scale/rig.py: real slurmctld, one real slurmd per node on 127.0.0.1).

For 256 nodes (the 1,024-node spec's first 256, re-rendered) and 1,024: time from starting the slurmds to all nodes
idle (split into spawning and registering), slurmctld's RSS once idle, and for the 1,024-node cluster sbatch ->
RUNNING -> COMPLETED of a whole-cluster `-N 1024 --gres=gpu:8` job over a few runs (min/median/max), and once (a cold
start: the nodes are powered down) a burst job on all 256 CLOUD nodes of the elastic p5 pool: sbatch -> ResumeProgram
called -> RUNNING -> COMPLETED. Also prints the settings the rig changes from the rendered slurm.conf.
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


def cold_burst(rig) -> None:
    cloud = len(rig.cloud_nodes)
    t0 = time.monotonic()
    job_id = rig.sbatch("-p", "burst", "-N", str(cloud), "--gres=gpu:8", "--wrap", "true")
    running = None
    while (state := rig.job(job_id).get("JobState")) not in scale.FINAL:
        if running is None and state in ("RUNNING", "COMPLETING"):
            running = time.monotonic() - t0
        time.sleep(0.1)
    done = time.monotonic() - t0
    resume = next((t - t0 for t, action, _ in rig.power_log if action == "resume"), float("nan"))
    running_s = f"{running:.1f}" if running is not None else "n/a"
    print(f"{len(rig.plan.nodes) - cloud:5d} nodes + {cloud} CLOUD: -p burst -N {cloud} --gres=gpu:8 (cold): "
          f"ResumeProgram called {resume:.1f} s after sbatch, RUNNING {running_s} s, {state} {done:.1f} s")


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
        rig.start_power()
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
        one_size(n, args.runs, show_differences=i == 0)


if __name__ == "__main__":
    main()
