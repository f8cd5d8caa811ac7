"""The real TaskProlog script: NCCL values the job set win, LD_LIBRARY_PATH is prepended to, never replaced."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROLOG = ROOT / "playbooks" / "roles" / "slurm_node" / "files" / "task-prolog.sh"


def run_prolog(tmp_path: Path, env_text: str, job_env: dict[str, str]) -> list[str]:
    env_file = tmp_path / "nccl.env"
    env_file.write_text(env_text)
    script = tmp_path / "prolog.sh"
    script.write_text(PROLOG.read_text().replace("/etc/clusterctl/nccl.env", str(env_file)))
    out = subprocess.run(["sh", str(script)], env={"PATH": "/usr/bin:/bin", **job_env},
                         capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


ENV = "# comment\nNCCL_DEBUG=WARN\nLD_LIBRARY_PATH=/opt/amazon/ofi-nccl/lib:/opt/amazon/efa/lib\nFI_PROVIDER=efa\n"


def test_prepends_library_path_to_the_jobs_own(tmp_path: Path) -> None:
    lines = run_prolog(tmp_path, ENV, {"LD_LIBRARY_PATH": "/usr/local/cuda/lib64", "NCCL_DEBUG": "INFO"})
    assert "export LD_LIBRARY_PATH=/opt/amazon/ofi-nccl/lib:/opt/amazon/efa/lib:/usr/local/cuda/lib64" in lines
    assert "export FI_PROVIDER=efa" in lines
    assert not any(line.startswith("export NCCL_DEBUG=") for line in lines)  # the job's own value wins


def test_library_path_alone_when_the_job_has_none_and_not_twice(tmp_path: Path) -> None:
    assert "export LD_LIBRARY_PATH=/opt/amazon/ofi-nccl/lib:/opt/amazon/efa/lib" in run_prolog(tmp_path, ENV, {})
    again = run_prolog(tmp_path, ENV, {"LD_LIBRARY_PATH": "/opt/amazon/ofi-nccl/lib:/opt/amazon/efa/lib:/x"})
    assert not any(line.startswith("export LD_LIBRARY_PATH") for line in again)
