"""One way to start a real moto_server (the AWS HTTP protocol on 127.0.0.1, a free port) for every test package.

The server gets a clean environment: moto itself uses botocore, so an AWS_PROFILE (or any AWS_* setting) that a
test left in os.environ would make every request fail with HTTP 500 (ProfileNotFound inside the server). Its
request log goes to a file: werkzeug logs every request to stderr, and a pipe nobody reads fills after ~64 KiB,
which blocks the server in the middle of a request.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def server_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_CONFIG_FILE="/dev/null",
               AWS_SHARED_CREDENTIALS_FILE="/dev/null")
    return env


class Moto:
    def __init__(self):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile(prefix="moto-", suffix=".log", delete=False)
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=self.log, env=server_env())
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/moto-api/", timeout=2)
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto server did not start: {self.log_tail()}") from None
                time.sleep(0.2)

    def log_tail(self, n: int = 2000) -> str:
        with open(self.log.name, errors="replace") as fh:
            return fh.read()[-n:]

    def reset(self):
        urllib.request.urlopen(urllib.request.Request(f"{self.url}/moto-api/reset", method="POST"), timeout=30)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        if os.path.exists(self.log.name):
            os.unlink(self.log.name)
