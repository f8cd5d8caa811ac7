"""Progress while Pulumi works: a live table of resources being created/updated/deleted (on a terminal), plain
lines otherwise; errors from the engine printed as they come. The Pulumi counterpart of ansible/progress.py,
fed with pulumi.automation EngineEvents (`on_event=progress.event`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape

from clusterctl.engines.liveview import LiveView

if TYPE_CHECKING:
    from pulumi import automation as auto
    from rich.console import Console
    from rich.table import Table

SKIP_OPS = ("same", "read", "refresh")  # nothing happens to these; listing 50 unchanged resources helps nobody


def _op(md: auto.StepEventMetadata) -> str:
    return str(getattr(md.op, "value", md.op))


def _short(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


class PulumiProgress(LiveView):
    """Consumes Pulumi engine events. Use as a context manager around preview/up/destroy/refresh."""

    def __init__(self, console: Console, title: str, quiet: bool = False) -> None:
        super().__init__(console, title, quiet)
        self.resources: dict[str, dict] = {}  # urn -> {type, name, op, status}
        self.errors: list[str] = []
        self.summary: dict[str, int] | None = None

    def event(self, ev: auto.EngineEvent) -> None:
        if (pre := getattr(ev, "resource_pre_event", None)) is not None:
            md = pre.metadata
            if _op(md) not in SKIP_OPS and not md.type.startswith("pulumi:"):
                self.resources[md.urn] = {"type": md.type, "name": _short(md.urn), "op": _op(md),
                                          "status": "planned" if pre.planning else "running"}
                self.say(f"  {_op(md):>8} {md.type} {_short(md.urn)}")
        elif (out := getattr(ev, "res_outputs_event", None)) is not None:
            r = self.resources.get(out.metadata.urn)
            if r is not None:
                r["status"] = "planned" if out.planning else "done"
        elif (failed := getattr(ev, "res_op_failed_event", None)) is not None:
            r = self.resources.get(failed.metadata.urn)
            if r is not None:
                r["status"] = "failed"
        elif (diag := getattr(ev, "diagnostic_event", None)) is not None:
            if diag.severity == "error" and not diag.ephemeral:
                msg = diag.message.strip()
                self.errors.append(msg)
                if not self.quiet:
                    where = f" {_short(diag.urn)}" if diag.urn else ""
                    self.console.print(f"  [red]error[/]{escape(where)}: {escape(msg)}", highlight=False)
        elif (summary := getattr(ev, "summary_event", None)) is not None:
            self.summary = {str(k): int(v) for k, v in (summary.resource_changes or {}).items()}
        self.refresh()

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.resources.values():
            out[r["status"]] = out.get(r["status"], 0) + 1
        return out

    def _table(self) -> Table:
        from rich.table import Table

        t = Table(title=self.title, expand=False)
        for col in ("resource", "type", "op", "status"):
            t.add_column(col)
        colours = {"done": "green", "failed": "red", "running": "yellow"}
        for r in sorted(self.resources.values(), key=lambda r: (r["status"] != "running", r["type"], r["name"])):
            c = colours.get(r["status"])
            t.add_row(r["name"], r["type"], r["op"], f"[{c}]{r['status']}[/]" if c else r["status"])
        return t


def print_changes(console: Console, changes: dict[str, int], title: str = "cloud changes") -> None:
    """One line: what the preview (or the run) changes, e.g. `create 52, update 1`."""
    parts = [f"{op} {n}" for op, n in sorted(changes.items()) if n and op != "same"]
    console.print(f"{title}: {', '.join(parts) if parts else 'none'}", highlight=False)
