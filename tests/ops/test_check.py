"""`clusterctl check` row logic with a fake command runner: what each node and the controller answer is canned; the
verdicts (pass / fail / skip, with the node named) are the code under test. The real thing runs against a lab in
tests/integration/test_lab_monitoring.py."""

from __future__ import annotations

import json
import subprocess

import pytest

from clusterctl.ops import check as c
from clusterctl.ops.check import CommandResult
from tests.helpers import plan_of
from tests.ops.checkfakes import Fake, all_reduce_output, by, healthy_onprem, probe_out, prometheus_up


# --- the lab --------------------------------------------------------------------------------------------------

def test_lab_passes_with_nccl_skipped():
    plan = plan_of("lab.yaml")
    fake = Fake(plan, {"gpu001": probe_out(mounts={"/mnt/nvme": True}), "gpu002": probe_out(mounts={"/mnt/nvme": True})})
    rows = c.check_cluster(plan, fake)
    assert c.rows_ok(rows)
    assert by(rows, "gpus", "gpu001").status == c.PASS
    assert by(rows, "gpu driver", "gpu001").status == c.SKIP and "fake" in by(rows, "gpu driver", "gpu001").detail
    assert by(rows, "mounts", "gpu002").status == c.PASS
    assert by(rows, "fabric ports", "gpu[001-002]").status == c.SKIP
    assert by(rows, "slurm job", "gpu[001-002]").status == c.PASS
    nccl = by(rows, "nccl all_reduce", "gpu[001-002]")
    assert nccl.status == c.SKIP and "fake /dev/nvidiaN" in nccl.detail
    assert by(rows, "exporters", "lab-ctl").status == c.PASS
    assert not any("srun" in cmd and "all_reduce_perf" in cmd for _, cmd in fake.commands)  # never faked, never run
    srun = next(cmd for _, cmd in fake.commands if " srun" in cmd)
    assert "-p critical -w gpu[001-002] -N 2 --gres=gpu:8" in srun


def test_lab_missing_gpu_device_fails_and_names_the_node():
    plan = plan_of("lab.yaml")
    sinfo = "gpu001|drained|clusterctl-health: GPU count 7, expected 8\ngpu002|idle|none\n"
    fake = Fake(plan, {"gpu001": probe_out(gpus=7, mounts={"/mnt/nvme": True}), "gpu002": probe_out(mounts={"/mnt/nvme": True})},
                sinfo=sinfo)
    srun_refused = CommandResult(1, "", "srun: error: Unable to allocate resources: Requested node configuration is not available")
    rows = c.check_cluster(plan, lambda n, cmd, t: srun_refused if " srun" in cmd else fake(n, cmd, t))
    assert not c.rows_ok(rows)
    failed = [r for r in rows if r.status == c.FAIL]
    assert by(rows, "gpus", "gpu001").status == c.FAIL
    assert by(rows, "gpus", "gpu001").detail == "7 /dev/nvidiaN (expected 8)"
    assert by(rows, "gpus", "gpu002").status == c.PASS
    assert by(rows, "slurm state", "gpu001").detail == "drained: clusterctl-health: GPU count 7, expected 8"
    assert by(rows, "slurm job", "gpu[001-002]").status == c.FAIL
    assert {r.node for r in failed} == {"gpu001", "gpu[001-002]"}


def test_unreachable_node():
    plan = plan_of("lab.yaml")
    fake = Fake(plan, {"gpu001": CommandResult(255, "", "ssh: connect to host 10.213.0.11 port 22: No route to host"),
                       "gpu002": probe_out(mounts={"/mnt/nvme": True})})
    rows = c.check_cluster(plan, fake)
    r = by(rows, "reachable", "gpu001")
    assert r.status == c.FAIL and "No route to host" in r.detail
    assert not [x for x in rows if x.check == "gpus" and x.node == "gpu001"]


def test_runner_exceptions_are_failures_not_crashes():
    plan = plan_of("lab.yaml")

    def boom(node, command, timeout):
        raise TimeoutError(f"{node.name}: did not finish in {timeout:.0f}s")

    rows = c.check_cluster(plan, boom)
    assert not c.rows_ok(rows)
    assert by(rows, "reachable", "gpu001").detail.endswith("did not finish in 120s")
    assert by(rows, "exporters", "lab-ctl").status == c.FAIL


def test_exporter_down():
    plan = plan_of("lab.yaml")
    prom = prometheus_up([("node", "lab-ctl", "1"), ("node", "gpu001", "0"), ("node", "gpu002", "1")])
    fake = Fake(plan, {n: probe_out(mounts={"/mnt/nvme": True}) for n in ("gpu001", "gpu002")}, prometheus=prom)
    r = by(c.check_cluster(plan, fake), "exporters", "lab-ctl")
    assert r.status == c.FAIL and r.detail == "down: node@gpu001"


def test_exporters_skipped_when_monitoring_is_off():
    plan = plan_of("lab.yaml", lambda d: d.__setitem__("monitoring", {"enabled": False}))
    fake = Fake(plan, {n: probe_out(mounts={"/mnt/nvme": True}) for n in ("gpu001", "gpu002")})
    assert by(c.check_cluster(plan, fake), "exporters", "lab-ctl").status == c.SKIP


# --- real GPU hosts (the on-prem example: 64 x 8 H100, NDR400 x 8 rails, /lustre + /mnt/nvme) ---------------------

def onprem_fake(overrides=None, **kw):
    plan = plan_of("onprem-64xh100-ib.yaml")
    probes = {n.name: healthy_onprem() for n in plan.nodes}
    probes.update(overrides or {})
    return plan, Fake(plan, probes, **kw)


def test_onprem_all_good():
    plan, fake = onprem_fake(nccl=all_reduce_output(512, 395.0, nodes=tuple(f"gpu{i:03d}" for i in range(1, 65))))
    rows = c.check_cluster(plan, fake)
    assert c.rows_ok(rows), [r for r in rows if r.status != c.PASS]
    assert by(rows, "gpu driver", "gpu064").detail == "driver 570.172.08 (spec: 570.172.08)"
    assert by(rows, "fabric ports", "gpu017").detail == "8 active infiniband ports (expected 8)"
    nccl = by(rows, "nccl all_reduce", "gpu[001-064]")
    assert nccl.status == c.PASS
    assert "bus bandwidth 395.0 GB/s at 8 GiB over 512 GPUs; expected 368 GB/s = 8 x 46 GB/s" in nccl.detail
    cmd = next(cmd for _, cmd in fake.commands if "srun" in cmd and "all_reduce_perf" in cmd)
    assert "-N 64 --ntasks-per-node=8 --gres=gpu:8 --mpi=pmix" in cmd and "-g 1" in cmd
    assert len([r for r in rows if r.check == "gpus"]) == 64


def test_onprem_failures_name_their_nodes():
    overrides = {
        "gpu005": probe_out(smi=8, driver="550.54.15", ib_active=8, mounts={"/lustre": True, "/mnt/nvme": True}, nccl=True),
        "gpu009": probe_out(smi=8, ib_active=7, ib_down=1, mounts={"/lustre": True, "/mnt/nvme": True}, nccl=True),
        "gpu010": probe_out(smi=8, ib_active=8, mounts={"/lustre": False, "/mnt/nvme": True}, nccl=True),
        "gpu011": probe_out(gpus=8, smi=7, ib_active=8, mounts={"/lustre": True, "/mnt/nvme": True}, nccl=True),
        "gpu012": probe_out(ib_active=8, mounts={"/lustre": True, "/mnt/nvme": True}),  # no nvidia-smi: no driver
    }
    plan, fake = onprem_fake(overrides, nccl=all_reduce_output(512, 395.0))
    rows = c.check_cluster(plan, fake)
    assert not c.rows_ok(rows)
    assert by(rows, "gpu driver", "gpu005").detail == "driver 550.54.15 (spec: 570.172.08)"
    assert by(rows, "fabric ports", "gpu009").detail == "7 active infiniband ports (expected 8); not active: mlx5_7/1 DOWN"
    assert by(rows, "mounts", "gpu010").detail == "not mounted: /lustre"
    assert by(rows, "gpus", "gpu011").detail == "8 /dev/nvidiaN (expected 8), nvidia-smi lists 7"
    assert by(rows, "gpu driver", "gpu012").detail == "nvidia-smi not found: NVIDIA driver 570.172.08 is not installed"
    nccl = by(rows, "nccl all_reduce", "gpu[001-064]")
    assert nccl.status == c.SKIP and nccl.detail == "no NVIDIA driver (nvidia-smi): gpu012"
    failed_nodes = {r.node for r in rows if r.status == c.FAIL}
    assert failed_nodes == {"gpu005", "gpu009", "gpu010", "gpu011", "gpu012"}


def test_nccl_below_expected_fails():
    plan, fake = onprem_fake(nccl=all_reduce_output(512, 180.0))
    nccl = by(c.check_cluster(plan, fake), "nccl all_reduce", "gpu[001-064]")
    assert nccl.status == c.FAIL and "bus bandwidth 180.0 GB/s" in nccl.detail and "pass at >= 80%" in nccl.detail


def test_nccl_tests_built_without_mpi_is_called_out():
    # 512 tasks of a non-MPI build: 512 separate single-rank tests, each "Rank 0" with bus bandwidth 0.
    plan, fake = onprem_fake(nccl=all_reduce_output(1, 0.0, nodes=("gpu001",)) * 512)
    nccl = by(c.check_cluster(plan, fake), "nccl all_reduce", "gpu[001-064]")
    assert nccl.status == c.FAIL and "MPI=1" in nccl.detail and "1 rank(s)" in nccl.detail


def test_nccl_tests_missing_is_a_skip_with_the_reason():
    plan, fake = onprem_fake({"gpu033": healthy_onprem(nccl=False)})
    nccl = by(c.check_cluster(plan, fake), "nccl all_reduce", "gpu[001-064]")
    assert nccl.status == c.SKIP and nccl.detail.startswith("/opt/nccl-tests/all_reduce_perf missing on gpu033")


def test_nccl_run_failure():
    plan, fake = onprem_fake(nccl=CommandResult(1, "", "srun: error: gpu007: task 48: Exited with exit code 3"))
    nccl = by(c.check_cluster(plan, fake), "nccl all_reduce", "gpu[001-064]")
    assert nccl.status == c.FAIL and "task 48" in nccl.detail


def test_efa_pool_and_elastic_pool():
    plan = plan_of("hybrid-burst.yaml")
    probes = {n.name: probe_out(smi=8, ib_active=8, mounts={"/home/shared": True}) for n in plan.nodes if not n.cloud}
    rows = c.check_cluster(plan, Fake(plan, probes))
    assert by(rows, "slurm job", "burst").status == c.SKIP  # elastic, nothing running
    assert not [r for r in rows if r.node.startswith("burst-")]
    assert by(rows, "nccl all_reduce", "h100-[01-08]").status == c.SKIP  # no nccl-tests in the probes
    plan = plan_of("aws-p5-spot.yaml")
    probes = {n.name: probe_out(smi=8, efa=31, mounts={"/fsx": True, "/mnt/nvme": True}) for n in plan.nodes}
    rows = c.check_cluster(plan, Fake(plan, probes))
    assert by(rows, "fabric ports", "p5001").detail == "31 EFA devices (expected 32)"
    assert by(rows, "fabric ports", "p5001").status == c.FAIL


def test_expected_bus_bandwidth():
    assert c.expected_busbw_gbs(plan_of("onprem-64xh100-ib.yaml").pools[0])[0] == pytest.approx(8 * 46.0)
    bw, src = c.expected_busbw_gbs(plan_of("aws-p5-spot.yaml").pools[0])
    assert bw == pytest.approx(3200 / 8 * 46 / 50) and "derived" in src
    assert c.expected_busbw_gbs(plan_of("lab.yaml").pools[0]) == (None, "no link speed for fabric ethernet in the spec")


def test_parse_all_reduce():
    res = c.parse_all_reduce(all_reduce_output(16, 400.0))
    assert res == {"ranks": 16, "busbw": 400.0, "size": 8589934592, "avg_busbw": 360.0}


def test_probe_command_runs_here(tmp_path):
    """The probe is real shell: run it on this machine (no GPUs, / is a mount point)."""
    r = subprocess.run(["sh", "-c", c.probe_command(("/", str(tmp_path)))], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    p = c.parse_probe(r.stdout)
    assert p.mounts == {"/": True, str(tmp_path): False}
    assert p.nvidia_smi is False and isinstance(p.gpu_devices, int)


def test_json_and_table_printers():
    from rich.console import Console

    from clusterctl.ops.phases import Phases

    plan = plan_of("lab.yaml")
    phases = Phases()
    rows = c.check_cluster(plan, Fake(plan, {n: probe_out(gpus=7 if n == "gpu002" else 8, mounts={"/mnt/nvme": True})
                                             for n in ("gpu001", "gpu002")}), phases=phases)
    doc = json.loads(c.check_json("lab", rows, phases))
    assert doc["ok"] is False and doc["counts"]["fail"] == 1
    # Where the time went, phase by phase (the fake runner answers at once: the figures are ~0, the names are the point).
    assert list(doc["phases"]) == ["node probes", "slurm states", "slurm job", "nccl", "stragglers", "exporters"]
    assert {"check": "gpus", "node": "gpu002", "status": "fail", "detail": "7 /dev/nvidiaN (expected 8)"} in doc["rows"]
    con = Console(record=True, width=160)
    c.print_checks(con, "lab", rows, phases)
    text = con.export_text()
    assert "FAIL" in text and "gpu002" in text and "1 failed" in text and "time: node probes" in text
