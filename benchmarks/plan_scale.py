"""How validate, render and plan grow with the cluster: specs of 64 / 1,024 / 4,096 / 16,384 nodes (on-prem IB host
groups of up to 1,024 hosts plus an elastic p5 pool holding a quarter of the nodes), and three edits: a count change
(8 more burst nodes), an SSH-user change on one host pool, and a 64-change edit.

Prints min/median/max seconds, peak RSS and the growth exponent between sizes; asserts nothing.
Goals (issue 19): any single change under 1 s at 1,024 nodes and 5 s at 16,384; the 64-change plan on 4,096 under 10 s;
render of 16,384 nodes under 1.5 s of CPU.
Run: python benchmarks/plan_scale.py [--sizes 64,1024,4096,16384] [--runs 3]
"""

from __future__ import annotations

import argparse
import copy
import math
import resource
import statistics
import time

GROUP = 1024  # hosts per on-prem host group (10.P.G.x addresses)


def spec_dict(nodes: int) -> dict:
    owned, burst = nodes - nodes // 4, nodes // 4
    pools, left, p = [], owned, 0
    while left:
        size = min(left, 4 * GROUP)
        groups, g = [], 0
        while size - g * GROUP > 0:
            n = min(GROUP, size - g * GROUP)
            groups.append({"names": f"p{p}g{g}n[0001-{n:04d}]", "addresses": f"10.{p}.{5 * g}.[1-{n}]" if n <= 254
                           else _addresses(p, g, n)})
            g += 1
        pools.append({"name": f"owned{p}", "provider": "onprem", "gpu": "h100-sxm", "gpus_per_node": 8, "cpus": 224,
                      "memory_mb": 2000000, "hosts": groups, "ssh": {"user": "ops", "become": True}})
        left -= size
        p += 1
    owned_names = [x["name"] for x in pools]
    for b in range(0, burst, 2048):  # elastic pools of up to 2,048 nodes (a pool's max is at most 4,096)
        pools.append({"name": f"burst{b // 2048}", "provider": "aws", "instance_type": "p5.48xlarge",
                      "region": "us-east-1", "availability_zones": ["us-east-1a", "us-east-1b"], "min": 0,
                      "max": min(2048, burst - b)})
    burst_names = [x["name"] for x in pools if x["name"].startswith("burst")]
    return {
        "apiVersion": "clusterctl/v1", "name": "bench",
        "controller": {"provider": "onprem", "address": "10.250.0.2"},
        "fabric": {"type": "infiniband", "speed": "ndr", "rails": 8, "rail_optimized": True, "nodes_per_leaf": 32},
        "pools": pools,
        # Whamcloud builds no Debian client: the site's own signed build, as examples/aws-p5-spot.yaml does.
        "mirrors": {"lustre": {"url": "https://mirror.bench.example.com/lustre",
                               "key_url": "https://mirror.bench.example.com/keys/lustre.asc"}},
        "storage": {"shared": [{"type": "lustre", "mgs_nids": ["10.250.0.20@o2ib"], "fs_name": "bench",
                                "mount_point": "/lustre"}],
                    "local_cache": {"devices": "auto"}, "checkpoints": {"s3_bucket": "bench-ckpt"}},
        "scheduler": {"slurm": {
            "partitions": [{"name": "critical", "pools": owned_names, "default": True},
                           {"name": "experiment", "pools": list(owned_names), "preemptible": True},
                           {"name": "burst", "pools": burst_names}],
            "burst": {"targets": [{"partition": "burst", "pools": list(burst_names)}]}}},
    }


def _addresses(p: int, g: int, n: int) -> str:
    """n addresses as a hostlist over /24s: 10.p.(5g..5g+4).[1-254]."""
    full, rest = divmod(n, 254)
    parts = [f"10.{p}.{5 * g + i}.[1-254]" for i in range(full)]
    if rest:
        parts.append(f"10.{p}.{5 * g + full}.[1-{rest}]")
    return ",".join(parts)


def edits(data: dict) -> dict[str, dict]:
    count = copy.deepcopy(data)
    count["pools"][-1]["max"] += 8
    user = copy.deepcopy(data)
    user["pools"][0]["ssh"]["user"] = "admin"
    many = copy.deepcopy(data)
    many["nccl"] = {"extra_env": {f"NCCL_BENCH_{i:02d}": str(i) for i in range(62)}}
    many["pools"][-1]["max"] += 8
    many["pools"][0]["ssh"]["user"] = "admin"
    return {"count +8": count, "ssh user": user, "64 changes": many}


def _timed(fn, runs: int, clock=time.perf_counter) -> tuple[list[float], object]:
    out, times = None, []
    for _ in range(runs):
        t0 = clock()
        out = fn()
        times.append(clock() - t0)
    return times, out


def _fmt(times: list[float]) -> str:
    return f"{min(times):7.3f} {statistics.median(times):7.3f} {max(times):7.3f}"


def main() -> None:
    from clusterctl.diff import build_report
    from clusterctl.render import render_spec
    from clusterctl.spec.cluster import ClusterSpec
    from clusterctl.validate import load_text
    from tests.helpers import to_yaml

    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="64,1024,4096,16384")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    medians: dict[str, list[float]] = {}
    print(f"{'nodes':>6} {'step':<22} {'min':>7} {'median':>7} {'max':>7}   (seconds)   peak RSS MiB")
    for n in sizes:
        data = spec_dict(n)
        text = to_yaml(data)
        times, loaded = _timed(lambda text=text: load_text(text), args.runs)
        assert loaded.ok, [f.message for f in loaded.errors][:3]
        rows = [("validate", times)]
        times, (_, old_build) = _timed(lambda spec=loaded.spec: render_spec(spec), args.runs)
        rows.append(("render", times))
        # The render goal is in CPU seconds: wall time on this shared 2-core machine moves with its neighbours.
        times, _ = _timed(lambda spec=loaded.spec: render_spec(spec), args.runs, clock=time.process_time)
        rows.append(("render (CPU)", times))
        for name, edited in edits(data).items():
            spec = ClusterSpec.model_validate(edited)

            def plan(spec=spec, old_build=old_build):
                _, new_build = render_spec(spec)
                return build_report("bench", old_build, new_build)

            times, report = _timed(plan, args.runs)
            assert report.has_changes
            rows.append((f"plan {name}", times))
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        for step, times in rows:
            print(f"{n:>6} {step:<22} {_fmt(times)}   {rss:8.0f}")
            medians.setdefault(step, []).append(statistics.median(times))
    print("\ngrowth exponent k (time ~ nodes^k) between consecutive sizes:")
    for step, ms in medians.items():
        ks = [math.log(ms[i + 1] / ms[i]) / math.log(sizes[i + 1] / sizes[i]) if ms[i] > 0 else float("nan")
              for i in range(len(ms) - 1)]
        print(f"  {step:<22} " + "  ".join(f"{k:5.2f}" for k in ks))


if __name__ == "__main__":
    main()
