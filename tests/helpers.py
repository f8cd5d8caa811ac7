"""The helpers tests share: specs and plans from the examples with small edits, the CLI run as a user runs it, polling,
the needs-root mark. Each is defined here only (tests/test_layout.py fails on a copy elsewhere)."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import time
from pathlib import Path

from ruamel.yaml import YAML

from clusterctl.validate import load_text

ROOT = Path(__file__).resolve().parents[1]


def example_dict(name: str) -> dict:
    return YAML(typ="safe").load((ROOT / "examples" / name).read_text())


def to_yaml(data: dict) -> str:
    import io

    buf = io.StringIO()
    y = YAML(typ="safe")
    y.default_flow_style = False
    y.dump(data, buf)
    return buf.getvalue()


def load_dict(data: dict):
    return load_text(to_yaml(data))


def edited(name: str, edit) -> dict:
    data = copy.deepcopy(example_dict(name))
    edit(data)
    return data


def codes(loaded, level=None) -> set[str]:
    return {f.code for f in loaded.findings if level is None or f.level.value == level}


def wait_for(predicate, timeout: float, interval: float = 3.0, what: str | None = None):
    """Poll predicate() until it returns something truthy and return that. On timeout: with `what`, fail naming it and
    the last value; without, return the last (falsy) value for the caller's own assertion."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    if what is not None:
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
    return last


CLI = (sys.executable, "-m", "clusterctl")  # the command line a user types, as this interpreter runs it


def clusterctl(*args, env=None, check=True, timeout=1800, cwd=None, **kw) -> subprocess.CompletedProcess:
    """Run the CLI as a user would (a separate process with its own environment; this one's when env is None).
    check: fail with the command's output unless it exits 0. Other keywords go to subprocess.run (stdin, ...)."""
    r = subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"clusterctl {' '.join(map(str, args))} -> {r.returncode}\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    return r


def spec_of(source, edit=None):
    """A spec checked valid, from an example's name (str), a spec file (Path) or spec data (dict), with an optional
    edit applied to a copy of its data first (edit(data) changes the dict)."""
    if isinstance(source, Path) and edit is None:
        loaded = load_text(source.read_text(), str(source))
    else:
        if isinstance(source, Path):
            data = YAML(typ="safe").load(source.read_text())
        elif isinstance(source, dict):
            data = copy.deepcopy(source)
        else:
            data = example_dict(source)
        if edit is not None:
            edit(data)
        loaded = load_dict(data)
    assert loaded.ok, [f"{f.path}: {f.message}" for f in loaded.errors]
    return loaded.spec


def plan_of(source, edit=None):
    """The compiled plan of spec_of(source, edit)."""
    from clusterctl.compile import compile_plan

    return compile_plan(spec_of(source, edit))


ROOT_DEFAULT_WHY = "network namespaces, nspawn, daemons"


def root_missing(why: str = ROOT_DEFAULT_WHY) -> str | None:
    """Why a test cannot run here for want of root, or None when it runs as root. For support code (rigs, harnesses)
    that reports its own readiness; tests take the needs_root() mark."""
    return None if os.geteuid() == 0 else f"needs root ({why})"


def needs_root(why: str = ROOT_DEFAULT_WHY):
    """The one skip mark for tests that need root (network namespaces, nspawn containers, daemons, mounts)."""
    import pytest

    reason = root_missing(why)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def check_mode_on_lab(build: Path, controller: tuple[str, str], group: str, computes: dict[str, str], ssh,
                      provider: str, playbook: str = "site.yml", extravars: dict | None = None):
    """Run one of our playbooks in check mode over a build rendered for another spec, its hosts played by lab nodes.

    controller: (the other spec's controller name, the lab address playing it); computes: {node name: lab address},
    all in the compute child group `group`. Returns the run's result and {task name: {"ok", "failed", "skipped"}}."""
    from clusterctl.engines.ansible.runner import PlaybookRun, run_playbook
    from clusterctl.render.yamlout import dump_yaml

    def hv(address: str) -> dict:
        return {"ansible_host": address, "ansible_user": "root", "clusterctl_node_provider": provider}

    inv = {"all": {"children": {
        "slurm_controller": {"hosts": {controller[0]: hv(controller[1])}},
        "compute": {"children": {group: {"hosts": {n: hv(a) for n, a in computes.items()}}}}}}}
    inventory = build / "ansible" / "inventory-lab.yml"
    inventory.write_text(dump_yaml(inv))
    tasks: dict[str, set] = {}

    def record(event: dict) -> None:
        if event.get("event") in ("runner_on_ok", "runner_on_failed", "runner_on_skipped"):
            name = event.get("event_data", {}).get("task", "")
            tasks.setdefault(name, set()).add(event["event"].removeprefix("runner_on_"))

    run = PlaybookRun(build_dir=build, playbook=playbook, inventory=inventory, check=True, diff=True,
                      extravars=extravars or {}, ssh=ssh)
    return run_playbook(run, record), tasks
