"""Hostile specs (tests/spec/hostile.py) are refused the way a user must see it: exit 1, the field (or the YAML
line) named, no traceback, nothing written, and quickly (the CPU time of the whole `clusterctl render` process)."""

from __future__ import annotations

import os
import resource

import pytest

from clusterctl.validate import load_text
from tests.helpers import clusterctl
from tests.spec.hostile import big_file_text, corpus

CASES = corpus()
CPU_SECONDS_BOUND = 2.0  # the bound for one refusal, process start included


def test_corpus_is_large_enough():
    assert len(CASES) >= 60


def _cpu_of_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _render(spec_file, out_dir, env):
    before = _cpu_of_children()
    r = clusterctl("render", spec_file, "--dir", out_dir, env=env, check=False, timeout=60)
    return r, _cpu_of_children() - before


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_spec_is_refused_naming_the_field(case, tmp_path):
    spec = tmp_path / "cluster.yaml"
    spec.write_text(case.text, encoding="utf-8")
    out = tmp_path / "build"
    state = tmp_path / "state"
    r, cpu = _render(spec, out, dict(os.environ, CLUSTERCTL_STATE_DIR=str(state)))
    said = r.stdout + r.stderr
    assert r.returncode == 1, said
    assert "Traceback" not in said and "internal error" not in said, said
    named = [line for line in r.stderr.splitlines() if ": error [" in line]
    assert named, said
    if case.names.startswith("line"):
        assert any(f"cluster.yaml:{case.names.split()[1]}:" in line for line in named) if " " in case.names \
            else any(line.startswith(f"{spec}:") and line.split(":")[1].isdigit() for line in named), said
    else:
        assert any(f" {case.names}:" in line for line in named), said
    assert not out.exists() and not state.exists(), "nothing may be written for a refused spec"
    assert cpu < CPU_SECONDS_BOUND, f"{cpu:.2f} s of CPU to refuse it"


@pytest.mark.parametrize("megabytes", [2, 50])
def test_oversized_file_is_refused_unread(megabytes, tmp_path):
    spec = tmp_path / "cluster.yaml"
    spec.write_text(big_file_text(megabytes))
    r, cpu = _render(spec, tmp_path / "build", dict(os.environ, CLUSTERCTL_STATE_DIR=str(tmp_path / "state")))
    assert r.returncode == 1 and "at most 1,048,576" in r.stderr, r.stderr
    assert not (tmp_path / "build").exists()
    assert cpu < CPU_SECONDS_BOUND


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_validate_in_process_reports_an_error(case):
    loaded = load_text(case.text, "cluster.yaml")
    assert not loaded.ok and loaded.errors
