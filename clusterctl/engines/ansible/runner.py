"""Run a playbook of ours over a rendered build with ansible-runner (private data dir inside the build dir)."""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from clusterctl.engines.ansible.result import RunResult, apply_event
from clusterctl.engines.ansible.settings import SshOptions, ansible_env, mitogen_strategy_dir, strategy_vars
from clusterctl.core import interrupt
from clusterctl.core.errors import ClusterctlError
from clusterctl.engines.runscope import RunScope
from clusterctl.engines.ssh.hostkeys import HostKeyError
from clusterctl.render import layout
from clusterctl.core.resources import resource_dir

RUNNER_DIR = ".runner"  # inside the build dir; not in the manifest, so it never shows in plan diffs
PEXPECT_POLL = 0.5  # seconds between ansible-runner's looks at the cancel callback: how soon a signal stops a run


class AnsibleError(ClusterctlError):
    """ansible-runner could not run the playbook at all (as opposed to tasks failing on hosts)."""


class AnsibleInterrupted(ClusterctlError):
    """The command was told to stop (SIGINT, SIGTERM, SIGHUP) while a playbook ran; it was stopped first."""

    exit_code = interrupt.EXIT_CODE


@dataclass
class PlaybookRun:
    build_dir: Path
    playbook: str = "site.yml"
    extravars: dict = field(default_factory=dict)
    ssh: SshOptions = field(default_factory=SshOptions)
    check: bool = False
    diff: bool = False
    limit: str | None = None
    fast: bool = True
    inventory: Path | None = None  # default: the build's rendered inventory


def _tied_to_us(private: Path, env: dict[str, str]) -> dict[str, str]:
    """Make ansible-playbook die with clusterctl.

    ansible-runner starts it in a session of its own that ignores SIGHUP, so a killed (or Ctrl-C'd) clusterctl would
    leave it converging on its own, racing the next `up`. A wrapper first on PATH enters the run's cgroup and records
    its pid (engines.runscope: everything it forks is ended with the run), then execs it under
    `setpriv --pdeathsig KILL`: the kernel kills it the moment its parent, this process, goes away.
    """
    setpriv = shutil.which("setpriv")
    real = shutil.which("ansible-playbook", path=env["PATH"])
    if not setpriv or not real:
        return env
    bindir = private / "bin"
    bindir.mkdir(exist_ok=True)
    wrapper = bindir / "ansible-playbook"
    text = ('#!/bin/sh\n'
            'echo $$ > "$CLUSTERCTL_RUN_PIDFILE"\n'
            '[ -z "$CLUSTERCTL_RUN_CGROUP" ] || echo $$ > "$CLUSTERCTL_RUN_CGROUP" || exit 125\n'
            f'exec {shlex.quote(setpriv)} --pdeathsig KILL -- {shlex.quote(real)} "$@"\n')
    if not wrapper.exists() or wrapper.read_text() != text:
        wrapper.write_text(text)
        wrapper.chmod(0o755)
    return {**env, "PATH": f"{bindir}{os.pathsep}{env['PATH']}"}


def run_playbook(run: PlaybookRun, on_event: Callable[[dict], None] | None = None) -> RunResult:
    import ansible_runner

    build = run.build_dir.resolve()
    playbook = resource_dir("playbooks") / run.playbook
    inventory = (run.inventory or build / layout.INVENTORY).resolve()
    if not inventory.is_file():
        raise AnsibleError(f"no inventory at {inventory}: render the build first")
    private = build / RUNNER_DIR
    private.mkdir(parents=True, exist_ok=True)
    hosts = inventory.read_text().count("ansible_user:")
    cmdline = " ".join(x for x in ("--check" if run.check else "", "--diff" if run.diff else "") if x)
    result = RunResult(check=run.check)

    def handler(event: dict) -> bool:
        apply_event(result, event)
        if on_event is not None:
            on_event(event)
        return False  # do not keep event files: the recap and failures are all we need

    mitogen = mitogen_strategy_dir() if run.fast else None  # the slow path is Ansible's own, end to end
    extravars = {"clusterctl_build": str(build), **strategy_vars(mitogen), **run.extravars}
    env = _tied_to_us(private, ansible_env(hosts, run.ssh, fast=run.fast, mitogen=mitogen))
    # Shielded: a signal is only recorded while ansible-playbook runs; ansible-runner sees it through the cancel
    # callback (so it installs no signal handlers of its own), kills its process group, and returns. The scope then
    # ends whatever is left (Mitogen's ssh in their own sessions), and the interrupt is raised with what ran.
    try:
        with interrupt.shielded(), RunScope(private / "ansible.pid") as scope:
            try:
                r = ansible_runner.run(
                    private_data_dir=str(private),
                    playbook=str(playbook),
                    inventory=str(inventory),
                    extravars=extravars,
                    envvars={**env, **scope.env},
                    cmdline=cmdline or None,
                    limit=run.limit,
                    quiet=True,
                    suppress_env_files=True,
                    rotate_artifacts=3,
                    event_handler=handler,
                    cancel_callback=lambda: interrupt.requested() is not None,
                    settings={"pexpect_timeout": PEXPECT_POLL},
                )
            except Exception as e:  # ansible-runner raises assorted errors when it cannot even start ansible-playbook
                raise AnsibleError(f"ansible-runner could not run {playbook.name}: {e}") from e
    except interrupt.Interrupted as e:
        raise AnsibleInterrupted(interrupted_message(playbook.name, e.name, result)) from None
    result.status = r.status
    result.rc = r.rc
    refused = [f.host_key for f in result.failures if f.host_key]
    if refused:  # playbooks/hostkeys.yml ended the run for every host before any change
        raise HostKeyError("\n".join(sorted(set(refused))))
    if r.status != "successful" and not result.failures and not result.recap:
        tail = (r.stdout.read()[-2000:] if hasattr(r.stdout, "read") else "").strip()
        raise AnsibleError(f"ansible-playbook {playbook.name} ended with status {r.status} (rc={r.rc}) before any task ran:\n{tail}")
    return result


def interrupted_message(playbook: str, signal_name: str, result: RunResult) -> str:
    """What an interrupted run did and where it was, for the user who stopped it."""
    plays = [p["play"] for p in result.plays]
    where = ""
    if result.task:
        hosts = sorted(result.task_hosts)
        on = f" on {', '.join(hosts[:8])}{f' and {len(hosts) - 8} more' if len(hosts) > 8 else ''}" if hosts else ""
        where = f"; it was at task '{result.task}'{on}"
    done = (f"{max(result.tasks_started - 1, 0)} task(s) done in play(s) {', '.join(plays)}" if plays
            else "no task had run yet")
    return (f"interrupted by {signal_name} during {playbook}: {done}{where}. ansible-playbook and everything it "
            "started were stopped; nothing is left running. Run the command again: it continues from what is done")
