"""`clusterctl burst ...`: the programs slurmctld runs for power saving, and the sync timer.

Wired into the main CLI as `app.add_typer(burst_app, name="burst")`; also runnable as `python -m clusterctl.engines.aws.burst`.
Exit codes: 0 done; 1 something failed (logged; Slurm only records the code, the nodes' reasons say what).
"""

from __future__ import annotations

import os
import sys
import logging
import time
from typing import TYPE_CHECKING, Callable, NoReturn

import typer

if TYPE_CHECKING:
    from clusterctl.engines.aws.burst.actions import Context
    from clusterctl.engines.aws.burst.settings import Settings

burst_app = typer.Typer(
    name="burst",
    help="Slurm power saving into elastic AWS pools (run by slurmctld on the controller; sync by a timer).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

@burst_app.callback()
def _std_fds() -> None:
    """Runs before every burst command, whichever entry point (clusterctl or python -m clusterctl.engines.aws.burst) started it."""
    ensure_std_fds()


NodesArg = typer.Argument(..., help="Slurm hostlist of nodes, e.g. cloud[001-004] (what slurmctld passes).")


def _run(action: str, fn: Callable[[Settings, logging.Logger], int | None]) -> None:
    """Settings from the env file, a logged run, errors as one line (and exit 1)."""
    from clusterctl.engines.aws.burst.runlog import run_logger
    from clusterctl.engines.aws.burst.settings import Settings, load_environment
    from clusterctl.core.errors import ClusterctlError

    env_file = load_environment()
    settings = Settings.from_env()
    log = run_logger(action, settings.log_file, stderr=bool(sys.stderr and sys.stderr.isatty()) or bool(os.environ.get("CLUSTERCTL_BURST_STDERR")))
    t0 = time.monotonic()
    code = 0
    try:
        log.info(f"start: {' '.join(sys.argv[1:])} (settings {env_file}, plan {settings.plan})")
        code = fn(settings, log) or 0
    except ClusterctlError as e:
        log.error(f"{type(e).__name__}: {e}")
        code = 1
    except Exception as e:
        if type(e).__module__.startswith("botocore"):  # endpoint unreachable, credentials, throttling: one line
            log.error(f"AWS: {type(e).__name__}: {e}")
        else:  # log what killed the run: slurmctld records only an exit status
            log.exception(f"unexpected {type(e).__name__}: {e}")
        code = 1
    _exit(log, t0, code)


def _exit(log: logging.Logger, t0: float, code: int) -> NoReturn:
    from clusterctl.engines.aws.burst.runlog import close

    log.info(f"done in {time.monotonic() - t0:.2f}s, exit {code}")
    close(log)
    raise typer.Exit(code)


def _context(settings: Settings, log: logging.Logger) -> Context:
    from clusterctl.engines.aws.burst.actions import Context

    return Context.create(settings, log)


@burst_app.command()
def resume(nodes: str = NodesArg) -> None:
    """ResumeProgram: launch the nodes' instances (all or nothing per job, AZ failover) and start their bootstrap."""

    def go(settings: Settings, log: logging.Logger) -> int | None:
        from clusterctl.engines.aws.burst import actions, bootstrap

        ctx = _context(settings, log)
        data = actions.read_resume_file(os.environ.get("SLURM_RESUME_FILE"))
        if data is not None:
            log.info(f"SLURM_RESUME_FILE: {data}")
        t0 = time.monotonic()
        report = actions.resume(ctx, nodes, data)
        log.info(f"resume latency {time.monotonic() - t0:.2f}s: {len(report.launched)} launched, "
                 f"{len(report.reused)} reused, {len(report.failed)} back to POWER_DOWN")
        ready = sorted(report.ready)
        if ready and settings.bootstrap == "detach":
            pid = bootstrap.spawn_detached(ready)
            log.info(f"bootstrap of {len(ready)} node(s) continues in pid {pid}")
        elif ready and settings.bootstrap == "inline":
            results = bootstrap.bootstrap_nodes(ctx, ready)
            return 0 if report.ok and not any(results.values()) else 1
        return 0 if report.ok else 1

    _run("resume", go)


@burst_app.command()
def suspend(nodes: str = NodesArg) -> None:
    """SuspendProgram: terminate the nodes' instances (by tag)."""

    def go(settings: Settings, log: logging.Logger) -> None:
        from clusterctl.engines.aws.burst import actions

        actions.suspend(_context(settings, log), nodes)

    _run("suspend", go)


@burst_app.command("resume-fail")
def resume_fail(nodes: str = NodesArg) -> None:
    """ResumeFailProgram: terminate, then back to POWER_DOWN with the reason (never a permanent DOWN)."""

    def go(settings: Settings, log: logging.Logger) -> None:
        from clusterctl.engines.aws.burst import actions

        actions.resume_fail(_context(settings, log), nodes)

    _run("resume-fail", go)


@burst_app.command()
def sync(dry_run: bool = typer.Option(False, "--dry-run", help="Log what would change; change nothing.")) -> None:
    """Reconcile Slurm with the cloud's tags: stray instances terminated, nodes whose instance vanished powered down,
    static spot nodes EC2 took back replaced (same name and address) and set up."""

    def go(settings: Settings, log: logging.Logger) -> None:
        from clusterctl.engines.aws.burst import actions, bootstrap

        ctx = _context(settings, log)
        report = actions.sync(ctx, dry_run=dry_run)
        # Inline, whatever BOOTSTRAP says for resume: sync runs as a oneshot systemd service, whose cgroup is
        # killed when it exits (a detached bootstrap would die with it); the timer waits for the run to end.
        if report.replaced and settings.bootstrap != "off":
            bootstrap.bootstrap_nodes(ctx, sorted(report.replaced))

    _run("sync", go)


@burst_app.command(hidden=True)
def bootstrap(nodes: str = NodesArg) -> None:
    """Set up launched instances as Slurm nodes (resume starts this detached)."""

    def go(settings: Settings, log: logging.Logger) -> int | None:
        from clusterctl.core import hostlist
        from clusterctl.engines.aws.burst.bootstrap import bootstrap_nodes

        results = bootstrap_nodes(_context(settings, log), hostlist.expand(nodes))
        return 1 if any(results.values()) else 0

    _run("bootstrap", go)


def ensure_std_fds() -> None:
    """slurmctld starts the power-saving programs with stdin/stdout/stderr closed: Python then has sys.stderr None
    (logging and typer would crash on it), and the next file or socket opened would become fd 0-2 and be inherited
    by ssh/scontrol as their stdio. Point any closed one at /dev/null first."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, mode, closefd=False))


def main() -> None:
    ensure_std_fds()
    burst_app(prog_name="clusterctl burst")
