import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys

import pytest

from clusterctl.state.lock import LockedError
from clusterctl.state import ClusterState

FORK = multiprocessing.get_context("fork")


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _leave_stale_info(st: ClusterState, pid: int | None = None, host: str | None = None) -> None:
    """What a killed run leaves: its holder info in the lock file, no process holding the flock."""
    st.dir.mkdir(parents=True, exist_ok=True)
    info = {"command": "apply", "user": "ci", "host": host or socket.gethostname(), "pid": pid or _dead_pid(),
            "since": "2026-01-01T00:00:00Z", "id": "dead"}
    st.lock_path.write_text(json.dumps(info))


def test_second_holder_refused_with_who_and_since(tmp_path):
    st = ClusterState("c", tmp_path)
    with st.lock("apply") as me:
        assert st.lock_holder() == me and len(me["id"]) == 32
        with pytest.raises(LockedError) as e:
            with ClusterState("c", tmp_path).lock("up"):
                pass
    msg = str(e.value)
    assert "clusterctl apply" in msg and socket.gethostname() in msg and "since" in msg and f"pid {os.getpid()}" in msg
    assert st.lock_holder() is None and st.lock_path.read_text() == ""  # the file stays, emptied


def _race(root, start, tried, done, wins, i, rounds):
    st = ClusterState("c", root)
    for r in range(rounds):
        start.wait()
        try:
            with st.lock("up"):
                wins[r * 8 + i] = 1
                tried.wait()  # hold it until every racer has tried
                done.wait()
        except LockedError:
            tried.wait()
            done.wait()


def test_racing_a_stale_lock_has_exactly_one_winner_every_time(tmp_path):
    racers, rounds = 3, 200
    st = ClusterState("c", tmp_path)
    dead = _dead_pid()
    start, tried, done = (FORK.Barrier(racers + 1) for _ in range(3))
    wins = FORK.Array("b", rounds * 8, lock=False)
    procs = [FORK.Process(target=_race, args=(tmp_path, start, tried, done, wins, i, rounds)) for i in range(racers)]
    for p in procs:
        p.start()
    try:
        for r in range(rounds):
            _leave_stale_info(st, pid=dead)  # every round starts from a killed run's lock file
            start.wait(timeout=10)
            tried.wait(timeout=10)
            assert sum(wins[r * 8 : r * 8 + racers]) == 1, f"round {r}: {list(wins[r * 8 : r * 8 + racers])} won"
            done.wait(timeout=10)
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()


HOLD = """
import sys, time
from pathlib import Path
from clusterctl.state import ClusterState
with ClusterState("c", Path(sys.argv[1])).lock("apply"):
    print("held", flush=True)
    time.sleep(60)
"""


def _holder_process(root):
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(root)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_a_live_holder_is_never_displaced_not_even_by_break_lock(tmp_path):
    p = _holder_process(tmp_path)
    try:
        st = ClusterState("c", tmp_path)
        for _ in range(20):
            with pytest.raises(LockedError, match=f"pid {p.pid}"):
                with st.lock("up"):
                    pass
        with pytest.raises(LockedError, match=f"still running.*kill {p.pid}"):
            st.break_lock()
        assert st.lock_holder()["pid"] == p.pid
    finally:
        p.kill()
        p.wait()


def test_a_killed_holders_lock_is_taken_by_the_next_run(tmp_path):
    p = _holder_process(tmp_path)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    st = ClusterState("c", tmp_path)
    assert st.lock_holder() is None  # freed by the kernel with the process
    assert json.loads(st.lock_path.read_text())["pid"] == p.pid  # its info is left behind, and deciding nothing
    with st.lock("up") as me:
        assert st.lock_holder()["id"] == me["id"]


def test_break_lock_clears_a_dead_runs_info(tmp_path):
    st = ClusterState("c", tmp_path)
    _leave_stale_info(st, host="runner-7")
    assert st.break_lock()["host"] == "runner-7"
    assert st.break_lock() is None and st.lock_path.read_text() == ""
    with st.lock("apply"):
        pass
