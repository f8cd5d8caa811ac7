"""First `up` of a lab with and without a node image (issue 15): for 2 and 8 compute nodes (examples/lab.yaml's shape
plus the controller), a fresh lab's first `up` from the base rootfs, then `clusterctl image build` and a fresh lab's
first `up` from the image, measured in the same run. Also counts the tasks each converge changed on one compute node
(with the image only per-node configuration should be left) and the packages it installed.

The base rootfs and apt package cache are shared and warm after a first lab (pass --warm-up on a new machine).
Needs root (lab nodes). Prints figures; asserts nothing.

Run: python benchmarks/image.py [--computes 2,8] [--rounds 1] [--warm-up]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from converge import ROOT, cli, lab_spec  # noqa: E402  (the same spec and CLI runner as the converge benchmark)

INSTALLS = ("installed", "packages", "node_exporter (")  # task names of the roles' package installs


def first_up(nodes: int, with_image: bool, state_dir: str) -> dict:
    env = {**os.environ, "CLUSTERCTL_STATE_DIR": state_dir, "PYTHONPATH": str(ROOT)}
    spec = str(lab_spec(ROOT, nodes, Path(state_dir)))
    out: dict = {}
    try:
        if with_image:
            out["image build"], built = cli(ROOT, env, "image", "build", spec, "--output", "json")
            out["image path"] = (built or {}).get("images", [{}])[0].get("image")
        out["up"], report = cli(ROOT, env, "up", spec, "--output", "json")
        changes = [c["task"] for c in (report or {})["converge"]["changes"] if c["host"] == "gpu001"]
        out["changed"] = len(changes)
        out["installs"] = sum(1 for t in changes if any(k in t for k in INSTALLS))
        out["phases"] = (report or {}).get("phases") or {}
    finally:
        cli(ROOT, env, "down", spec, "--force", "--output", "json")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--computes", default="2,8", help="compute node counts (the controller comes on top)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--warm-up", action="store_true", help="a first lab that fills the rootfs and apt caches")
    args = ap.parse_args()
    base = tempfile.mkdtemp(prefix="clusterctl-bench-image-")
    if args.warm_up:
        first_up(3, False, tempfile.mkdtemp(dir=base))
    print(f"{'computes':>8}  {'first up':<14} {'min':>7} {'median':>7} {'max':>7}  {'build':>6}  changed/installs on "
          f"gpu001   phases (s, last run)")
    for c in (int(x) for x in args.computes.split(",")):
        for with_image in (False, True):
            runs = [first_up(c + 1, with_image, tempfile.mkdtemp(dir=base)) for _ in range(args.rounds)]
            ups = [r["up"] for r in runs]
            build = f"{statistics.median(r['image build'] for r in runs):6.1f}" if with_image else "     -"
            last = runs[-1]
            phases = ", ".join(f"{k} {v:.1f}" for k, v in last["phases"].items())
            print(f"{c:>8}  {'from image' if with_image else 'from base':<14} {min(ups):7.1f} "
                  f"{statistics.median(ups):7.1f} {max(ups):7.1f}  {build}  {last['changed']:>7}/{last['installs']:<8}"
                  f"         {phases}", flush=True)


if __name__ == "__main__":
    main()
