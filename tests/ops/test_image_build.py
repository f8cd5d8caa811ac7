"""`clusterctl image build` refuses, by name, what it cannot build, before anything boots."""

from __future__ import annotations

import pytest

from clusterctl.ops.image import ImageError, chosen_pools
from clusterctl.render.compiled import Compiled
from tests.helpers import clusterctl, spec_of


def test_pools_are_chosen_by_name_and_only_lab_pools_are_built():
    lab = Compiled.of(spec_of("lab.yaml"))
    assert chosen_pools(lab, []) == ["gpu"] == chosen_pools(lab, ["gpu"])
    with pytest.raises(ImageError, match="--pool nope: no such pool in cluster lab"):
        chosen_pools(lab, ["nope"])
    aws = Compiled.of(spec_of("aws-p5-spot.yaml"))
    with pytest.raises(ImageError, match="no lab pool"):
        chosen_pools(aws, [])
    with pytest.raises(ImageError, match="--pool p5: .* lab pools"):
        chosen_pools(aws, ["p5"])


def test_the_cli_says_why_without_a_traceback(tmp_path):
    from tests.conftest import example

    r = clusterctl("image", "build", example("aws-p5-spot.yaml"), "--pool", "p5", check=False,
                   env={"CLUSTERCTL_STATE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 1 and "lab pools" in r.stderr and "Traceback" not in r.stderr
