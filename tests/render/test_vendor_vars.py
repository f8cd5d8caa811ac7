"""The vendor repositories reach the roles as data in group_vars: mirror URLs as the spec gave them, the catalog's
URLs otherwise, every string tagged !unsafe (never templated), and nothing for lab nodes without mirrors."""

from __future__ import annotations

from clusterctl.render import layout
from clusterctl.render.ansible import controller_vars, pool_vars, render_ansible
from clusterctl.render.node_files import render_node_files
from clusterctl.render.yamlout import UNSAFE_TAG, load_ansible_yaml
from tests.helpers import plan_of

ONPREM, AWS, LAB = "onprem-64xh100-ib.yaml", "aws-p5-spot.yaml", "lab.yaml"
ART = "https://artifactory.atlas.example.com"


def _by_component(repos):
    return {r["component"]: r for r in repos}


def test_onprem_group_vars_carry_the_mirrors():
    plan = plan_of(ONPREM)
    gv = pool_vars(plan, plan.pool("gpu"))
    assert gv["clusterctl_os"] == "ubuntu2204"
    repos = _by_component(gv["clusterctl_repos"])
    assert list(repos) == ["cuda", "doca", "lustre", "slurm"]  # install order: driver stack, RDMA, storage, Slurm
    assert repos["cuda"]["url"] == f"{ART}/nvidia-cuda/ubuntu2204/x86_64/"
    assert repos["cuda"]["key_url"] == f"{ART}/nvidia-cuda/ubuntu2204/x86_64/3bf863cc.pub"
    assert repos["doca"]["url"] == f"{ART}/mellanox-doca/2.9.1/ubuntu22.04/x86_64/"
    assert repos["lustre"]["url"] == f"{ART}/lustre/lustre-2.15.6/ubuntu2204/client/"
    assert repos["slurm"] == {"component": "slurm", "kind": "apt", "url": f"{ART}/slurm-23.11/ubuntu2204/", "suite": "./",
                              "key_url": f"{ART}/keys/slurm.asc", "keyring": "clusterctl-slurm", "mirror": True}
    assert all(r["key_url"] for r in gv["clusterctl_repos"])
    # The controller mounts the Lustre filesystem and runs the pinned Slurm: it gets those two, no GPU stack.
    assert list(_by_component(controller_vars(plan)["clusterctl_repos"])) == ["lustre", "slurm"]


def test_aws_pool_gets_vendor_cuda_and_the_efa_tarball():
    plan = plan_of(AWS)
    gv = pool_vars(plan, plan.pool("p5"))
    repos = _by_component(gv["clusterctl_repos"])
    assert repos["cuda"]["url"] == "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"
    assert repos["cuda"]["mirror"] is False
    # Whamcloud builds no Debian client: the site's own build, one flat repository per distro below the mirror's url.
    assert repos["lustre"]["url"] == "https://mirror.p5spot.example.com/lustre/debian12/"
    assert gv["clusterctl_os"] == "debian12"
    assert "efa" not in repos  # a tarball, not an apt repository
    assert gv["clusterctl_downloads"]["efa"]["url"] == "https://efa-installer.amazonaws.com/aws-efa-installer-1.38.1.tar.gz"


def test_lab_nodes_get_repositories_only_through_mirrors():
    plan = plan_of(LAB)
    assert all(pool_vars(plan, p)["clusterctl_repos"] == [] for p in plan.pools)
    stand_in = "http://10.213.0.1:8080/nvidia"
    plan = plan_of(LAB, lambda d: d.update(mirrors={"cuda": {"url": stand_in, "key_url": stand_in + "/key.asc"}}))
    gpu_pools = [p for p in plan.pools if p.gpus_per_node > 0]
    assert gpu_pools
    for p in gpu_pools:
        assert [r["url"] for r in pool_vars(plan, p)["clusterctl_repos"]] == [stand_in + "/debian12/x86_64/"]


def test_repository_strings_are_written_unsafe():
    plan = plan_of(ONPREM)
    text = render_ansible(plan)[f"{layout.GROUP_VARS}/{layout.pool_group('gpu')}.yml"]
    assert f"url: {UNSAFE_TAG} {ART}/nvidia-cuda/ubuntu2204/x86_64/" in text.replace("'", "")
    data = load_ansible_yaml(text)
    assert data["clusterctl_repos"][0]["keyring"] == "clusterctl-cuda"


def test_health_check_judges_the_driver_where_clusterctl_installs_it():
    # Real hosts (on-prem, AWS): nvidia-smi must report the spec's driver; lab nodes only with a CUDA mirror.
    for source in (ONPREM, AWS):
        plan = plan_of(source)
        pool = next(p for p in plan.pools if p.gpus_per_node)
        assert pool.health.driver == plan.software["nvidia_driver"]
        conf = render_node_files(plan)[layout.HEALTH_CONF.format(pool=pool.name)]
        assert f"\nDRIVER_VERSION={plan.software['nvidia_driver']}\n" in conf
    plan = plan_of(LAB)
    assert all(p.health.driver is None for p in plan.pools)
    stand_in = "http://10.213.0.1:8080/nvidia"
    plan = plan_of(LAB, lambda d: d.update(mirrors={"cuda": {"url": stand_in, "key_url": stand_in + "/key.asc"}}))
    assert {p.health.driver for p in plan.pools if p.gpus_per_node} == {plan.software["nvidia_driver"]}


def test_roles_and_health_check_share_one_answer_on_the_nvidia_stack():
    """Compile decides once where the driver, CUDA and NCCL install; the roles read it from group_vars and the health
    check judges the driver by the same answer, so the two cannot disagree."""
    stand_in = "http://10.213.0.1:8080/nvidia"
    cases = [plan_of(ONPREM), plan_of(AWS), plan_of(LAB),
             plan_of(LAB, lambda d: d.update(mirrors={"cuda": {"url": stand_in, "key_url": stand_in + "/key.asc"}}))]
    seen = set()
    for plan in cases:
        for p in plan.pools:
            stack = load_ansible_yaml(render_ansible(plan)[f"{layout.GROUP_VARS}/{layout.pool_group(p.name)}.yml"])
            assert stack["clusterctl_nvidia_stack"] is p.nvidia_stack
            assert (p.health.driver is not None) is p.nvidia_stack
            seen.add((p.provider, p.nvidia_stack))
    assert {("onprem", True), ("aws", True), ("local", False), ("local", True)} <= seen
