"""SIGINT, SIGTERM and SIGHUP end a command as an exception (core.interrupt), so its cleanup runs: here, the private
secrets directory of an s3-backed command (state._private_dir), in a real process sent a real signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from clusterctl.core import procs
from clusterctl.state import SECRETS_PREFIX, sweep_private_dirs

# A command's shape: handlers installed, a secrets dir made, then a long wait the signal cuts short.
COMMAND = textwrap.dedent("""
    import sys, time
    from clusterctl.core import interrupt
    from clusterctl.state import _private_dir
    interrupt.install()
    d = _private_dir()
    (d / "munge.key").write_bytes(b"secret")
    try:
        print(d, flush=True)
        time.sleep(60)
    except interrupt.Interrupted as e:
        print(e.name, flush=True)
        sys.exit(interrupt.EXIT_CODE)
""")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_the_secrets_directory_is_gone_after_the_signal(sig):
    p = subprocess.Popen([sys.executable, "-c", COMMAND], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    secrets = Path(p.stdout.readline().strip())
    assert (secrets / "munge.key").read_bytes() == b"secret"
    assert secrets.name.startswith(f"{SECRETS_PREFIX}{p.pid}-")  # tagged with its owner, for the sweep
    p.send_signal(sig)
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 130 and out.strip() == signal.Signals(sig).name
    assert not secrets.exists()


def test_a_dead_commands_secrets_directory_is_swept_and_a_live_ones_kept(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    stale = tmp_path / f"{SECRETS_PREFIX}{pid}-12345-abcd"  # a SIGKILLed command's: its pid is gone
    live = tmp_path / f"{SECRETS_PREFIX}{procs.me()}-efgh"  # this process's own
    foreign = tmp_path / f"{SECRETS_PREFIX}0123abcd"  # no tag: not ours to judge
    for d in (stale, live, foreign):
        d.mkdir()
        (d / "munge.key").write_bytes(b"k")
    assert sweep_private_dirs(tmp_path) == [stale]
    assert not stale.exists() and live.exists() and foreign.exists()


def test_a_reused_pid_is_not_the_owner():
    pid, start = procs.me().split("-")
    assert procs.tag_alive(f"{pid}-{start}") and not procs.tag_alive(f"{pid}-{int(start) + 1}")
    assert os.getpid() == int(pid)
