"""Each validator: a spec that breaks its rule gets its finding (with the field path and YAML line); the examples don't."""

import copy

import pytest

from clusterctl.validate import VALIDATORS, load_file, load_text
from tests.conftest import EXAMPLES
from tests.helpers import codes, edited, load_dict, to_yaml


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_validate_clean(path):
    loaded = load_file(path)
    assert loaded.ok, loaded.findings
    assert [f for f in loaded.findings if f.level.value != "info"] == []


def _aws(data, i=0):
    return data["pools"][i]


def _second_pool_in(data, az):
    """aws-p5-spot with its pool in us-east-1a only, and a second pool in `az` (both mount its FSx)."""
    _aws(data)["availability_zones"] = ["us-east-1a"]
    data["pools"].append({**_aws(data), "name": "p5b", "availability_zones": [az]})
    data["scheduler"]["slurm"]["partitions"][0]["pools"].append("p5b")


def _two_lustre(data, first, second):
    """onprem-64xh100-ib with a second Lustre filesystem, both mounted by its pool, with these LNet networks."""
    fs = data["storage"]["shared"][0]
    fs["lnet_networks"] = first
    data["storage"]["shared"].insert(1, {**copy.deepcopy(fs), "fs_name": "scratch", "mount_point": "/scratch",
                                         "lnet_networks": second})


CASES = [
    # (code, example, edit, level, path)
    ("efa-not-aws", "lab.yaml", lambda d: d["fabric"].update(type="efa"), "error", "fabric.type"),
    ("ib-on-aws", "aws-p5-spot.yaml", lambda d: _aws(d).update(fabric={"type": "infiniband"}), "error", "pools[0].fabric.type"),
    ("gpus-per-node-mismatch", "aws-p5-spot.yaml", lambda d: _aws(d).update(gpus_per_node=4), "error", "pools[0].gpus_per_node"),
    ("gpu-model-mismatch", "aws-p5-spot.yaml", lambda d: _aws(d).update(gpu="a100-80gb"), "error", "pools[0].gpu"),
    ("partition-unknown-pool", "lab.yaml", lambda d: d["scheduler"]["slurm"]["partitions"][0].update(pools=["gpu", "gpux"]),
     "error", "scheduler.slurm.partitions[0].pools[1]"),
    ("duplicate-node", "hybrid-burst.yaml",
     lambda d: d["pools"].append({"name": "more", "provider": "onprem", "gpu": "h100-sxm",
                                  "hosts": [{"names": "h100-08", "addresses": "10.20.1.99"}]}),
     "error", "pools[2].hosts"),
    ("duplicate-node", "hybrid-burst.yaml",
     lambda d: d["pools"].append({"name": "more", "provider": "onprem", "gpu": "h100-sxm",
                                  "hosts": [{"names": "x[1-2]", "addresses": "10.20.1.[17-18]"}]}),
     "error", "pools[2].hosts"),
    ("resume-timeout", "hybrid-burst.yaml", lambda d: d["scheduler"]["slurm"]["burst"].update(resume_timeout_seconds=60),
     "warning", "scheduler.slurm.burst.resume_timeout_seconds"),
    ("burst-target", "hybrid-burst.yaml", lambda d: d["scheduler"]["slurm"]["burst"]["targets"][0].update(pools=["owned"]),
     "error", "scheduler.slurm.burst.targets[0].pools[0]"),
    ("burst-image", "hybrid-burst.yaml", lambda d: None, "info", "pools[1].ami"),
    ("spot-no-checkpoints", "aws-p5-spot.yaml", lambda d: d["storage"].pop("checkpoints"), "warning", "pools[0].market"),
    ("ethernet-at-scale", "onprem-64xh100-ib.yaml", lambda d: d["fabric"].update(type="ethernet", speed="400g"),
     "warning", "fabric.type"),
    ("fsx-invalid", "aws-p5-spot.yaml", lambda d: d["storage"]["shared"][0].update(storage_capacity_gib=3000), "error",
     "storage.shared[0].storage_capacity_gib"),
    ("fsx-invalid", "aws-p5-spot.yaml", lambda d: d["storage"]["shared"][0].update(per_unit_storage_throughput=200), "error",
     "storage.shared[0].per_unit_storage_throughput"),
    ("fsx-az", "aws-p5-spot.yaml", lambda d: _second_pool_in(d, "us-east-1b"), "error", "pools[1].availability_zones[0]"),
    ("fsx-az", "aws-p5-spot.yaml", lambda d: None, "info", "pools[0].availability_zones"),  # the fallback AZ
    ("lnet-conflict", "onprem-64xh100-ib.yaml", lambda d: _two_lustre(d, "o2ib0(ib0)", "tcp0(eth0),o2ib(ib1)"), "error",
     "storage.shared[1].lnet_networks"),
    ("market-reservation", "aws-p5-spot.yaml", lambda d: _aws(d).update(market="capacity-block"), "error",
     "pools[0].capacity_reservation_id"),
    ("market-fallback", "aws-p5-spot.yaml", lambda d: _aws(d).update(fallback_markets=["on-demand"]), "error",
     "pools[0].fallback_markets"),
    ("market-fallback", "hybrid-burst.yaml", lambda d: d["pools"][1].update(fallback_markets=["spot", "on-demand"]), "error",
     "pools[1].fallback_markets[1]"),
    ("spot-no-checkpoints", "hybrid-burst.yaml",
     lambda d: (d["storage"].pop("checkpoints"), d["pools"][1].update(fallback_markets=["spot"])), "warning",
     "pools[1].fallback_markets"),
    ("instance-type-unknown", "aws-p5-spot.yaml", lambda d: _aws(d).update(instance_type="p5.24xlarge"), "error",
     "pools[0].instance_type"),
    ("gpu-model-missing", "lab.yaml", lambda d: d["pools"][0].pop("gpu"), "error", "pools[0].gpu"),
    ("hosts-invalid", "onprem-64xh100-ib.yaml", lambda d: d["pools"][0]["hosts"][0].update(addresses="10.10.1.[1-63]"),
     "error", "pools[0].hosts[0].addresses"),
    ("hosts-invalid", "onprem-64xh100-ib.yaml", lambda d: d["pools"][0]["hosts"][0].update(addresses="10.10.1.[200-263]"),
     "error", "pools[0].hosts[0].addresses"),
    ("controller-provider", "lab.yaml", lambda d: d["controller"].update(provider="onprem"), "error", "controller.provider"),
    ("lab-subnet-full", "lab.yaml", lambda d: (d["lab"].update(subnet="10.213.0.0/28"), d["pools"][0].update(count=6)), "error", "lab.subnet"),
    ("fabric-speed", "onprem-64xh100-ib.yaml", lambda d: d["fabric"].update(speed="400g"), "error", "fabric.speed"),
    ("storage-unknown-pool", "lab.yaml", lambda d: d["storage"]["local_cache"].update(pools=["nope"]), "error",
     "storage.local_cache.pools[0]"),
    ("mount-conflict", "onprem-64xh100-ib.yaml", lambda d: d["storage"]["local_cache"].update(mount_point="/lustre"),
     "error", "storage.local_cache.mount_point"),
    ("checkpoint-target", "lab.yaml", lambda d: d["storage"]["checkpoints"].update(s3_bucket="ckpt-bucket"), "error",
     "storage.checkpoints"),
    ("partition-names", "lab.yaml", lambda d: d["scheduler"]["slurm"]["partitions"][1].update(default=True), "error",
     "scheduler.slurm.partitions[1].default"),
    ("elastic-unused", "hybrid-burst.yaml", lambda d: d["scheduler"]["slurm"]["burst"].update(targets=[]), "warning",
     "pools[1].max"),
    ("pool-unscheduled", "lab.yaml",
     lambda d: d["pools"].append({"name": "idle", "provider": "local", "count": 1, "gpu": "l40s", "gpus_per_node": 1}),
     "warning", "pools[1].name"),
    ("slurm-version", "lab.yaml", lambda d: d["software"].update(slurm="21.08") if "software" in d else d.update(software={"slurm": "21.08"}),
     "error", "software.slurm"),
    ("preemption-tiers", "lab.yaml", lambda d: d["scheduler"]["slurm"]["partitions"][0].update(preemptible=True), "warning",
     "scheduler.slurm.partitions"),
    ("aws-regions", "hybrid-burst.yaml",
     lambda d: d["pools"].append(dict(d["pools"][1], name="east", region="us-east-1", availability_zones=["us-east-1a"])),
     "error", "pools[2].region"),
    ("vendor-distro", "hybrid-burst.yaml", lambda d: d.setdefault("software", {}).update(slurm="23.11"), "error",
     "software.slurm"),
    ("repo-unsigned", "onprem-64xh100-ib.yaml", lambda d: d["mirrors"]["cuda"].pop("key_url"), "error", "mirrors.cuda.key_url"),
    ("driver-flavor", "onprem-64xh100-ib.yaml",
     lambda d: (d["pools"][0].update(gpu="b200"), d["software"].update(nvidia_driver_flavor="proprietary")), "error",
     "software.nvidia_driver_flavor"),
    ("os-image", "aws-p5-spot.yaml", lambda d: d["pools"][0].update(os="ubuntu2204"), "error", "pools[0].os"),
    ("lab-os", "lab.yaml", lambda d: d["pools"][0].update(os="ubuntu2404"), "error", "pools[0].os"),
]


@pytest.mark.parametrize("code,example,edit,level,path", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule_fires_with_path_and_line(code, example, edit, level, path):
    loaded = load_dict(edited(example, edit))
    hits = [f for f in loaded.findings if f.code == code]
    assert hits, f"expected {code}; got {[(f.code, f.path, f.message) for f in loaded.findings]}"
    f = hits[0]
    assert f.level.value == level
    assert f.path == path
    assert f.line is not None and f.line >= 1


def test_every_validator_has_a_case():
    tested = {c[0] for c in CASES}
    assert {v.code for v in VALIDATORS} <= tested


def test_an_elastic_pool_may_fall_back_to_another_market():
    loaded = load_dict(edited("hybrid-burst.yaml", lambda d: d["pools"][1].update(fallback_markets=["spot"])))
    assert loaded.ok and "market-fallback" not in codes(loaded)


def test_fallback_markets_exclude_bought_capacity():
    loaded = load_dict(edited("hybrid-burst.yaml", lambda d: d["pools"][1].update(fallback_markets=["reserved"])))
    assert not loaded.ok
    assert any(f.path.startswith("pools[1].fallback_markets") for f in loaded.errors), [f.path for f in loaded.errors]


def test_burst_image_note_goes_away_with_an_ami():
    loaded = load_dict(edited("hybrid-burst.yaml", lambda d: d["pools"][1].update(ami="ami-0123456789abcdef0")))
    assert "burst-image" not in codes(loaded)


def test_ethernet_warning_quotes_the_guides_measurement():
    loaded = load_dict(edited("onprem-64xh100-ib.yaml", lambda d: d["fabric"].update(type="roce", speed="400g")))
    (f,) = [f for f in loaded.findings if f.code == "ethernet-at-scale"]
    assert "512 GPUs" in f.message and "28 GB/s" in f.message and "46 GB/s" in f.message


def test_all_problems_reported_at_once():
    def edit(d):
        d["fabric"]["type"] = "efa"
        d["scheduler"]["slurm"]["partitions"][0]["pools"] = ["nope"]
        d["storage"]["checkpoints"]["s3_bucket"] = "ckpt-bucket"

    assert {"efa-not-aws", "partition-unknown-pool", "checkpoint-target"} <= codes(load_dict(edited("lab.yaml", edit)), "error")


def test_finding_points_at_the_yaml_line():
    text = (
        "apiVersion: clusterctl/v1\nname: t\npools:\n  - name: p\n    provider: aws\n    instance_type: p5.48xlarge\n"
        "    region: us-east-1\n    availability_zones: [us-east-1a]\n    gpus_per_node: 4\n    count: 1\n"
        "scheduler:\n  slurm:\n    partitions:\n      - name: a\n        pools: [p]\n"
    )
    loaded = load_text(text)
    (f,) = [f for f in loaded.findings if f.code == "gpus-per-node-mismatch"]
    assert (f.line, f.column) == (9, 5)


def test_schema_errors_name_field_and_line():
    text = to_yaml(edited("lab.yaml", lambda d: d["pools"][0].update(gpus_per_nod=8)))
    loaded = load_text(text)
    assert loaded.spec is None
    (f,) = loaded.errors
    assert f.path == "pools[0].gpus_per_nod" and "unknown field" in f.message
    assert text.splitlines()[f.line - 1].strip().startswith("gpus_per_nod")


def test_union_errors_drop_pydantic_tags():
    loaded = load_dict(edited("aws-p5-spot.yaml", lambda d: d["pools"][0].update(count="sixteen")))
    paths = {f.path for f in loaded.errors}
    assert "pools[0].count" in paths


def test_yaml_syntax_error_has_line():
    loaded = load_text("name: x\npools: [\n")
    (f,) = loaded.errors
    assert f.code == "yaml-syntax" and f.line is not None


def test_duplicate_yaml_keys_rejected():
    loaded = load_text("name: x\nname: y\n")
    assert loaded.errors and loaded.errors[0].code == "yaml-syntax"


def test_fsx_is_made_where_its_pools_start_and_other_pools_may_start_elsewhere():
    """The FSx goes to the first AZ of the first aws pool that mounts it; a pool that does not mount it may start in
    any AZ, and the stack config carries the AZ to the Pulumi program."""
    from clusterctl.compile import compile_plan
    from clusterctl.render.cloud import cloud_config

    def two_pools(d):
        d["pools"].insert(0, {**_aws(d), "name": "p5b", "availability_zones": ["us-east-1b"]})
        d["storage"]["shared"][0]["pools"] = ["p5"]
        d["scheduler"]["slurm"]["partitions"][0]["pools"] = ["p5", "p5b"]

    loaded = load_dict(edited("aws-p5-spot.yaml", two_pools))
    assert loaded.ok and not [f for f in loaded.findings if f.code == "fsx-az" and f.level.value != "info"]
    plan = compile_plan(loaded.spec)
    assert [f.availability_zone for f in plan.fsx] == ["us-east-1a"]
    assert [f["availability_zone"] for f in cloud_config(plan)["clusterctl:fsx"]] == ["us-east-1a"]


def test_lustre_filesystems_on_one_node_share_one_lnet_line():
    """Compile merges a node's LNet networks (each network once: `tcp` is `tcp0`, interfaces may hold commas); the
    same network with the same interfaces in two filesystems is fine, and one not mounted together never conflicts."""
    from clusterctl.compile import compile_plan
    from clusterctl.render.ansible import pool_vars
    from clusterctl.spec.effective import lnet_line

    assert lnet_line(["o2ib0(ib0,ib1)", None, "tcp(eth0),o2ib0(ib0,ib1)"]) == "o2ib0(ib0,ib1),tcp(eth0)"
    assert lnet_line([None]) is None
    loaded = load_dict(edited("onprem-64xh100-ib.yaml", lambda d: _two_lustre(d, "o2ib0(ib0,ib1)", "o2ib(ib0,ib1),tcp0(eth0)")))
    assert loaded.ok, [f.message for f in loaded.errors]
    plan = compile_plan(loaded.spec)
    assert pool_vars(plan, plan.pools[0])["clusterctl_lnet_networks"] == "o2ib0(ib0,ib1),tcp0(eth0)"

    def apart(d):
        _two_lustre(d, "o2ib0(ib0)", "o2ib0(ib1)")
        d["pools"].append({**copy.deepcopy(d["pools"][0]), "name": "other",
                           "hosts": [{"names": "other01", "addresses": "10.20.9.1"}]})
        d["storage"]["shared"][0]["pools"], d["storage"]["shared"][1]["pools"] = ["gpu"], ["other"]
        d["scheduler"]["slurm"]["partitions"][0]["pools"].append("other")

    assert "lnet-conflict" not in codes(load_dict(edited("onprem-64xh100-ib.yaml", apart)))
