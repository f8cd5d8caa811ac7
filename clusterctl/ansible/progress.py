"""Progress while Ansible works: a live table of each host's current play and task (on a terminal), plain
lines otherwise; then a per-host recap and the failures with host, task and message."""

from __future__ import annotations

import time

from clusterctl.ansible.result import RunResult


class Progress:
    """Consumes ansible-runner events. Use as a context manager around the run."""

    def __init__(self, console, title: str, quiet: bool = False):
        self.console = console
        self.title = title
        self.quiet = quiet
        self.play = ""
        self.hosts: dict[str, dict] = {}
        self.live = None
        self._last = 0.0

    def __enter__(self):
        if not self.quiet and self.console.is_terminal:
            from rich.live import Live

            self.live = Live(self._table(), console=self.console, refresh_per_second=4, transient=True)
            self.live.__enter__()
        elif not self.quiet:
            self.console.print(f"{self.title} ...")
        return self

    def __exit__(self, *exc):
        if self.live is not None:
            self.live.__exit__(*exc)
        return False

    def event(self, event: dict) -> None:
        kind = event.get("event", "")
        data = event.get("event_data", {}) or {}
        host = data.get("host")
        if kind == "playbook_on_play_start":
            self.play = data.get("play", "")
            if self.live is None and not self.quiet:
                self.console.print(f"  play: {self.play}")
        elif kind == "runner_on_start" and host:
            self.hosts.setdefault(host, {"ok": 0, "changed": 0, "failed": 0})
            self.hosts[host].update(play=self.play, task=data.get("task", ""))
        elif kind in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable", "runner_on_skipped") and host:
            h = self.hosts.setdefault(host, {"ok": 0, "changed": 0, "failed": 0, "play": self.play, "task": ""})
            if kind == "runner_on_ok":
                h["ok"] += 1
                h["changed"] += 1 if (data.get("res") or {}).get("changed") else 0
            elif kind != "runner_on_skipped" and not data.get("ignore_errors"):
                h["failed"] += 1
                if self.live is None and not self.quiet:
                    self.console.print(f"  [red]failed[/] {host}: {data.get('task')}", highlight=False)
        if self.live is not None and time.monotonic() - self._last > 0.2:
            self._last = time.monotonic()
            self.live.update(self._table())

    def _table(self):
        from rich.table import Table

        t = Table(title=self.title, expand=False)
        for col in ("host", "play", "current task", "ok", "changed", "failed"):
            t.add_column(col)
        for host in sorted(self.hosts):
            h = self.hosts[host]
            t.add_row(host, h.get("play", ""), h.get("task", ""), str(h["ok"]), str(h["changed"]),
                      f"[red]{h['failed']}[/]" if h["failed"] else "0")
        return t


def print_recap(console, result: RunResult) -> None:
    from rich.table import Table

    t = Table(title="recap" + (" (check mode)" if result.check else ""))
    for col in ("host", "ok", "changed", "failed", "unreachable", "skipped"):
        t.add_column(col)
    for host, r in result.recap.items():
        t.add_row(host, str(r["ok"]), str(r["changed"]), str(r["failures"]), str(r["dark"]), str(r["skipped"]))
    console.print(t)
    for f in result.failures:
        kind = "unreachable" if f.unreachable else "failed"
        console.print(f"[red]{kind}[/] {f.host} | {f.task} | {f.message}", highlight=False)
