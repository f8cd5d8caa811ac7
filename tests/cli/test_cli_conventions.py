"""Every command follows the same conventions: --help works, a usage error exits 1 with the parser's own message (never
2, which means "changes" for plan and drift, and never "internal error"), and --output json prints one JSON document
with the envelope {"cluster", "ok", ...}, also when the spec is refused. (`schema` prints the JSON Schema itself, which
editors read as it is; `burst` is run by slurmctld, which reads exit codes only.)"""

from __future__ import annotations

import json
import os

import pytest

from tests.helpers import clusterctl

BAD_SPEC = "apiVersion: clusterctl/v1\nname: Bad Name\npools: []\n"
SPEC_COMMANDS = ["validate", "plan", "up", "down", "status", "apply", "drift", "check", "cost", "history"]
ALL_COMMANDS = ["init", "schema", "render", *SPEC_COMMANDS, "size", "burst", "state migrate"]


def run(*args, tmp_path):
    env = dict(os.environ, CLUSTERCTL_STATE_DIR=str(tmp_path / "state"))
    return clusterctl(*args, env=env, check=False, timeout=120, cwd=tmp_path)


@pytest.mark.parametrize("command", ALL_COMMANDS)
def test_help(command, tmp_path):
    r = run(*command.split(), "--help", tmp_path=tmp_path)
    assert r.returncode == 0 and "Usage:" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("command", ALL_COMMANDS)
def test_usage_error_exits_1_with_the_parsers_message(command, tmp_path):
    r = run(*command.split(), "--no-such-flag", tmp_path=tmp_path)
    said = r.stdout + r.stderr
    assert r.returncode == 1, said
    assert "No such option" in said and "internal error" not in said and "Traceback" not in said, said


@pytest.mark.parametrize("args", [["bogus"], ["validate"], ["plan", "x.yaml", "--output", "yaml"]])
def test_top_level_usage_errors(args, tmp_path):
    r = run(*args, tmp_path=tmp_path)
    assert r.returncode == 1 and "Usage:" in r.stderr and "internal error" not in r.stderr, r.stderr


def test_version(tmp_path):
    r = run("--version", tmp_path=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("clusterctl ")


@pytest.mark.parametrize("command", SPEC_COMMANDS)
def test_json_output_of_a_refused_spec_has_the_envelope(command, tmp_path):
    spec = tmp_path / "cluster.yaml"
    spec.write_text(BAD_SPEC)
    r = run(command, spec, "--output", "json", tmp_path=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert list(doc)[:2] == ["cluster", "ok"] and doc["ok"] is False
    assert any(f["path"] == "name" for f in doc["findings"]), doc


@pytest.mark.parametrize("command,extra", [("validate", []), ("cost", []), ("plan", ["--no-cloud"]), ("history", [])])
def test_json_output_of_a_good_spec_has_the_envelope(command, extra, tmp_path):
    from tests.conftest import example

    r = run(command, example("lab.yaml"), "--output", "json", *extra, tmp_path=tmp_path)
    assert r.returncode in (0, 2), r.stdout + r.stderr
    doc = json.loads(r.stdout)
    if command != "plan":  # plan's JSON is the saved plan file `apply --plan` reads
        assert list(doc)[:2] == ["cluster", "ok"] and doc["cluster"] == "lab"


def test_init_and_render_json_have_the_envelope(tmp_path):
    doc = json.loads(run("init", "--out", tmp_path / "c.yaml", "--output", "json", tmp_path=tmp_path).stdout)
    assert list(doc)[:2] == ["cluster", "ok"] and doc["cluster"] == "lab"
    doc = json.loads(run("render", tmp_path / "c.yaml", "--dir", tmp_path / "b", "-o", "json", tmp_path=tmp_path).stdout)
    assert list(doc)[:2] == ["cluster", "ok"] and "slurm/slurm.conf" in doc["changed"]


def test_size_json_has_the_envelope(tmp_path):
    doc = json.loads(run("size", "--params", "7B", "--tokens", "1T", "--output", "json", tmp_path=tmp_path).stdout)
    assert list(doc)[:2] == ["cluster", "ok"]


def test_plan_against_a_missing_or_foreign_build_is_an_error(tmp_path):
    from tests.conftest import example

    r = run("plan", example("lab.yaml"), "--against", tmp_path / "nowhere", tmp_path=tmp_path)
    assert r.returncode == 1 and "no such build directory" in r.stderr
    assert run("render", example("aws-p5-spot.yaml"), "--dir", tmp_path / "other", tmp_path=tmp_path).returncode == 0
    r = run("plan", example("lab.yaml"), "--against", tmp_path / "other", "--no-cloud", tmp_path=tmp_path)
    assert r.returncode == 1 and "a build of cluster p5spot, not lab" in r.stderr, r.stderr


def test_old_flag_spellings_still_work(tmp_path):
    from tests.conftest import example

    r = run("render", example("lab.yaml"), "-o", tmp_path / "b", tmp_path=tmp_path)
    assert r.returncode == 0 and (tmp_path / "b" / "slurm" / "slurm.conf").exists() and "deprecated" in r.stderr


def test_did_you_mean_for_keys_and_gpus(tmp_path):
    spec = tmp_path / "cluster.yaml"
    spec.write_text("apiVersion: clusterctl/v1\nname: x\npools:\n  - {name: g, provider: local, count: 1, gpu: h100, "
                    "gpus_per_nod: 8}\nschedular: {}\n")
    r = run("validate", spec, tmp_path=tmp_path)
    assert "did you mean 'gpus_per_node'?" in r.stdout and "did you mean 'scheduler'?" in r.stdout
    assert "did you mean 'h100-sxm'?" in r.stdout
