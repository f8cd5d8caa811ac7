"""Wall time of a first converge and a no-op re-converge of the lab (examples/lab.yaml shape: 3 nodes), with and
without clusterctl's Ansible speed settings (pipelining, forks, fact caching, SSH ControlPersist).

Needs root (lab nodes). Each variant gets a fresh lab. A warm-up lab runs first so that every measured run finds
the base rootfs and the shared apt package cache already filled (downloads would otherwise dominate the first run).
Prints figures; asserts nothing. Run: python benchmarks/converge.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one_lab(fast: bool, rounds: int) -> tuple[float, list[float]]:
    from rich.console import Console

    from clusterctl.ops.access import access_for
    from clusterctl.state.secrets import ensure_munge_key
    from clusterctl.ops.up import converge
    from clusterctl.render import render_spec
    from clusterctl.render.write import write_build
    from clusterctl.state import ClusterState
    from clusterctl.validate import load_text

    text = (ROOT / "examples" / "lab.yaml").read_text().replace("name: lab", "name: bench").replace("10.213.0.0/24", "10.216.0.0/24")
    loaded = load_text(text)
    assert loaded.ok, loaded.findings
    state = ClusterState("bench")
    plan, files = render_spec(loaded.spec)
    build = state.dir / "build"
    write_build(files, build)
    access = access_for(plan, state, lambda m: None)
    console = Console(quiet=True)
    try:
        access.lab.up()
        key = ensure_munge_key(state)
        t0 = time.perf_counter()
        first = converge(build, access, key, console, quiet=True, fast=fast)
        t_first = time.perf_counter() - t0
        assert first.ok, first.failures
        again = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            r = converge(build, access, key, console, quiet=True, fast=fast)
            again.append(time.perf_counter() - t0)
            assert r.ok and r.total_changed == 0, (r.failures, r.recap)
        return t_first, again
    finally:
        access.lab.down()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3, help="no-op re-converges per variant")
    args = ap.parse_args()
    os.environ["CLUSTERCTL_STATE_DIR"] = tempfile.mkdtemp(prefix="clusterctl-bench-")
    print("warm-up (fills the rootfs and apt caches) ...", flush=True)
    one_lab(True, 0)
    for fast in (True, False):
        first, again = one_lab(fast, args.rounds)
        label = "with speed settings   " if fast else "without speed settings"
        print(f"{label}: first converge {first:6.1f} s | no-op re-converge median {statistics.median(again):5.1f} s "
              f"(runs: {', '.join(f'{x:.1f}' for x in again)})", flush=True)


if __name__ == "__main__":
    main()
