"""Hybrid burst for real: a lab Slurm cluster grows into "rented" p5 nodes and shrinks back.

Real: Slurm 22.05 (slurmctld's power saving calls the rendered ResumeProgram/SuspendProgram/ResumeFailProgram,
which exec `clusterctl burst ...` as SlurmUser on the lab controller, installed there by the burst role), the EC2 API
(moto_server over HTTP, reached from the controller through the lab bridge), the launch requests (the pool's
template, ENIs, spot market options, tags), the bootstrap over SSH, slurmd registering, the jobs, the spot watcher
(a systemd service on the burst node polling IMDSv2 over HTTP).
Simulated: the VMs (a lab node booted for each instance moto reports running, with the instance's private address,
removed when it is terminated), capacity errors (a proxy in front of moto answers RunInstances in chosen AZs with
EC2's InsufficientInstanceCapacity), the IMDS (an HTTP server on the lab bridge serving a spot notice), AWS's own
reclaiming of an interrupted spot instance (the test terminates it in moto), and the Pulumi stack (created with boto3).

One cluster for the module (tests run in file order). Spec: tests/engines/aws/burst/lab-hybrid.yaml (SuspendTime 60 s).
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import pytest

from clusterctl.core import hostlist
from tests.engines.aws.burst.labcluster import BurstLab
from tests.helpers import needs_root, wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slurm,
    needs_root(),
]

CLOUD = ["cloud001", "cloud002", "cloud003", "cloud004"]
# How the harness's image builder differs from an EC2 one, as the converge is told: no kernel of its own to build
# modules for (clusterctl_own_kernel false, as on every lab node), and root logs in with the lab's key (a Debian AMI
# logs in as admin and sudoes; the burst bootstrap gets the same switch: CLUSTERCTL_BURST_SSH_USER=root).
BUILDER_IN_A_CONTAINER = {"clusterctl_own_kernel": False, "ansible_user": "root", "ansible_become": False}
SUBNET_B = "10.219.0.128/26"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    b = BurstLab(tmp_path_factory.mktemp("burst-state"))
    try:
        b.up()
        yield b
    finally:
        b.down()


def flags(lab, node) -> set[str]:
    return set(lab.node(node).get("State", "").split("+"))


def back_to_power_saving(f: set[str]) -> bool:
    """Powered down or on the way there (POWER_DOWN: requested, POWERING_DOWN: SuspendProgram ran), never DOWN."""
    return bool(f & {"POWER_DOWN", "POWERING_DOWN", "POWERED_DOWN"}) and "DOWN" not in f


def powered_down_nodes(lab) -> list[str]:
    """Cloud nodes Slurm can power up now (POWERED_DOWN, not DOWN, not powering up or down)."""
    out = []
    for n in CLOUD:
        f = flags(lab, n)
        if "POWERED_DOWN" in f and not f & {"POWERING_UP", "POWERING_DOWN", "DOWN", "DRAIN"}:
            out.append(n)
    return out


def free_node(lab) -> str:
    """A cloud node Slurm can power up now; nodes an earlier test released are POWERING_DOWN for SuspendTimeout."""
    return wait_for(lambda: powered_down_nodes(lab), 300, 3, "a powered-down cloud node")[0]


def node_with_reason(lab, node: str, text: str) -> dict | None:
    """The node's fields once its Reason mentions `text`."""
    d = lab.node(node)
    return d if text in d.get("Reason", "") else None


def requeued(lab, job: str) -> dict | None:
    """The job's fields once it has been requeued (Restarts counts it) and the old run's cleanup is over."""
    j = lab.job(job)
    return j if int(j.get("Restarts", 0)) >= 1 and j.get("JobState") != "COMPLETING" else None


def live_names(lab) -> dict[str, dict]:
    return {i["TagMap"].get("Name"): i for i in lab.instances()}


def job_state(lab, job) -> str:
    return lab.job(job).get("JobState", "")


def wait_job(lab, job: str, states: tuple[str, ...], timeout: float, node: str | None = None) -> None:
    """Wait for the job to reach one of `states`; on timeout, fail with what the lab knows (burst log, VMs, Slurm)."""
    try:
        wait_for(lambda: job_state(lab, job) in states, timeout, 1, f"job {job} to be {'/'.join(states)}")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{lab.explain(job, node)}") from None


def test_burst_job_grows_runs_and_shrinks(lab):
    assert lab.converge_result.ok  # site.yml installed the burst programs on the controller
    assert "resume-fail" in lab.as_slurm("clusterctl burst --help").stdout
    assert powered_down_nodes(lab) == CLOUD  # min 0: nothing rented before the job
    t0 = time.monotonic()
    job = lab.sbatch("-p burst -N2 --gres=gpu:8 -o /tmp/burst-%j.out --wrap 'srun hostname'")
    # Cold start: two VMs boot and are bootstrapped over SSH; on a loaded 2-core machine that took over 300 s once.
    wait_job(lab, job, ("RUNNING", "COMPLETING", "COMPLETED"), 600)
    started = time.monotonic() - t0
    wait_job(lab, job, ("COMPLETED",), 120)
    info = lab.job(job)
    nodes = hostlist.expand(info["NodeList"])
    assert len(nodes) == 2 and set(nodes) <= set(CLOUD)

    # Resume launched exactly these two, tagged with cluster, pool and node name, and Slurm has their addresses
    # (beside the static node's instance, the stack's).
    live = live_names(lab)
    assert sorted(live) == sorted([*nodes, *lab.static])
    for n in nodes:
        i = live[n]
        assert i["TagMap"]["clusterctl:cluster"] == "burst" and i["TagMap"]["clusterctl:pool"] == "cloud"
        assert i["InstanceType"] == "p5.48xlarge" and i.get("InstanceLifecycle") == "spot"
        assert lab.node(n)["NodeAddr"] == i["PrivateIpAddress"]
    # Each instance had its VM, and the job ran there (srun output: both hostnames, set by the bootstrap).
    booted = {e.node: e.address for e in lab.vms.events if e.what == "booted"}
    assert {n: booted.get(n) for n in nodes} == {n: live[n]["PrivateIpAddress"] for n in nodes}
    out = lab.on(booted[nodes[0]], f"cat /tmp/burst-{job}.out").stdout
    assert sorted(out.split()) == sorted(nodes)
    log = lab.burst_log()
    assert "resume latency" in log and f"job {job}: launched" in log
    configured = [line.split(": ", 1)[1] for line in log.splitlines()
                  if ": configured in" in line and line.split(": ", 1)[0].split()[-1] in nodes]
    print(f"\nsbatch -> job start on burst nodes: {started:.1f}s; their bootstrap (base image): {configured}")

    # SuspendTime (60 s) later: instances terminated (by tag), VMs gone, nodes powered down in Slurm.
    wait_for(lambda: not set(nodes) & set(live_names(lab)), 240, 3, "the burst instances to be terminated")
    terminated = {i["TagMap"].get("Name") for i in lab.instances(states=("shutting-down", "terminated"))}
    assert set(nodes) <= terminated
    wait_for(lambda: not set(nodes) & {lab.vms.names.get(i) for i in lab.vms.vms}, 60, 1, "their VMs to stop")
    for n in nodes:
        f = flags(lab, n)
        assert back_to_power_saving(f), f
    assert "suspend" in lab.burst_log()


def test_capacity_error_fails_over_to_the_next_az(lab):
    target = free_node(lab)
    mark = len(lab.proxy.calls)
    lab.proxy.failing_azs = {"us-west-2a"}
    try:
        job = lab.sbatch(f"-p burst -w {target} --gres=gpu:8 --wrap hostname")
        # One resume normally (~30 s here). 600 s leaves room for Slurm's second power-up if the first node could
        # not be bootstrapped in ResumeTimeout (300 s) on a loaded machine: CI once timed out at 300 s with no trace.
        wait_job(lab, job, ("COMPLETED",), 600, target)
    finally:
        lab.proxy.failing_azs = set()
    calls = [(c.availability_zone, c.failed) for c in lab.proxy.calls[mark:]]
    if len(calls) > 2:  # the failover is still shown by the first two; say why there were more
        print(f"\n{target} needed {len(calls)} RunInstances calls:\n{lab.explain(job, target)}")
    assert calls[:2] == [("us-west-2a", True), ("us-west-2b", False)], calls
    inst = live_names(lab)[target]
    assert inst["Placement"]["AvailabilityZone"] == "us-west-2b"
    from ipaddress import IPv4Address, IPv4Network

    assert IPv4Address(inst["PrivateIpAddress"]) in IPv4Network(SUBNET_B)  # the AZ's subnet, inside the lab subnet
    log = lab.burst_log()
    assert "in us-west-2a failed: InsufficientInstanceCapacity" in log and f"{target}=" in log


def test_no_capacity_anywhere_powers_down_with_the_code_and_the_job_waits(lab):
    target = free_node(lab)
    mark = len(lab.proxy.calls)
    lab.proxy.failing_azs = {"us-west-2a", "us-west-2b", "us-west-2c"}
    try:
        job = lab.sbatch(f"-p burst -w {target} --gres=gpu:8 --wrap hostname")
        node = wait_for(lambda: node_with_reason(lab, target, "InsufficientInstanceCapacity"),
                        120, 1, f"{target} to be powered down with the cloud error")
        f = set(node["State"].split("+"))
        assert back_to_power_saving(f), f  # back to power saving, never DOWN
        assert "us-west-2a, us-west-2b, us-west-2c" in node["Reason"]
        # Requeued (through COMPLETING): it waits for capacity instead of failing.
        wait_for(lambda: job_state(lab, job) == "PENDING", 60, 1, f"job {job} to be pending again")
        calls = lab.proxy.calls[mark:]
        assert [c.availability_zone for c in calls] == ["us-west-2a", "us-west-2b", "us-west-2c"]
        assert all(c.failed for c in calls) and target not in live_names(lab)  # nothing launched, nothing left
    finally:
        lab.proxy.failing_azs = set()
        lab.ctl(f"scancel {job}", check=False)


SPOT_JOB = """#!/bin/sh
# Checkpoints on USR1 (what the spot watcher sends), then keeps working until it is requeued.
trap 'scontrol update jobid=$SLURM_JOB_ID comment=checkpointed-on-$(hostname)' USR1
while true; do sleep 1; done
"""


def test_spot_notice_drains_the_node_and_requeues_the_job(lab):
    target = free_node(lab)
    lab.ctl(f"printf %s {shlex.quote(SPOT_JOB)} > /root/spot.sh")
    job = lab.sbatch(f"-p burst -w {target} --gres=gpu:8 -o /dev/null /root/spot.sh")
    wait_job(lab, job, ("RUNNING",), 300, target)
    address = lab.node(target)["NodeAddr"]
    wait_for(lambda: lab.imds.polls.get(address, 0) > 0, 60, 1, f"the spot watcher on {target} to poll IMDS")

    mark = len(lab.burst_log())
    notice = lab.imds.interrupt(address, in_seconds=120)
    node = wait_for(lambda: node_with_reason(lab, target, "spot interruption"),
                    60, 1, f"{target} to be drained")
    assert "DRAIN" in node["State"] and notice["time"] in node["Reason"]
    # A requeue passes through COMPLETING (the old run's cleanup) back to PENDING.
    info = wait_for(lambda: requeued(lab, job), 90, 1, f"job {job} to be requeued")
    assert info["JobState"] in ("PENDING", "REQUEUED", "CONFIGURING", "RUNNING"), info  # requeued, not failed
    assert info["Comment"] == f"checkpointed-on-{target}"  # the job got the signal before the requeue
    watcher = lab.on(address, "journalctl -u clusterctl-spot-watch --no-pager -o cat").stdout
    assert f"job {job}: sending SIGUSR1" in watcher and f"job {job} (RUNNING): requeued" in watcher

    # EC2 takes the instance back (the notice's deadline). Sync powers the node down, unless Slurm already did
    # (the drained node idle for SuspendTime: its suspend terminated the instance first). Never DOWN.
    lab.ctl(f"scancel {job}")
    inst = live_names(lab).get(target)
    if inst:
        lab.ec2.terminate_instances(InstanceIds=[inst["InstanceId"]])
    # The notice was that instance's: a later instance given the same address (EC2 reuses them) has none.
    lab.imds.notices.pop(address)
    lab.as_slurm("clusterctl burst sync")
    f = flags(lab, target)
    assert back_to_power_saving(f), f
    log = lab.burst_log()[mark:]
    assert f"powering down {target}: clusterctl burst: instance gone" in log or f"terminated {target}=" in log


def test_image_build_bakes_the_pool_and_a_burst_node_boots_it_with_8_gpus(lab, tmp_path_factory, monkeypatch):
    """`image build` of the aws pool for real: the builder launched through EC2 (moto, behind the proxy) in the
    cluster's subnet boots as a VM, the node roles converge it over SSH in image mode from the site's mirrors (the
    stand-in NVIDIA and EFA releases, as an air-gapped site serves them), CreateImage bakes its root, the image id is
    recorded and the builder terminated. The launch template then boots it (what `up` does with a recorded image);
    a job on the burst partition runs on a node booted from that image, whose slurmd registers 8 GPUs, and nothing
    is installed at its bootstrap. The builder is a container (BUILDER_IN_A_CONTAINER says how it differs)."""
    from ruamel.yaml import YAML

    from clusterctl.engines.aws.image import recorded_image
    from clusterctl.ops.image_aws import build_aws_pools
    from clusterctl.render.compiled import Compiled
    from clusterctl.validate import load_text
    from rich.console import Console
    from tests.engines.aws.burst.labcluster import SPEC
    from clusterctl.state.secrets import ensure_cluster_id
    from tests.helpers import to_yaml
    from tests.standins import efa_installer as efa
    from tests.standins import vendor_repo as vr

    d = tmp_path_factory.mktemp("burst-image")
    vr.build(d / "repos")
    efa.build(d / "repos")
    base = sorted(i["ImageId"] for i in lab.ec2.describe_images(
        Owners=["amazon"], Filters=[{"Name": "architecture", "Values": ["x86_64"]}])["Images"])[0]
    for k, v in lab.burst_env().items():
        if k.startswith("AWS_"):
            monkeypatch.setenv(k, v)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    with vr.serve(d / "repos", lab.plan.lab.gateway) as url:
        data = YAML(typ="safe").load(SPEC.read_text())
        data["pools"][1]["ami"] = base  # the builder's base (moto's own images; the harness boots Debian)
        data["mirrors"] = {"cuda": {"url": url, "key_url": f"{url}/{vr.REPO_PATH}/{vr.KEY_FILE}"},
                           "efa": {"url": f"{url}/efa", "key_url": f"{url}/efa/{efa.KEY_FILE}"}}
        loaded = load_text(to_yaml(data))
        assert loaded.ok, [f.message for f in loaded.findings]
        compiled = Compiled.of(loaded.spec)
        t0 = time.monotonic()
        with lab.state.lock("image build"):
            built = build_aws_pools(compiled, lab.state, Console(stderr=True), ["cloud"], quiet=True,
                                    role_vars=BUILDER_IN_A_CONTAINER)
        seconds = time.monotonic() - t0
    [image] = built
    assert image.built and image.image.startswith("ami-")
    assert recorded_image(lab.state.backend, "cloud") == {"image_id": image.image, "base_ami": base,
                                                          "inputs_hash": image.inputs_hash}
    # The builder: launched from the base in the pool's first-AZ subnet with the template's security group,
    # tagged as the cluster's, CreateImage'd and terminated.
    [builder] = [i for i in lab.instances(states=("pending", "running", "shutting-down", "terminated"))
                 if i["TagMap"].get("clusterctl:role") == "image-builder"]
    assert builder["ImageId"] == base and builder["State"]["Name"] in ("shutting-down", "terminated")
    assert builder["SubnetId"] == lab.stack.subnets["us-west-2a"]
    assert builder["TagMap"]["clusterctl:cluster-id"] == ensure_cluster_id(lab.state)
    root = Path(lab.proxy.images[image.image])  # what CreateImage baked
    status = (root / "var/lib/dpkg/status").read_text()
    for package in ("nvidia-open-570", "nvidia-fabricmanager-570", "libnccl2", "slurmd", "munge"):
        assert f"Package: {package}\n" in status, package
    assert (root / "opt/amazon/efa_installed_packages").exists()  # the EFA release ran
    assert not (root / "etc/munge/munge.key").exists() and not list((root / "etc/ssh").glob("ssh_host_*"))

    lab.set_template_image(image.image)
    mark = len(lab.burst_log())
    t0 = time.monotonic()
    job = lab.sbatch("-p burst -N1 --gres=gpu:8 -o /tmp/image-%j.out --wrap 'srun nvidia-smi -L'")
    wait_job(lab, job, ("RUNNING", "COMPLETING", "COMPLETED"), 600)
    started = time.monotonic() - t0
    wait_job(lab, job, ("COMPLETED",), 120)
    [node] = hostlist.expand(lab.job(job)["NodeList"])
    inst = live_names(lab)[node]
    assert inst["ImageId"] == image.image
    assert lab.vms.roots[inst["InstanceId"]] == str(root)  # its VM booted the baked root
    assert "gpu:" in lab.node(node)["Gres"] and lab.node(node)["Gres"].endswith(":8"), lab.node(node)["Gres"]
    out = lab.on(inst["PrivateIpAddress"], f"cat /tmp/image-{job}.out").stdout.splitlines()
    assert [line.split(":")[0] for line in out] == [f"GPU {i}" for i in range(8)], out
    log = lab.burst_log()[mark:]
    assert f"bootstrap {node}: installing" not in log  # the packages came with the image
    configured = [line.split(": ", 1)[1] for line in log.splitlines() if f"{node}: configured in" in line]
    print(f"\nimage build of pool cloud: {seconds:.1f}s; sbatch -> job start on a node booted from it: "
          f"{started:.1f}s; its bootstrap: {configured}")


def test_a_static_spot_node_ec2_takes_back_comes_back_under_its_name(lab):
    """(After the image test: the burst node that test powered up is suspended meanwhile, which the last test would
    otherwise wait for.) steady001, a static spot node (the stack's), runs a job; the spot notice drains it and requeues the job; EC2
    takes the instance back. The sync timer's run launches a replacement with the same name and address from the
    pool's template, the kit sets it up, the spot watcher's drain is lifted, and the requeued job runs there."""
    node = "steady001"
    old = live_names(lab)[node]
    address = old["PrivateIpAddress"]
    assert lab.node(node)["NodeAddr"] == address  # slurm.conf names it (rendered from the stack's outputs)
    lab.ctl(f"printf %s {shlex.quote(SPOT_JOB)} > /root/steady.sh")
    job = lab.sbatch(f"-p steady -w {node} --gres=gpu:8 -o /dev/null /root/steady.sh")
    wait_job(lab, job, ("RUNNING",), 120, node)
    wait_for(lambda: lab.imds.polls.get(address, 0) > 0, 60, 1, f"the spot watcher on {node} to poll IMDS")
    lab.imds.interrupt(address, in_seconds=120)
    wait_for(lambda: node_with_reason(lab, node, "spot interruption"), 60, 1, f"{node} to be drained")
    wait_for(lambda: requeued(lab, job), 90, 1, f"job {job} to be requeued")

    mark = len(lab.burst_log())
    lab.reclaim(old["InstanceId"])  # the notice's deadline: EC2 terminates it, with its spot reason
    lab.imds.notices.pop(address)  # that instance's notice; the replacement at the same address has none
    wait_for(lambda: old["InstanceId"] not in lab.vms.vms, 60, 1, f"the VM of {node}'s old instance to stop")
    t0 = time.monotonic()
    lab.as_slurm("clusterctl burst sync", timeout=400)  # what the timer runs every minute; sets the node up inline
    synced = time.monotonic() - t0
    new = live_names(lab).get(node)
    assert new and new["InstanceId"] != old["InstanceId"], lab.explain(job, node)
    assert new["PrivateIpAddress"] == address and new["Placement"]["AvailabilityZone"] == "us-west-2a"
    wait_job(lab, job, ("RUNNING",), 300, node)
    back = time.monotonic() - t0
    assert "DRAIN" not in lab.node(node)["State"] and lab.on(address, "hostname").stdout.strip() == node
    log = lab.burst_log()[mark:]
    assert f"replacing {node}: EC2 took back {old['InstanceId']} (Server.SpotInstanceTermination)" in log, log
    assert f"{node}: back in service on the replacement instance" in log, log
    lab.ctl(f"scancel {job}")
    print(f"\nstatic spot node {node}: sync (launch, VM boot, bootstrap) {synced:.1f}s; "
          f"sync -> its requeued job running on the replacement {back:.1f}s")


def test_everything_shrinks_back_to_owned_only(lab):
    """Every burst instance terminated and its VM gone; the static node's (the stack's) stays."""
    wait_for(lambda: set(live_names(lab)) == set(lab.static), 240, 5, "every burst instance to be terminated")
    wait_for(lambda: powered_down_nodes(lab) == CLOUD, 300, 5, "every cloud node to be POWERED_DOWN")
    wait_for(lambda: {lab.vms.names.get(i) for i in lab.vms.vms} == set(lab.static), 60, 1, "every burst VM to stop")
    assert lab.node("gpu001")["State"] == "IDLE"  # the owned node never powers down (SuspendExcNodes)
    log = lab.burst_log()
    assert "Traceback" not in log and "unexpected" not in log
    assert not lab.vms.errors, lab.vms.errors
