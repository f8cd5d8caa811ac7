"""Hybrid burst figures: the resume program's own latency, and sbatch -> job start on burst nodes in the lab
simulation (tests/engines/aws/burst/labcluster.py: a lab Slurm cluster, moto as EC2, a lab node booted per instance).

1. Resume program latency against moto (no lab, no root): `clusterctl.engines.aws.burst.actions.resume` for N nodes of the
   p5 pool (tag queries, launch-template lookup, one all-or-nothing RunInstances, Name tags, NodeAddr updates on a
   stand-in Slurm), with and without a capacity failover (first AZ answers InsufficientInstanceCapacity).
2. The lab (root; ~4 min): sbatch -p burst -N1, then -N2, on a cluster whose cloud nodes are all powered down;
   prints sbatch -> RUNNING, and splits it with the controller's burst.log (slurmctld's power_save pick-up, the
   resume program, VM boot + bootstrap until slurmd runs).

Prints figures; asserts nothing. Run: python benchmarks/burst.py [--no-lab] [--rounds N (moto part)]
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class _Slurm:
    def set_address(self, node, address):
        pass

    def power_down(self, names, reason):
        pass

    def nodes(self, names):
        return {}


def resume_latency(rounds: int) -> None:
    import boto3

    from clusterctl.engines.aws.burst import actions, ec2 as cloud
    from clusterctl.engines.aws.burst.plan import BurstPlan
    from clusterctl.engines.aws.burst.settings import Settings
    from clusterctl.compile import compile_plan
    from clusterctl.render import to_json
    from clusterctl.validate import load_valid
    from tests.engines.aws.burst import harness

    moto = harness.Moto()
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-west-2")
    tmp = Path(tempfile.mkdtemp(prefix="burst-bench-"))
    try:
        plan = compile_plan(load_valid(ROOT / "tests" / "burst" / "lab-hybrid.yaml"))
        (tmp / "plan.json").write_text(to_json(plan.to_dict()))
        settings = Settings(plan=tmp / "plan.json", log_file=tmp / "log", state_dir=tmp / "state", kit_dir=tmp,
                            ssh_key=tmp / "k", ssh_user="", munge_key=tmp / "m", imds_endpoint="",
                            bootstrap="off", sync_grace_seconds=300, spot_signal="USR1", spot_grace_seconds=60)
        log = logging.getLogger("bench")
        log.addHandler(logging.NullHandler())
        log.propagate = False
        print("resume program latency (moto over HTTP on 127.0.0.1; p5.48xlarge spot, 33 ENIs per instance):")
        for failover in (False, True):
            for n in (1, 2, 4):
                times = []
                for _ in range(rounds):
                    moto.reset()
                    ec2, launch_client = cloud.clients("us-west-2", endpoint_url=moto.url)
                    stack = harness.create_stack(boto3.client("ec2", region_name="us-west-2", endpoint_url=moto.url), plan, "cloud")
                    proxy = None
                    if failover:
                        proxy = harness.FaultProxy(moto.url, "127.0.0.1", stack.subnet_azs)
                        proxy.failing_azs = {"us-west-2a"}
                        _, launch_client = cloud.clients("us-west-2", endpoint_url=proxy.url)
                    ctx = actions.Context(settings, BurstPlan.load(settings.plan), _Slurm(), ec2, launch_client, log)
                    names = [f"cloud{i:03d}" for i in range(1, n + 1)]
                    t0 = time.perf_counter()
                    report = actions.resume(ctx, ",".join(names), {"jobs": [{"job_id": 1, "nodes": ",".join(names)}]})
                    times.append(time.perf_counter() - t0)
                    assert report.ok and len(report.launched) == n, report
                    if proxy:
                        proxy.stop()
                what = "first AZ out of capacity" if failover else "capacity in the first AZ"
                print(f"  {n} node(s), {what}: median {statistics.median(times):.2f}s  (min {min(times):.2f}, max {max(times):.2f}, n={rounds})")
    finally:
        moto.stop()
        shutil.rmtree(tmp, ignore_errors=True)


_LOG = re.compile(r"^(\S+ \S+) \w+ (\S+)\[\d+\] run=\w+ (.*)$")


def _log_events(text: str) -> list[tuple[float, str, str]]:
    out = []
    for line in text.splitlines():
        m = _LOG.match(line)
        if m:
            t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            out.append((t, m.group(2), m.group(3)))
    return out


# Each lab round uses cloud nodes no earlier round touched (max 4 in the lab spec), so no round waits for the
# previous one's nodes to be released (SuspendTime + SuspendTimeout, 3 minutes).
LAB_ROUNDS = (["cloud001"], ["cloud002", "cloud003"])


def lab_figures() -> None:
    from clusterctl.core import hostlist
    from tests.engines.aws.burst.labcluster import BurstLab
    from tests.helpers import root_missing, wait_for

    if why := root_missing("lab nodes: network namespaces, systemd-nspawn"):
        print(f"lab: skipped ({why})")
        return
    state = Path(tempfile.mkdtemp(prefix="burst-bench-state-"))
    lab = BurstLab(state, log=lambda m: None)
    try:
        t0 = time.monotonic()
        lab.up()
        print(f"lab: cluster up (lab nodes, site.yml with the burst role, smoke job) {time.monotonic() - t0:.0f}s")
        for nodes in LAB_ROUNDS:
            n = len(nodes)
            mark = len(lab.burst_log().splitlines())
            ctl_now = float(lab.ctl("date +%s.%N").stdout)
            t_sub = time.monotonic()
            job = lab.sbatch(f"-p burst -N{n} -w {hostlist.compress(nodes)} --gres=gpu:8 --wrap 'srun sleep 1'")
            wait_for(lambda j=job: lab.job(j).get("JobState") in ("RUNNING", "COMPLETING", "COMPLETED"), 300, 0.5, "job start")
            start = time.monotonic() - t_sub
            wait_for(lambda j=job: lab.job(j).get("JobState") == "COMPLETED", 120, 1, "job end")
            events = _log_events("\n".join(lab.burst_log().splitlines()[mark:]))
            resume = [e for e in events if e[1] == "resume"]
            boot = [e for e in events if e[1] == "bootstrap"]
            pick = resume[0][0] - ctl_now if resume else float("nan")
            lat = next((float(m.group(1)) for _, _, msg in resume if (m := re.search(r"resume latency ([\d.]+)s", msg))),
                       float("nan"))
            prog = resume[-1][0] - resume[0][0] if resume else float("nan")
            conf = max((t for t, _, msg in boot if "configured in" in msg), default=float("nan")) - (resume[-1][0] if resume else 0)
            print(f"lab: -N{n}: sbatch -> job running on burst nodes {start:5.1f}s | slurmctld power_save pick-up {pick:4.1f}s, "
                  f"resume program {prog:4.2f}s (EC2 part {lat:4.2f}s), VM boot + bootstrap until slurmd up {conf:5.1f}s")
    finally:
        lab.down()
        shutil.rmtree(state, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-lab", action="store_true", help="only the resume program latency against moto")
    args = ap.parse_args()
    resume_latency(args.rounds)
    if not args.no_lab:
        lab_figures()


if __name__ == "__main__":
    main()
