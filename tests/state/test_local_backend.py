"""The local backend behind the same interface: today's directory layout, plus versions and history."""

import pytest

from clusterctl.render.compiled import Compiled
from clusterctl.ops.apply import StalePlan, check_fresh, current_report
from clusterctl.render import render_spec
from clusterctl.state import ClusterState
from clusterctl.state.backend import StateError
from clusterctl.state.lock import LockedError
from tests.conftest import example
from clusterctl.validate import load_file


def test_reapplying_the_same_build_makes_an_older_plan_stale(tmp_path):
    spec = load_file(example("lab.yaml")).spec
    st = ClusterState.for_spec(spec, tmp_path)
    files = render_spec(spec)[1]
    with st.lock("apply"):
        assert st.record_applied(files) == "1"
    assert (st.dir / "applied" / "spec.json").is_file()  # the directory layout of before
    saved = current_report(Compiled.of(spec), st).to_dict()
    check_fresh(saved, current_report(Compiled.of(spec), st))
    with st.lock("up"):
        st.record_applied(files)  # the very same build again
    with pytest.raises(StalePlan, match="applied since"):
        check_fresh(saved, current_report(Compiled.of(spec), st))
    st.forget_applied()
    assert st.applied_build() == {} and [e["action"] for e in st.history()] == ["apply", "apply", "down"]
    assert [e["command"] for e in st.history()] == ["apply", "up", None]


def test_local_break_lock_with_an_id_must_name_the_left_one(tmp_path):
    st = ClusterState("c", tmp_path, backend="local")
    st.dir.mkdir(parents=True)
    st.lock_path.write_text('{"id": "dead", "host": "runner-7"}')
    with pytest.raises(LockedError, match="not that one"):
        st.break_lock("other")
    assert st.break_lock("dead")["host"] == "runner-7"


def test_the_environment_overrides_the_spec_and_is_checked(tmp_path, monkeypatch):
    spec = load_file(example("lab.yaml")).spec
    monkeypatch.setenv("CLUSTERCTL_STATE_BACKEND", "s3://bucket-x/p q")
    with pytest.raises(StateError, match="not `local` or s3://"):
        ClusterState.for_spec(spec, tmp_path)
    monkeypatch.setenv("CLUSTERCTL_STATE_BACKEND", "s3://bucket-x/team")
    assert ClusterState.for_spec(spec, tmp_path).backend.url == "s3://bucket-x/team"


@pytest.mark.parametrize("value", ["s3://b/x", "s3://bucket/a b", "s3://bucket/'x'", "s3://bucket/{x}",
                                   "s3://bucket/$(id)", "s3://bucket/a\nb", "file:///tmp/x", "s3://bucket/../x"])
def test_hostile_backends_are_refused(value):
    from clusterctl.spec.cluster import State

    with pytest.raises(ValueError):
        State(backend=value)


@pytest.mark.parametrize("value", ["alias/x y", "alias/{x}", "arn:aws:kms:us-east-1:123:key/x", "key-id"])
def test_hostile_kms_keys_are_refused(value):
    from clusterctl.spec.cluster import State

    with pytest.raises(ValueError):
        State(kms_key=value)


def test_state_location_is_not_part_of_the_build():
    from tests.helpers import spec_of

    plain = load_file(example("lab.yaml")).spec
    moved = spec_of("lab.yaml", lambda d: d.update(state={"backend": "s3://bkt-a/p", "kms_key": "alias/k"}))
    assert render_spec(plain)[1] == render_spec(moved)[1]  # moving the state is no change to plan
