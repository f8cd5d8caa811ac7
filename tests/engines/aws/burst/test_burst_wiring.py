"""The chain from slurm.conf to the burst programs holds together: the renderer's ResumeProgram & co. are the
wrappers the controller role installs, each execs `clusterctl burst <action>`, the burst role installs that
`clusterctl` command on the default PATH of slurmctld's children, site.yml runs the role, and the main CLI has
the `burst` commands (a full install of clusterctl on the controller answers them too)."""

from __future__ import annotations

import os
import subprocess
import sys

import yaml

from clusterctl.engines.aws.burst.settings import DEFAULT_PATH
from clusterctl.render import layout, render_spec
from clusterctl.render.yamlout import load_ansible_yaml
from clusterctl.validate import load_valid
from tests.conftest import ROOT, example
from tests.helpers import CLI, clusterctl

ROLES = ROOT / "playbooks" / "roles"
ACTIONS = {layout.BURST_RESUME: "resume", layout.BURST_SUSPEND: "suspend", layout.BURST_RESUME_FAIL: "resume-fail"}


def test_rendered_programs_are_the_wrappers_the_controller_role_installs():
    _, files = render_spec(load_valid(example("hybrid-burst.yaml")))
    conf = dict(line.split("=", 1) for line in files[layout.SLURM_CONF].splitlines() if line.endswith(tuple(ACTIONS)))
    assert conf == {"ResumeProgram": layout.BURST_RESUME, "SuspendProgram": layout.BURST_SUSPEND,
                    "ResumeFailProgram": layout.BURST_RESUME_FAIL}
    group_vars = load_ansible_yaml(files["ansible/group_vars/all.yml"])
    paths = group_vars["clusterctl_paths"]
    assert {paths["burst_resume"], paths["burst_suspend"], paths["burst_resume_fail"]} == set(ACTIONS)
    assert group_vars["clusterctl_has_cloud_nodes"] is True

    # slurm_controller installs them before slurmctld starts (slurmctld disables power saving when a program is
    # missing at startup); each one execs `clusterctl burst <action> "$@"`.
    tasks = yaml.safe_load((ROLES / "slurm_controller" / "tasks" / "main.yml").read_text())
    [wrappers] = [t for t in tasks if "burst" in t["name"].lower() or "power-saving" in t["name"].lower()]
    loop = {item["path"].replace("{{ clusterctl_paths.", "").replace(" }}", ""): item["action"] for item in wrappers["loop"]}
    assert loop == {"burst_resume": "resume", "burst_suspend": "suspend", "burst_resume_fail": "resume-fail"}
    assert 'exec clusterctl burst {{ item.action }} "$@"' in wrappers["ansible.builtin.copy"]["content"]


def test_burst_role_installs_the_clusterctl_the_wrappers_exec():
    tasks = yaml.safe_load((ROLES / "burst" / "tasks" / "controller.yml").read_text())
    [cmd] = [t for t in tasks if t.get("ansible.builtin.template", {}).get("src") == "clusterctl.sh.j2"]
    dest = cmd["ansible.builtin.template"]["dest"]
    # slurmctld starts ResumeProgram without PATH: /bin/sh then searches its default path, which has /usr/local/bin.
    assert os.path.dirname(dest) in DEFAULT_PATH.split(":")
    wrapper = (ROLES / "burst" / "templates" / "clusterctl.sh.j2").read_text()
    assert "-m clusterctl.engines.aws.burst" in wrapper


def test_site_yml_runs_the_burst_role_and_the_role_guards_itself():
    plays = yaml.safe_load((ROOT / "playbooks" / "site.yml").read_text())
    [play] = [p for p in plays if "burst" in p.get("roles", [])]
    assert play["hosts"] == "all"
    names = [p["name"] for p in plays]
    assert names.index(play["name"]) > next(i for i, p in enumerate(plays) if p.get("hosts") == "slurm_controller")
    main = yaml.safe_load((ROLES / "burst" / "tasks" / "main.yml").read_text())
    whens = " ".join(t["when"] for t in main)
    assert "clusterctl_has_cloud_nodes" in whens and "slurm_controller" in whens  # clusters without burst: no-op


def test_main_cli_has_the_burst_commands():
    for argv in ([*CLI, "burst", "--help"], [sys.executable, "-m", "clusterctl.engines.aws.burst", "--help"]):
        r = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 0, r.stderr
        for cmd in ("resume", "suspend", "resume-fail", "sync"):
            assert cmd in r.stdout


def test_burst_command_without_a_plan_fails_in_one_logged_line(tmp_path):
    """What slurmctld sees on a controller the role has not set up: exit 1, the reason in the log, no traceback."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CLUSTERCTL_BURST_"))}
    env.update(CLUSTERCTL_BURST_ENV_FILE=str(tmp_path / "none.env"), CLUSTERCTL_BURST_PLAN=str(tmp_path / "plan.json"),
               CLUSTERCTL_BURST_LOG=str(tmp_path / "burst.log"), CLUSTERCTL_BURST_STATE=str(tmp_path / "state"))
    r = clusterctl("burst", "suspend", "cloud[001-002]", env=env, check=False, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert r.returncode == 1
    log = (tmp_path / "burst.log").read_text()
    assert "PlanError" in log and "run `clusterctl up` first" in log and "Traceback" not in log
