"""engines.runscope and the Ansible runner: an interrupted playbook run leaves no process behind, not even one that
left ansible-playbook's session (Mitogen starts ssh that way), and says what ran and where it was. Real
ansible-playbook over a local connection; real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from clusterctl.core import interrupt
from clusterctl.engines import runscope
from clusterctl.engines.ansible.runner import AnsibleInterrupted, PlaybookRun, run_playbook
from tests.helpers import needs_root

pytestmark = needs_root("cgroups")


def _alive(marker: str) -> list[str]:
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [ln for ln in ps.splitlines() if marker in ln and "ps -eo" not in ln]


@pytest.fixture
def handlers():
    before = {s: signal.getsignal(s) for s in interrupt.SIGNALS}
    interrupt.install()
    yield
    interrupt.reset()
    for s, h in before.items():
        signal.signal(s, h)


def _playbook(tmp_path, marker: str):
    (tmp_path / "inventory.yml").write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
                                            f"      ansible_python_interpreter: {sys.executable}\n")
    (tmp_path / "wait.yml").write_text(f"""- name: Waiting play
  hosts: all
  gather_facts: false
  tasks:
    - name: First step
      ansible.builtin.command: "true"
    - name: Wait here
      ansible.builtin.shell: "setsid sh -c 'sleep 300' {marker}-escaped & sh -c 'sleep 300' {marker}-child"
""")
    return PlaybookRun(build_dir=tmp_path / "build", playbook=str(tmp_path / "wait.yml"),
                       inventory=tmp_path / "inventory.yml", fast=False)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_playbook_and_everything_it_started(tmp_path, handlers, sig):
    marker = uuid.uuid4().hex
    run = _playbook(tmp_path, marker)
    run.build_dir.mkdir()

    def on_event(event):
        if event.get("event") == "runner_on_start" and event["event_data"].get("task") == "Wait here":
            deadline = time.monotonic() + 30
            while len(_alive(marker)) < 2 and time.monotonic() < deadline:
                time.sleep(0.1)  # both sleeps started, one in a session of its own
            os.kill(os.getpid(), sig)

    t0 = time.monotonic()
    with pytest.raises(AnsibleInterrupted) as e:
        run_playbook(run, on_event)
    stopped = time.monotonic() - t0
    msg = str(e.value)
    assert f"interrupted by {signal.Signals(sig).name} during wait.yml" in msg, msg
    assert "1 task(s) done in play(s) Waiting play" in msg and "task 'Wait here' on localhost" in msg, msg
    assert "Run the command again" in msg
    assert e.value.exit_code == 130
    assert _alive(marker) == [], _alive(marker)  # the escaped sleep too
    assert not list(runscope._cgroup2_base().glob(f"{runscope.PREFIX}{os.getpid()}-*"))  # the run's cgroup is gone
    print(f"stopped {signal.Signals(sig).name} run in {stopped:.1f} s")


def test_a_dead_commands_run_is_swept_by_the_next(tmp_path):
    """As after SIGKILL of clusterctl: a run cgroup whose command is gone still holds a process; the next run's
    scope kills it and removes the cgroup."""
    base = runscope._cgroup2_base()
    assert base is not None
    gone = base / f"{runscope.PREFIX}999999999-1-1"
    gone.mkdir()
    orphan = subprocess.Popen(["sh", "-c", f"echo $$ > {gone}/cgroup.procs; exec sleep 300"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not (gone / "cgroup.procs").read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.05)
        with runscope.RunScope(tmp_path / "pid") as scope:
            assert orphan.pid in scope.swept
        orphan.wait(timeout=10)
        assert orphan.returncode == -signal.SIGKILL and not gone.exists()
    finally:
        if orphan.poll() is None:
            orphan.kill()
