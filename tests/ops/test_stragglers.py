"""Straggler ranking in `clusterctl check` with a fake runner: one node is slow in every run that includes it."""

from __future__ import annotations

import re

from clusterctl.core import hostlist
from clusterctl.ops import check as c
from clusterctl.ops import stragglers as s
from tests.helpers import plan_of
from tests.ops.checkfakes import Fake, all_reduce_output, by, healthy_onprem, probe_out


def slow_node(node: str, fast: float = 45.0, slow: float = 12.0):
    def answer(names):
        bw = slow if node in names else fast
        return all_reduce_output(8 * len(names), bw, nodes=tuple(names))
    return answer


def drains(fake):
    return [cmd for _, cmd in fake.commands if cmd.startswith("scontrol update")]


def test_onprem_ranks_64_nodes_and_names_the_slow_one():
    plan = plan_of("onprem-64xh100-ib.yaml")
    fake = Fake(plan, {n.name: healthy_onprem() for n in plan.nodes}, nccl=slow_node("gpu017"))
    rows = c.check_cluster(plan, fake)
    ranked = [r for r in rows if r.check == "nccl straggler"]
    assert len(ranked) == 64
    assert [r.node for r in ranked if r.status == c.FAIL] == ["gpu017"]
    assert by(rows, "nccl straggler", "gpu017").detail == (
        "all_reduce bus bandwidth alone 12.0 GB/s (median 45.0), best pair 12.0 GB/s (median 45.0): 27% of the median; "
        "below the 90% tolerance")
    # gpu016 and gpu018 share one slow pair each, and their other pair is good: they are not blamed.
    assert by(rows, "nccl straggler", "gpu016").status == c.PASS
    assert drains(fake) == []
    runs = [cmd for _, cmd in fake.commands if "srun" in cmd and "all_reduce_perf" in cmd]
    assert len(runs) == 1 + 64 + 64  # the pool, each node alone, each ring pair


def test_drain_stragglers_puts_the_figure_in_the_reason():
    plan = plan_of("onprem-64xh100-ib.yaml")
    fake = Fake(plan, {n.name: healthy_onprem() for n in plan.nodes}, nccl=slow_node("gpu042"))
    rows = c.check_cluster(plan, fake, drain_stragglers=True)
    assert by(rows, "drain", "gpu042").status == c.PASS
    (cmd,) = drains(fake)
    assert cmd.startswith("scontrol update nodename=gpu042 state=drain reason='clusterctl-check: NCCL straggler: "
                          "all_reduce bus bandwidth alone 12.0 GB/s (median 45.0)")


def test_pair_rounds_never_put_a_node_in_two_runs_at_once():
    plan = plan_of("onprem-64xh100-ib.yaml")
    for count in (3, 4, 5, 64):
        nodes = plan.nodes[:count]
        rounds = s.pair_rounds(list(nodes))
        assert sum(len(r) for r in rounds) == count  # every ring edge once
        for r in rounds:
            members = [n.name for p in r for n in p]
            assert len(members) == len(set(members))
        assert len(rounds) == (2 if count % 2 == 0 else 3)
    assert s.pair_rounds(list(plan.nodes[:2])) == []


def test_lab_two_nodes_rank_alone_with_tasks_fitting_the_cpus():
    plan = plan_of("lab.yaml")
    probes = {n: probe_out(smi=8, mounts={"/mnt/nvme": True}, nccl=True) for n in ("gpu001", "gpu002")}
    fake = Fake(plan, probes, nccl=slow_node("gpu002", fast=40.0, slow=10.0))
    rows = c.check_cluster(plan, fake, straggler_tolerance=0.8)
    assert by(rows, "nccl straggler", "gpu002").status == c.FAIL
    assert by(rows, "nccl straggler", "gpu001").status == c.PASS
    # 2 nodes: no pairs besides the pool-wide run; the median of (40, 10) is 25: gpu001 160%, gpu002 40%.
    assert "alone 10.0 GB/s (median 25.0): 40% of the median" in by(rows, "nccl straggler", "gpu002").detail
    single = next(cmd for _, cmd in fake.commands if "all_reduce_perf" in cmd and " -N 1 " in cmd)
    assert "--ntasks-per-node=2 " in single and " -g 4 " in single  # lab nodes have 2 CPUs: 2 tasks x 4 GPUs


def test_a_failed_run_is_named():
    plan = plan_of("onprem-64xh100-ib.yaml")
    healthy = slow_node("none")

    def runner(node, cmd, timeout):
        if "all_reduce_perf" in cmd and re.search(r" -w gpu005 ", cmd):
            return c.CommandResult(1, "", "srun: error: Node gpu005 not responding")
        return fake(node, cmd, timeout)

    fake = Fake(plan, {n.name: healthy_onprem() for n in plan.nodes}, nccl=healthy)
    rows = c.check_cluster(plan, runner)
    assert by(rows, "nccl straggler", "gpu005").status == c.FAIL
    assert any(r.detail == "all_reduce_perf failed: srun: error: Node gpu005 not responding" for r in rows)
    assert hostlist.expand("gpu[004-006]")  # the neighbours still rank by their other pair
    assert by(rows, "nccl straggler", "gpu004").status == c.PASS


def test_no_mpi_option_for_a_build_without_mpi():
    plan = plan_of("lab.yaml")
    probes = {n: probe_out(smi=8, nccl=True, nccl_mpi=False) for n in ("gpu001", "gpu002")}
    fake = Fake(plan, probes, nccl=slow_node("none"))
    c.check_cluster(plan, fake)
    runs = [cmd for _, cmd in fake.commands if "srun" in cmd and "all_reduce_perf" in cmd]
    assert runs and not any("--mpi" in cmd for cmd in runs)
