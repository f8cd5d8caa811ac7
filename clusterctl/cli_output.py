"""How the CLI prints findings and errors: one line per finding, naming file, line, field and rule."""

from __future__ import annotations

import json

from clusterctl.findings import Finding, Level

STYLE = {Level.ERROR: "bold red", Level.WARNING: "yellow", Level.INFO: "cyan"}


def console(stderr: bool = False):
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


def findings_json(findings: list[Finding], filename: str | None) -> str:
    return json.dumps({"file": filename, "findings": [f.to_dict() for f in findings]}, indent=2) + "\n"
