from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path, monkeypatch):
    """No test reads or writes the user's real clusterctl state."""
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path / "state"))


def example(name: str) -> Path:
    return ROOT / "examples" / name

