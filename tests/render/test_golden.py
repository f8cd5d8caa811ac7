"""Golden files of the rendered build for every example, and byte-identical output across runs.

Regenerate after an intended change with: UPDATE_GOLDEN=1 pytest tests/render/test_golden.py (then review the diff).
"""

import os

import pytest

from clusterctl.render import render_spec
from clusterctl.render.write import read_build, write_build
from clusterctl.validate import load_valid
from tests.conftest import EXAMPLES, ROOT
from tests.helpers import clusterctl

GOLDEN = ROOT / "tests" / "golden"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_render_matches_golden(path):
    _, files = render_spec(load_valid(path))
    gold = GOLDEN / path.stem
    if os.environ.get("UPDATE_GOLDEN"):
        write_build(files, gold)
    assert read_build(gold) == files


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_render_twice_same_bytes_in_fresh_processes(path, tmp_path):
    """Separate interpreters (different hash seeds) must still write identical bytes."""
    outs = []
    for i, seed in enumerate(("1", "2")):
        out = tmp_path / f"b{i}"
        env = dict(os.environ, PYTHONHASHSEED=seed)
        clusterctl("render", path, "--dir", out, env=env)
        outs.append({p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()})
    assert outs[0] == outs[1]
    assert len(outs[0]) >= 10


def test_expected_files_present():
    _, files = render_spec(load_valid(ROOT / "examples" / "aws-p5-spot.yaml"))
    for rel in ("slurm/slurm.conf", "slurm/gres.conf", "slurm/cgroup.conf", "slurm/topology.conf", "ansible/inventory.yml",
                "ansible/group_vars/all.yml", "nccl/p5.env", "pulumi/Pulumi.p5spot.yaml", "manifest.json"):
        assert rel in files


def test_manifest_hashes_match(tmp_path):
    import hashlib
    import json

    _, files = render_spec(load_valid(ROOT / "examples" / "lab.yaml"))
    write_build(files, tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    for rel, digest in manifest["files"].items():
        assert hashlib.sha256((tmp_path / rel).read_bytes()).hexdigest() == digest


def test_rewrite_removes_stale_files_only(tmp_path):
    _, aws = render_spec(load_valid(ROOT / "examples" / "aws-p5-spot.yaml"))
    write_build(aws, tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    _, other = render_spec(load_valid(ROOT / "examples" / "hybrid-burst.yaml"))
    write_build(other, tmp_path)
    assert not (tmp_path / "pulumi" / "Pulumi.p5spot.yaml").exists()
    assert (tmp_path / "notes.txt").read_text() == "mine"
