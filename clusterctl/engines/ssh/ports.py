"""Whether a freshly booted machine answers on its SSH port yet (an instance that runs has not always started sshd)."""

from __future__ import annotations

import socket
import time


def port_open(address: str, port: int = 22, timeout: float = 3) -> bool:
    try:
        with socket.create_connection((address, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_port(address: str, port: int, timeout: float, interval: float = 2) -> bool:
    """True once address:port accepts a connection, False when `timeout` seconds passed without."""
    deadline = time.monotonic() + timeout
    while True:
        if port_open(address, port):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
