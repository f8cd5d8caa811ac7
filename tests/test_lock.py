import multiprocessing
import os
import socket

import pytest

from clusterctl.lock import LockedError
from clusterctl.state import ClusterState


def test_second_holder_refused_with_who_and_since(tmp_path):
    st = ClusterState("c", tmp_path)
    with st.lock("apply"):
        with pytest.raises(LockedError) as e:
            with ClusterState("c", tmp_path).lock("up"):
                pass
    msg = str(e.value)
    assert "clusterctl apply" in msg and socket.gethostname() in msg and "since" in msg and "--break-lock" in msg
    assert not st.lock_path.exists()


def _hold_and_die(path_root):
    st = ClusterState("c", path_root)
    cm = st.lock("up")
    cm.__enter__()
    os._exit(0)  # killed without releasing


def test_lock_of_a_dead_process_on_this_host_is_taken_over(tmp_path):
    p = multiprocessing.get_context("fork").Process(target=_hold_and_die, args=(tmp_path,))
    p.start()
    p.join()
    assert ClusterState("c", tmp_path).lock_path.exists()
    with ClusterState("c", tmp_path).lock("up"):
        pass


def test_foreign_host_lock_needs_break(tmp_path):
    st = ClusterState("c", tmp_path)
    st.dir.mkdir(parents=True)
    st.lock_path.write_text('{"command": "apply", "user": "ci", "host": "runner-7", "pid": 1, "since": "2026-01-01T00:00:00Z"}')
    with pytest.raises(LockedError, match="runner-7"):
        with st.lock("apply"):
            pass
    assert st.break_lock()["host"] == "runner-7"
    with st.lock("apply"):
        pass
