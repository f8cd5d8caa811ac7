"""The rig's slurm.conf is the rendered one except for the settings Rig.overrides() names and the node addresses
(no daemons started; runs everywhere)."""

from __future__ import annotations

from pathlib import Path

from clusterctl.render import layout, render_spec
from clusterctl.validate import load_valid
from tests.scale.rig import SPEC_1024, Rig


def rig() -> Rig:
    plan, files = render_spec(load_valid(SPEC_1024))
    return Rig(plan, files, Path("/rig"), 20000, {n.name: 20001 + i for i, n in enumerate(plan.nodes)})


def test_only_listed_settings_differ():
    r = rig()
    rendered = r.rendered[layout.SLURM_CONF].splitlines()
    ours = r.slurm_conf().splitlines()
    changed_keys = {ln.split("=", 1)[0] for ln in set(ours) - set(rendered) if not ln.startswith("NodeName=")}
    assert changed_keys == set(r.overrides())
    gone = {ln.split("=", 1)[0] for ln in set(rendered) - set(ours) if not ln.startswith("NodeName=")}
    assert gone <= set(r.overrides())
    # Node lines: same nodes, same attributes, only the address replaced by localhost:<own port>.
    nodes = [ln for ln in ours if ln.startswith("NodeName=")]
    assert len(nodes) == 1024 + 1  # owned nodes one a line, the elastic pool's CLOUD nodes on one
    assert nodes[-1].startswith(f"NodeName=burst[001-512] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[{20001 + 1024}-")
    assert nodes[0] == ("NodeName=h100-0001 NodeHostname=localhost NodeAddr=127.0.0.1 Port=20001 CPUs=224 Sockets=2 "
                        "CoresPerSocket=56 ThreadsPerCore=2 RealMemory=2000000 MemSpecLimit=32768 Gres=gpu:h100:8 "
                        "Features=pool_h100,infiniband,h100-sxm State=UNKNOWN")
    # Nothing about scheduling, priority, preemption, GRES or topology is touched.
    for key in ("SelectType", "PriorityType", "PreemptType", "GresTypes", "TopologyPlugin", "PartitionName"):
        assert [ln for ln in ours if ln.startswith(key + "=")] == [ln for ln in rendered if ln.startswith(key + "=")]


def test_gres_conf_differs_only_in_device_paths():
    r = rig()
    assert r.gres_conf().replace("/rig/dev/nvidia", "/dev/nvidia") == r.rendered[layout.GRES_CONF]


def test_differences_name_the_burst_settings():
    """Every setting the rig adds for the elastic pool is listed: the programs' paths and what replaces the cloud."""
    diffs = "\n".join(rig().differences())
    for what in ("ResumeProgram: /usr/local/sbin/clusterctl-resume -> /rig/bin/clusterctl-resume",
                 "SuspendProgram: /usr/local/sbin/clusterctl-suspend -> /rig/bin/clusterctl-suspend",
                 "/rig/etc/burst.env instead of /etc/clusterctl/burst.env", "AWS_ENDPOINT_URL=moto_server",
                 "CLUSTERCTL_BURST_BOOTSTRAP=off", "127.64.0.0/16", "LD_PRELOAD"):
        assert what in diffs, what


def test_burst_runs_reads_the_programs_own_log(tmp_path):
    """The rig times the burst programs from the lines runlog writes (the format is the product's)."""
    from clusterctl.engines.aws.burst.runlog import close, run_logger
    from tests.scale.cloud import burst_runs

    log = run_logger("resume", tmp_path / "burst.log", stderr=False)
    log.info("start: resume burst[001-064] (settings /rig/etc/burst.env, plan /rig/etc/plan.json)")
    log.info("done in 1.25s, exit 0")
    close(log)
    (run,) = burst_runs((tmp_path / "burst.log").read_text())
    assert (run.action, run.nodes, run.seconds, run.exit) == ("resume", "burst[001-064]", 1.25, 0)
