"""A spec value holding a line break (or NUL) could add a line of its own to slurm.conf, hosts, fstab or an env file
(`AuthType=auth/none`, another NodeName): rendering refuses it, names the file and the value, and writes nothing."""

from __future__ import annotations

import sys
from dataclasses import replace

import pytest

from clusterctl.core.errors import RenderError
from clusterctl.render.monitoring import render_monitoring
from clusterctl.render import render_plan
from clusterctl.render.cloud_files import render_cloud
from clusterctl.render.node_files import render_node_files
from tests.conftest import example
from tests.render.untrusted import SITES, hybrid

with_addresses, _ = SITES["address"]

# Every separator str.splitlines() knows, and NUL.
BREAKS = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\x00"]


def shown(value: str, msg: str) -> bool:
    """The message shows the value escaped (within the line or value it was part of)."""
    return repr(value)[1:-1] in msg


def refused(render, *args) -> str:
    with pytest.raises(RenderError) as e:
        render(*args)
    return str(e.value)


@pytest.mark.parametrize("site", SITES)
def test_line_break_in_any_spec_string_is_refused(site):
    edit, path = SITES[site]
    spec, plan = hybrid()
    value = "x\nAuthType=auth/none"
    msg = refused(render_plan, edit(plan, value), spec)
    assert msg.startswith(path) and shown(value, msg), msg


@pytest.mark.parametrize("brk", BREAKS, ids=repr)
def test_every_line_separator_is_refused(brk):
    spec, plan = hybrid()
    value = f"10.0.0.1{brk}NodeName=evil"
    msg = refused(render_plan, with_addresses(plan, value), spec)
    assert msg.startswith("slurm/slurm.conf") and shown(value, msg), msg


@pytest.mark.parametrize("brk", ["\n", "\u2028", "\x00"], ids=repr)
def test_files_built_in_python_refuse_line_breaks(brk):
    _, plan = hybrid()
    value = f"10.0.0.1{brk}evil"
    assert "common/hosts" in refused(render_node_files, with_addresses(plan, value))
    edit, _ = SITES["nccl.extra_env"]
    assert "nccl/owned.env" in refused(render_node_files, edit(plan, f"ib0{brk}LD_PRELOAD=/tmp/evil.so"))


def test_monitoring_and_cloud_init_templates_refuse_line_breaks():
    _, plan = hybrid()
    evil = with_addresses(plan, "10.20.0.2\n- targets: [evil]")
    assert "monitoring/prometheus.yml.j2" in refused(render_monitoring, evil)
    assert "cloud-init/user-data.yaml.j2" in refused(render_cloud, evil)


def test_render_that_fails_writes_nothing(tmp_path, monkeypatch, capsys):
    """`clusterctl render` renders every file in memory first: a refused value leaves the build directory as it was."""
    from clusterctl import cli
    from clusterctl.render import compile_plan as real_compile

    out = tmp_path / "build"
    monkeypatch.setattr(sys, "argv", ["clusterctl", "render", str(example("hybrid-burst.yaml")), "-o", str(out)])

    def render_with(site: str | None, text: str = "") -> int:
        edit = SITES[site][0] if site else (lambda plan, _: plan)
        monkeypatch.setattr("clusterctl.render.compiled.compile_plan", lambda spec, facts=None: edit(real_compile(spec, facts), text))
        with pytest.raises(SystemExit) as e:
            cli.main()
        return e.value.code

    def files() -> dict:
        return {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}

    assert render_with("accounting.storage_host", "db\nAuthType=auth/none") == 1
    assert "slurm/slurm.conf" in capsys.readouterr().err
    assert not out.exists()

    assert render_with(None) == 0
    before = files()
    # The nccl env files are rendered after slurm/ and ansible/: those were in memory only.
    assert render_with("nccl.extra_env", "ib0\nLD_PRELOAD=/tmp/evil.so") == 1
    assert "nccl/owned.env" in capsys.readouterr().err
    assert files() == before


def test_values_without_line_breaks_render_as_before():
    _, plan = hybrid()
    ok = replace(plan, slurm=replace(plan.slurm, accounting=True, accounting_host="dbd.example.org"))
    assert "AccountingStorageHost=dbd.example.org\n" in render_plan(ok, hybrid()[0])["slurm/slurm.conf"]
