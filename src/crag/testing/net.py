"""Network helpers for tests and benchmarks that start local servers (loopback only).

>>> 0 < free_port() < 65536
True
"""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
