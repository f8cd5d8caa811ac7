"""Every burst run leaves lines in one log on the controller (/var/log/clusterctl/burst.log): what Slurm asked,
what EC2 answered, what changed. slurmctld discards the programs' output, so the log is where an operator looks."""

from __future__ import annotations

import fcntl
import logging
import os
import sys
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def run_logger(action: str, log_file: Path, stderr: bool = True) -> logging.Logger:
    """A logger for this run: lines carry the action, pid and a short run id; the file is appended to."""
    run_id = uuid.uuid4().hex[:8]
    log = logging.getLogger(f"clusterctl.engines.aws.burst.{action}.{run_id}")
    log.setLevel(logging.INFO)
    log.propagate = False
    fmt = logging.Formatter(f"%(asctime)s %(levelname)s {action}[{os.getpid()}] run={run_id} %(message)s")
    try:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        fh = logging.FileHandler(log_file)
        fh.setFormatter(fmt)
        log.addHandler(fh)
    except OSError as e:
        print(f"clusterctl burst: cannot write {log_file} ({e}); logging to stderr only", file=sys.stderr)
        stderr = True
    if stderr:
        sh = logging.StreamHandler(sys.stderr)
        sh.setFormatter(fmt)
        log.addHandler(sh)
    log.run_id = run_id  # type: ignore[attr-defined]
    return log


def close(log: logging.Logger) -> None:
    for h in list(log.handlers):
        h.close()
        log.removeHandler(h)


@contextmanager
def locked(state_dir: Path, exclusive: bool) -> Iterator[None]:
    """Launch/terminate runs share the lock; sync takes it alone, so it never reconciles against a half-done launch."""
    state_dir.mkdir(parents=True, exist_ok=True)
    with open(state_dir / "lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
