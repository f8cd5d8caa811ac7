"""NCCL env files: decided per partition span, fabric and NCCL version, every choice with its reason as a comment."""

from __future__ import annotations

import copy

from clusterctl.render import render_spec
from clusterctl.validate import load_text
from tests.helpers import example_dict, spec_of, to_yaml


def render(data: dict) -> dict[str, str]:
    return render_spec(spec_of(data))[1]


def env_of(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def four_pools_512() -> dict:
    """512 H100s over RoCE in four 16-node pools: train spans pools a-c (384 GPUs), d serves only `dev` (128)."""
    data = example_dict("onprem-64xh100-ib.yaml")
    base = data["pools"][0]
    data["fabric"] = {"type": "roce", "speed": "400g", "rails": 8, "interface": "eno1",
                      "hcas": ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]}
    data["pools"] = []
    for i, name in enumerate("abcd"):
        p = copy.deepcopy(base)
        p["name"] = name
        p["hosts"] = [{"names": f"{name}[01-16]", "addresses": f"10.10.{i + 1}.[1-16]"}]
        data["pools"].append(p)
    data["scheduler"]["slurm"]["partitions"] = [
        {"name": "train", "pools": ["a", "b", "c"], "default": True},
        {"name": "dev", "pools": ["d"], "preemptible": True},
    ]
    data["storage"]["local_cache"]["pools"] = ["a", "b", "c", "d"]
    return data


def test_onprem_64_nodes_allreduce_only_and_exact_rails():
    files = render(example_dict("onprem-64xh100-ib.yaml"))
    text = files["nccl/gpu.env"]
    env = env_of(text)
    assert env["NCCL_ALGO"] == "allreduce:^ring" and "NCCL_PROTO" not in env
    assert env["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1"
    assert "# NCCL_ALGO: the largest job here (partition critical) spans 512 GPUs" in text
    assert "'=' is NCCL's exact match" in text
    assert "# NCCL_COLLNET_ENABLE unset (off): the fabric declares no SHARP (fabric.sharp)" in text
    health = files["health/gpu.conf"]
    assert "RAILS='mlx5_0:1:400 mlx5_3:1:400" in health and "EXPECTED_IB_PORTS=0" in health


def test_four_pools_512_gpus_decided_by_partition_span():
    files = render(four_pools_512())
    a, d = files["nccl/a.env"], files["nccl/d.env"]
    assert env_of(a)["NCCL_ALGO"] == "allreduce:^ring"
    assert "(partition train) spans 384 GPUs" in a  # 3 pools x 16 nodes x 8, not pool a's own 128
    assert "NCCL_ALGO" not in env_of(d)
    assert "# NCCL_ALGO unset: the largest job here (partition dev) spans 128 GPUs, below the guide's 256" in d
    for text in (a, d):
        env = env_of(text)
        assert "NCCL_IB_GID_INDEX" not in env  # NCCL 2.26 picks the RoCEv2 GID itself
        assert "NCCL_IB_GID_INDEX unset: NCCL 2.26.2 selects the RoCEv2 GID itself" in text
        assert env["NCCL_IB_HCA"].startswith("=mlx5_0:1,")


def test_old_nccl_keeps_global_knobs_off_and_roce_gid_pinned():
    data = four_pools_512()
    data["software"] = {"nccl": "2.18.3"}
    files = render(data)
    a = files["nccl/a.env"]
    assert "NCCL_ALGO" not in env_of(a)
    assert "NCCL 2.18.3 has no per-collective NCCL_ALGO (2.24+)" in a
    assert env_of(a)["NCCL_IB_GID_INDEX"] == "3"
    data["fabric"]["gid_index"] = 5
    assert env_of(render(data)["nccl/a.env"])["NCCL_IB_GID_INDEX"] == "5"


def test_sharp_enables_collnet_only_where_declared():
    data = example_dict("onprem-64xh100-ib.yaml")
    data["fabric"]["sharp"] = True
    text = render(data)["nccl/gpu.env"]
    assert env_of(text)["NCCL_COLLNET_ENABLE"] == "1"
    assert "# NCCL_COLLNET_ENABLE: fabric.sharp" in text


def test_efa_pool():
    text = render(example_dict("aws-p5-spot.yaml"))["nccl/p5.env"]
    env = env_of(text)
    assert env["FI_PROVIDER"] == "efa" and "NCCL_IB_HCA" not in env and "NCCL_ALGO" not in env
    assert "# FI_EFA_USE_DEVICE_RDMA: GPUDirect RDMA over EFA: p5.48xlarge supports RDMA read (p4d and later)" in text


def test_explicit_spec_values_win_with_their_reason():
    data = example_dict("lab.yaml")
    data["nccl"] = {"algo": "Ring", "proto": "LL128", "extra_env": {"NCCL_IB_HCA": "mlx5_4"}}
    text = render(data)["nccl/gpu.env"]
    env = env_of(text)
    assert (env["NCCL_ALGO"], env["NCCL_PROTO"], env["NCCL_IB_HCA"]) == ("Ring", "LL128", "mlx5_4")
    assert "# NCCL_IB_HCA: nccl.extra_env in the spec" in text


def test_hca_names_are_allow_listed():
    data = example_dict("onprem-64xh100-ib.yaml")
    for bad in ("mlx5_0;reboot", "MLX5_0", "mlx5_0 mlx5_1", "mlx5_0:1:2", "mlx5_0\nX=1"):
        data["fabric"]["hcas"] = [bad]
        assert not load_text(to_yaml(data)).ok, bad


def test_p5_efa_env_makes_aws_ofi_nccl_findable_and_forces_no_algorithm():
    text = render(example_dict("aws-p5-spot.yaml"))["nccl/p5.env"]
    env = env_of(text)
    paths = env["LD_LIBRARY_PATH"].split(":")
    assert paths[0] == "/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu"
    assert "/opt/amazon/ofi-nccl/lib" in paths and "/opt/amazon/efa/lib" in paths
    assert env["NCCL_TUNER_PLUGIN"] == "/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu/libnccl-ofi-tuner.so"
    assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert "NCCL_ALGO" not in env and "NCCL_PROTO" not in env
    assert "# NCCL_TUNER_PLUGIN: aws-ofi-nccl's algorithm/protocol tuner" in text
    assert "# FI_EFA_USE_DEVICE_RDMA: GPUDirect RDMA over EFA: p5.48xlarge" in text


def test_efa_pool_spanning_512_gpus_still_leaves_the_algorithm_to_the_tuner():
    data = example_dict("aws-p5-spot.yaml")
    data["pools"][0]["count"] = 64  # 512 GPUs: a RoCE/IB pool this size gets NCCL_ALGO=allreduce:^ring
    text = render(data)["nccl/p5.env"]
    assert "NCCL_ALGO" not in env_of(text)
    assert "aws-ofi-nccl's tuner chooses" in text and "spans 512 GPUs" in text


def test_non_efa_pool_has_no_efa_library_path():
    env = env_of(render(example_dict("onprem-64xh100-ib.yaml"))["nccl/gpu.env"])
    assert "LD_LIBRARY_PATH" not in env and "NCCL_TUNER_PLUGIN" not in env


def test_four_pools_512_nccl_files_match_golden():
    """The 512-GPU four-pool spec's NCCL files as a reviewer reads them (the EFA pool's is the aws-p5-spot golden's
    nccl/p5.env, the 64-node example's is onprem-64xh100-ib's). Regenerate with UPDATE_GOLDEN=1."""
    import os

    from tests.conftest import ROOT

    gold = ROOT / "tests" / "golden" / "nccl-four-pools-512"
    files = {k: v for k, v in render(four_pools_512()).items() if k.startswith("nccl/")}
    assert sorted(files) == [f"nccl/{p}.env" for p in "abcd"]
    if os.environ.get("UPDATE_GOLDEN"):
        for name, text in files.items():
            (gold / name).parent.mkdir(parents=True, exist_ok=True)
            (gold / name).write_text(text)
    assert {name: (gold / name).read_text() for name in files} == files
