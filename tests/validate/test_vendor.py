"""Vendor rules: a component on a distro its vendor does not build for, unsigned repositories, the driver flavour,
the lab's distro. Each finding names the field to change."""

from __future__ import annotations

import pytest

from tests.helpers import edited, load_dict

ONPREM, AWS, LAB = "onprem-64xh100-ib.yaml", "aws-p5-spot.yaml", "lab.yaml"


def _findings(example, edit, code):
    loaded = load_dict(edited(example, edit))
    return [(f.level.value, f.path, f.message) for f in loaded.findings if f.code == code]


def _no_mirror(name):
    return lambda d: d["mirrors"].pop(name)


CASES = [
    # Whamcloud builds no Debian client: the pool that mounts Lustre, and the controller, are named.
    ("vendor-distro", ONPREM, lambda d: (d["mirrors"].pop("lustre"), d["pools"][0].update(os="debian12")),
     "pools[0].os", "lustre"),
    # Debian 12 ships Slurm 22.05: pinning 23.11 there needs a mirror.
    ("vendor-distro", ONPREM, lambda d: (d["mirrors"].pop("slurm"), d["controller"].update(os="debian12")),
     "software.slurm", "ships Slurm 22.05, not 23.11"),
    # Whamcloud's Ubuntu client directory has no confirmed signing key: only a signed mirror is accepted.
    ("repo-unsigned", ONPREM, _no_mirror("lustre"), "mirrors.lustre", "signing key"),
    ("repo-unsigned", ONPREM, lambda d: d["mirrors"]["cuda"].pop("key_url"), "mirrors.cuda.key_url", "unsigned"),
    ("driver-flavor", ONPREM, lambda d: (d["pools"][0].update(gpu="b200"), d["software"].update(nvidia_driver_flavor="proprietary")),
     "software.nvidia_driver_flavor", "only the open kernel modules"),
    ("driver-flavor", ONPREM, lambda d: d["software"].update(nvidia_driver="470.256.02"), "software.nvidia_driver", "no open kernel modules"),
    ("lab-os", LAB, lambda d: d["pools"][0].update(os="ubuntu2204"), "pools[0].os", "Debian 12"),
]


@pytest.mark.parametrize("code,example,edit,path,words", CASES, ids=[f"{c[0]}-{c[3]}" for c in CASES])
def test_rule_names_the_field(code, example, edit, path, words):
    found = _findings(example, edit, code)
    assert any(level == "error" and p == path and words in msg for level, p, msg in found), found


def test_proprietary_driver_is_allowed_on_hopper():
    assert _findings(ONPREM, lambda d: d["software"].update(nvidia_driver_flavor="proprietary"), "driver-flavor") == []


def test_lab_nodes_need_no_vendor_repository():
    # Lab nodes reach no vendor: without mirrors they install nothing from one, and nothing is reported.
    assert _findings(LAB, lambda d: d.setdefault("software", {}).update(slurm="23.11"), "vendor-distro") == []


def test_unconfirmed_row_is_a_warning_not_silence():
    # DOCA on Debian 12: the debian12.5 label was seen for 2.9, not confirmed for every release (the catalog's note).
    found = _findings(ONPREM, lambda d: (d["mirrors"].pop("doca"), d["pools"][0].update(os="debian12"),
                                         d["mirrors"].pop("lustre"), d["storage"].pop("shared", None)), "vendor-distro")
    assert [(lvl, p) for lvl, p, m in found if "DOCA" in m or "doca" in m] == [("warning", "pools[0].os")], found


def test_a_confirmed_row_says_nothing():
    assert _findings(ONPREM, _no_mirror("doca"), "vendor-distro") == []
