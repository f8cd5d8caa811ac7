"""The `clusterctl` command. Heavy modules (pydantic models, engines) load inside commands so --help stays instant.

Exit codes: 0 success; 1 error (bad spec, failed apply, and usage errors: a pipeline must never read a mistyped flag
as 2); 2 `plan`/`drift`: changes pending.
"""

from __future__ import annotations

from rich.markup import escape

import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Protocol, TypeVar

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from clusterctl.core.findings import Finding
    from clusterctl.engines.aws.automation import Preview
    from clusterctl.render.compiled import Compiled
    from clusterctl.spec.cluster import ClusterSpec
    from clusterctl.validate import Loaded

_T = TypeVar("_T")

app = typer.Typer(
    name="clusterctl",
    help="Declarative GPU training clusters: one spec -> Slurm, Ansible and Pulumi.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)

_state = {"debug": False}

SpecArg = typer.Argument(..., help="Cluster spec (cluster.yaml).", exists=False, metavar="SPEC")
BreakLockOpt = typer.Option(
    None, "--break-lock", metavar="[ID]",
    help="Local state: clear what a killed run left in the lock file first (the lock itself is freed when a run ends; "
    "a running one is never displaced). s3 state: remove the lock with this ID (the one the refusal printed), once "
    "you know its run is gone; never done automatically.")


class Format(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


class Preset(str, Enum):
    lab = "lab"
    onprem_ib = "onprem-ib"
    aws_spot = "aws-spot"
    hybrid = "hybrid"


PRESET_FILES = {
    Preset.lab: "lab.yaml",
    Preset.onprem_ib: "onprem-64xh100-ib.yaml",
    Preset.aws_spot: "aws-p5-spot.yaml",
    Preset.hybrid: "hybrid-burst.yaml",
}


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"clusterctl {version('clusterctl')}")
        raise typer.Exit(0)


@app.callback()
def _main(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True, help="Print the version."),
) -> None:
    _state["debug"] = debug


def _load(spec: Path, fmt: Enum = Format.text) -> ClusterSpec:
    """Load and validate a spec. Findings go to stderr as text, or, for json/markdown output, into that document on
    stdout (a pipeline reading JSON sees why a spec was refused); raise SpecError on errors."""
    from clusterctl.cli.output import emit_findings, print_findings
    from clusterctl.core.errors import SpecError
    from clusterctl.validate import load_file

    loaded = load_file(spec)
    if fmt.value == "text":
        if loaded.findings:
            print_findings(loaded.findings, str(spec), stderr=True)
    elif not loaded.ok:
        emit_findings(fmt.value, loaded.findings, str(spec), _cluster_name(loaded))
    if not loaded.ok:
        raise SpecError(f"{spec}: {len(loaded.errors)} error(s) in the spec; nothing was changed", loaded.findings)
    assert loaded.spec is not None  # a spec without errors was parsed
    return loaded.spec


def _compile(spec: Path, fmt: Enum = Format.text) -> Compiled:
    """The command's one compile: spec -> plan -> build files, passed down to every step."""
    from clusterctl.render.compiled import Compiled

    return Compiled.of(_load(spec, fmt))


def _format_or_path(value: str, path_flag: str) -> tuple[str, Path | None]:
    """--output/-o is the format (text | json); before, it named a path here, which still works for one release."""
    if value in ("text", "json"):
        return value, None
    if value == "markdown":
        raise typer.BadParameter("markdown is not an output of this command: text or json", param_hint="'--output'")
    typer.echo(f"note: --output/-o PATH is deprecated here; use {path_flag} PATH (--output is the format now)", err=True)
    return "text", Path(value)


def _cluster_name(loaded: Loaded) -> str | None:
    return loaded.spec.name if loaded.spec is not None else None


def _legacy(value: _T, old: _T | None, old_flag: str, new_flag: str) -> _T:
    """An option's old spelling, kept hidden for one release: it still works, and says what replaces it."""
    if old is None:
        return value
    typer.echo(f"note: {old_flag} is deprecated here; use {new_flag}", err=True)
    return old


@app.command()
def init(
    preset: Preset = typer.Option(Preset.lab, "--preset", "-p", help="Starting point."),
    out: Path = typer.Option(Path("cluster.yaml"), "--out", help="Where to write the spec."),
    name: Optional[str] = typer.Option(None, "--name", help="Cluster name (default: the preset's)."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
    output: str = typer.Option("text", "--output", "-o", help="text or json."),
) -> None:
    """Write a starter spec from a named preset."""
    from clusterctl.cli.output import envelope
    from clusterctl.cli.presets import preset_text
    from clusterctl.core.errors import ClusterctlError

    fmt, old_path = _format_or_path(output, "--out")
    path = old_path or out
    if path.exists() and not force:
        raise ClusterctlError(f"{path} exists; pass --force to overwrite it")
    text = preset_text(PRESET_FILES[preset], name)
    path.write_text(text)
    if fmt == "json":
        from clusterctl.spec.loader import parse_yaml

        data, _ = parse_yaml(text)
        sys.stdout.write(envelope(str(data.get("name")), True, file=str(path), preset=preset.value))
    else:
        typer.echo(f"wrote {path} (preset {preset.value}); next: clusterctl validate {path}")


@app.command()
def validate(
    spec: Path = SpecArg,
    output: Format = typer.Option(Format.text, "--output", "-o", help="text, json or markdown (a PR comment)."),
    old_format: Optional[Format] = typer.Option(None, "--format", "-f", hidden=True),
) -> None:
    """Check a spec and print every problem (field path and YAML line). Exit 1 on any error."""
    from clusterctl.cli.output import emit_findings, print_findings
    from clusterctl.validate import load_file

    format = _legacy(output, old_format, "--format/-f", "--output/-o")
    loaded = load_file(spec)
    if format is not Format.text:
        emit_findings(format.value, loaded.findings, str(spec), _cluster_name(loaded), ok=loaded.ok)
    else:
        print_findings(loaded.findings, str(spec))
        errors = len(loaded.errors)
        warnings = sum(1 for f in loaded.findings if f.level.value == "warning")
        typer.echo(f"{spec}: {'invalid' if errors else 'valid'} ({errors} error(s), {warnings} warning(s))")
    raise typer.Exit(0 if loaded.ok else 1)


@app.command()
def schema(
    out: Optional[Path] = typer.Option(None, "--out", help="Write to a file instead of stdout."),
    old_output: Optional[Path] = typer.Option(None, "--output", "-o", hidden=True),
) -> None:
    """Print the JSON Schema of the spec (for editor autocompletion of cluster.yaml)."""
    from clusterctl.spec.schema import schema_json

    output = _legacy(out, old_output, "--output/-o", "--out")
    text = schema_json()
    if output:
        output.write_text(text)
    else:
        sys.stdout.write(text)


@app.command()
def render(
    spec: Path = SpecArg,
    dir: Path = typer.Option(Path("build"), "--dir", help="Build directory."),
    output: str = typer.Option("text", "--output", "-o", help="text or json."),
) -> None:
    """Render every config file the cluster runs on into a build directory (same spec, same bytes)."""
    from clusterctl.cli.output import envelope
    from clusterctl.render.write import write_build

    fmt, old_path = _format_or_path(output, "--dir")
    target = old_path or dir
    compiled = _compile(spec, Format(fmt))
    changed = write_build(compiled.files, target)
    if fmt == "json":
        sys.stdout.write(envelope(compiled.name, True, dir=str(target), files=sorted(compiled.files),
                                  changed=sorted(changed)))
    else:
        typer.echo(f"rendered {len(compiled.files)} files into {target} ({len(changed)} changed)")


@app.command()
def plan(
    spec: Path = SpecArg,
    output: Format = typer.Option(Format.text, "--output", "-o", help="text, json or markdown (a PR comment)."),
    old_format: Optional[Format] = typer.Option(None, "--format", "-f", hidden=True),
    against: Optional[Path] = typer.Option(
        None, "--against", help="Compare with this build directory instead of the last applied build."
    ),
    out: Optional[Path] = typer.Option(None, "--out", help="Also save the report as JSON (input of `apply --plan`)."),
    hosts: bool = typer.Option(False, "--hosts", help="Also run Ansible in check mode on the live hosts (per-host diff)."),
    cloud: bool = typer.Option(True, "--cloud/--no-cloud", help="Pulumi preview of the aws stack (specs with aws pools)."),
) -> None:
    """Show exactly what would change and what each change costs. Exit 0: no changes, 2: changes, 1: error."""
    from clusterctl.diff.formats import FORMATS, as_json
    from clusterctl.ops.apply import report_against
    from clusterctl.ops.plan_live import add_cloud, add_cost, add_hosts, add_images
    from clusterctl.state import Applied, ClusterState

    format = _legacy(output, old_format, "--format/-f", "--output/-o")
    compiled = _compile(spec, format)
    state = ClusterState.for_spec(compiled.spec)
    applied = Applied(_against_build(against, compiled.name), None) if against else state.applied()
    old = applied.files
    report = report_against(compiled.name, applied, compiled.files)
    add_cost(report, old, compiled)
    add_images(report, compiled, state)
    if cloud:
        add_cloud(report, compiled, state)
    if hosts:
        add_hosts(report, compiled, state)
    sys.stdout.write(FORMATS[format.value](report))
    if out:
        out.write_text(as_json(report))
    raise typer.Exit(2 if report.has_changes else 0)


def _against_build(path: Path, cluster: str) -> dict[str, str]:
    """A build directory to compare with: it must exist and be this cluster's, or the plan would show everything as
    new (exit 2) and read as a harmless create."""
    from clusterctl.core.errors import ClusterctlError
    from clusterctl.render.write import read_build

    if not path.is_dir():
        raise ClusterctlError(f"--against {path}: no such build directory")
    build = read_build(path)
    if not build:
        raise ClusterctlError(f"--against {path}: not a build directory (no rendered files; see `clusterctl render`)")
    owner = _build_cluster(build)
    if owner != cluster:
        raise ClusterctlError(f"--against {path}: a build of cluster {owner or '(unknown)'}, not {cluster}")
    return build


def _build_cluster(build: dict[str, str]) -> str | None:
    import json

    try:
        return json.loads(build.get("spec.json", "{}")).get("name")
    except ValueError:
        return None


ForceLeavingOpt = typer.Option(
    False, "--force", help="Nodes the spec drops: requeue the jobs still running on them instead of waiting (Slurm runs "
    "them again on other nodes; jobs that cannot be requeued are cancelled).")
DrainTimeoutOpt = typer.Option(
    None, "--drain-timeout", min=1, metavar="SECONDS",
    help="How long jobs on nodes the spec drops are waited for (default: scheduler.slurm.drain_timeout_seconds).")


class Output(str, Enum):
    text = "text"
    json = "json"


@app.command()
def up(
    spec: Path = SpecArg,
    output: Output = typer.Option(Output.text, "--output", "-o", help="json: no live view, one JSON report on stdout."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Make the previewed cloud changes without asking (pipelines)."),
    force: bool = ForceLeavingOpt,
    drain_timeout: Optional[int] = DrainTimeoutOpt,
    break_lock: Optional[str] = BreakLockOpt,
) -> None:
    """Bring the cluster to the spec: cloud resources (AWS: preflight, preview, confirm), then lab nodes or hosts
    converged with Ansible, then a smoke job.

    Safe to repeat: a second run repairs what an interrupted or failed one left. Exit 0 when the smoke job passed.
    Nodes the spec no longer has are drained first and removed only once their jobs ended (exit 1 naming the jobs
    when the drain timeout passes first; --force requeues them).
    """
    import json

    from clusterctl.ops.up import print_summary
    from clusterctl.ops.up import up as do_up
    from clusterctl.cli.output import console, print_findings

    compiled = _compile(spec, output)
    quiet = output is Output.json
    out = console(stderr=quiet)
    _maybe_break_lock(compiled.spec, break_lock, out)
    report, plan, access = do_up(compiled, out, quiet=quiet, confirm=_confirm_cloud(out, yes, quiet, compiled),
                                 on_findings=lambda fs: print_findings(fs, str(spec), stderr=True), force=force,
                                 drain_timeout=drain_timeout)
    if quiet:
        sys.stdout.write(json.dumps(report.to_dict(plan, access), indent=2) + "\n")
    else:
        print_summary(out, report, plan, access)
    raise typer.Exit(0 if report.ok else 1)


@app.command()
def down(
    spec: Path = SpecArg,
    force: bool = typer.Option(False, "--force", help="Go ahead even while jobs run (they are killed)."),
    break_lock: Optional[str] = BreakLockOpt,
    output: Output = typer.Option(Output.text, "--output", "-o"),
) -> None:
    """Take the cluster down: lab nodes removed completely; owned hosts drained and the daemons clusterctl started
    stopped (no data touched);
    aws: nodes drained, burst instances terminated, then exactly the cluster's Pulumi stack destroyed."""

    from clusterctl.ops.down import down as do_down
    from clusterctl.ops.phases import line as phases_line
    from clusterctl.cli.output import console, document

    compiled = _compile(spec, output)
    _maybe_break_lock(compiled.spec, break_lock, console(stderr=True))
    result = do_down(compiled, console(stderr=output is Output.json), force=force, quiet=output is Output.json)
    if output is Output.json:
        sys.stdout.write(document(compiled.name, True, result))
    else:
        typer.echo(f"cluster {compiled.name} is down")
        typer.echo(phases_line(result["phases"]))


@app.command()
def status(spec: Path = SpecArg, output: Output = typer.Option(Output.text, "--output", "-o")) -> None:
    """Nodes of the cluster and their Slurm state."""

    from clusterctl.ops.status import print_status
    from clusterctl.ops.status import status as do_status
    from clusterctl.cli.output import console, document

    info = do_status(_compile(spec, output))
    if output is Output.json:
        sys.stdout.write(document(info.get("cluster"), not info.get("controller_error"), info))
    else:
        print_status(console(), info)


@app.command()
def apply(
    spec: Path = SpecArg,
    plan_file: Optional[Path] = typer.Option(None, "--plan", help="The reviewed plan (`plan --out`): refused if stale."),
    allow_replace: bool = typer.Option(False, "--allow-replace", help="Allow changes that replace nodes or resources."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Make the previewed cloud changes without asking."),
    force: bool = ForceLeavingOpt,
    drain_timeout: Optional[int] = DrainTimeoutOpt,
    break_lock: Optional[str] = BreakLockOpt,
    output: Output = typer.Option(Output.text, "--output", "-o"),
) -> None:
    """Apply a spec change as planned: stale plans, forbidden changes and unallowed replacements are refused;
    drain changes roll out batch by batch. Exit 0 applied (or nothing to do), 1 refused or failed."""
    import json

    from clusterctl.ops.apply import apply as do_apply
    from clusterctl.ops.up import print_summary
    from clusterctl.cli.output import console, print_findings

    compiled = _compile(spec, output)
    quiet = output is Output.json
    out = console(stderr=quiet)
    _maybe_break_lock(compiled.spec, break_lock, out)
    report, up_report, plan, access = do_apply(
        compiled, out, plan_file=plan_file, allow_replace=allow_replace, quiet=quiet,
        confirm=_confirm_cloud(out, yes, quiet, compiled), on_findings=lambda fs: print_findings(fs, str(spec), stderr=True),
        force=force, drain_timeout=drain_timeout)
    if up_report is None:
        if quiet:
            sys.stdout.write(json.dumps({"cluster": compiled.name, "ok": True, "changes": False}) + "\n")
        else:
            typer.echo(f"cluster {compiled.name}: no changes")
        raise typer.Exit(0)
    assert plan is not None and access is not None  # apply returns them with its up report
    if quiet:
        sys.stdout.write(json.dumps({**up_report.to_dict(plan, access), "policy": report.policy}, indent=2) + "\n")
    else:
        for b in up_report.batches:
            health = "; ".join(f"{n} {v}" for n, v in b.get("health", {}).items())
            out.print(escape(f"batch {', '.join(b['nodes'])}: {b['why']}") + (f" [red]{escape(b['error'])}[/]" if b.get("error") else "")
                      + (escape(f" (health check: {health})") if health else ""))
        print_summary(out, up_report, plan, access)
    raise typer.Exit(0 if up_report.ok else 1)


@app.command()
def drift(spec: Path = SpecArg, output: Output = typer.Option(Output.text, "--output", "-o")) -> None:
    """Compare the live cluster with the last apply (Ansible check mode on every host; the cloud stack through
    Pulumi). Exit 0 no drift, 2 drift (names host and file), 1 could not tell."""

    from clusterctl.ops.drift import drift as do_drift
    from clusterctl.ops.drift import print_drift
    from clusterctl.cli.output import console, document

    compiled = _compile(spec, output)
    report = do_drift(compiled, console(stderr=True) if output is Output.text else None)
    if output is Output.json:
        sys.stdout.write(document(compiled.name, report["complete"] and not report["drift"], report))
    else:
        print_drift(console(), report)
    raise typer.Exit(2 if report["drift"] else 0 if report["complete"] else 1)


def _confirm_cloud(out: Console, yes: bool, quiet: bool, compiled: Compiled) -> Callable[[Preview], bool]:
    """After the Pulumi preview: show what it will do and what the cluster costs per hour, then ask (or --yes)."""
    def confirm(preview: Preview) -> bool:
        from clusterctl.engines.aws.progress import print_changes
        from clusterctl.economics.cost import estimate_cost

        print_changes(out, preview.changes)
        cost = estimate_cost(compiled.spec, compiled.plan)
        out.print(f"cost once up: ${cost.total_hourly_usd:,.2f}/hour, ${cost.total_monthly_usd:,.0f}/month"
                  + ("" if cost.complete else " (some pools could not be priced)") + "; details: `clusterctl cost`",
                  markup=False, highlight=False)
        if yes:
            return True
        if not out.is_terminal or quiet:
            out.print("not confirmed: pass --yes to make these changes without a terminal")
            return False
        return typer.confirm("make these AWS changes?")

    return confirm


def _maybe_break_lock(cluster: ClusterSpec, break_lock: str | None, out: Console) -> None:
    """break_lock: None (not given), "" (bare --break-lock) or a lock id."""
    if break_lock is None:
        return
    from clusterctl.state.lock import describe
    from clusterctl.state import ClusterState

    # Refuses (LockedError) while a live local run holds the lock, and for s3 without the lock's exact id.
    holder = ClusterState.for_spec(cluster).break_lock(break_lock or None)
    out.print(f"cleared the lock {holder.get('id')} left by {describe(holder)}, which is gone" if holder
              else "no lock was held", markup=False)


from clusterctl.cli.economics import register as _register_economics  # noqa: E402
from clusterctl.cli.check import register as _register_check  # noqa: E402
from clusterctl.cli.state import register as _register_state  # noqa: E402
from clusterctl.cli.image import register as _register_image  # noqa: E402

_register_check(app, _load)
_register_economics(app, _load)
_register_state(app, _load)
_register_image(app, _load)

# Slurm's power-saving programs; the module imports only typer until a burst command runs (boto3 stays lazy).
from clusterctl.engines.aws.burst.cli import burst_app  # noqa: E402

app.add_typer(burst_app, name="burst")


def main() -> None:
    """Entry point: run the app; print clusterctl errors without tracebacks (unless --debug)."""
    from clusterctl.core import interrupt
    from clusterctl.core.errors import ClusterctlError

    interrupt.install()  # SIGTERM and SIGHUP end the command as Ctrl-C does: cleanup runs, children are stopped
    try:
        # Without standalone mode click returns the code of typer.Exit instead of exiting.
        rc = app(args=_optional_lock_id(sys.argv[1:]), standalone_mode=False)
        sys.exit(rc if isinstance(rc, int) else 0)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except ClusterctlError as e:
        _fail(str(e), getattr(e, "findings", None), e.exit_code)
    except interrupt.Interrupted as e:
        _fail(f"interrupted by {e.name}; what was started was stopped. Run the command again: it continues from "
              "what is done", None, interrupt.EXIT_CODE)
    except KeyboardInterrupt:
        _fail("interrupted", None, interrupt.EXIT_CODE)
    except Exception as e:  # noqa: BLE001 - the last line of defence: no tracebacks for users
        usage, aborts = _cli_exception_types()
        if isinstance(e, usage):
            e.show()  # the parser's own message, with the usage line
            sys.exit(1)  # never click's 2: for plan and drift, 2 means "changes"
        if isinstance(e, aborts):
            _fail("aborted", None, 1)
        _fail(f"internal error: {type(e).__name__}: {e} (rerun with --debug for the traceback)", None, 1)


def _optional_lock_id(argv: list[str]) -> list[str]:
    """`--break-lock` alone or `--break-lock ID`: the parser has no options with an optional value, so a bare one
    becomes `--break-lock=` here. An ID is what the lock refusal prints: 32 hex digits (never a spec's path)."""
    import re

    out: list[str] = []
    for i, arg in enumerate(argv):
        if arg == "--":
            return out + argv[i:]
        nxt = argv[i + 1] if i + 1 < len(argv) else ""
        out.append("--break-lock=" if arg == "--break-lock" and not re.fullmatch(r"[0-9a-f]{32}", nxt) else arg)
    return out


class _UsageError(Protocol):
    def show(self) -> None: ...


def _cli_exception_types() -> tuple[tuple[type[_UsageError], ...], tuple[type, ...]]:
    """Usage-error and abort classes of the parser: typer's own (it ships its own click since 0.20) and, for older
    typer, click's."""
    usage: list[type[_UsageError]] = []
    aborts: list[type] = [typer.Abort]
    try:
        from typer._click.exceptions import ClickException as TyperClickException

        usage.append(TyperClickException)
    except ImportError:
        pass
    try:
        import click

        usage.append(click.exceptions.ClickException)
        aborts.append(click.exceptions.Abort)
    except ImportError:
        pass
    return tuple(usage), tuple(aborts)


def _fail(message: str, findings: list[Finding] | None, code: int) -> None:
    from clusterctl.cli.output import console

    if _state["debug"]:
        import traceback

        traceback.print_exc()
    console(stderr=True).print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    sys.exit(code)


if __name__ == "__main__":
    main()
