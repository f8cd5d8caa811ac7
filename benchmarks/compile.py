"""Compile+render time of a generated 1,024-node (8,192 GPU) hybrid spec, and `clusterctl --help` wall time.

Targets: compile+render under 1 s; --help under 0.3 s. Prints figures; asserts nothing.
Run: python benchmarks/compile.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

OWNED, BURST = 512, 512  # nodes, 8 GPUs each


def big_spec_text() -> str:
    return f"""apiVersion: clusterctl/v1
name: bench
controller: {{provider: onprem, address: 10.0.0.2}}
fabric: {{type: infiniband, speed: ndr, rails: 8, rail_optimized: true, nodes_per_leaf: 32}}
pools:
  - name: owned
    provider: onprem
    gpu: h100-sxm
    gpus_per_node: 8
    cpus: 224
    memory_mb: 2000000
    hosts:
      - names: gpu[0001-{OWNED:04d}]
        addresses: 10.1.[0-3].[1-128]
  - name: burst
    provider: aws
    instance_type: p5.48xlarge
    region: us-east-1
    availability_zones: [us-east-1a, us-east-1b]
    min: 0
    max: {BURST}
storage:
  shared: [{{type: lustre, mgs_nids: [10.0.0.20@o2ib], fs_name: bench, mount_point: /lustre}}]
  local_cache: {{devices: auto}}
  checkpoints: {{s3_bucket: bench-ckpt}}
scheduler:
  slurm:
    partitions:
      - {{name: critical, pools: [owned], default: true}}
      - {{name: experiment, pools: [owned], preemptible: true}}
      - {{name: burst, pools: [burst]}}
    burst: {{targets: [{{partition: burst, pools: [burst]}}]}}
"""


def time_compile(runs: int = 7) -> tuple[float, float, int, int]:
    from clusterctl.render import render_spec
    from clusterctl.validate import load_text

    text = big_spec_text()
    times, load_times = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        loaded = load_text(text)
        t1 = time.perf_counter()
        assert loaded.ok, loaded.findings
        plan, files = render_spec(loaded.spec)
        times.append(time.perf_counter() - t1)
        load_times.append(t1 - t0)
    gpus = sum(n.gpus for n in plan.nodes)
    return statistics.median(load_times), statistics.median(times), len(plan.nodes), gpus


def time_help(runs: int = 7) -> float:
    script = Path(sys.executable).parent / "clusterctl"
    cmd = [str(script), "--help"] if script.exists() else [sys.executable, "-m", "clusterctl", "--help"]
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    load, compile_render, nodes, gpus = time_compile()
    print(f"spec: {nodes} nodes, {gpus} GPUs (hybrid: {OWNED} owned IB + {BURST} elastic p5)")
    print(f"load+validate:  {load * 1000:.0f} ms (median of 7)")
    print(f"compile+render: {compile_render * 1000:.0f} ms (median of 7; target < 1000 ms)")
    print(f"clusterctl --help: {time_help() * 1000:.0f} ms wall (median of 7; target < 300 ms)")


if __name__ == "__main__":
    main()
