"""Every check that can refuse a command runs before its first change: a refused `up` leaves the machine as it was."""

from __future__ import annotations

import subprocess

from tests.conftest import ROOT
from tests.helpers import clusterctl


def _netns() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def test_up_with_an_s3_backend_but_no_kms_key_changes_nothing(tmp_path):
    import os

    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if k != "CLUSTERCTL_STATE_KMS_KEY"}
    env.update(CLUSTERCTL_STATE_DIR=str(state), CLUSTERCTL_STATE_BACKEND="s3://clusterctl-refusal-test/prefix",
               AWS_DEFAULT_REGION="us-east-1", AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
               CLUSTERCTL_CACHE_DIR=str(tmp_path / "cache"))
    before = _netns()
    for command in ("up", "apply"):
        r = clusterctl(command, ROOT / "examples" / "lab.yaml", env=env, check=False, timeout=120)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "keeps secrets only encrypted" in r.stderr and "state.kms_key" in r.stderr and "Nothing was changed" in r.stderr
        assert "Traceback" not in r.stderr
    assert not state.exists() and not (tmp_path / "cache").exists()  # no build, no lab, no rootfs
    assert _netns() == before
