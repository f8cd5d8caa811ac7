"""The pipeline examples in examples/ci call commands and options clusterctl really has (parsed by its own CLI, not run),
plan on pull requests, and apply on main the saved plan file rather than a fresh one."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import typer.main
import yaml

from clusterctl.cli import app

CI = Path(__file__).resolve().parents[2] / "examples" / "ci"


def commands(doc) -> list[str]:
    """Every shell line in a workflow that runs clusterctl, from GitHub `run:` steps or GitLab `script:` lists."""
    found = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key in ("run", "script") and isinstance(value, (str, list)):
                lines = [value] if isinstance(value, str) else value
                found += [line for line in lines if line.strip().startswith("clusterctl ")]
            else:
                found += commands(value)
    elif isinstance(doc, list):
        for item in doc:
            found += commands(item)
    return found


def argv(line: str) -> list[str]:
    """The clusterctl arguments of a shell line, without redirections and `|| ...` tails."""
    words = []
    for word in shlex.split(line.split("||")[0])[1:]:
        if word.startswith((">", "<")):
            break
        words.append(word)
    return words


@pytest.mark.parametrize("name", ["github-actions.yml", "gitlab-ci.yml"])
def test_pipeline_commands_parse(name):
    doc = yaml.safe_load((CI / name).read_text())
    lines = commands(doc)
    group = typer.main.get_command(app)
    used = set()
    for line in lines:
        args = argv(line)
        sub = group.get_command(group.context_class(group), args[0])
        assert sub is not None, f"{name}: unknown command in {line!r}"
        sub.make_context(args[0], args[1:])  # raises on an unknown option or a bad value
        used.add(args[0])
    assert {"validate", "plan", "apply", "drift"} <= used, used
    plans = [argv(line) for line in lines if argv(line)[0] == "plan"]
    assert any("markdown" in a for a in plans), "pull requests get the markdown plan"
    applies = [argv(line) for line in lines if argv(line)[0] == "apply"]
    assert applies and all("--plan" in a and "--allow-replace" not in a for a in applies)


@pytest.mark.parametrize("name", ["github-actions.yml", "gitlab-ci.yml"])
def test_pull_request_job_has_no_cluster_access(name):
    """The job that plans a pull request touches no live host and no cloud API: it plans against a build artifact."""
    doc = yaml.safe_load((CI / name).read_text())
    pr_job = doc["jobs"]["plan"] if "jobs" in doc else doc["plan"]
    plans = [argv(line) for line in commands(pr_job) if argv(line)[0] == "plan"]
    assert plans and all("--hosts" not in a and "--no-cloud" in a and "--against" in a for a in plans), plans
    text = yaml.safe_dump(pr_job)
    assert "CLUSTERCTL_STATE_DIR" not in text and "clusterctl]" not in text and "self-hosted" not in text
    assert not [argv(line) for line in commands(pr_job) if argv(line)[0] in ("apply", "up", "down", "drift")]
