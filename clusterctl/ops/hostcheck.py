"""Ansible in check mode with diff against the live hosts: what converging a build would change, per host and
file, without changing anything. `plan --hosts` runs it with the new build, `drift` with the last applied one."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from clusterctl.engines.ansible.progress import Progress
from clusterctl.engines.ansible.runner import PlaybookRun, run_playbook
from clusterctl.state.secrets import playbook_vars

if TYPE_CHECKING:
    from rich.console import Console

    from clusterctl.ops.access import Access


def _files(res: dict) -> list[str]:
    """Paths a changed task touches, from its diff headers (copy/template/lineinfile) or its result. A loop task
    reports its items under `results`: only the items that changed count."""
    if isinstance(res.get("results"), list):
        out: list[str] = []
        for item in res["results"]:
            if isinstance(item, dict) and item.get("changed"):
                out += [f for f in _files(item) if f not in out]
        return out
    diffs = res.get("diff") or []
    if isinstance(diffs, dict):
        diffs = [diffs]
    out = []
    for d in diffs:
        if isinstance(d, dict):
            for key in ("before_header", "after_header"):
                h = d.get(key)
                if isinstance(h, str) and h.startswith("/") and h not in out:
                    out.append(h)
                    break
    for key in ("dest", "path"):
        if not out and isinstance(res.get(key), str):
            out.append(res[key])
    return out


def check_hosts(build_dir: Path, access: Access, munge_key: Path, console: Console | None = None, quiet: bool = True) -> dict:
    by_host: dict[str, dict] = {}

    def record(event: dict) -> None:
        data = event.get("event_data", {}) or {}
        res = data.get("res") or {}
        if event.get("event") == "runner_on_ok" and res.get("changed"):
            by_host.setdefault(data.get("host", "?"), {"changes": []})["changes"].append(
                {"task": data.get("task", "?"), "role": data.get("role"), "files": _files(res)})

    run = PlaybookRun(build_dir=build_dir, extravars=playbook_vars(munge_key), ssh=access.ssh,
                      check=True, diff=True)
    if console is not None:
        with Progress(console, "checking hosts (check mode)", quiet=quiet) as progress:
            def both(ev: dict) -> None:
                progress.event(ev)
                record(ev)
            result = run_playbook(run, both)
    else:
        result = run_playbook(run, record)
    for host in result.recap:
        by_host.setdefault(host, {"changes": []})
    return {"ok": not result.failures, "by_host": dict(sorted(by_host.items())),
            "failures": [vars(f) for f in result.failures]}
