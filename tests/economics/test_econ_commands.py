"""`cost` and `size` as the CLI will have them (registered on a fresh Typer app here: cli.py is wired by the lead)."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from clusterctl.cli.economics import register
from clusterctl.validate import load_file
from tests.conftest import ROOT


@pytest.fixture
def app():
    from clusterctl.cli import _load

    a = typer.Typer()
    a.callback()(lambda: None)
    register(a, _load)
    return a


def test_cost_text_and_json(app, tmp_path):
    runner = CliRunner()
    r = runner.invoke(app, ["cost", str(ROOT / "examples" / "aws-p5-spot.yaml")])
    assert r.exit_code == 0, r.output
    assert "$880.64" in r.output or "$881.45" in r.output
    r = runner.invoke(app, ["cost", str(ROOT / "examples" / "onprem-64xh100-ib.yaml"), "--output", "json",
                            "--capex-per-gpu", "30000", "--life-years", "5", "--usd-per-kwh", "0.12", "--pue", "1.3",
                            "--ops-per-node-month", "5000", "--utilization", "0.5", "--save-prices", str(tmp_path / "p.json")])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    gpu = doc["pools"][0]
    assert gpu["owned"]["capex_usd"] == 64 * 8 * 30000
    assert gpu["monthly_usd"] == pytest.approx(64 * 8 * 30000 / 60 + 64 * (10.2 * 1.3 * 730 * 0.12 + 5000))
    assert doc["utilization"] == 0.5 and doc["params"]["pue"] == 1.3
    # The saved table loads back in.
    r = runner.invoke(app, ["cost", str(ROOT / "examples" / "aws-p5-spot.yaml"), "--prices", str(tmp_path / "p.json"), "-o", "json"])
    assert r.exit_code == 0 and json.loads(r.output)["total"]["complete"]


def test_size_and_starter_spec(app, tmp_path):
    runner = CliRunner()
    r = runner.invoke(app, ["size", "--params", "70B", "--tokens", "2T", "--gpu", "h100"])
    assert r.exit_code == 0, r.output
    assert "1.12 TB" in r.output and "at least 14 GPUs" in r.output
    out = tmp_path / "train.yaml"
    r = runner.invoke(app, ["size", "--params", "70B", "--tokens", "2T", "--gpu", "h100", "--gpus", "256", "--mfu", "0.5",
                            "--write-spec", str(out), "--name", "llm70b", "-o", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["gpus"] == 256 and doc["state_bytes"] == 1.12e12
    loaded = load_file(out)
    assert loaded.ok and loaded.spec.name == "llm70b" and loaded.spec.pools[0].count == 32
    assert out.read_text().startswith("# Starter spec written by `clusterctl size --params 70B --tokens 2T --gpu h100 --mfu 0.5 --gpus 256`")
    r = runner.invoke(app, ["size", "--params", "70B", "--tokens", "2T", "--write-spec", str(out)])
    assert r.exit_code != 0 and "exists" in str(r.exception)
    r = runner.invoke(app, ["size", "--params", "70Q", "--tokens", "2T"])
    assert r.exit_code != 0
