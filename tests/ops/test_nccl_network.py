"""`clusterctl check` proves NCCL used the RDMA network: real NCCL_DEBUG=INFO lines (fixtures/nccl-net/SOURCES.md)
showing NET/OFI or NET/IB pass, a fallback to NET/Socket on an EFA/IB pool fails the NCCL row."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.ops import check as c
from clusterctl.ops import checkkit
from tests.helpers import plan_of
from tests.ops.checkfakes import Fake, all_reduce_output, probe_out

FIX = Path(__file__).parents[1] / "fixtures" / "nccl-net"


def fixture(name: str) -> str:
    return (FIX / name).read_text()


@pytest.mark.parametrize("name, nets", [
    ("ofi-efa.nccl-1597.txt", {"Libfabric"}),
    ("ofi-efa-rings.nccl-229.txt", {"AWS Libfabric"}),  # "via P2P/IPC" is intra-node, not a network
    ("socket-fallback-efa.nccl-398.txt", {"Socket"}),
    ("socket-rings.nccl-278.txt", {"Socket"}),
])
def test_networks_read_from_real_logs(name: str, nets: set[str]) -> None:
    assert checkkit.nccl_networks(fixture(name)) == nets


def test_verdict_by_fabric() -> None:
    fell_back = checkkit.network_verdict("efa", fixture("socket-fallback-efa.nccl-398.txt"))
    assert fell_back and "NET/Socket" in fell_back and "aws-ofi-nccl (NET/OFI) was not loaded" in fell_back
    ib = checkkit.network_verdict("infiniband", fixture("socket-rings.nccl-278.txt"))
    assert ib and "NET/IB found no usable device" in ib
    assert checkkit.network_verdict("efa", fixture("ofi-efa.nccl-1597.txt")) is None
    assert checkkit.network_verdict("efa", fixture("ofi-efa-rings.nccl-229.txt")) is None
    assert checkkit.network_verdict("ethernet", fixture("socket-rings.nccl-278.txt")) is None  # sockets expected


def p5_rows(log: str) -> tuple[list, Fake]:
    plan = plan_of("aws-p5-spot.yaml")
    static = [n for n in plan.nodes if not n.cloud]
    probes = {n.name: probe_out(smi=8, efa=32, nccl=True, mounts={"/fsx": True, "/mnt/nvme": True}) for n in static}
    out = log + all_reduce_output(8 * len(static), 400.0, nodes=tuple(n.name for n in static))
    fake = Fake(plan, probes, nccl=out)
    return c.check_cluster(plan, fake), fake


def test_check_fails_a_p5_pool_whose_nccl_fell_back_to_sockets() -> None:
    rows, fake = p5_rows(fixture("socket-fallback-efa.nccl-398.txt"))
    row = next(r for r in rows if r.check == "nccl all_reduce")
    assert row.status == c.FAIL and "fell back to NET/Socket" in row.detail
    srun = next(cmd for _, cmd in fake.commands if "srun" in cmd and "all_reduce_perf" in cmd)
    assert srun.startswith("NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET timeout 900 srun ")


def test_check_passes_a_p5_pool_on_net_ofi() -> None:
    rows, _ = p5_rows(fixture("ofi-efa.nccl-1597.txt"))
    row = next(r for r in rows if r.check == "nccl all_reduce")
    assert row.status == c.PASS, row
    assert "via NET/Libfabric" in row.detail
