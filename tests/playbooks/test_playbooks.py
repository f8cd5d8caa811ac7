"""The playbooks parse and pass ansible-playbook's syntax check; roles use only ansible-core's builtin modules
(no collections are installed with clusterctl)."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

PLAYBOOKS = sorted((ROOT / "playbooks").glob("*.yml"))


@pytest.mark.parametrize("playbook", PLAYBOOKS, ids=lambda p: p.name)
def test_syntax_check(playbook):
    local = Path(sys.executable).parent / "ansible-playbook"
    exe = str(local) if local.exists() else shutil.which("ansible-playbook")
    r = subprocess.run([exe, "--syntax-check", "-i", "localhost,",
                        str(playbook)], capture_output=True, text=True, cwd=ROOT / "playbooks")
    assert r.returncode == 0, r.stdout + r.stderr


def test_roles_use_builtin_modules_only():
    for f in (ROOT / "playbooks").rglob("*.yml"):
        for task_key in re.findall(r"^\s*-?\s*([a-z_]+\.[a-z_]+\.[a-z_]+):", f.read_text(), re.M):
            assert task_key.startswith("ansible.builtin."), f"{f}: {task_key}"


def test_every_yaml_parses():
    for f in (ROOT / "playbooks").rglob("*.yml"):
        yaml.safe_load(f.read_text())


# (earlier, later): the first role must run before the second wherever a playbook runs both on the same hosts.
ROLE_ORDER = (
    ("nvidia_driver", "efa"),  # aws-ofi-nccl / GPUDirect RDMA over EFA need the driver installed first
    ("nvidia_driver", "cuda"),
    ("cuda", "nccl"),
)


def _role_name(entry: str | dict) -> str:
    return entry if isinstance(entry, str) else entry.get("role") or entry.get("name")


def roles_in_order(playbook: Path) -> list[tuple[str, str]]:
    """(hosts, role) in the order Ansible runs them, following import_playbook."""
    out: list[tuple[str, str]] = []
    for play in yaml.safe_load(playbook.read_text()) or []:
        if "import_playbook" in play:
            out += roles_in_order(playbook.parent / play["import_playbook"])
            continue
        out += [(str(play.get("hosts")), _role_name(r)) for r in play.get("roles") or []]
    return out


@pytest.mark.parametrize("playbook", PLAYBOOKS, ids=lambda p: p.name)
def test_role_order(playbook: Path) -> None:
    order = roles_in_order(playbook)
    for first, then in ROLE_ORDER:
        for hosts, role in order:
            if role != then:
                continue
            earlier = [r for h, r in order[:order.index((hosts, role))] if h in (hosts, "all")]
            later = [r for h, r in order[order.index((hosts, role)):] if h in (hosts, "all")]
            assert first not in later or first in earlier, f"{playbook.name}: {first} must run before {then} on {hosts}"


def test_site_installs_the_driver_before_the_efa_installer() -> None:
    names = [r for _, r in roles_in_order(ROOT / "playbooks" / "site.yml")]
    assert names.index("nvidia_driver") < names.index("efa") < names.index("nccl")


def test_plays_whose_hosts_converge_independently_use_the_free_strategy() -> None:
    """free lets a host run ahead of the slowest one; the burst play keeps linear: its run_once task would run on
    every host under free (Ansible warns and does so)."""
    plays = {p["name"]: p for p in yaml.safe_load((ROOT / "playbooks" / "site.yml").read_text()) if "hosts" in p}
    free = {name for name, p in plays.items() if p.get("strategy") == "free"}
    assert {"Every node", "Compute nodes"} <= free and any(n.startswith("Monitoring") for n in free), free
    burst = next(p for n, p in plays.items() if n.startswith("Hybrid burst"))
    assert burst.get("strategy", "linear") == "linear"
    for name in free:
        for role in plays[name]["roles"]:
            tasks = "".join(f.read_text() for f in (ROOT / "playbooks" / "roles" / role).rglob("*.yml"))
            assert "run_once" not in tasks and "delegate_to" not in tasks, (name, role)


def _tasks(role: str, kind: str = "tasks") -> list[dict]:
    return yaml.safe_load((ROOT / "playbooks" / "roles" / role / kind / "main.yml").read_text())


def test_compute_nodes_are_configless():
    """slurm_node installs the slurmd drop-in (--conf-server) and removes local copies of every file slurmctld serves;
    it copies no Slurm file. The controller keeps them and, when they change, restarts slurmctld and then sends them
    to the nodes with `scontrol reconfigure` (handlers run in the order they are defined)."""
    from clusterctl.render import layout
    from clusterctl.render.ansible import all_vars
    from tests.helpers import plan_of

    node = _tasks("slurm_node")
    text = yaml.safe_dump(node)
    for f in ("slurm_conf", "gres_conf", "cgroup_conf", "topology_conf"):
        assert f"clusterctl_files.{f}" not in text
    [absent] = [t for t in node if t.get("ansible.builtin.file", {}).get("state") == "absent"]
    assert absent["ansible.builtin.file"]["path"] == "/etc/slurm/{{ item }}"
    assert absent["loop"] == "{{ clusterctl_configless_files }}"
    assert all_vars(plan_of("lab.yaml"))["clusterctl_configless_files"] == list(layout.CONFIGLESS_FILES)
    [dropin] = [t for t in node if t.get("ansible.builtin.copy", {}).get("dest") == "{{ clusterctl_paths.slurmd_dropin }}"]
    assert dropin["notify"] == "Restart slurmd"

    [conf] = [t for t in _tasks("slurm_controller") if "{{ clusterctl_files.slurm_conf }}" in t.get("loop", [])]
    assert conf["notify"] == ["Restart slurmctld", "Reconfigure nodes"]
    handlers = [h["name"] for h in _tasks("slurm_controller", "handlers")]
    assert handlers.index("Restart slurmctld") < handlers.index("Reconfigure nodes")
    [reconf] = [h for h in _tasks("slurm_controller", "handlers") if h["name"] == "Reconfigure nodes"]
    assert reconf["ansible.builtin.command"] == "scontrol reconfigure"
