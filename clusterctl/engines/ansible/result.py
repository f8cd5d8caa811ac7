"""What an Ansible run did: the per-host recap and the failures, from ansible-runner's events."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from clusterctl.engines.ssh import hostkeys

RECAP_KEYS = ("ok", "changed", "failures", "dark", "skipped", "rescued", "ignored")


@dataclass
class Failure:
    host: str
    task: str
    message: str
    unreachable: bool = False
    host_key: str | None = None  # the host key check failed: clusterctl.engines.ssh.hostkeys' explanation


@dataclass
class RunResult:
    status: str = "unstarted"  # ansible-runner status: successful | failed | timeout | canceled
    rc: int | None = None
    recap: dict[str, dict[str, int]] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    changes: list[tuple[str, str]] = field(default_factory=list)  # (host, task) of every changed result
    check: bool = False
    plays: list[dict] = field(default_factory=list)  # {"play", "seconds"} in run order: where a converge spends its time
    play_started: float | None = field(default=None, repr=False)
    tasks_started: int = 0  # tasks begun, for what an interrupted run says it did
    task: str | None = None  # the task running now (the last one begun)
    task_hosts: set[str] = field(default_factory=set, repr=False)  # hosts that began it and have not answered yet

    @property
    def ok(self) -> bool:
        return self.status == "successful" and not self.failures

    def changed(self, host: str) -> int:
        return self.recap.get(host, {}).get("changed", 0)

    @property
    def total_changed(self) -> int:
        return sum(h.get("changed", 0) for h in self.recap.values())

    def to_dict(self) -> dict:
        return {
            "status": self.status,
            "rc": self.rc,
            "check": self.check,
            "recap": self.recap,
            "failures": [vars(f) for f in self.failures],
            "changes": [{"host": h, "task": t} for h, t in self.changes],
            "plays": self.plays,
        }


def failure_message(res: dict) -> str:
    """The most useful line of a failed task's result."""
    for key in ("msg", "stderr", "reason", "stdout"):
        val = res.get(key)
        if isinstance(val, str) and val.strip():
            return val.strip().splitlines()[-1][:500] if key != "msg" else val.strip()[:500]
    results = res.get("results")
    if isinstance(results, list):
        for r in results:
            if isinstance(r, dict) and r.get("failed"):
                return failure_message(r)
    return "failed (no message)"


def apply_event(result: RunResult, event: dict) -> None:
    """Fold one ansible-runner event into the result."""
    kind = event.get("event", "")
    data = event.get("event_data", {}) or {}
    if kind in ("playbook_on_task_start", "playbook_on_handler_task_start"):
        result.tasks_started += 1
        result.task = data.get("task") or data.get("name") or "?"
        result.task_hosts = set()
    elif kind == "runner_on_start":
        result.task_hosts.add(data.get("host", "?"))
    elif kind.startswith("runner_on_"):
        result.task_hosts.discard(data.get("host", "?"))
    if kind == "runner_on_ok" and (data.get("res") or {}).get("changed"):
        result.changes.append((data.get("host", "?"), data.get("task", "?")))
    elif kind == "runner_on_failed" and not data.get("ignore_errors"):
        result.failures.append(Failure(data.get("host", "?"), data.get("task", "?"), failure_message(data.get("res", {}))))
    elif kind == "runner_on_unreachable":
        res = data.get("res", {}) or {}
        host = data.get("host", "?")
        # The whole message: ssh's banner is long and failure_message() keeps only its start.
        key = hostkeys.problem(host, str(res.get("msg", "")))
        result.failures.append(Failure(host, data.get("task", "?"), failure_message(res), unreachable=True,
                                       host_key=str(key) if key else None))
    elif kind == "playbook_on_play_start":
        _close_play(result)
        result.plays.append({"play": data.get("play", "?"), "seconds": None})
        result.play_started = time.monotonic()
    elif kind == "playbook_on_stats":
        _close_play(result)
        hosts: set[str] = set()
        for recap_key in RECAP_KEYS:
            hosts.update((data.get(recap_key) or {}).keys())
        result.recap = {h: {k: int((data.get(k) or {}).get(h, 0)) for k in RECAP_KEYS} for h in sorted(hosts)}


def _close_play(result: RunResult) -> None:
    if result.play_started is not None and result.plays:
        result.plays[-1]["seconds"] = round(time.monotonic() - result.play_started, 1)
    result.play_started = None


def merge(results: list[RunResult]) -> RunResult:
    """Several runs over parts of the cluster (a rolling change) as one result: recaps summed per host."""
    out = RunResult(status="successful" if all(r.status == "successful" for r in results) else "failed")
    for r in results:
        out.rc = r.rc if out.rc in (None, 0) else out.rc
        out.failures += r.failures
        out.changes += r.changes
        out.plays += r.plays
        for host, counts in r.recap.items():
            mine = out.recap.setdefault(host, dict.fromkeys(RECAP_KEYS, 0))
            for k, v in counts.items():
                mine[k] = mine.get(k, 0) + v
    return out
