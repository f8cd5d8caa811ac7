"""tests/ mirrors clusterctl/: a test module sits in the folder of the package part it tests (tests/render/ for
clusterctl/render/, tests/engines/aws/ for clusterctl/engines/aws/), or in one of the named extra folders below. The
helpers every test shares (the CLI runner, spec_of, plan_of, the root check) are defined once, in tests/helpers.py (or a
conftest.py), never copied into a test module."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

TESTS = ROOT / "tests"
PACKAGE = ROOT / "clusterctl"

# Folders of tests/ that mirror no package part, and why they exist.
EXTRA = {
    "integration": "real engines: lab nodes (systemd-nspawn), real SSH, Ansible and Slurm",
    "scale": "Debian's Slurm at 1,024 emulated nodes on 127.0.0.1",
    "playbooks": "playbooks/ (a top-level part of the product) and the programs its roles install",
    "fixtures": "public hardware outputs shared by tests, each folder with its SOURCES.md",
    "standins": "stand-in vendor tools (nvidia-smi, dmesg, all_reduce_perf) the lab nodes run, and the stand-in vendor "
                "apt repository they install from",
    "golden": "golden files of the rendered build",
}
# Modules at the top of tests/: checks of the whole package, and the shared support code.
TOP_LEVEL = {
    "test_layers.py": "import graph of the whole package",
    "test_layout.py": "this file: the layout of tests/",
    "test_packaging.py": "the wheel carries every data directory the package uses",
    "test_benchmark_specs.py": "the specs benchmarks/ generates validate (benchmarks/ is a top-level part, like playbooks/)",
    "helpers.py": "the shared helpers",
    "conftest.py": "shared fixtures",
    "motoserver.py": "the moto server the aws and state tests share",
}
SHARED_HELPERS = ("clusterctl", "plan_of", "spec_of")
HELPER_HOMES = ("helpers.py", "conftest.py")


def misplaced(tests: Path, package: Path) -> list[str]:
    """Python files of tests/ outside a folder that mirrors the package or is a named extra, with the reason."""
    found = []
    for py in sorted(tests.rglob("*.py")):
        rel = py.relative_to(tests)
        if "__pycache__" in rel.parts:
            continue
        if len(rel.parts) == 1:
            if rel.name not in TOP_LEVEL:
                found.append(f"tests/{rel}: a module at the top of tests/; move it to the folder of what it tests")
        elif rel.parts[0] not in EXTRA and not (package / Path(*rel.parts[:-1])).is_dir():
            found.append(f"tests/{rel}: clusterctl/{Path(*rel.parts[:-1])}/ does not exist and "
                         f"{rel.parts[0]!r} is not an extra folder of tests/")
    return found


def _runs_the_cli_itself(node: ast.AST) -> bool:
    """A list or tuple literal holding "-m", "clusterctl" next to each other: a second CLI runner."""
    if not isinstance(node, ast.List | ast.Tuple):
        return False
    values = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
    return any(a == "-m" and b == "clusterctl" for a, b in zip(values, values[1:], strict=False))


def copied_helpers(tests: Path) -> list[str]:
    """Definitions of the shared helpers outside their home, own CLI runners and own root checks, with file:line."""
    found = []
    for py in sorted(tests.rglob("*.py")):
        if "__pycache__" in py.parts or (py.name in HELPER_HOMES and py.parent == tests) or py.name == "conftest.py":
            continue
        where = py.relative_to(tests.parent)
        here: list[tuple[int, str]] = []
        for node in ast.walk(ast.parse(py.read_text(), str(py))):
            line = getattr(node, "lineno", 0)
            names: list[str] = []
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            elif isinstance(node, ast.ImportFrom) and node.module != "tests.helpers":
                names = [a.asname or a.name for a in node.names]
            here += [(line, f"defines {n}(); use tests.helpers.{n}") for n in names if n in SHARED_HELPERS]
            if _runs_the_cli_itself(node):
                here.append((line, "runs `python -m clusterctl` itself; use tests.helpers.clusterctl (or CLI)"))
            if isinstance(node, ast.Attribute) and node.attr in ("geteuid", "getuid"):
                here.append((line, "checks for root itself; use tests.helpers.needs_root()"))
        found += [f"{where}:{line}: {what}" for line, what in sorted(here)]
    return found


def test_tests_mirror_the_package():
    assert misplaced(TESTS, PACKAGE) == []


def test_shared_helpers_are_defined_once():
    assert copied_helpers(TESTS) == []


def test_each_fixture_folder_cites_its_sources():
    folders = [d for d in sorted((TESTS / "fixtures").iterdir()) if d.is_dir()]
    assert folders
    assert [d.name for d in folders if not (d / "SOURCES.md").is_file()] == []


def test_the_checks_catch_what_they_are_for(tmp_path):
    """The two checks above on a tree made to break every rule once (and to keep each allowance once)."""
    package, tests = tmp_path / "clusterctl", tmp_path / "tests"
    for d in (package / "render", tests / "render", tests / "monitoring", tests / "integration"):
        d.mkdir(parents=True)
    files = {
        "helpers.py": "def clusterctl(*a): ...\ndef plan_of(s): ...\nimport os\nos.geteuid()\n",  # the home: allowed
        "test_stray.py": "",
        "render/test_ok.py": "from tests.helpers import clusterctl, plan_of\n",
        "monitoring/test_render.py": "def plan_of(path):\n    return path\n",
        "integration/test_lab.py": (
            "import os, subprocess, sys\n"
            "from clusterctl.validate import load_valid as spec_of\n"
            "def clusterctl(*args):\n    return subprocess.run([sys.executable, '-m', 'clusterctl', *args])\n"
            "skip = os.geteuid() != 0\n"
            "burst = [sys.executable, '-m', 'clusterctl.engines.aws.burst']\n"),
    }
    for name, text in files.items():
        (tests / name).write_text(text)
    assert misplaced(tests, package) == [
        "tests/monitoring/test_render.py: clusterctl/monitoring/ does not exist and 'monitoring' is not an extra "
        "folder of tests/",
        "tests/test_stray.py: a module at the top of tests/; move it to the folder of what it tests"]
    assert copied_helpers(tests) == [
        "tests/integration/test_lab.py:2: defines spec_of(); use tests.helpers.spec_of",
        "tests/integration/test_lab.py:3: defines clusterctl(); use tests.helpers.clusterctl",
        "tests/integration/test_lab.py:4: runs `python -m clusterctl` itself; use tests.helpers.clusterctl (or CLI)",
        "tests/integration/test_lab.py:5: checks for root itself; use tests.helpers.needs_root()",
        "tests/monitoring/test_render.py:1: defines plan_of(); use tests.helpers.plan_of"]
