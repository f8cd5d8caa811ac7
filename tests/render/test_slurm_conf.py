"""slurm.conf/gres.conf as production sites write them: multifactor priority, nodes described with their CPU layout,
GPUs bound to their socket's cores, memory defaults that let jobs share a node, cloud settings per Slurm version."""

from __future__ import annotations

import re

import pytest

from clusterctl.catalog.cpus import INSTANCE_LAYOUTS
from clusterctl.render import layout, render_spec
from tests.helpers import edited, load_dict


def build(example: str, edit=lambda d: None):
    loaded = load_dict(edited(example, edit))
    assert loaded.ok, loaded.findings
    return render_spec(loaded.spec)


def conf_value(conf: str, key: str) -> str | None:
    m = re.search(rf"^{key}=(\S+)$", conf, re.M)
    return m.group(1) if m else None


def node_line(conf: str, name: str) -> dict[str, str]:
    line = next(ln for ln in conf.splitlines() if ln.startswith(f"NodeName={name} "))
    return dict(kv.split("=", 1) for kv in line.split())


def test_multifactor_priority_with_fair_share_when_accounting_on():
    _, files = build("onprem-64xh100-ib.yaml")
    conf = files[layout.SLURM_CONF]
    assert conf_value(conf, "PriorityType") == "priority/multifactor"
    assert int(conf_value(conf, "PriorityWeightFairshare")) > int(conf_value(conf, "PriorityWeightAge")) > 0
    assert int(conf_value(conf, "PriorityWeightPartition")) > 0
    assert conf_value(conf, "AccountingStorageTRES") == "gres/gpu"
    parts = {m[0]: m[1] for m in re.findall(r"^PartitionName=(\S+) (.*)$", conf, re.M)}
    assert "PriorityJobFactor=2" in parts["critical"] and "PriorityJobFactor=1" in parts["experiment"]


def test_without_accounting_no_fair_share_weights():
    """Fair share and age need slurmdbd (slurm.conf(5)); without it only the partition factor is set."""
    def no_accounting(d):
        d["scheduler"]["slurm"].pop("accounts")
        d["scheduler"]["slurm"]["accounting"] = {"enabled": False}

    _, files = build("lab.yaml", no_accounting)
    conf = files[layout.SLURM_CONF]
    assert conf_value(conf, "PriorityType") == "priority/multifactor"
    assert conf_value(conf, "PriorityWeightFairshare") is None and conf_value(conf, "PriorityWeightAge") is None
    assert conf_value(conf, "AccountingStorageTRES") is None


@pytest.mark.parametrize("instance_type", sorted(INSTANCE_LAYOUTS))
def test_aws_nodes_carry_catalog_layout_and_gpu_cores(instance_type):
    def edit(d):
        d["pools"][0]["instance_type"] = instance_type

    plan, files = build("aws-p5-spot.yaml", edit)
    lay = INSTANCE_LAYOUTS[instance_type]
    node = plan.nodes[0]
    attrs = node_line(files[layout.SLURM_CONF], node.name)
    assert (attrs["Sockets"], attrs["CoresPerSocket"], attrs["ThreadsPerCore"]) == tuple(
        str(x) for x in (lay.sockets, lay.cores_per_socket, lay.threads_per_core))
    assert int(attrs["CPUs"]) == lay.cpus
    gres = files[layout.GRES_CONF]
    c = lay.cores_per_socket
    assert f"File=/dev/nvidia[0-3] Cores=0-{c - 1}" in gres and f"File=/dev/nvidia[4-7] Cores={c}-{2 * c - 1}" in gres


def test_onprem_layout_from_reference_server_only_when_cpus_match():
    plan, files = build("onprem-64xh100-ib.yaml")  # cpus: 224 = DGX H100's 2 x 56 x 2
    assert node_line(files[layout.SLURM_CONF], "gpu001")["CoresPerSocket"] == "56"

    def other_cpus(d):
        d["pools"][0]["cpus"] = 128

    _, files = build("onprem-64xh100-ib.yaml", other_cpus)
    assert "Sockets" not in node_line(files[layout.SLURM_CONF], "gpu001")
    assert "Cores=" not in files[layout.GRES_CONF] and "File=/dev/nvidia[0-7]" in files[layout.GRES_CONF]


def test_spec_overrides_layout():
    def edit(d):
        d["pools"][0].update(cpus=128, sockets=2, cores_per_socket=32, threads_per_core=2)

    _, files = build("onprem-64xh100-ib.yaml", edit)
    attrs = node_line(files[layout.SLURM_CONF], "gpu001")
    assert (attrs["CPUs"], attrs["Sockets"], attrs["CoresPerSocket"]) == ("128", "2", "32")
    assert "Cores=32-63" in files[layout.GRES_CONF]


@pytest.mark.parametrize("fields", [
    {"sockets": 2},  # partial
    {"sockets": 2, "cores_per_socket": 32, "threads_per_core": 2, "cpus": 100},  # product disagrees with cpus
    {"sockets": "2; rm -rf /", "cores_per_socket": 32, "threads_per_core": 2},  # not an int
    {"sockets": 0, "cores_per_socket": 32, "threads_per_core": 2},
])
def test_bad_layout_refused(fields):
    def edit(d):
        d["pools"][0].update(fields)

    assert not load_dict(edited("onprem-64xh100-ib.yaml", edit)).ok


@pytest.mark.parametrize("example", ["onprem-64xh100-ib.yaml", "hybrid-burst.yaml", "aws-p5-spot.yaml", "lab.yaml"])
def test_two_half_node_gpu_jobs_share_a_node(example):
    """Default memory per GPU leaves room for a second job with the other half of the GPUs, and MemSpecLimit
    (on real-sized nodes) keeps memory for the OS."""
    plan, _ = build(example)
    nodes = {n.name: n for n in plan.nodes}
    for part in plan.partitions:
        for n in (nodes[name] for name in part.nodes if nodes[name].gpus):
            assert 2 * (n.gpus // 2) * part.def_mem_per_gpu <= n.memory_mb - n.mem_spec_mb
            if n.memory_mb >= 16 * 1024:
                assert n.mem_spec_mb >= 1024


@pytest.mark.parametrize("version, old", [("22.05", True), ("23.02", True), ("23.11", False), ("24.05", False)])
def test_cloud_settings_follow_slurm_version(version, old):
    """NoAddrCache and cloud_reg_addrs exist up to 23.02; 23.11 refuses them as defunct (its RELEASE_NOTES)."""
    def edit(d):
        d.setdefault("software", {})["slurm"] = version
        if version != "22.05":  # not Debian 12's release: the hosts install it from a (signed) site mirror
            d["mirrors"] = {"slurm": {"url": "https://mirror.example.com/slurm", "key_url": "https://mirror.example.com/slurm.asc"}}

    _, files = build("hybrid-burst.yaml", edit)
    conf = files[layout.SLURM_CONF]
    assert ("CommunicationParameters=NoAddrCache" in conf) is old
    assert ("cloud_reg_addrs" in conf) is old
    assert "SchedulerParameters=salloc_wait_nodes" in conf
    assert int(conf_value(conf, "UnkillableStepTimeout")) >= 5 * 10  # at least 5x MessageTimeout


def test_no_cloud_settings_without_cloud_nodes():
    _, files = build("onprem-64xh100-ib.yaml")
    assert "NoAddrCache" not in files[layout.SLURM_CONF] and "salloc_wait_nodes" not in files[layout.SLURM_CONF]


EXAMPLES = ["lab.yaml", "onprem-64xh100-ib.yaml", "aws-p5-spot.yaml", "hybrid-burst.yaml"]


@pytest.mark.parametrize("example", EXAMPLES)
def test_configless_for_every_provider(example):
    """slurmctld serves the files (enable_configless, on the one SlurmctldParameters line Slurm reads); every slurmd is
    started with --conf-server the controller's address (name where the plan has none) and SlurmctldPort."""
    plan, files = build(example)
    conf = files[layout.SLURM_CONF]
    [params] = re.findall(r"^SlurmctldParameters=(\S+)$", conf, re.M)
    assert params.split(",")[0] == "enable_configless"
    server = f"{plan.controller.address or plan.controller.name}:{conf_value(conf, 'SlurmctldPort')}"
    lines = files[layout.SLURMD_DROPIN].splitlines()
    # Debian's unit has ConditionPathExists=/etc/slurm/slurm.conf: an empty assignment clears it (systemd.unit(5)),
    # and an empty ExecStart= must come before the replacement (systemd.service(5)).
    assert lines.index("ConditionPathExists=") > lines.index("[Unit]")
    i = lines.index("ExecStart=")
    assert i > lines.index("[Service]") and lines[i + 1] == f"ExecStart=/usr/sbin/slurmd -D -s --conf-server {server} $SLURMD_OPTIONS"


@pytest.mark.parametrize("version, params", [("22.05", "enable_configless,idle_on_node_suspend,cloud_reg_addrs"),
                                             ("23.11", "enable_configless,idle_on_node_suspend")])
def test_configless_merged_with_power_saving_parameters(version, params):
    def edit(d):
        d.setdefault("software", {})["slurm"] = version
        if version != "22.05":
            d["mirrors"] = {"slurm": {"url": "https://mirror.example.com/slurm", "key_url": "https://mirror.example.com/slurm.asc"}}

    _, files = build("hybrid-burst.yaml", edit)
    assert re.findall(r"^SlurmctldParameters=(\S+)$", files[layout.SLURM_CONF], re.M) == [params]

