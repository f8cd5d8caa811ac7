"""Debian's real Slurm on the rendered configs: slurmctld starts and parses nodes, partitions and topology; slurmd
parses gres.conf."""

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.helpers import needs_root, spec_of

from clusterctl.render import render_spec
from clusterctl.render.write import write_build
from clusterctl.validate import load_valid
from tests.conftest import ROOT

SCRIPT = Path(__file__).with_name("slurmctld_check.sh")
GRES_SCRIPT = Path(__file__).with_name("slurmd_gres_check.sh")

pytestmark = [
    pytest.mark.slurm,
    needs_root(),
    pytest.mark.skipif(shutil.which("slurmctld") is None, reason="Debian's slurmctld is not installed (apt-get install slurmctld)"),
]


@pytest.fixture
def build_dir():
    """A world-readable build dir: slurmctld drops to the slurm user, which cannot enter pytest's 0700 tmp dirs."""
    d = tempfile.mkdtemp(prefix="clusterctl-slurm-")
    os.chmod(d, 0o755)
    yield Path(d)
    shutil.rmtree(d)


def _without_accounting(d: dict) -> None:
    # With accounting_storage/slurmdbd, a first start that cannot reach slurmdbd is fatal ("no TRES from it"), and
    # this netns has none: parse the rest of the rendered config here; accounting runs for real on the lab (sacct).
    d["scheduler"]["slurm"].pop("accounts", None)
    d["scheduler"]["slurm"]["accounting"] = {"enabled": False}


def _run(example, tmp_path):
    plan, files = render_spec(spec_of(example, _without_accounting))
    write_build(files, tmp_path)
    r = subprocess.run(
        ["unshare", "--net", "--uts", "--mount", "--fork", "bash", str(SCRIPT), str(tmp_path), plan.controller.name,
         plan.controller.address],
        capture_output=True, text=True, timeout=60,
    )
    out = r.stdout
    sections = dict(re.findall(r"== (\w+)\n(.*?)(?=\n== |\Z)", out, re.S))
    return plan, sections, r


def test_lab_config_parsed(build_dir):
    plan, s, r = _run("lab.yaml", build_dir)
    assert "nodes" in s, r.stdout + r.stderr
    nodes = {m[0]: m[1] for m in re.findall(r"NodeName=(\S+) (.*)", s["nodes"])}
    assert set(nodes) == {"gpu001", "gpu002"}
    for line in nodes.values():
        assert "Gres=gpu:h100:8" in line and "RealMemory=1024" in line and "CPUTot=2" in line
    parts = dict(re.findall(r"PartitionName=(\S+) (.*)", s["partitions"]))
    assert set(parts) == {"critical", "experiment"}
    assert "Default=YES" in parts["critical"] and "PreemptMode=OFF" in parts["critical"]
    assert "PreemptMode=REQUEUE" in parts["experiment"] and "GraceTime=120" in parts["experiment"]
    assert "Nodes=gpu[001-002]" in parts["critical"]
    assert "SwitchName=gpu-leaf1" in s["topology"]
    assert "fatal" not in s["log"].lower()
    assert "slurmctld version" in s["log"] and "cluster lab" in s["log"]


def test_hybrid_config_with_cloud_nodes_parsed(build_dir):
    plan, s, r = _run("hybrid-burst.yaml", build_dir)
    assert "nodes" in s, r.stdout + r.stderr
    names = re.findall(r"NodeName=(\S+)", s["nodes"])
    assert len(names) == 8 + 32
    burst = [ln for ln in s["nodes"].splitlines() if ln.startswith("NodeName=burst001 ")][0]
    assert "CLOUD" in burst and "Gres=gpu:h100:8" in burst
    assert "fatal" not in s["log"].lower()


@pytest.mark.skipif(shutil.which("slurmd") is None, reason="Debian's slurmd is not installed (apt-get install slurmd)")
@pytest.mark.parametrize("example", ["lab.yaml", "onprem-64xh100-ib.yaml", "hybrid-burst.yaml"])
def test_gres_conf_parsed_by_slurmd(example, build_dir):
    """slurmctld does not read gres.conf; slurmd does: every GPU pool's first node gets its GPUs from it."""
    plan, files = render_spec(load_valid(ROOT / "examples" / example))
    write_build(files, build_dir)
    for pool in (p for p in plan.pools if p.gpus_per_node):
        node = plan.nodes_of(pool.name)[0]
        r = subprocess.run(["unshare", "--uts", "--mount", "--fork", "bash", str(GRES_SCRIPT),
                            str(build_dir / "slurm" / "slurm.conf"), node.name, str(node.gpus)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr
        gres = re.findall(r"Gres Name=gpu Type=(\S+) Count=(\d+) .*?(?:Cores=\((\S+)\) )?.*File=(\S+)", r.stdout)
        assert {t for t, *_ in gres} == {node.gres_type}, r.stdout
        assert sum(int(c) for _, c, *_ in gres) == node.gpus, r.stdout
        # Catalog CPU layouts split the GPUs by socket, each group with its socket's cores.
        assert len(gres) == len({c for c in pool.gpu_cores} or {""}), r.stdout
