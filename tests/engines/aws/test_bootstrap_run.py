"""Run the rendered bootstrap script for real against a fake IMDSv2 at 169.254.169.254.

Inside a private mount + network namespace (unshare): the fake instance metadata service listens on 169.254.169.254
on the namespace's loopback and insists on the IMDSv2 token; /etc is an overlay, so /etc/hosts and the munge key
are written for real without touching the host. `aws`, `hostnamectl`, `systemctl`, `chown` and `sleep` are shims
that record their arguments (no AWS, no systemd in a test); curl, sed, base64 and the shell are the real ones.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import yaml

from clusterctl.render.stack_config import StackConfig
from clusterctl.render.userdata import render_user_data
from tests.helpers import needs_root, plan_of

KEY = bytes(range(256)) * 4  # 1024 bytes, like mungekey's

IMDS = textwrap.dedent("""
    import http.server, sys
    TOKEN = "tok-123"
    META = {"tags/instance/Name": "p5001", "local-ipv4": "10.240.0.21", "placement/region": "us-east-1"}
    misses = {"n": 0}
    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            with open(sys.argv[1], "a") as f:
                f.write(self.command + " " + self.path + " " + str(self.headers.get("X-aws-ec2-metadata-token")) + "\\n")
        def _send(self, code, body=""):
            self.send_response(code); self.send_header("Content-Length", str(len(body))); self.end_headers()
            self.wfile.write(body.encode())
        def do_PUT(self):
            if self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                return self._send(200, TOKEN)
            self._send(400)
        def do_GET(self):
            if self.headers.get("X-aws-ec2-metadata-token") != TOKEN:
                return self._send(401)  # IMDSv2 only, like the launch template asks
            key = self.path.removeprefix("/latest/meta-data/")
            if key == "tags/instance/Name" and misses["n"] < 2:
                misses["n"] += 1  # the tag arrives a moment after launch
                return self._send(404)
            self._send(200, META[key]) if key in META else self._send(404)
    http.server.HTTPServer(("169.254.169.254", 80), H).serve_forever()
""")

SHIMS = {
    "aws": 'echo "$@" >> "$LOG/aws"; printf %s "$MUNGE_B64"\n',
    "hostnamectl": 'echo "$@" >> "$LOG/hostnamectl"\n',
    "systemctl": 'echo "$@" >> "$LOG/systemctl"\n',
    "chown": 'echo "$@" >> "$LOG/chown"\n',
    "sleep": 'echo "$@" >> "$LOG/sleep"\n',
}


MISSING = [tool for tool in ("unshare", "ip", "curl", "mount", "base64") if shutil.which(tool) is None]


@needs_root("unshare of mount and network namespaces")
@pytest.mark.skipif(bool(MISSING), reason=f"missing: {', '.join(MISSING)}")
def test_bootstrap_sets_name_hosts_and_munge_key_from_imdsv2_and_ssm(tmp_path):
    cfg = StackConfig.from_plan(plan_of("aws-p5-spot.yaml"))
    doc = yaml.safe_load(render_user_data(cfg, "p5"))
    script = next(f["content"] for f in doc["write_files"] if f["path"] == "/usr/local/sbin/clusterctl-bootstrap")
    (tmp_path / "bootstrap.sh").write_text(script)
    (tmp_path / "imds.py").write_text(IMDS)
    shims, log, out = tmp_path / "shims", tmp_path / "log", tmp_path / "out"
    for d in (shims, log, out, tmp_path / "upper", tmp_path / "work"):
        d.mkdir()
    for name, body in SHIMS.items():
        (shims / name).write_text("#!/bin/sh\n" + body)
        (shims / name).chmod(0o755)
    inner = f"""
        set -e
        mount -t overlay overlay -o lowerdir=/etc,upperdir={tmp_path}/upper,workdir={tmp_path}/work /etc
        mkdir -p /etc/munge
        ip link set lo up
        ip addr add 169.254.169.254/32 dev lo
        {sys.executable} {tmp_path}/imds.py {log}/imds >/dev/null 2>&1 &
        server=$!
        trap 'kill $server' EXIT
        i=0; until curl -s -o /dev/null -X PUT http://169.254.169.254/ 2>/dev/null; do i=$((i+1)); [ $i -lt 100 ]; /bin/sleep 0.1; done
        PATH={shims}:$PATH sh {tmp_path}/bootstrap.sh
        PATH={shims}:$PATH sh {tmp_path}/bootstrap.sh
        cp /etc/hosts {out}/hosts
        cp /etc/munge/munge.key {out}/munge.key
        stat -c %a /etc/munge/munge.key > {out}/mode
    """
    env = dict(os.environ, LOG=str(log), MUNGE_B64=base64.b64encode(KEY).decode())
    r = subprocess.run(["unshare", "--mount", "--net", "sh", "-c", inner], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr

    hosts = (out / "hosts").read_text()
    assert hosts.count("10.240.0.21 p5001 # clusterctl") == 1  # a second run does not duplicate
    assert hosts.count("10.240.240.10 p5spot-ctl # clusterctl") == 1
    assert (out / "munge.key").read_bytes() == KEY and (out / "mode").read_text().strip() == "400"
    assert (log / "hostnamectl").read_text().splitlines() == ["set-hostname p5001"] * 2
    assert (log / "systemctl").read_text().splitlines() == ["restart munge"] * 2
    aws = (log / "aws").read_text().splitlines()[0]
    assert "ssm get-parameter --region us-east-1 --name /clusterctl/p5spot/munge-key --with-decryption" in aws
    imds = (log / "imds").read_text().splitlines()
    gets = [line for line in imds if line.startswith("GET")]
    assert gets and all(not line.endswith(" None") for line in gets)  # every read carried the IMDSv2 token
    assert sum("tags/instance/Name" in line for line in gets) >= 3  # waited for the Name tag
    assert (log / "sleep").read_text().split() == ["5", "5"]
