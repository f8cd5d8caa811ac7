"""The playbooks parse and pass ansible-playbook's syntax check; roles use only ansible-core's builtin modules
(no collections are installed with clusterctl)."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
import yaml

from clusterctl.engines.ansible.settings import MITOGEN_SWITCH, mitogen_strategy_dir, strategy_vars
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


def strategies(playbook: str, extravars: dict[str, str]) -> dict[str, str]:
    """Each play's strategy as Ansible resolves it with clusterctl's extra vars (none: a plain ansible-playbook)."""
    plays = yaml.safe_load((ROOT / "playbooks" / playbook).read_text())
    return {p["name"]: jinja2.Template(p.get("strategy", "linear")).render(**extravars) for p in plays if "hosts" in p}


@pytest.mark.parametrize("mitogen", [False, True], ids=["ansible", "mitogen"])
def test_plays_whose_hosts_converge_independently_use_the_free_strategy(mitogen: bool, monkeypatch) -> None:
    """free lets a host run ahead of the slowest one; the burst play keeps linear: its run_once task would run on
    every host under free (Ansible warns and does so). With Mitogen on, the same choice on Mitogen's strategies."""
    monkeypatch.setenv(MITOGEN_SWITCH, "1" if mitogen else "0")
    extravars = strategy_vars(mitogen_strategy_dir())
    assert (extravars["clusterctl_free_strategy"] == "mitogen_free") is mitogen
    plays = {p["name"]: p for p in yaml.safe_load((ROOT / "playbooks" / "site.yml").read_text()) if "hosts" in p}
    strategy = strategies("site.yml", extravars)
    free = {name for name, s in strategy.items() if s == extravars["clusterctl_free_strategy"]}
    assert {"Every node", "Compute nodes"} <= free and any(n.startswith("Monitoring") for n in free), free
    burst = next(n for n in plays if n.startswith("Hybrid burst"))
    assert strategy[burst] == extravars["clusterctl_linear_strategy"]
    assert strategies("site.yml", {})[burst] == "linear" and strategies("site.yml", {})["Every node"] == "free"
    for name in free:
        for role in plays[name]["roles"]:
            tasks = "".join(f.read_text() for f in (ROOT / "playbooks" / "roles" / role).rglob("*.yml"))
            assert "run_once" not in tasks and "delegate_to" not in tasks, (name, role)


def test_the_host_key_play_keeps_ansibles_own_ssh_under_mitogen(monkeypatch) -> None:
    """Mitogen's ssh would put StrictHostKeyChecking=yes ahead of the -F file (refusing a first contact) and word its
    failures otherwise: the play that checks keys is plain linear, and every playbook that changes hosts imports it
    first."""
    monkeypatch.setenv(MITOGEN_SWITCH, "1")
    assert strategies("hostkeys.yml", strategy_vars(mitogen_strategy_dir())) == {"SSH host keys verified on every host before anything is changed": "linear"}
    for playbook in ("site.yml", "down.yml", "monitoring.yml"):
        first = yaml.safe_load((ROOT / "playbooks" / playbook).read_text())[0]
        assert first.get("import_playbook") == "hostkeys.yml", playbook


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


def test_a_part_most_hosts_skip_is_one_include_not_a_guarded_block() -> None:
    """Ansible evaluates a block's `when` on every task in it, host by host (a worker each): a part that most hosts
    skip (vendor stack, EFA, mounts, accounting, DCGM) is an include_tasks with the condition, skipped once. Small
    guarded blocks (up to 3 tasks) stay inline."""
    for f in sorted((ROOT / "playbooks" / "roles").glob("*/tasks/*.yml")):
        for task in yaml.safe_load(f.read_text()) or []:
            if "block" in task and "when" in task:
                assert len(task["block"]) <= 3, f"{f.relative_to(ROOT)}: {task['name']}"


def _apt_tasks(tasks: list) -> list[dict]:
    out = []
    for task in tasks or []:
        out += _apt_tasks(task.get("block", [])) if "block" in task else []
        if "ansible.builtin.apt" in task and task["ansible.builtin.apt"].get("name"):
            out.append(task)
    return out


def test_unpinned_package_tasks_run_apt_only_when_a_package_is_missing() -> None:
    """A no-op converge skips apt (a second of CPU per task per node) for distro packages dpkg already has; pinned
    or templated names (driver, CUDA, NCCL, Lustre: apt compares versions) and vendor packages that check mode
    cannot see yet (failed_when) always go through apt."""
    common = yaml.safe_load((ROOT / "playbooks" / "roles" / "common" / "tasks" / "main.yml").read_text())
    names = [t["name"] for t in common]
    first_apt = min(names.index(t["name"]) for t in _apt_tasks(common) if t["ansible.builtin.apt"].get("name"))
    assert names.index("Remember them for the other roles") < first_apt
    gated = 0
    for f in sorted((ROOT / "playbooks" / "roles").glob("*/tasks/*.yml")):
        for task in _apt_tasks(yaml.safe_load(f.read_text())):
            literal = task.get("vars", {}).get("_packages")
            if literal is None:
                name = task["ansible.builtin.apt"]["name"]
                templated = "{{" in str(name) or "=" in str(name)
                assert templated or "failed_when" in task, f"{f.relative_to(ROOT)}: {task['name']} is not gated"
                continue
            assert task["ansible.builtin.apt"]["name"] == "{{ _packages }}"
            assert "_packages | difference(clusterctl_installed_packages | default([])) | length > 0" in task["when"]
            gated += 1
    assert gated >= 10
