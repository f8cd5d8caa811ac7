"""How the CLI prints findings and errors: one line per finding, naming file, line, field and rule."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from clusterctl.core.findings import Finding, Level

if TYPE_CHECKING:
    from rich.console import Console

    from clusterctl.spec.cluster import ClusterSpec


class SpecLoader(Protocol):
    """The CLI's spec loader (cli._load), handed to the commands registered from other modules."""

    def __call__(self, spec: Path, fmt: Enum = ...) -> ClusterSpec: ...

STYLE = {Level.ERROR: "bold red", Level.WARNING: "yellow", Level.INFO: "cyan"}


def console(stderr: bool = False) -> Console:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def finding_line(f: Finding, filename: str | None) -> str:
    path = f" {f.path}:" if f.path else ""
    return f"{f.location(filename)}: {f.level.value} [{f.code}]{path} {f.message}"


def print_findings(findings: list[Finding], filename: str | None, stderr: bool = False) -> None:
    from rich.markup import escape

    out = console(stderr)
    order = {Level.ERROR: 0, Level.WARNING: 1, Level.INFO: 2}
    for f in sorted(findings, key=lambda f: (order[f.level], f.line or 0)):
        out.print(f"[{STYLE[f.level]}]{escape(finding_line(f, filename))}[/]")


def envelope(cluster: str | None, ok: bool, **payload: Any) -> str:
    """Every command's JSON output: the same first keys, snake_case, then what the command adds."""
    return json.dumps({"cluster": cluster, "ok": ok, **payload}, indent=2) + "\n"


def document(cluster: str | None, ok: bool, data: dict) -> str:
    """A command's own result dict inside the envelope (its own cluster/ok keys give way to the envelope's)."""
    return envelope(cluster, ok, **{k: v for k, v in data.items() if k not in ("cluster", "ok")})


def findings_json(findings: list[Finding], filename: str | None, cluster: str | None = None,
                  ok: bool | None = None) -> str:
    ok = not any(f.level is Level.ERROR for f in findings) if ok is None else ok
    return envelope(cluster, ok, file=filename, findings=[f.to_dict() for f in findings])


def findings_markdown(findings: list[Finding], filename: str | None) -> str:
    """A table for a pull-request comment; `|` and line breaks in messages are escaped so a row stays a row."""
    if not findings:
        return f"`{filename}`: no findings\n"
    rows = ["| level | where | field | rule | message |", "|---|---|---|---|---|"]
    for f in findings:
        cells = [f.level.value, f.location(filename), f.path or "", f.code, f.message]
        rows.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(rows) + "\n"


def emit_findings(fmt: str, findings: list[Finding], filename: str | None, cluster: str | None,
                  ok: bool | None = None) -> None:
    """Findings as the document of a json or markdown output, on stdout."""
    import sys

    if fmt == "json":
        sys.stdout.write(findings_json(findings, filename, cluster, ok))
    else:
        sys.stdout.write(findings_markdown(findings, filename))
