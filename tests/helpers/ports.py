"""Free TCP ports on 127.0.0.1 for the multi-worker tests."""

from __future__ import annotations

import socket


def free_ports(count: int) -> list[int]:
    """Ports nothing listens on right now (bound, read, released)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
