"""The CLI as a user runs it: exit codes, messages naming the field, no tracebacks."""

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT, example
from tests.helpers import clusterctl, edited, to_yaml


def run(*args):
    """The CLI as a user runs it; the test reads the exit code."""
    return clusterctl(*args, check=False, timeout=120)


def test_validate_ok_exit_0():
    r = run("validate", example("lab.yaml"))
    assert r.returncode == 0 and "valid" in r.stdout


def test_validate_errors_exit_1_with_field_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(to_yaml(edited("aws-p5-spot.yaml", lambda d: d["pools"][0].update(gpus_per_node=4, market="capacity-block"))))
    r = run("validate", bad)
    assert r.returncode == 1
    assert f"{bad}:" in r.stdout and "pools[0].gpus_per_node" in r.stdout and "pools[0].capacity_reservation_id" in r.stdout
    assert "Traceback" not in r.stdout + r.stderr


def test_validate_json(tmp_path):
    r = run("validate", example("lab.yaml"), "--format", "json")
    assert json.loads(r.stdout)["findings"] == []


@pytest.mark.parametrize("content", ["", "- a\n- b\n", "name: [\n", "\x00\x01"])
def test_garbage_never_tracebacks(tmp_path, content):
    f = tmp_path / "x.yaml"
    f.write_text(content)
    for cmd in ("validate", "render", "plan"):
        r = run(cmd, f)
        assert r.returncode == 1, (cmd, r.stdout, r.stderr)
        assert "Traceback" not in r.stdout + r.stderr


def test_missing_file_is_a_clear_error(tmp_path):
    r = run("render", tmp_path / "nope.yaml")
    assert r.returncode == 1 and "no such file" in r.stderr and "Traceback" not in r.stderr


def test_render_refuses_invalid_spec_and_writes_nothing(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(to_yaml(edited("lab.yaml", lambda d: d["fabric"].update(type="efa"))))
    r = run("render", bad, "-o", tmp_path / "out")
    assert r.returncode == 1 and "fabric.type" in r.stderr
    assert not (tmp_path / "out").exists()


def test_plan_exit_codes(tmp_path):
    build = tmp_path / "b"
    assert run("render", example("lab.yaml"), "-o", build).returncode == 0
    assert run("plan", example("lab.yaml"), "--against", build).returncode == 0
    grown = tmp_path / "lab.yaml"
    grown.write_text(to_yaml(edited("lab.yaml", lambda d: d["pools"][0].update(count=3))))
    r = run("plan", grown, "--against", build, "--format", "json", "--out", tmp_path / "plan.json")
    assert r.returncode == 2
    report = json.loads(r.stdout)
    assert report["policy"] == "live"
    assert {"name": "gpu003", "kind": "added", "policy": "live", "detail": "pool gpu"} in report["nodes"]
    assert json.loads((tmp_path / "plan.json").read_text()) == report


def test_plan_without_applied_state_is_a_create(tmp_path):
    r = run("plan", example("lab.yaml"))
    assert r.returncode == 2 and "not applied yet" in r.stdout


def test_schema_is_json_schema_with_descriptions():
    r = run("schema")
    schema = json.loads(r.stdout)
    assert schema["title"] == "clusterctl cluster spec"
    assert "pools" in schema["properties"]


def test_init_writes_a_valid_spec(tmp_path):
    out = tmp_path / "c.yaml"
    for preset in ("lab", "onprem-ib", "aws-spot", "hybrid"):
        r = run("init", "--preset", preset, "-o", out, "--name", "mine", "--force")
        assert r.returncode == 0, r.stderr
        assert run("validate", out).returncode == 0
        assert "name: mine" in out.read_text()
    r = run("init", "-o", out)
    assert r.returncode == 1 and "--force" in r.stderr


def test_help_lists_commands():
    r = run("--help")
    for cmd in ("init", "validate", "schema", "render", "plan"):
        assert cmd in r.stdout


def test_help_does_not_import_engines():
    code = ("import sys; sys.argv=['clusterctl','--help']\n"
            "try:\n    from clusterctl.cli import main; main()\nexcept SystemExit: pass\n"
            "heavy=[m for m in ('pulumi','pulumi_aws','boto3','ansible_runner','ansible','pydantic') if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert "HEAVY []" in r.stdout


def test_validate_does_not_import_engines():
    code = ("import sys; sys.argv=['clusterctl','validate', %r]\n"
            "try:\n    from clusterctl.cli import main; main()\nexcept SystemExit: pass\n"
            "heavy=[m for m in ('pulumi','pulumi_aws','boto3','ansible_runner','ansible') if m in sys.modules]\n"
            "print('HEAVY', heavy)") % str(example("hybrid-burst.yaml"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert "HEAVY []" in r.stdout


def test_cloud_confirmation_shows_the_preview_and_the_hourly_cost():
    """What `up` prints before asking to create aws resources: the Pulumi preview counts and the cluster's cost."""
    import io

    from rich.console import Console

    from clusterctl.cli import _confirm_cloud
    from clusterctl.engines.aws.automation import Preview
    from clusterctl.economics.cost import estimate_cost
    from clusterctl.render.compiled import Compiled
    from clusterctl.validate import load_valid

    spec = load_valid(example("aws-p5-spot.yaml"))
    buf = io.StringIO()
    out = Console(file=buf, width=200, force_terminal=False)
    assert _confirm_cloud(out, True, False, Compiled.of(spec))(Preview({"create": 52}, [])) is True
    text = buf.getvalue()
    hourly = estimate_cost(spec).total_hourly_usd
    assert "52" in text and "create" in text
    assert f"${hourly:,.2f}/hour" in text and hourly > 800  # 16 x p5.48xlarge
    buf.truncate(0)
    assert _confirm_cloud(out, False, False, Compiled.of(spec))(Preview({"create": 52}, [])) is False  # no terminal, no --yes
    assert "--yes" in buf.getvalue()
