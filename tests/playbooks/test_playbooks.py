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
