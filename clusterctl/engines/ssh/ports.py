"""Whether a freshly booted machine answers on its SSH port yet (an instance that runs has not always started sshd)."""

from __future__ import annotations

import socket


def port_open(address: str, port: int = 22, timeout: float = 3) -> bool:
    try:
        with socket.create_connection((address, port), timeout=timeout):
            return True
    except OSError:
        return False
