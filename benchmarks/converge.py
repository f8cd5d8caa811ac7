"""Day-2 speed of the lab as a user sees it: `clusterctl up` on fresh nodes, a no-op `up`, `drift` and `down`, for
lab clusters of 3, 8 and 16 nodes (examples/lab.yaml's shape: one controller/login node + N-1 GPU nodes), and the
same sequence at the smallest size from a baseline revision of clusterctl, measured in the same run.

Every figure is the wall time of the real CLI (`python -m clusterctl`), so it includes what a user waits for: Python
start, compile, SSH, Ansible, the smoke job. The JSON reports' own phase figures (capacity, boot, converge, smoke job;
drift: hosts, cloud) are printed beside them.

The base rootfs and the apt package cache live under /var/cache/clusterctl and are shared by every lab: on a machine
that has never run a lab, pass --warm-up so that downloads do not land in whichever run comes first. Needs root
(lab nodes). Prints figures; asserts nothing.

Run: python benchmarks/converge.py [--sizes 3,8,16] [--rounds N] [--baseline REV] [--warm-up]
  --baseline REV  a git revision whose clusterctl (checked out into a temporary worktree, run from there) does the
                  same sequence at the smallest size, with that revision's own examples/lab.yaml.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAB_SUBNET = "10.213.0.0/24"


def lab_spec(tree: Path, nodes: int, out: Path) -> Path:
    """examples/lab.yaml of `tree` with nodes-1 GPU nodes, its own name and subnet (never the examples' lab)."""
    text = (tree / "examples" / "lab.yaml").read_text()
    text = text.replace("name: lab\n", f"name: bench{nodes}\n").replace(LAB_SUBNET, f"10.216.{nodes}.0/24")
    text = text.replace("    count: 2\n", f"    count: {nodes - 1}\n")
    path = out / f"bench{nodes}.yaml"
    path.write_text(text)
    return path


def cli(tree: Path, env: dict[str, str], *args: str) -> tuple[float, dict | None]:
    """Wall seconds of one clusterctl command run from `tree`, and its JSON report when it printed one."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "clusterctl", *args], cwd=tree, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    try:
        report = json.loads(r.stdout)
    except json.JSONDecodeError:
        report = None
    if r.returncode not in (0, 2):  # drift exits 2 when it finds drift: a figure, not a failure
        why = {k: (report or {}).get(k) for k in ("error", "smoke")}
        failures = ((report or {}).get("converge") or {}).get("failures")
        raise SystemExit(f"clusterctl {' '.join(args)} failed ({r.returncode}): {why}\nfailures: {failures}\n"
                         f"{r.stderr[-3000:]}")
    return seconds, report


def phases(report: dict | None) -> str:
    got = (report or {}).get("phases") or {}
    return ", ".join(f"{k} {v:.1f}" for k, v in got.items() if isinstance(v, (int, float)))


def sequence(tree: Path, nodes: int, rounds: int, state_dir: str) -> dict[str, list[tuple[float, dict | None]]]:
    env = {**os.environ, "CLUSTERCTL_STATE_DIR": state_dir, "PYTHONPATH": str(tree)}
    spec = str(lab_spec(tree, nodes, Path(state_dir)))
    out: dict[str, list[tuple[float, dict | None]]] = {"up (first)": [], "up (no-op)": [], "drift": [], "down": []}
    try:
        out["up (first)"].append(cli(tree, env, "up", spec, "--output", "json"))
        for _ in range(rounds):
            out["up (no-op)"].append(cli(tree, env, "up", spec, "--output", "json"))
            out["drift"].append(cli(tree, env, "drift", spec, "--output", "json"))
    finally:
        out["down"].append(cli(tree, env, "down", spec, "--force", "--output", "json"))
    return out


def print_rows(label: str, nodes: int, got: dict[str, list[tuple[float, dict | None]]]) -> None:
    for step, runs in got.items():
        if not runs:
            continue
        secs = [s for s, _ in runs]
        per_node = statistics.median(secs) / nodes
        print(f"{label:<10} {nodes:>5}  {step:<11} {min(secs):7.1f} {statistics.median(secs):7.1f} {max(secs):7.1f}"
              f"  {per_node:6.2f}   {phases(runs[-1][1])}", flush=True)


def worktree(rev: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix="clusterctl-baseline-"))
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), rev], check=True,
                   capture_output=True)
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="3,8,16", help="lab sizes in nodes, controller included")
    ap.add_argument("--rounds", type=int, default=2, help="no-op up + drift rounds per size")
    ap.add_argument("--baseline", help="git revision to measure at the smallest size, in the same run")
    ap.add_argument("--warm-up", action="store_true", help="a first lab that fills the rootfs and apt caches")
    args = ap.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    base = tempfile.mkdtemp(prefix="clusterctl-bench-")
    if args.warm_up:
        print("warm-up (fills the rootfs and apt caches) ...", flush=True)
        sequence(ROOT, sizes[0], 0, tempfile.mkdtemp(dir=base))
    print(f"{'tree':<10} {'nodes':>5}  {'step':<11} {'min':>7} {'median':>7} {'max':>7}  {'s/node':>6}   phases (s, last run)")
    if args.baseline:
        tree = worktree(args.baseline)
        try:
            print_rows(args.baseline[:10], sizes[0], sequence(tree, sizes[0], args.rounds, tempfile.mkdtemp(dir=base)))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    for n in sizes:
        print_rows("this tree", n, sequence(ROOT, n, args.rounds, tempfile.mkdtemp(dir=base)))


if __name__ == "__main__":
    main()
