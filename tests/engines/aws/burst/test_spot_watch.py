"""The spot-interruption watcher (playbooks/roles/burst/files/clusterctl-spot-watch) against the harness's IMDSv2
server (real HTTP: token PUT, token header, 404 until a notice) and stand-in Slurm commands on PATH that record
their arguments (the lab test runs it against real Slurm)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.engines.aws.burst.harness import FakeImds

WATCHER = Path(__file__).resolve().parents[4] / "playbooks" / "roles" / "burst" / "files" / "clusterctl-spot-watch"


def load_watcher():
    loader = importlib.machinery.SourceFileLoader("clusterctl_spot_watch", str(WATCHER))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


@pytest.fixture
def imds():
    s = FakeImds("127.0.0.1")
    yield s
    s.stop()


@pytest.fixture
def slurm_bin(tmp_path, monkeypatch):
    """scontrol/squeue/scancel that append their argv to calls.log; squeue lists jobs 41 and 42 on the node,
    `scontrol show job` says 41 is RUNNING and 42 COMPLETED."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "calls.log"
    script = f"""#!/bin/sh
echo "$(basename "$0") $*" >> {log}
case "$(basename "$0") $*" in
  "squeue "*) printf '41\\n42\\n' ;;
  "scontrol -o show job 41") echo "JobId=41 JobName=train JobState=RUNNING Reason=None" ;;
  "scontrol -o show job 42") echo "JobId=42 JobName=eval JobState=COMPLETED Reason=None" ;;
esac
"""
    for name in ("scontrol", "squeue", "scancel"):
        p = bindir / name
        p.write_text(script)
        p.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    return log


def test_no_notice_is_404(imds):
    w = load_watcher()
    client = w.Imds(imds.url)
    assert w.notice(client) is None
    assert imds.polls["127.0.0.1"] == 1 and len(imds.tokens) == 1  # IMDSv2: a token first, then the GET with it


def test_expired_token_is_renewed(imds):
    w = load_watcher()
    client = w.Imds(imds.url)
    w.notice(client)
    imds.tokens.clear()  # IMDS forgot it (TTL over): 401, then a new PUT
    assert w.notice(client) is None
    assert len(imds.tokens) == 1 and imds.polls["127.0.0.1"] == 2


def test_notice_drains_signals_and_requeues(imds, slurm_bin):
    w = load_watcher()
    notice = imds.interrupt("127.0.0.1", in_seconds=120)
    got = w.notice(w.Imds(imds.url))
    assert got == notice and got["action"] == "terminate"
    slept = []
    requeued = w.handle("cloud002", got, "USR1", 5, sleep=slept.append)
    calls = slurm_bin.read_text().splitlines()
    assert calls[0].startswith("scontrol update nodename=cloud002 state=drain reason=spot interruption: terminate at ")
    assert "scancel --signal=USR1 --full 41" in calls and "scancel --signal=USR1 --full 42" in calls
    assert slept == [5]  # the checkpoint grace, well before the 2-minute deadline
    assert requeued == ["41"]  # 42 finished during the grace: not run again
    assert "scontrol requeue 41" in calls and "scontrol requeue 42" not in calls
    assert calls.index("scancel --signal=USR1 --full 41") < calls.index("scontrol requeue 41")


def test_grace_never_runs_past_the_deadline(imds, slurm_bin):
    w = load_watcher()
    slept = []
    w.handle("cloud002", {"action": "terminate", "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 40))},
             "USR1", 60, sleep=slept.append)
    assert slept and slept[0] <= 10.5  # 40 s left - 30 s safety


def test_watcher_service_end_to_end(imds, slurm_bin, tmp_path):
    """The script as systemd runs it: polls, handles the notice once, keeps running."""
    env = dict(os.environ, NODE="cloud003", IMDS_ENDPOINT=imds.url, POLL="0.2", SPOT_GRACE="0")
    proc = subprocess.Popen([sys.executable, str(WATCHER)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 20
        while imds.polls.get("127.0.0.1", 0) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not slurm_bin.exists()  # polling, no notice yet: nothing done
        imds.interrupt("127.0.0.1")
        while "requeue" not in (slurm_bin.read_text() if slurm_bin.exists() else "") and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)  # more polls with the same notice must not handle it again
        calls = slurm_bin.read_text().splitlines()
        assert sum(c.startswith("scontrol update nodename=cloud003 state=drain") for c in calls) == 1
        assert "scontrol requeue 41" in calls
    finally:
        proc.terminate()
        out = proc.communicate(timeout=10)[0]
    assert "watching" in out and "notice:" in out


def test_notice_document_shape():
    w = load_watcher()
    assert w.seconds_left("2000-01-01T00:00:00Z") < 0
    assert w.seconds_left(None) is None and w.seconds_left("garbage") is None
    json.dumps({"ok": True})
