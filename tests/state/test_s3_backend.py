"""The s3 state backend against a real moto_server: two state directories stand for two throwaway CI runners that
share only the bucket. No lab: `plan` runs for real; `apply` runs for real only up to where it would touch nodes
(its staleness gate and its lock come before that), and a successful apply's recording is driven at the state
level (ClusterState.record_applied under the lock, as ops.up does once the smoke job passed)."""

from __future__ import annotations

import base64
import json
import multiprocessing
import os
import signal
import subprocess
import sys

import boto3
import pytest

from clusterctl.render.compiled import Compiled
from clusterctl.ops.apply import StalePlan, check_fresh, current_report
from clusterctl.render import render_spec
from clusterctl.state import ClusterState
from clusterctl.state.lock import LockedError
from tests.helpers import clusterctl, edited, spec_of, to_yaml

BUCKET, PREFIX, ALIAS = "clusterctl-state", "ci/clusters", "alias/clusterctl-state"
URL = f"s3://{BUCKET}/{PREFIX}"
FORK = multiprocessing.get_context("fork")


@pytest.fixture
def s3(aws):
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    kms = boto3.client("kms")
    kms.create_alias(AliasName=ALIAS, TargetKeyId=kms.create_key()["KeyMetadata"]["KeyId"])
    return aws


def spec_data(count: int = 2, backend: str | None = URL) -> dict:
    def edit(d):
        d["pools"][0]["count"] = count
        d["state"] = {"backend": backend, "kms_key": ALIAS} if backend else {}
    return edited("lab.yaml", edit)


def runner(tmp_path, name: str, spec) -> ClusterState:
    return ClusterState.for_spec(spec, tmp_path / name)


def apply_from(state: ClusterState, spec, command: str = "apply") -> str:
    """What a successful apply records, under the lock, as ops.up does once the smoke job passed."""
    with state.lock(command):
        return state.record_applied(render_spec(spec)[1])


def cli(*args, state_dir, env_extra=None):
    """The CLI on one runner: its own state directory, the bucket shared."""
    env = {**os.environ, "CLUSTERCTL_STATE_DIR": str(state_dir), **(env_extra or {})}
    return clusterctl(*args, env=env, check=False, timeout=120)


def all_objects() -> dict[str, bytes]:
    c = boto3.client("s3")
    keys = [o["Key"] for o in c.list_objects_v2(Bucket=BUCKET).get("Contents", [])]
    return {k: c.get_object(Bucket=BUCKET, Key=k)["Body"].read() for k in keys}


def test_plan_on_a_apply_from_b_is_read_on_a_and_the_old_plan_is_stale(s3, tmp_path):
    data = spec_data()
    (tmp_path / "cluster.yaml").write_text(to_yaml(data))
    spec = spec_of(data)
    r = cli("plan", tmp_path / "cluster.yaml", "--no-cloud", "--out", tmp_path / "plan.json", state_dir=tmp_path / "A")
    assert r.returncode == 2, r.stderr  # a create: nothing applied yet
    saved = json.loads((tmp_path / "plan.json").read_text())
    assert saved["fingerprint"]["applied_version"] is None

    b = runner(tmp_path, "B", spec)
    assert apply_from(b, spec) == "1"
    a = runner(tmp_path, "A", spec)
    assert a.applied_build() == render_spec(spec)[1]  # B's apply, read on A through the bucket only
    r = cli("plan", tmp_path / "cluster.yaml", "--no-cloud", "--out", tmp_path / "plan2.json", state_dir=tmp_path / "A")
    assert r.returncode == 0, r.stdout + r.stderr  # no changes on A

    with pytest.raises(StalePlan, match="applied since the plan was made"):
        check_fresh(saved, current_report(Compiled.of(spec), a))
    fresh = json.loads((tmp_path / "plan2.json").read_text())
    check_fresh(fresh, current_report(Compiled.of(spec), a))  # made against version 1: fine until 2 exists
    assert apply_from(b, spec) == "2"  # the same build applied again, from B
    with pytest.raises(StalePlan, match="applied since"):
        check_fresh(fresh, current_report(Compiled.of(spec), a))  # the second apply of that plan is refused


def _race(root, start, result, i):
    st = ClusterState("lab", root)
    start.wait()
    try:
        with st.lock(f"apply-{i}") as me:
            result.put(("won", i, me["id"]))
            start.wait()  # hold it until the other has tried
    except LockedError as e:
        result.put(("refused", i, str(e)))
        start.wait()


def test_two_runners_racing_for_the_lock_exactly_one_wins(s3, tmp_path, monkeypatch):
    monkeypatch.setenv("CLUSTERCTL_STATE_BACKEND", URL)
    for round_ in range(5):
        start, result = FORK.Barrier(2), FORK.Queue()
        procs = [FORK.Process(target=_race, args=(tmp_path / f"runner{i}", start, result, i)) for i in range(2)]
        for p in procs:
            p.start()
        outcomes = [result.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        won = [o for o in outcomes if o[0] == "won"]
        refused = [o for o in outcomes if o[0] == "refused"]
        assert len(won) == 1 and len(refused) == 1, f"round {round_}: {outcomes}"
        msg = refused[0][2]
        assert f"apply-{won[0][1]}" in msg and f"lock id {won[0][2]}" in msg and f"--break-lock {won[0][2]}" in msg
        assert ClusterState("lab", tmp_path).lock_holder() is None  # released by its holder


HOLD = """
import sys, time
from pathlib import Path
from clusterctl.state import ClusterState
with ClusterState("lab", Path(sys.argv[1])).lock("apply") as me:
    print(me["id"], flush=True)
    time.sleep(120)
"""


def test_a_killed_holder_keeps_the_lock_until_break_lock_with_its_id(s3, tmp_path, monkeypatch):
    monkeypatch.setenv("CLUSTERCTL_STATE_BACKEND", URL)
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "A")], stdout=subprocess.PIPE, text=True)
    lock_id = p.stdout.readline().strip()
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    b = ClusterState("lab", tmp_path / "B")
    for _ in range(2):  # never taken over automatically, however often it is tried
        with pytest.raises(LockedError, match=f"lock id {lock_id}"):
            with b.lock("apply"):
                pass
    with pytest.raises(LockedError, match="name the id"):
        b.break_lock(None)
    with pytest.raises(LockedError, match="not the id"):
        b.break_lock("0" * 32)
    assert b.lock_holder()["id"] == lock_id  # the refusals removed nothing
    assert b.break_lock(lock_id)["pid"] == p.pid
    with b.lock("apply") as me:
        assert b.lock_holder()["id"] == me["id"]


def test_cli_break_lock_takes_an_id_or_nothing():
    from clusterctl.cli import _optional_lock_id

    lid = "ab" * 16
    assert _optional_lock_id(["apply", "c.yaml", "--break-lock", lid]) == ["apply", "c.yaml", "--break-lock", lid]
    assert _optional_lock_id(["apply", "--break-lock", "c.yaml"]) == ["apply", "--break-lock=", "c.yaml"]
    assert _optional_lock_id(["up", "c.yaml", "--break-lock"]) == ["up", "c.yaml", "--break-lock="]


def test_the_pointer_moves_only_after_the_whole_build_is_stored(s3, tmp_path, monkeypatch):
    from clusterctl.state.s3 import Objects

    spec = spec_of(spec_data())
    st = runner(tmp_path, "A", spec)
    apply_from(st, spec)
    before = st.applied()
    bigger = spec_of(spec_data(count=3))
    real_put = Objects.put

    def failing_put(self, key, body, **kw):
        if "/builds/" in key:  # the connection drops half-way through the build's upload
            raise ConnectionResetError("simulated failure mid-write")
        return real_put(self, key, body, **kw)

    monkeypatch.setattr(Objects, "put", failing_put)
    with pytest.raises(ConnectionResetError):
        apply_from(st, bigger)
    monkeypatch.setattr(Objects, "put", real_put)
    assert st.applied() == before and len(st.history()) == 1  # nothing points at a half-stored build

    # A build stored whole but whose pointer write loses to another runner: not current either, and said so.
    other = runner(tmp_path, "B", spec)
    real_pointer = st.backend._pointer

    def stale_pointer():
        pointer, etag = real_pointer()
        apply_from(other, spec)  # B moves the pointer between A's read and A's conditional write
        return pointer, etag

    monkeypatch.setattr(st.backend, "_pointer", stale_pointer)
    from clusterctl.state.backend import StateConflict

    with pytest.raises(StateConflict, match="another run recorded an apply"):
        st.backend.record(render_spec(bigger)[1], {"action": "apply"})
    monkeypatch.undo()
    assert st.applied().version == "2" and st.applied_build() == render_spec(spec)[1]


def test_the_bucket_holds_no_plaintext_secret(s3, tmp_path):
    from clusterctl.state.secrets import ensure_cluster_id, ensure_munge_key, playbook_vars

    spec = spec_of(spec_data())
    st = runner(tmp_path, "A", spec)
    key_file = ensure_munge_key(st)
    munge = key_file.read_bytes()
    assert len(munge) == 1024 and oct(key_file.stat().st_mode & 0o777) == "0o400"
    assert not str(key_file).startswith(str(tmp_path))  # a private temp dir (/dev/shm where there is one)
    cluster_id = ensure_cluster_id(st)
    assert playbook_vars(key_file)["clusterctl_cluster_id"] == cluster_id
    apply_from(st, spec)
    # Another runner gets the same secrets back.
    other = runner(tmp_path, "B", spec)
    assert ensure_munge_key(other).read_bytes() == munge and ensure_cluster_id(other) == cluster_id
    objects = all_objects()
    assert any("/secrets/munge.key.enc" in k for k in objects)
    needles = [munge, munge[:64], base64.b64encode(munge)[:64], cluster_id.encode()]
    for key, body in objects.items():
        for needle in needles:
            assert needle not in body, f"{key} holds a secret in plaintext"


def test_a_secret_copied_under_another_name_does_not_decrypt(s3, tmp_path):
    from clusterctl.state.backend import StateError

    spec = spec_of(spec_data())
    st = runner(tmp_path, "A", spec)
    st.secret("munge.key", lambda: b"k" * 32)
    c = boto3.client("s3")
    body = c.get_object(Bucket=BUCKET, Key=f"{PREFIX}/lab/secrets/munge.key.enc")["Body"].read()
    c.put_object(Bucket=BUCKET, Key=f"{PREFIX}/lab/secrets/pulumi-passphrase.enc", Body=body)
    with pytest.raises(StateError, match="pulumi-passphrase.*KMS refused"):
        st.secret("pulumi-passphrase")


def test_secrets_need_a_kms_key(s3, tmp_path):
    from clusterctl.state.backend import StateError

    st = ClusterState("lab", tmp_path, backend=URL)
    with pytest.raises(StateError, match="state.kms_key"):
        st.secret("munge.key", lambda: b"x")


def test_migrate_then_plan_shows_no_changes_and_a_foreign_target_is_refused(s3, tmp_path):
    from clusterctl.state.secrets import ensure_cluster_id, ensure_munge_key

    data = spec_data(backend=None)
    (tmp_path / "cluster.yaml").write_text(to_yaml({**data, "state": {"kms_key": ALIAS}}))
    spec = spec_of(data)
    local = ClusterState("lab", tmp_path / "A", backend="local")
    munge = ensure_munge_key(local).read_bytes()
    apply_from(local, spec)
    r = cli("state", "migrate", tmp_path / "cluster.yaml", "--to", URL, state_dir=tmp_path / "A")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "set state.backend" in r.stdout
    r = cli("plan", tmp_path / "cluster.yaml", "--no-cloud", state_dir=tmp_path / "fresh-runner",
            env_extra={"CLUSTERCTL_STATE_BACKEND": URL})
    assert r.returncode == 0, r.stdout + r.stderr
    remote = ClusterState("lab", tmp_path / "fresh-runner", backend=URL, kms_key=ALIAS)
    assert remote.secret("munge.key") == munge and ensure_cluster_id(remote) == ensure_cluster_id(local)
    # Rerunning it is harmless (same cluster); another cluster of the same name is refused.
    assert cli("state", "migrate", tmp_path / "cluster.yaml", "--to", URL, state_dir=tmp_path / "A").returncode == 0
    other = ClusterState("lab", tmp_path / "C", backend="local")
    ensure_cluster_id(other)
    r = cli("state", "migrate", tmp_path / "cluster.yaml", "--to", URL, state_dir=tmp_path / "C")
    assert r.returncode == 1 and "holds another cluster named lab" in r.stderr


def test_history_after_three_applies_lists_them_in_order(s3, tmp_path):
    specs = [spec_of(spec_data(count=n)) for n in (2, 3, 4)]
    for i, spec in enumerate(specs):
        apply_from(runner(tmp_path, "AB"[i % 2], spec), spec, command=f"apply-{i}")
    path = tmp_path / "cluster.yaml"
    path.write_text(to_yaml(spec_data(count=4)))
    r = cli("history", path, "--output", "json", state_dir=tmp_path / "C")
    assert r.returncode == 0, r.stderr
    entries = json.loads(r.stdout)["history"]
    assert [e["version"] for e in entries] == ["1", "2", "3"]
    assert [e["command"] for e in entries] == ["apply-0", "apply-1", "apply-2"]
    assert all(e["who"] and e["when"] and e["fingerprint"]["build"] for e in entries)
    text = cli("history", path, state_dir=tmp_path / "C").stdout.splitlines()
    assert len(text) == 3 and [ln.split()[0] for ln in text] == ["1", "2", "3"]


def test_pulumi_state_defaults_next_to_the_s3_state(s3, tmp_path):
    st = ClusterState("lab", tmp_path, backend=URL, kms_key=ALIAS)
    assert st.pulumi_url() == f"{URL}/lab/pulumi"


def test_host_keys_a_runner_recorded_are_known_to_the_next(s3, tmp_path):
    spec = spec_of(spec_data())
    a = runner(tmp_path, "A", spec)
    line = b"10.0.0.5 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlaceholderKeyForTheTest\n"
    with a.lock("up"):
        a.dir.mkdir(parents=True)  # made by hostkeys.write_config in a real run
        a.known_hosts_path.write_bytes(line)  # what ssh's accept-new writes on first contact
    b = runner(tmp_path, "B", spec)
    assert b.known_hosts_path.read_bytes() == line


def test_real_apply_cli_refuses_a_stale_plan_and_breaks_a_dead_lock_only_by_its_id(s3, tmp_path, monkeypatch):
    """`clusterctl apply` itself: its gates run before any node is touched, so no lab is needed to see them refuse."""
    data = spec_data()
    spec_file = tmp_path / "cluster.yaml"
    spec_file.write_text(to_yaml(data))
    spec = spec_of(data)
    assert cli("plan", spec_file, "--no-cloud", "--out", tmp_path / "plan.json", state_dir=tmp_path / "A").returncode == 2
    apply_from(runner(tmp_path, "B", spec), spec)  # another runner applied meanwhile
    r = cli("apply", spec_file, "--plan", tmp_path / "plan.json", state_dir=tmp_path / "A")
    assert r.returncode == 1 and "stale plan" in r.stderr, r.stderr

    # A plan with nothing to do: past its gates `apply` takes the lock, and stops there (no nodes to touch).
    assert cli("plan", spec_file, "--no-cloud", "--out", tmp_path / "noop.json", state_dir=tmp_path / "A").returncode == 0
    monkeypatch.setenv("CLUSTERCTL_STATE_BACKEND", URL)
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "dead-runner")], stdout=subprocess.PIPE, text=True)
    lock_id = p.stdout.readline().strip()
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    noop = ["apply", spec_file, "--plan", tmp_path / "noop.json"]
    r = cli(*noop, state_dir=tmp_path / "A")
    assert r.returncode == 1 and f"--break-lock {lock_id}" in " ".join(r.stderr.split()), r.stderr
    for wrong in (["--break-lock"], ["--break-lock", "f" * 32]):
        r = cli(*noop, *wrong, state_dir=tmp_path / "A")
        assert r.returncode == 1 and "no changes" not in r.stdout, r.stdout + r.stderr
        assert ClusterState("lab", tmp_path / "A").lock_holder()["id"] == lock_id
    r = cli(*noop, "--break-lock", lock_id, state_dir=tmp_path / "A")
    assert r.returncode == 0 and f"cleared the lock {lock_id}" in r.stdout and "no changes" in r.stdout, r.stdout + r.stderr
    assert ClusterState("lab", tmp_path / "A").lock_holder() is None
