"""scheduler.slurm.accounts: allow-listed in the spec, rendered as slurm/accounts.txt, applied by the controller role's
accounts-apply.sh idempotently. The script runs here against a stand-in sacctmgr (tests/render/fake_sacctmgr.py) that
keeps associations in a JSON file; real sacctmgr/slurmdbd are not run (no MariaDB here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clusterctl.render import layout, render_spec
from tests.conftest import ROOT
from tests.helpers import edited, load_dict

SCRIPT = ROOT / "playbooks" / "roles" / "slurm_controller" / "files" / "accounts-apply.sh"
FAKE = Path(__file__).with_name("fake_sacctmgr.py")

ACCOUNTS = [{"name": "llm", "share": 60, "users": ["alice", "bob"]}, {"name": "vision", "share": 40}]


def spec_with(accounts, accounting=True):
    def edit(d):
        d["scheduler"]["slurm"]["accounts"] = accounts
        d["scheduler"]["slurm"]["accounting"] = {"enabled": accounting}

    return load_dict(edited("onprem-64xh100-ib.yaml", edit))


def test_rendered_accounts_file():
    loaded = spec_with(ACCOUNTS)
    assert loaded.ok, loaded.findings
    _, files = render_spec(loaded.spec)
    assert files[layout.SLURM_ACCOUNTS] == "llm 60 alice,bob\nvision 40 -\n"
    assert "accounts: !unsafe slurm/accounts.txt" in files["ansible/group_vars/all.yml"]


@pytest.mark.parametrize("accounts, accounting", [
    ([{"name": "llm; rm -rf /", "share": 1}], True),
    ([{"name": "llm", "share": 1, "users": ["Bob Smith"]}], True),
    ([{"name": "llm", "share": 0}], True),
    ([{"name": "llm"}, {"name": "llm"}], True),
    ([{"name": "llm"}], False),  # accounts without accounting
])
def test_bad_accounts_refused(accounts, accounting):
    assert not spec_with(accounts, accounting).ok


def apply(tmp_path, lines: str):
    accounts = tmp_path / "accounts.txt"
    accounts.write_text(lines)
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    shim = bindir / "sacctmgr"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE} \"$@\"\n")
    shim.chmod(0o755)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", FAKE_SACCTMGR_STATE=str(tmp_path / "state.json"))
    r = subprocess.run(["sh", str(SCRIPT), str(accounts), "atlas"], capture_output=True, text=True, env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    state = json.loads((tmp_path / "state.json").read_text())
    return r.stdout.strip(), state


def test_apply_adds_then_is_a_no_op_then_updates_shares(tmp_path):
    out, state = apply(tmp_path, "llm 60 alice,bob\nvision 40 -\n")
    assert out == "changed"
    assert sorted(map(tuple, state["assoc"])) == [("llm", "", "60"), ("llm", "alice", "1"), ("llm", "bob", "1"),
                                                  ("vision", "", "40")]
    writes = len(state["writes"])
    out, state = apply(tmp_path, "llm 60 alice,bob\nvision 40 -\n")
    assert out == "" and len(state["writes"]) == writes  # second converge: nothing changed
    out, state = apply(tmp_path, "llm 70 alice,bob,carol\nvision 40 -\n")
    assert out == "changed"
    assert state["writes"][writes:] == [["-i", "modify", "account", "where", "name=llm", "cluster=atlas", "set",
                                         "fairshare=70"], ["-i", "add", "user", "carol", "account=llm", "cluster=atlas"]]
    # Accounts and users no longer listed are kept (their usage history stays).
    out, state = apply(tmp_path, "llm 70 alice\n")
    assert out == "" and ("vision", "", "40") in map(tuple, state["assoc"])
