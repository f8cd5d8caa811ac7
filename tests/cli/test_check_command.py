"""The `check` command as the CLI will have it (registered on a fresh Typer app here: cli.py is wired by the lead)."""

from __future__ import annotations

import json

import typer
from typer.testing import CliRunner

from clusterctl.ops import check as c
from clusterctl.cli.check import register
from tests.conftest import ROOT

LAB = ROOT / "examples" / "lab.yaml"


def app_with_check():
    from clusterctl.cli import _load

    app = typer.Typer()
    app.callback()(lambda: None)
    register(app, _load)
    return app


def fake_rows(fail: bool):
    rows = [c.CheckRow("gpus", "gpu001", c.PASS, "8 /dev/nvidiaN (expected 8)"),
            c.CheckRow("gpus", "gpu002", c.FAIL if fail else c.PASS, "7 /dev/nvidiaN (expected 8)" if fail else "8 /dev/nvidiaN (expected 8)"),
            c.CheckRow("nccl all_reduce", "gpu[001-002]", c.SKIP, "lab nodes with fake /dev/nvidiaN device files, no GPUs or CUDA for NCCL: gpu[001-002]")]
    return rows, c.rows_ok(rows)


def test_check_exit_codes_and_json(monkeypatch):
    seen = {}

    def fake_run_checks(spec, nccl_tolerance=0.8, **kw):
        seen["tolerance"] = nccl_tolerance
        return fake_rows(seen.get("fail", False))

    monkeypatch.setattr(c, "run_checks", fake_run_checks)
    runner = CliRunner()
    r = runner.invoke(app_with_check(), ["check", str(LAB)])
    assert r.exit_code == 0, r.output
    assert "all checks passed" in r.output and "SKIP" in r.output
    seen["fail"] = True
    r = runner.invoke(app_with_check(), ["check", str(LAB), "--output", "json", "--nccl-tolerance", "0.7"])
    assert r.exit_code == 1
    doc = json.loads(r.output)
    assert doc["ok"] is False and doc["cluster"] == "lab" and seen["tolerance"] == 0.7
    assert [row["node"] for row in doc["rows"] if row["status"] == "fail"] == ["gpu002"]
