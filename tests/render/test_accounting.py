"""Accounting renders slurmdbd.conf for the controller only when it runs slurmdbd, and never the database password."""

from __future__ import annotations

from clusterctl.render import layout, render_spec
from tests.helpers import edited, load_dict


def build_with(accounting: dict | None):
    def edit(d):
        if accounting is None:
            d["scheduler"]["slurm"].pop("accounting", None)
            d["scheduler"]["slurm"].pop("accounts", None)  # accounts need accounting
        else:
            d["scheduler"]["slurm"]["accounting"] = accounting

    loaded = load_dict(edited("onprem-64xh100-ib.yaml", edit))
    assert loaded.ok, loaded.findings
    plan, files = render_spec(loaded.spec)
    return plan, files


def test_controller_runs_slurmdbd():
    plan, files = build_with({"enabled": True})
    dbd = files[layout.SLURMDBD_CONF]
    assert f"DbdHost={plan.controller.name}" in dbd and "StorageType=accounting_storage/mysql" in dbd
    assert "StoragePass" not in dbd.replace("StoragePass is added", "")  # the password is added on the host
    assert f"AccountingStorageHost={plan.controller.name}" in files[layout.SLURM_CONF]
    assert "AccountingStorageEnforce" not in files[layout.SLURM_CONF]
    assert "clusterctl_slurmdbd: true" in files["ansible/group_vars/all.yml"]


def test_external_slurmdbd_gets_no_local_daemon():
    _, files = build_with({"enabled": True, "storage_host": "dbd.example.org"})
    assert layout.SLURMDBD_CONF not in files
    assert "AccountingStorageHost=dbd.example.org" in files[layout.SLURM_CONF]
    assert "clusterctl_slurmdbd: false" in files["ansible/group_vars/all.yml"]


def test_no_accounting():
    _, files = build_with(None)
    assert layout.SLURMDBD_CONF not in files
    assert "AccountingStorageType=accounting_storage/none" in files[layout.SLURM_CONF]
    assert "clusterctl_accounting: false" in files["ansible/group_vars/all.yml"]
