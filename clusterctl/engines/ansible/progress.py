"""Progress while Ansible works: a live table of each host's current play and task (on a terminal), plain
lines otherwise; then a per-host recap and the failures with host, task and message."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape

from clusterctl.engines.ansible.result import RunResult
from clusterctl.engines.liveview import LiveView

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


class Progress(LiveView):
    """Consumes ansible-runner events. Use as a context manager around the run."""

    def __init__(self, console: Console, title: str, quiet: bool = False) -> None:
        super().__init__(console, title, quiet)
        self.play = ""
        self.hosts: dict[str, dict] = {}

    def event(self, event: dict) -> None:
        kind = event.get("event", "")
        data = event.get("event_data", {}) or {}
        host = data.get("host")
        if kind == "playbook_on_play_start":
            self.play = data.get("play", "")
            self.say(f"  play: {self.play}")
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
                self.say(f"  [red]failed[/] {host}: {data.get('task')}")
        self.refresh()

    def _table(self) -> Table:
        from rich.table import Table

        t = Table(title=self.title, expand=False)
        for col in ("host", "play", "current task", "ok", "changed", "failed"):
            t.add_column(col)
        for host in sorted(self.hosts):
            h = self.hosts[host]
            t.add_row(host, h.get("play", ""), h.get("task", ""), str(h["ok"]), str(h["changed"]),
                      f"[red]{h['failed']}[/]" if h["failed"] else "0")
        return t


def print_recap(console: Console, result: RunResult) -> None:
    from rich.table import Table

    t = Table(title="recap" + (" (check mode)" if result.check else ""))
    for col in ("host", "ok", "changed", "failed", "unreachable", "skipped"):
        t.add_column(col)
    for host, r in result.recap.items():
        t.add_row(host, str(r["ok"]), str(r["changed"]), str(r["failures"]), str(r["dark"]), str(r["skipped"]))
    console.print(t)
    for f in result.failures:
        kind = "unreachable" if f.unreachable else "failed"
        console.print(f"[red]{kind}[/] " + escape(f"{f.host} | {f.task} | {f.message}"), highlight=False)
