"""The vendor GPU stack (nvidia_driver, cuda, nccl) in REAL mode on lab nodes, from the stand-in NVIDIA repository.

Its own lab (cluster `vnd`, subnet 10.220.0.0/24, its own state dir, one compute node). In order:
- `clusterctl up` of the plain lab; then the stand-in repository (tests/standins/vendor_repo.py) is built and served
  over HTTP on the lab bridge's host address, and `clusterctl up` of the same spec with `mirrors.cuda` pointing at it,
  the same path an air-gapped site's internal mirror takes: vendor_repo adds it signed, and the roles install for real;
- the node holds exactly the pinned driver 570.172.08 with its Fabric Manager and NSCQ, CUDA 12.8 and NCCL 2.26.2,
  the driver build is held, nvidia-persistenced and nvidia-fabricmanager run, nvidia-smi answers from the fake devices;
- the repository offers a newer 570 driver (570.211.01, no Fabric Manager of its version) and a newer NCCL: apt's
  candidate is the newer driver, yet neither is installed, and an `apt-get upgrade` would not take it (held);
- a second converge changes nothing, and the tasks that need a kernel of the node's own were skipped by the named
  condition clusterctl_own_kernel (site.yml), not run.
"""

from __future__ import annotations

import json
import os

import pytest

from clusterctl.engines.ansible.runner import PlaybookRun, run_playbook
from clusterctl.ops.access import access_for
from clusterctl.compile import compile_plan
from clusterctl.state import ClusterState
from clusterctl.state.secrets import ensure_munge_key, playbook_vars
from clusterctl.validate import load_text, load_valid
from tests.helpers import clusterctl, example_dict, needs_root, to_yaml
from tests.standins import vendor_repo as vr

pytestmark = [
    pytest.mark.integration,
    needs_root("lab nodes: network namespaces, systemd-nspawn"),
]

DRIVER = "570.172.08"
DRIVER_PKGS = ("nvidia-open-570", "nvidia-persistenced", "nvidia-fabricmanager-570", "libnvidia-nscq-570")
# Tasks that cannot run in a container, each skipped by clusterctl_own_kernel (the lab node shares the host's kernel).
KERNEL_TASKS = ("Kernel headers for the driver's DKMS modules",)


def _spec_data(mirror_url: str | None = None) -> dict:
    data = example_dict("lab.yaml")
    data["name"] = "vnd"
    data["lab"]["subnet"] = "10.220.0.0/24"
    data["pools"][0]["count"] = 1
    data["storage"].pop("local_cache", None)  # not what this test is about
    data["monitoring"]["enabled"] = False
    data["scheduler"]["slurm"]["accounting"]["enabled"] = False
    data["scheduler"]["slurm"].pop("accounts", None)
    data.setdefault("software", {})["nvidia_driver"] = DRIVER
    if mirror_url:
        data["mirrors"] = {"cuda": {"url": mirror_url, "key_url": f"{mirror_url}/{vr.REPO_PATH}/{vr.KEY_FILE}"}}
    return data


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("vnd")
    spec = d / "vnd.yaml"
    spec.write_text(to_yaml(_spec_data()))
    assert load_text(spec.read_text()).ok
    e = dict(os.environ, CLUSTERCTL_STATE_DIR=str(d / "state"))
    yield e, d, spec
    clusterctl("down", spec, "--force", env=e, check=False)


@pytest.fixture(scope="module")
def lab(env):
    """The plain lab up, then the stand-in repository served on its bridge and the spec with mirrors.cuda applied."""
    e, d, plain = env
    r = clusterctl("up", plain, "--output", "json", env=e)
    assert json.loads(r.stdout)["ok"]
    plan = compile_plan(load_valid(plain))
    root = d / "repos"
    vr.build(root)
    with vr.serve(root, plan.lab.gateway) as url:
        mirrored = d / "vnd-mirrored.yaml"
        mirrored.write_text(to_yaml(_spec_data(url)))
        loaded = load_text(mirrored.read_text())
        assert loaded.ok, [f.message for f in loaded.findings]
        r = clusterctl("up", mirrored, "--output", "json", env=e, check=False)
        report = json.loads(r.stdout)
        assert report["ok"], report["error"] or report["converge"]["failures"]
        spec = load_valid(mirrored)
        plan = compile_plan(spec)
        state = ClusterState(spec.name, root=d / "state")
        access = access_for(plan, state, lambda m: None)
        yield plan, access, state, report


def on(lab, node, command, check=True):
    plan, access, _, _ = lab
    target = next(n for n in plan.all_nodes if n.name == node)
    return access.remote(target).run(command, timeout=120, check=check)


def installed(lab, node, *packages) -> dict[str, str]:
    """{package: version} of those installed (held ones included: their selection is hold, their status installed)."""
    r = on(lab, node, "dpkg-query -W -f='${Package} ${Version} ${db:Status-Status}\\n' " + " ".join(packages),
           check=False)
    return {p: v for p, v, st in (line.split(" ", 2) for line in r.stdout.splitlines()) if st == "installed"}


def test_first_run_installed_the_stack_for_real(lab):
    changed = [t["task"] for t in lab[3]["converge"]["changes"] if t["host"] == "gpu001"]
    for prefix in ("Signed vendor repositories", "Driver ", "CUDA toolkit", "NCCL ", "Hold the whole driver build"):
        assert any(t.startswith(prefix) for t in changed), (prefix, changed)


def test_exactly_the_pinned_versions_are_installed(lab):
    got = installed(lab, "gpu001", *DRIVER_PKGS, "cuda-toolkit-12-8", "libnccl2", "libnccl-dev")
    assert got == {**{p: f"{DRIVER}-1" for p in DRIVER_PKGS}, "cuda-toolkit-12-8": "12.8.1-1",
                   "libnccl2": "2.26.2-1+cuda12.8", "libnccl-dev": "2.26.2-1+cuda12.8"}, got
    sources = on(lab, "gpu001", "cat /etc/apt/sources.list.d/clusterctl-cuda.list").stdout
    assert "[signed-by=/usr/share/keyrings/clusterctl-cuda.gpg]" in sources and "trusted" not in sources, sources


def test_the_driver_build_is_held(lab):
    held = set(on(lab, "gpu001", "apt-mark showhold").stdout.split())
    assert held >= set(DRIVER_PKGS), held


def test_services_run_and_nvidia_smi_answers(lab):
    r = on(lab, "gpu001", "systemctl is-active nvidia-persistenced nvidia-fabricmanager; "
                          "systemctl is-enabled nvidia-persistenced nvidia-fabricmanager", check=False)
    assert r.stdout.split() == ["active", "active", "enabled", "enabled"], r.stdout + r.stderr
    assert on(lab, "gpu001", "nvidia-smi --query-gpu=driver_version --format=csv,noheader").stdout.split() == [DRIVER] * 8
    assert len(on(lab, "gpu001", "nvidia-smi -L").stdout.splitlines()) == 8


def test_a_newer_driver_without_its_fabric_manager_is_not_installed(lab):
    policy = on(lab, "gpu001", "apt-cache policy nvidia-open-570 nvidia-fabricmanager-570 libnccl2").stdout
    # The repository offers 570.211.01 (and NCCL 2.27.3): apt's candidate, not what the node runs.
    assert "Candidate: 570.211.01-1" in policy and "570.211.01-1" not in installed(lab, "gpu001", "nvidia-open-570").values()
    assert "2.27.3-1+cuda12.9" in policy
    # Taking it would change held packages: apt says so (and refuses without --allow-change-held-packages).
    r = on(lab, "gpu001", "apt-get -s install nvidia-open-570=570.211.01-1 nvidia-persistenced=570.211.01-1", check=False)
    assert "held packages will be changed" in r.stdout, r.stdout + r.stderr


def test_second_run_changes_nothing_and_skips_kernel_tasks_by_name(lab):
    plan, access, state, _ = lab
    skipped: dict[str, set[str]] = {}

    def record(event):
        d = event.get("event_data", {})
        if event.get("event") == "runner_on_skipped":
            skipped.setdefault(d.get("host", ""), set()).add(d.get("task", ""))

    result = run_playbook(PlaybookRun(build_dir=state.dir / "build", extravars=playbook_vars(ensure_munge_key(state)),
                                      ssh=access.ssh), record)
    assert result.ok, result.failures
    assert {h: r["changed"] for h, r in result.recap.items()} == {"vnd-ctl": 0, "gpu001": 0}, result.changes
    for task in KERNEL_TASKS:
        assert task in skipped.get("gpu001", set()), (task, sorted(skipped.get("gpu001", set())))
    assert "Fabric Manager" not in skipped.get("gpu001", set())
    assert installed(lab, "gpu001", "nvidia-open-570") == {"nvidia-open-570": f"{DRIVER}-1"}
