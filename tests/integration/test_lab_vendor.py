"""The vendor GPU stack (nvidia_driver, cuda, nccl) in REAL mode on lab nodes, from the stand-in NVIDIA repository.

Its own lab (cluster `vnd`, subnet 10.220.0.0/24, its own state dir, two compute nodes). In order:
- `clusterctl up` of the plain lab; then the stand-in repository (tests/standins/vendor_repo.py) is built and served
  over HTTP on the lab bridge's host address, and `clusterctl up` of the same spec with `mirrors.cuda` pointing at it,
  the same path an air-gapped site's internal mirror takes: vendor_repo adds it signed, and the roles install for real;
- the node holds exactly the pinned driver 570.172.08 with its Fabric Manager and NSCQ, CUDA 12.8 and NCCL 2.26.2,
  the driver build is held, nvidia-persistenced and nvidia-fabricmanager run, nvidia-smi answers from the fake devices;
- the repository offers a newer 570 driver (570.211.01, no Fabric Manager of its version) and a newer NCCL: apt's
  candidate is the newer driver, yet neither is installed, and an `apt-get upgrade` would not take it (held);
- a second converge changes nothing, and the tasks that need a kernel of the node's own were skipped by the named
  condition clusterctl_own_kernel (site.yml), not run;
- last, the driver upgrade as a day-2 operation: with a user's job running on gpu002, `plan` of the 575 branch says
  `drain` and `apply` rolls it out one node at a time: gpu001 drained, upgraded (driver, Fabric Manager and NSCQ
  together), health-checked and resumed while the job runs on; gpu002 drained only once the job has finished (never
  killed), then upgraded the same way. Every node ends on 575.57.08, held, with no 570 package left.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from clusterctl.engines.ansible.runner import PlaybookRun, run_playbook
from clusterctl.ops.access import access_for
from clusterctl.compile import compile_plan
from clusterctl.compile.vendor import resolve
from clusterctl.core.resources import resource_dir
from clusterctl.render.ansible import repo_vars
from clusterctl.spec.effective import lnet_line
from clusterctl.state import ClusterState
from clusterctl.state.secrets import ensure_munge_key, playbook_vars
from clusterctl.validate import load_text, load_valid
from tests.helpers import clusterctl, example_dict, needs_root, to_yaml
from tests.standins import vendor_repo as vr

pytestmark = [
    pytest.mark.integration,
    needs_root("lab nodes: network namespaces, systemd-nspawn"),
]

DRIVER, NEW_DRIVER = "570.172.08", "575.57.08"


def driver_packages(version: str) -> tuple[str, ...]:
    branch = version.split(".")[0]
    return (f"nvidia-open-{branch}", "nvidia-persistenced", f"nvidia-fabricmanager-{branch}", f"libnvidia-nscq-{branch}")


DRIVER_PKGS = driver_packages(DRIVER)
# Tasks that cannot run in a container, each skipped by clusterctl_own_kernel (the lab node shares the host's kernel).
KERNEL_TASKS = ("Kernel headers for DKMS modules",)


def _spec_data(mirror_url: str | None = None, driver: str = DRIVER) -> dict:
    data = example_dict("lab.yaml")
    data["name"] = "vnd"
    data["lab"]["subnet"] = "10.220.0.0/24"
    data["pools"][0]["count"] = 2
    data["storage"].pop("local_cache", None)  # not what this test is about
    data["monitoring"]["enabled"] = False
    data["scheduler"]["slurm"]["accounting"]["enabled"] = False
    data["scheduler"]["slurm"].pop("accounts", None)
    data.setdefault("software", {})["nvidia_driver"] = driver
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
        yield plan, access, state, report, url


def on(lab, node, command, check=True):
    plan, access = lab[0], lab[1]
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
    plan, access, state = lab[:3]
    skipped: dict[str, set[str]] = {}

    def record(event):
        d = event.get("event_data", {})
        if event.get("event") == "runner_on_skipped":
            skipped.setdefault(d.get("host", ""), set()).add(d.get("task", ""))

    result = run_playbook(PlaybookRun(build_dir=state.dir / "build", extravars=playbook_vars(ensure_munge_key(state)),
                                      ssh=access.ssh), record)
    assert result.ok, result.failures
    assert {h: r["changed"] for h, r in result.recap.items()} == {"vnd-ctl": 0, "gpu001": 0, "gpu002": 0}, result.changes
    for task in KERNEL_TASKS:
        assert task in skipped.get("gpu001", set()), (task, sorted(skipped.get("gpu001", set())))
    assert "Fabric Manager" not in skipped.get("gpu001", set())
    assert installed(lab, "gpu001", "nvidia-open-570") == {"nvidia-open-570": f"{DRIVER}-1"}


def _roles_alone(env, lab, node, roles: list[str], extravars: dict) -> tuple:
    """Some roles alone on one lab node, in real mode, over the lab's build (its group_vars apply); returns the
    run's result and the tasks it changed."""
    e, d, _ = env
    plan, access, state = lab[:3]
    play = d / f"{'-'.join(roles)}-only.yml"
    play.write_text(to_yaml([{"hosts": node, "gather_facts": False,
                              "roles": [str(resource_dir("playbooks") / "roles" / r) for r in roles]}]))
    changed: list[str] = []

    def record(event):
        if event.get("event") == "runner_on_ok" and event.get("event_data", {}).get("res", {}).get("changed"):
            changed.append(event["event_data"].get("task", ""))

    result = run_playbook(PlaybookRun(build_dir=state.dir / "build", playbook=str(play), ssh=access.ssh, limit=node,
                                      extravars={**playbook_vars(ensure_munge_key(state)), **extravars}), record)
    return result, changed


def _efa_role(env, lab, node, mirror: dict) -> tuple:
    """The efa role alone on one lab node, in real mode, with clusterctl_downloads.efa as compile makes it from
    `mirrors.efa` (lab pools never have an EFA fabric, so site.yml would skip it); the node shares the host's kernel,
    as site.yml says with clusterctl_own_kernel. Returns the run's result and the tasks it changed."""
    spec = load_text(to_yaml({**_spec_data(lab[4]), "mirrors": {"efa": mirror}})).spec
    download = repo_vars(resolve(spec, "efa", "debian12"))
    return _roles_alone(env, lab, node, ["efa"], {"clusterctl_fabric": "efa", "clusterctl_downloads": {"efa": download}})


def test_the_efa_installer_runs_only_when_its_signature_holds(env, lab):
    """The stand-in EFA release (tests/standins/efa_installer.py) beside the CUDA stand-in. A copy whose tarball was
    altered after signing, and a mirror without its own key (so AWS's key fingerprint is pinned) are refused before
    anything is unpacked; the signed release installs for real, without the kernel module on a container, records its
    version, and a second run changes nothing."""
    from tests.standins import efa_installer as efa

    e, d, _ = env
    url = lab[4]
    packages = efa.debs()
    pinned = {deb.name: deb.version for sub in ("", "rdma-core") for deb in packages[sub]}  # efa-driver: the kmod
    good = efa.build(d / "repos")
    name = f"aws-efa-installer-{efa.VERSION}.tar.gz"
    bad = d / "repos" / "efa-altered"
    bad.mkdir()
    for f in (name, f"{name}.sig", efa.KEY_FILE):
        (bad / f).write_bytes((good / f).read_bytes())
    with open(bad / name, "ab") as fh:
        fh.write(b"\0")  # one byte after signing
    own_key = {"key_url": f"{url}/efa/{efa.KEY_FILE}"}
    refused = (({"url": f"{url}/efa-altered", **own_key}, "The EFA installer's signature holds", "BAD signature"),
               ({"url": f"{url}/efa"}, "The EFA installer is signed by the pinned key", "4E9091BCBB97A96B26B15E59A05480B1DD2D3CCC"))
    for mirror, task, why in refused:
        result, _ = _efa_role(env, lab, "gpu002", mirror)
        assert not result.ok and [(f.task, why in f.message) for f in result.failures] == [(task, True)], result.failures
        assert on(lab, "gpu002", f"test -e {efa.RECORD}", check=False).returncode == 1
        # rdma-core is Debian's there (the rdma role); none of the release's packages went in
        assert {p: v for p, v in installed(lab, "gpu002", *pinned).items() if v == pinned[p]} == {}
        assert on(lab, "gpu002", "test -e /var/tmp/clusterctl-efa/aws-efa-installer", check=False).returncode == 1

    result, changed = _efa_role(env, lab, "gpu001", {"url": f"{url}/efa", **own_key})
    assert result.ok, result.failures
    assert "Run the EFA installer" in changed, changed
    record = on(lab, "gpu001", f"cat {efa.RECORD}").stdout.splitlines()
    assert record[:3] == [f"# EFA installer version: {efa.VERSION}", "# Debug packages installed: no",
                          "# Packages installed:"], record
    assert installed(lab, "gpu001", *pinned, "efa") == pinned  # the release's own rdma-core; no kmod (--skip-kmod)
    for lib in ("libnccl-net-ofi.so", "libnccl-ofi-tuner.so"):  # where the rendered NCCL env looks for them
        on(lab, "gpu001", f"test -f /opt/amazon/ofi-nccl/lib/x86_64-linux-gnu/{lib}")
    assert on(lab, "gpu001", "test -e /var/tmp/clusterctl-efa", check=False).returncode == 1
    again, changed = _efa_role(env, lab, "gpu001", {"url": f"{url}/efa", **own_key})
    assert again.ok and again.recap["gpu001"]["changed"] == 0, changed


def test_the_lustre_client_installs_the_pinned_release_from_a_signed_site_build(env, lab):
    """The stand-in of a site's own signed Lustre build for Debian 12 (tests/standins/lustre_repo.py) through
    mirrors.lustre: vendor_repo adds it signed, lustre_client installs exactly 2.15.6-1 (not the 2.15.60-1 beside it)
    and holds it, writes one LNet line for the node's Lustre filesystems, and skips the DKMS module by
    clusterctl_own_kernel on a container. A second run changes nothing. (No Lustre server here: nothing mounts.)"""
    from tests.standins import lustre_repo as lr

    e, d, _ = env
    url = lab[4]
    lr.build(d / "repos")
    mirror = {"url": f"{url}/lustre", "key_url": f"{url}/lustre/{lr.REPO_PATH}/{lr.KEY_FILE}"}
    spec = load_text(to_yaml({**_spec_data(url), "mirrors": {"lustre": mirror}})).spec
    mounts = [{"kind": "lustre", "source": f"10.220.0.250@tcp:/fs{i}", "path": f"/lustre{i}", "options": "flock",
               "lnet_networks": nets} for i, nets in ((1, "tcp0(eth0)"), (2, "tcp(eth0),o2ib1(ib1,ib2)"))]
    extravars = {"clusterctl_repos": [repo_vars(resolve(spec, "lustre", "debian12"))], "clusterctl_node_mounts": mounts,
                 "clusterctl_lnet_networks": lnet_line(m["lnet_networks"] for m in mounts)}  # as render merges them
    result, changed = _roles_alone(env, lab, "gpu002", ["vendor_repo", "lustre_client"], extravars)
    assert result.ok, result.failures
    assert f"Lustre client {lr.RELEASE}" in changed, changed
    assert installed(lab, "gpu002", "lustre-client-utils", "lustre-client-modules-dkms") == {
        "lustre-client-utils": f"{lr.RELEASE}-1"}
    assert "lustre-client-utils" in on(lab, "gpu002", "apt-mark showhold").stdout.split()
    assert f"Candidate: {lr.NEWER}-1" in on(lab, "gpu002", "apt-cache policy lustre-client-utils").stdout
    conf = on(lab, "gpu002", "cat /etc/modprobe.d/lustre.conf").stdout
    assert conf == "# Installed by clusterctl\noptions lnet networks=tcp0(eth0),o2ib1(ib1,ib2)\n", conf
    sources = on(lab, "gpu002", "cat /etc/apt/sources.list.d/clusterctl-lustre.list").stdout
    assert "[signed-by=/usr/share/keyrings/clusterctl-lustre.gpg]" in sources and "trusted" not in sources, sources
    again, changed = _roles_alone(env, lab, "gpu002", ["vendor_repo", "lustre_client"], extravars)
    assert again.ok and again.recap["gpu002"]["changed"] == 0, changed


def test_doca_ofed_installs_the_pinned_release_and_a_pin_change_moves_it(env, lab):
    """The stand-in DOCA-Host repositories (tests/standins/doca_repo.py: NVIDIA's layout for Debian 12, one directory per
    release with its binary doca_keyring.gpg, the profile and MLNX_OFED 24.10 package names and versions) through
    mirrors.doca: vendor_repo adds 2.9.1's signed with the binary keyring as it is; the rdma role installs exactly
    doca-ofed-userspace 2.9.1 and its members (the userspace profile: a container has no kernel of its own, so no
    DKMS module and no openibd reload) and holds the profile; a second run changes nothing. Then the pin moves to
    2.9.3: the sources line is replaced (not added beside), the held profile and its members move to 2.9.3's."""
    from tests.standins import doca_repo as dr

    e, d, _ = env
    url = lab[4]
    dr.build(d / "repos")

    def run(release):
        data = _spec_data(url)
        data["mirrors"]["doca"] = {"url": f"{url}/doca", "key_url": f"{url}/doca/{dr.repo_path(release)}/{dr.KEY_FILE}"}
        data["software"]["rdma_stack"], data["software"]["doca"] = "doca", release
        spec = load_text(to_yaml(data)).spec
        repo = repo_vars(resolve(spec, "doca", "debian12"))
        assert repo["url"] == f"{url}/doca/{dr.repo_path(release)}/", repo  # the catalog's layout below the mirror
        extravars = {"clusterctl_repos": [repo], "clusterctl_software": compile_plan(spec).software}
        return _roles_alone(env, lab, "gpu002", ["vendor_repo", "rdma"], extravars)

    for release in (dr.RELEASE, dr.NEXT):
        result, changed = run(release)
        assert result.ok, result.failures
        assert f"DOCA-OFED {release}" in changed, changed
        want = {"doca-ofed-userspace": dr.version(release), **dr.members(release)}
        assert installed(lab, "gpu002", *want, "doca-ofed", "mlnx-ofed-kernel-dkms") == want
        assert "doca-ofed-userspace" in on(lab, "gpu002", "apt-mark showhold").stdout.split()
        assert on(lab, "gpu002", "ofed_info -s").stdout.strip() == f"MLNX_OFED_LINUX-{dr.RELEASES[release][1]}:"
        assert "Reload the RDMA driver stack (openibd)" not in changed, changed
        sources = on(lab, "gpu002", "cat /etc/apt/sources.list.d/clusterctl-doca.list").stdout
        assert sources == (f"deb [signed-by=/usr/share/keyrings/clusterctl-doca.gpg] {url}/doca/{dr.repo_path(release)}/ ./\n"), sources
        again, changed = run(release)
        assert again.ok and again.recap["gpu002"]["changed"] == 0, changed


def test_driver_upgrade_rolls_node_by_node_around_a_running_job(env, lab):
    e, d, _ = env
    url = lab[4]
    upgraded = d / "vnd-575.yaml"
    upgraded.write_text(to_yaml(_spec_data(url, driver=NEW_DRIVER)))
    r = clusterctl("plan", upgraded, "--out", d / "upgrade.json", "--output", "json", env=e, check=False)
    assert r.returncode == 2 and json.loads(r.stdout)["policy"] == "drain", r.stdout[-2000:]
    # A user's job on batch 2's node, long enough to outlast batch 1's upgrade; it records when it really ended.
    job = on(lab, "vnd-ctl", "sudo -u alice sbatch --parsable -w gpu002 -N1 -o /dev/null "
                             "--wrap 'sleep 90; date +%s.%N > /tmp/upgrade-job.end'").stdout.strip()
    for _ in range(60):
        if "JobState=RUNNING" in on(lab, "vnd-ctl", f"scontrol -o show job {job}").stdout:
            break
        time.sleep(1)
    else:
        pytest.fail(on(lab, "vnd-ctl", f"scontrol -o show job {job}").stdout)
    r = clusterctl("apply", upgraded, "--plan", d / "upgrade.json", "--output", "json", env=e, check=False)
    report = json.loads(r.stdout)
    assert report["ok"], report.get("error") or report["converge"]["failures"]
    first, second = report["batches"]
    assert (first["nodes"], second["nodes"]) == (["gpu001"], ["gpu002"])
    assert first["health"] == {"gpu001": "OK"} and second["health"] == {"gpu002": "OK"}, (first, second)
    job_state = on(lab, "vnd-ctl", f"scontrol -o show job {job}").stdout
    assert "JobState=COMPLETED" in job_state and "ExitCode=0:0" in job_state, job_state  # never killed
    job_end = float(on(lab, "gpu002", "cat /tmp/upgrade-job.end").stdout)
    # gpu001 was out of service and back while the job ran; gpu002 was drained only after it ended.
    assert first["drained_at"] < first["resumed_at"] < job_end <= second["drained_at"], (first, second, job_end)
    new_pkgs = driver_packages(NEW_DRIVER)
    for node in ("gpu001", "gpu002"):
        smi = on(lab, node, "nvidia-smi --query-gpu=driver_version --format=csv,noheader").stdout.split()
        assert smi == [NEW_DRIVER] * 8, (node, smi)
        assert installed(lab, node, *new_pkgs) == {p: f"{NEW_DRIVER}-1" for p in new_pkgs}, node
        assert installed(lab, node, *DRIVER_PKGS[:1], *DRIVER_PKGS[2:]) == {}, node  # the 570 branch is gone
        held = {p for p in on(lab, node, "apt-mark showhold").stdout.split() if "nvidia" in p}  # (gpu002 holds Lustre too)
        assert held == set(new_pkgs), (node, held)  # the pins moved together
        r = on(lab, node, "systemctl is-active nvidia-persistenced nvidia-fabricmanager", check=False)
        assert r.stdout.split() == ["active", "active"], (node, r.stdout)
    states = on(lab, "vnd-ctl", "sinfo -h -N -o '%N %T'").stdout.split()
    assert "drain" not in " ".join(states) and "drained" not in states, states
