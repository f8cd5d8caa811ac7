"""Running host commands (argv lists only) and checking host processes without trusting stale pid files."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from clusterctl.engines.local.errors import LabError

# sudo/su without a login shell often drop the sbin directories, where ip, iptables and debootstrap live.
_EXTRA_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def which(tool: str) -> str | None:
    return shutil.which(tool, path=os.environ.get("PATH", "") + ":" + _EXTRA_PATH)


def host_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = env.get("PATH", "") + ":" + _EXTRA_PATH
    env.setdefault("LC_ALL", "C.UTF-8")
    env.update(extra)
    return env


def run(argv: list[str], *, what: str | None = None, check: bool = True, timeout: float | None = 300,
        input: str | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run argv; on failure raise LabError naming the step (`what`) with the command's stderr."""
    exe = which(argv[0]) or argv[0]
    try:
        cp = subprocess.run([exe, *argv[1:]], check=False, capture_output=True, text=True, timeout=timeout, input=input,
                            env=env or host_env(), stdin=None if input is not None else subprocess.DEVNULL)
    except FileNotFoundError:
        raise LabError(f"{what or argv[0]}: command not found: {argv[0]} (run `Lab.ensure_host_prereqs()` / "
                       f"`clusterctl lab prereqs`)") from None
    except subprocess.TimeoutExpired:
        raise LabError(f"{what or argv[0]}: timed out after {timeout:.0f}s: {' '.join(argv)}") from None
    if check and cp.returncode != 0:
        detail = (cp.stderr or cp.stdout).strip()[-2000:]
        raise LabError(f"{what or argv[0]} failed (exit {cp.returncode}): {' '.join(argv)}\n{detail}")
    return cp


def ok(argv: list[str], timeout: float | None = 60) -> bool:
    """True when argv exits 0; for idempotence probes (does this rule/link exist?)."""
    return run(argv, check=False, timeout=timeout).returncode == 0


# --- processes -----------------------------------------------------------------------------------

def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm is in parentheses and may contain spaces: fields start after the last ')'.
    return raw[raw.rindex(")") + 2:].split()


def start_time(pid: int) -> int | None:
    f = _stat_fields(pid)
    return int(f[19]) if f else None  # field 22 of stat; pid reuse changes it


def ppid(pid: int) -> int | None:
    f = _stat_fields(pid)
    return int(f[1]) if f else None


def alive(pid: int | None, started: int | None = None) -> bool:
    """A live (non-zombie) process; when `started` is given, the same process that wrote the pid file."""
    if not pid:
        return False
    f = _stat_fields(pid)
    if not f or f[0] in ("Z", "X"):
        return False
    return started is None or int(f[19]) == started


def write_pidfile(path: Path, pid: int) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"{pid} {start_time(pid) or 0}\n")
    tmp.replace(path)


def read_pidfile(path: Path) -> int | None:
    """The pid in path if that very process (same start time) is still alive, else None (stale file)."""
    try:
        pid_s, started_s = path.read_text().split()[:2]
        pid, started = int(pid_s), int(started_s)
    except (FileNotFoundError, ValueError):
        return None
    return pid if alive(pid, started) else None


def children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and ppid(int(entry)) == pid:
            out.append(int(entry))
    return out


def ns_pid(pid: int) -> list[int]:
    """The NSpid line: pid as seen in each nested pid namespace, outermost first."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return [int(x) for x in line.split()[1:]]
    except (FileNotFoundError, ProcessLookupError):
        pass
    return []


def comm(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except (FileNotFoundError, ProcessLookupError):
        return None


def signal(pid: int | None, sig: int) -> None:
    if pid:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
