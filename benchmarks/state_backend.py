"""What the state backend costs a plan: `clusterctl plan`'s in-process path (read the applied build and its version,
render, diff, cost) for the 64-node example, with the state in a local directory vs an s3 backend on moto_server
(127.0.0.1, so this is the protocol's and the code's cost, not a real network round trip). One apply is recorded
first, so the plan diffs a full build against a full build. Also times the two steps that touch the backend: reading
the applied build, and recording one (build object + conditional pointer move).

Prints min/median/max seconds; asserts nothing.
Run: python benchmarks/state_backend.py [--runs 10] [--spec examples/onprem-64xh100-ib.yaml]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def timed(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def line(label: str, times: list[float]) -> str:
    return f"{label:<34} min {min(times):7.3f}s  median {statistics.median(times):7.3f}s  max {max(times):7.3f}s"


def bench(spec, state, runs: int) -> dict[str, list[float]]:
    from clusterctl.ops.apply import report_against
    from clusterctl.ops.plan_live import add_cost
    from clusterctl.render import render_spec

    files = render_spec(spec)[1]
    with state.lock("apply"):
        state.record_applied(files)

    def plan():
        applied = state.applied()
        new = render_spec(spec)[1]
        report = report_against(spec.name, applied, new)
        add_cost(report, applied.files, spec)
        assert not report.has_changes

    def record():
        with state.lock("apply"):
            state.record_applied(files)

    return {"plan": timed(plan, runs), "read applied build": timed(state.applied, runs),
            "lock + record an apply": timed(record, runs)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--spec", default=str(ROOT / "examples" / "onprem-64xh100-ib.yaml"))
    args = ap.parse_args()

    import boto3

    from clusterctl.state import ClusterState
    from clusterctl.validate import load_file
    from tests.motoserver import Moto

    spec = load_file(Path(args.spec)).spec
    moto = Moto()
    try:
        for k in [k for k in os.environ if k.startswith("AWS_")]:
            del os.environ[k]
        os.environ.update(AWS_ENDPOINT_URL=moto.url, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                          AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE="/dev/null",
                          AWS_SHARED_CREDENTIALS_FILE="/dev/null")
        boto3.client("s3").create_bucket(Bucket="bench-state")
        with tempfile.TemporaryDirectory() as d:
            local = ClusterState(spec.name, Path(d) / "local", backend="local")
            s3 = ClusterState(spec.name, Path(d) / "s3", backend="s3://bench-state/ci")
            from clusterctl.render import render_spec

            print(f"{args.spec}: {len(render_spec(spec)[1])} build files, {args.runs} runs each")
            results = {"local": bench(spec, local, args.runs), "s3 (moto)": bench(spec, s3, args.runs)}
    finally:
        moto.stop()
    for backend, res in results.items():
        for step, times in res.items():
            print(line(f"{backend}: {step}", times))


if __name__ == "__main__":
    main()
