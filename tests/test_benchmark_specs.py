"""The benchmarks' generated specs stay valid as validation grows stricter: a benchmark that cannot load its own spec
prints no figure (plan_scale.py's specs stopped validating once Lustre on Debian needed mirrors.lustre, unnoticed
until it was run)."""

from __future__ import annotations

import importlib.util

import yaml

from clusterctl.validate import load_text
from tests.conftest import ROOT


def _benchmark(name: str):
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_plan_scale_specs_and_their_edits_validate():
    ps = _benchmark("plan_scale")
    data = ps.spec_dict(64)
    for name, d in {"base": data, **ps.edits(data)}.items():
        loaded = load_text(yaml.safe_dump(d))
        assert loaded.ok, (name, [f.message for f in loaded.errors][:3])


def test_converge_lab_specs_validate(tmp_path):
    cv = _benchmark("converge")
    for nodes in (3, 8, 16):
        loaded = load_text(cv.lab_spec(ROOT, nodes, tmp_path).read_text())
        assert loaded.ok, (nodes, [f.message for f in loaded.errors][:3])
