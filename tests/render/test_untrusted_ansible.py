"""Spec strings reach Ansible as data, never as templates: a `{{ lookup('pipe', ...) }}` in any of them is printed back
by real ansible-inventory / ansible-playbook runs and never executed (every string value is tagged !unsafe)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from ansible import release as ansible_release

from clusterctl.compile import compile_plan
from clusterctl.render import layout, render_plan
from clusterctl.render.ansible import all_vars, controller_vars, inventory, pool_vars
from clusterctl.render.write import write_build
from clusterctl.render.yamlout import UNSAFE_TAG, load_ansible_yaml
from clusterctl.validate import load_valid
from tests.conftest import EXAMPLES
from tests.render.untrusted import everywhere, hybrid

ANSIBLE_VERSION = tuple(int(x) for x in ansible_release.__version__.split(".")[:2])
PLAYBOOK = """
- hosts: all
  gather_facts: false
  tasks:
    - name: connection and spec values as the play sees them
      ansible.builtin.debug:
        msg: "{{ [ansible_host, ansible_user, ansible_ssh_common_args, clusterctl_node_mounts] }}"
    - name: the fstab line shared_mounts writes
      ansible.builtin.debug:
        msg: "{{ item.source }} {{ item.path }} lustre {{ item.options }},_netdev 0 0 lnet={{ item.lnet_networks }}"
      loop: "{{ clusterctl_node_mounts }}"
    - name: the hosts block common reads (a lookup through a tagged path)
      ansible.builtin.debug:
        msg: "{{ lookup('ansible.builtin.file', clusterctl_build ~ '/' ~ clusterctl_files.hosts) }}"
    - name: the conditions roles use still compare tagged values
      ansible.builtin.assert:
        that:
          - clusterctl_node_mounts | selectattr('kind', 'equalto', 'nfs') | list | length > 0
          - (clusterctl_cluster | lower) == 'hybrid'
          - clusterctl_node_provider != 'local'
          - clusterctl_slurm_version is version('22.05', '>=')
"""


def ansible_tool(name: str) -> str:
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else shutil.which(name)


def ansible_env(tmp_path: Path) -> dict:
    # An empty config, own home and temp dirs: no settings from, and nothing shared with, other runs on this machine.
    cfg = tmp_path / "ansible.cfg"
    cfg.write_text("")
    return dict(os.environ, ANSIBLE_CONFIG=str(cfg), ANSIBLE_HOME=str(tmp_path / "ansible-home"),
                ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"), ANSIBLE_NOCOLOR="1")


@pytest.fixture
def poisoned_build(tmp_path):
    """A build whose spec strings all hold template code that would create marker files if Ansible ran it."""
    markers = [tmp_path / f"PWNED_{uuid.uuid4().hex}" for _ in range(2)]
    text = f"{{{{ lookup('pipe', 'touch {markers[0]}') }}}}{{% if lookup('pipe', 'touch {markers[1]}') %}}x{{% endif %}}"
    spec, plan = hybrid()
    plan = everywhere(plan, text)
    build = tmp_path / "build"
    write_build(render_plan(plan, spec), build)
    yield plan, build, text
    for m in markers:
        assert not m.exists(), f"Ansible ran template code from the spec ({m.name} created)"


def test_ansible_inventory_lists_spec_strings_as_unsafe(poisoned_build, tmp_path):
    plan, build, _ = poisoned_build
    r = subprocess.run([ansible_tool("ansible-inventory"), "-i", str(build / layout.INVENTORY), "--list"],
                       capture_output=True, text=True, env=ansible_env(tmp_path), timeout=120)
    assert r.returncode == 0, r.stderr
    hostvars = json.loads(r.stdout)["_meta"]["hostvars"][plan.controller.name]
    for var in ("ansible_host", "ansible_user", "ansible_ssh_common_args"):
        value = hostvars[var]
        if ANSIBLE_VERSION >= (2, 19):  # it lists a tagged string as {"__ansible_unsafe": ...}; older ones do not say
            value = value["__ansible_unsafe"]
        assert "{{ lookup(" in value, var


def test_ansible_playbook_prints_spec_strings_back(poisoned_build, tmp_path):
    plan, build, text = poisoned_build
    playbook = tmp_path / "show.yml"
    playbook.write_text(PLAYBOOK)
    owned = next(n.name for n in plan.nodes if not n.cloud)
    r = subprocess.run(
        [ansible_tool("ansible-playbook"), "-i", str(build / layout.INVENTORY), str(playbook),
         "--limit", f"{plan.controller.name},{owned}", "-e", "ansible_connection=local",
         "-e", f"ansible_python_interpreter={sys.executable}", "-e", f"clusterctl_build={build}"],
        capture_output=True, text=True, env=ansible_env(tmp_path), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok=4" in r.stdout and "failed=0" in r.stdout
    assert "{{ lookup('pipe', 'touch " in r.stdout and "{% if lookup(" in r.stdout


def test_ssh_connection_takes_tagged_connection_vars(tmp_path):
    """ansible_host, ansible_user, ansible_port and ansible_ssh_common_args reach ssh's command line when tagged."""
    spec, plan = hybrid()
    ctl = plan.controller
    ssh = replace(ctl.ssh, user="ops", port=1, known_hosts_file=str(tmp_path / "known_hosts"))
    plan = replace(plan, controller=replace(ctl, address="127.0.0.1", ssh=ssh))
    build = tmp_path / "build"
    write_build(render_plan(plan, spec), build)
    assert f"ansible_host: {UNSAFE_TAG} 127.0.0.1" in (build / layout.INVENTORY).read_text()
    r = subprocess.run([ansible_tool("ansible"), "-i", str(build / layout.INVENTORY), ctl.name, "-m", "ping", "-vvv"],
                       capture_output=True, text=True, env=dict(ansible_env(tmp_path), ANSIBLE_TIMEOUT="5"), timeout=120)
    assert "UNREACHABLE" in r.stdout, r.stdout + r.stderr  # nothing listens on port 1: ssh was run, and refused
    exec_line = next(line for line in r.stdout.splitlines() if "SSH: EXEC" in line)
    for part in ('User="ops"', "Port=1", f"UserKnownHostsFile={tmp_path / 'known_hosts'}", "127.0.0.1"):
        assert part in exec_line, (part, exec_line)


STR = "tag:yaml.org,2002:str"


def _tags(node, out):
    if isinstance(node, yaml.MappingNode):
        for _, value in node.value:
            _tags(value, out)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _tags(item, out)
    else:
        out.append((node.tag, node.value))
    return out


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_string_value_tagged_and_types_kept(path):
    spec = load_valid(path)
    plan = compile_plan(spec)
    files = render_plan(plan, spec)
    data = {layout.INVENTORY: inventory(plan), f"{layout.GROUP_VARS}/all.yml": all_vars(plan),
            f"{layout.GROUP_VARS}/slurm_controller.yml": controller_vars(plan)}
    data.update({f"{layout.GROUP_VARS}/{layout.pool_group(p.name)}.yml": pool_vars(plan, p) for p in plan.pools})
    for rel, expected in data.items():
        assert load_ansible_yaml(files[rel]) == json.loads(json.dumps(expected)), rel  # tuples read back as lists
        resolver = yaml.SafeLoader("")
        for tag, value in _tags(yaml.compose(files[rel], Loader=yaml.SafeLoader), []):
            as_plain = resolver.resolve(yaml.ScalarNode, value, (True, False))
            if tag == UNSAFE_TAG:
                assert as_plain == STR, (rel, value)
            elif tag == STR:
                # Only text YAML would read as another type ('22.05', '') is left untagged, quoted: ansible-core 2.19
                # re-resolves an !unsafe scalar from its text. Such text cannot hold template syntax.
                assert as_plain != STR, (rel, value)
