"""Secrets never reach a command line: the real Automation API code path (open_stack, preview, up) drives a fake
`pulumi` on PATH that records every argv and environment it is started with.

The fake answers the commands this path uses with the shapes the SDK parses (version, stack select/init, config
get/set-all/rm-all, preview/up with an engine event log, stack output, stack history). It cannot run the program
(that needs the real engine); tests/engines/aws/test_pulumi_program.py runs it under mocks, and the last test here
checks that the program handed to Pulumi carries the munge key in-process.
"""

from __future__ import annotations

import base64
import json
import stat
import sys

import pytest

from clusterctl.engines.aws import automation
from clusterctl.state import ClusterState
from tests.helpers import plan_of

FAKE = r'''#!{python}
import json, os, sys
args = [a for a in sys.argv[1:] if a != "--non-interactive"]
with open(os.environ["FAKE_PULUMI_LOG"], "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "cmd": args, "env": dict(os.environ)}}) + "\n")
old = {{"clusterctl:munge_key_b64": {{"value": os.environ["FAKE_OLD_SECRET"], "secret": True}}}}
def out(x):
    sys.stdout.write(x if isinstance(x, str) else json.dumps(x))
if args[:1] == ["version"]:
    out("v3.200.0\n")  # before 3.206 engine events go to a file (later: a gRPC stream)
elif args[:2] == ["config", "--show-secrets"]:
    out(old)
elif args[:1] in (["preview"], ["up"]) and "--event-log" in args:
    log = args[args.index("--event-log") + 1]
    with open(log, "w") as f:
        f.write(json.dumps({{"sequence": 1, "timestamp": 1, "summaryEvent": {{"maybeCorrupt": False,
                "durationSeconds": 1, "resourceChanges": {{"create": 3}}, "PolicyPacks": {{}}}}}}) + "\n")
elif args[:3] == ["stack", "output", "--json"]:
    out({{"munge_parameter": "/clusterctl/t/munge"}})
elif args[:3] == ["stack", "history", "--json"]:
    out([{{"kind": "update", "startTime": "2026-01-01T00:00:00.000Z", "message": "", "environment": {{}},
           "config": {{}}, "result": "succeeded", "endTime": "2026-01-01T00:00:01.000Z", "resourceChanges": {{"create": 3}}}}])
elif args[:2] == ["stack", "ls"]:
    out([])
elif args[:1] == ["whoami"]:
    out({{"user": "me", "url": "file://", "organizations": []}})
'''


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "pulumi"
    exe.write_text(FAKE.format(python=sys.executable))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_PULUMI_LOG", str(log))
    monkeypatch.setenv("CLUSTERCTL_STATE_DIR", str(tmp_path / "state"))
    for k in ("PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE", automation.BACKEND_ENV):
        monkeypatch.delenv(k, raising=False)
    # a munge key an older clusterctl left in the stack config (the fake's `config --json` reports it)
    monkeypatch.setenv("FAKE_OLD_SECRET", "b2xkLXNlY3JldA==")
    return lambda: [json.loads(line) for line in log.read_text().splitlines()]


def _secrets(state: ClusterState, settings) -> list[str]:
    """Every secret this code path holds: munge key (raw and base64), admin SSH private key, Pulumi passphrase."""
    from clusterctl.state.secrets import ensure_munge_key

    key = ensure_munge_key(state).read_bytes()
    private = (state.secrets_dir / "aws_admin_ed25519").read_text()
    body = "".join(line for line in private.splitlines() if not line.startswith("-----"))
    passphrase = (state.secrets_dir / "pulumi-passphrase").read_text()
    return [settings.munge_key_b64, base64.b64encode(key).decode()[:40], body[:40], passphrase]


def test_open_preview_up_never_put_a_secret_on_a_command_line(recorded):
    from clusterctl.engines.aws.up import stack_settings

    plan = plan_of("aws-p5-spot.yaml")
    state = ClusterState(plan.name)
    settings = stack_settings(plan, state)
    stack = automation.open_stack(state, settings)
    assert automation.preview(stack).changes == {"create": 3}
    automation.up(stack)

    calls = recorded()
    commands = [" ".join(c["cmd"][:2]) for c in calls]
    assert "config set-all" in commands and "preview --yes" not in commands and any(c.startswith("up") for c in commands)
    secrets = _secrets(state, settings)
    for c in calls:
        argv = "\0".join(c["argv"])
        for s in secrets:
            assert s not in argv, f"a secret on the command line of `pulumi {' '.join(c['cmd'][:3])}`"
        for name, value in c["env"].items():
            for s in secrets:
                assert s not in value, f"a secret in the environment of pulumi ({name})"
    set_all = next(c["argv"] for c in calls if c["cmd"][:2] == ["config", "set-all"])
    assert not any(a.startswith(("--secret", "clusterctl:munge_key")) for a in set_all)
    assert f"clusterctl:cluster_id={settings.cluster_id}" in set_all
    # the key an older version stored in the config is removed by name only
    rm = next(c["argv"] for c in calls if c["cmd"][:2] == ["config", "rm-all"])
    assert "clusterctl:munge_key_b64" in rm and "b2xkLXNlY3JldA==" not in "".join(rm)


def test_pulumi_errors_are_redacted(recorded):
    from pulumi.automation.errors import CommandError

    from clusterctl.engines.aws.errors import CloudError

    automation._inline_program("c2VjcmV0LWtleQ==")

    class Result:
        def __str__(self):
            return "error: resource failed: value c2VjcmV0LWtleQ== rejected"
    with pytest.raises(CloudError) as e:
        automation._run("up", lambda: (_ for _ in ()).throw(CommandError(Result())))
    assert "c2VjcmV0LWtleQ==" not in str(e.value) and "[secret]" in str(e.value)
    assert e.value.__cause__ is None and e.value.__suppress_context__


def test_the_inline_program_gets_the_munge_key_in_process():
    import pulumi

    from clusterctl.render.stack_config import automation_config
    from clusterctl.render.cloud import cloud_config
    from tests.engines.aws.pulumi_harness import MUNGE_B64, run_program

    program = automation._inline_program(MUNGE_B64)
    assert MUNGE_B64 not in repr(program)
    # program_from_config reads the stack config: the rendered config, as open_stack sets it
    plan = plan_of("aws-p5-spot.yaml")
    config = {**automation_config(cloud_config(plan)), "clusterctl:cluster_id": "0123456789abcdef"}
    pulumi.runtime.set_all_config(config)
    try:
        rec = run_program(program)
    finally:
        pulumi.runtime.set_all_config({})
    value = rec.one("aws:ssm/parameter:Parameter").inputs["value"]
    assert isinstance(value, dict) and value["value"] == MUNGE_B64  # a secret envelope: `[secret]` in diffs
