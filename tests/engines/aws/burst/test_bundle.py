"""The burst bundle installs only REQUIREMENTS on the controller: the programs slurmctld runs must import with
nothing else (a module that imports PyYAML, Pulumi or Ansible at import time breaks every resume there)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from clusterctl.engines.aws.burst.bundle import REQUIREMENTS

# Installed here for `up`, absent on the controller; ruamel.yaml is in REQUIREMENTS, PyYAML is not.
ABSENT = ("yaml", "pulumi", "pulumi_aws", "ansible", "ansible_runner")


def test_burst_programs_import_with_the_bundle_requirements_only():
    assert "pyyaml" not in {r.lower() for r in REQUIREMENTS}
    code = textwrap.dedent(f"""
        import importlib.abc, sys
        class Absent(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {ABSENT!r}:
                    raise ModuleNotFoundError(f"No module named {{name!r}}")
        sys.meta_path.insert(0, Absent())
        from clusterctl.engines.aws.burst import actions, bootstrap, cli, teardown  # what resume/suspend/sync run
        from clusterctl.engines.aws.burst.plan import BurstPlan
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
