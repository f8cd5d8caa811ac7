"""No repository is added unsigned, and the driver stack is pinned and held as one."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOKS = ROOT / "playbooks"


def _tasks(data):
    """Every task of a task file, blocks flattened."""
    for t in data or []:
        yield t
        for key in ("block", "rescue", "always"):
            yield from _tasks(t.get(key))


def _all_tasks():
    for f in sorted(PLAYBOOKS.rglob("tasks/*.yml")):
        for t in _tasks(yaml.safe_load(f.read_text())):
            yield f, t


def test_no_trusted_yes_anywhere_in_playbooks():
    offenders = [str(f.relative_to(ROOT)) for f in PLAYBOOKS.rglob("*") if f.is_file()
                 and "trusted=yes" in f.read_text(errors="replace").replace(" ", "")]
    assert offenders == []


def test_every_apt_repository_is_signed_by_its_own_keyring():
    repos = [(f, t["ansible.builtin.apt_repository"]) for f, t in _all_tasks() if "ansible.builtin.apt_repository" in t]
    assert repos, "the roles add repositories through apt_repository"
    for f, args in repos:
        line = args["repo"]
        if line.startswith("{{ ") and line.endswith(" }}"):  # a role default holding the whole line
            defaults = yaml.safe_load((f.parents[1] / "defaults" / "main.yml").read_text())
            line = defaults[line[3:-3]]
        assert line.startswith("deb [signed-by="), (f, line)
        assert "trusted" not in line and "allow-insecure" not in line, (f, line)


def test_vendor_repo_role_runs_before_the_roles_that_install_from_it():
    site = yaml.safe_load((PLAYBOOKS / "site.yml").read_text())
    plays = [p for p in site if "roles" in p]
    first = plays[0]
    assert first["hosts"] == "all" and first["roles"][:2] == ["common", "vendor_repo"]
    for later in plays[1:]:
        assert "vendor_repo" not in later["roles"]


def test_driver_install_pins_every_package_to_the_driver_version_and_holds_the_build():
    tasks = {t.get("name", ""): t for f, t in _all_tasks() if f.parts[-3] == "nvidia_driver"}
    install = next(t for n, t in tasks.items() if n.startswith("Driver "))
    assert "nvidia_driver_pin" in install["ansible.builtin.apt"]["name"]
    hold = next(t for n, t in tasks.items() if n.startswith("Hold the whole driver build"))
    assert hold["ansible.builtin.dpkg_selections"]["selection"] == "hold"
    release = next(t for n, t in tasks.items() if n.startswith("Release the holds"))
    assert release["ansible.builtin.dpkg_selections"]["selection"] == "install"
    defaults = yaml.safe_load((PLAYBOOKS / "roles/nvidia_driver/defaults/main.yml").read_text())
    assert defaults["nvidia_driver_pin"] == "{{ clusterctl_software.nvidia_driver }}-*"
    assert set(defaults["nvidia_driver_meta"]) == {"open", "proprietary"}
    assert any("fabricmanager" in p for p in defaults["nvidia_nvswitch_packages"])
    assert any("nscq" in p for p in defaults["nvidia_nvswitch_packages"])
    peermem = [t for n, t in tasks.items() if "nvidia-peermem" in n]
    assert peermem and any("infiniband" in str(t.get("when", "")) for t in peermem)


# Tasks that need a kernel of the node's own: lab nodes (containers) skip them by clusterctl_own_kernel, by name.
KERNEL_ONLY = {"kernel_headers": ("Kernel headers for DKMS modules",), "nvidia_driver": ("Load nvidia-peermem now",),
               "rdma": ("Reload the RDMA driver stack (openibd)",)}


def test_kernel_only_tasks_are_skipped_on_lab_nodes_by_a_named_condition():
    from clusterctl.render.ansible import controller_vars, pool_vars
    from tests.helpers import plan_of

    for example, own in (("lab.yaml", False), ("onprem-64xh100-ib.yaml", True), ("aws-p5-spot.yaml", True)):
        plan = plan_of(example)  # every node group's vars say it, controller included (it mounts Lustre too)
        assert {pool_vars(plan, p)["clusterctl_own_kernel"] for p in plan.pools} == {own}, example
        assert controller_vars(plan)["clusterctl_own_kernel"] is own, example
    # The Lustre DKMS module goes in the same apt run as the utilities (they depend on each other's version), left
    # out of it by the same condition.
    lustre = {t.get("name", ""): t for f, t in _all_tasks() if f.parts[-3] == "lustre_client"}
    install = next(t for n, t in lustre.items() if n.startswith("Lustre client {{"))
    assert "lustre-client-modules-dkms" in install["ansible.builtin.apt"]["name"]
    assert "clusterctl_own_kernel" in install["ansible.builtin.apt"]["name"]
    for role, names in KERNEL_ONLY.items():
        tasks = {t.get("name", ""): t for f, t in _all_tasks() if f.parts[-3] == role}
        for name in names:
            assert "clusterctl_own_kernel" in str(tasks[name].get("when", "")), (role, name)
    handlers = yaml.safe_load((PLAYBOOKS / "roles/nvidia_driver/handlers/main.yml").read_text())
    reboot = next(h for h in handlers if "ansible.builtin.reboot" in h)
    assert "clusterctl_own_kernel" in str(reboot.get("when", ""))
    # The vendor stack itself runs on lab nodes given a CUDA mirror: no role gates it on the provider any more.
    for role in ("nvidia_driver", "cuda", "nccl"):
        whens = [str(t.get("when", "")) for f, t in _all_tasks() if f.parts[-3] == role]
        assert any("clusterctl_nvidia_stack" in w for w in whens), role
        assert not any("clusterctl_node_provider" in w for w in whens), role
