"""Ports on 127.0.0.1 that refuse every connection for the rest of the test process.

A port merely bound and released (or a test server's, once closed) can be taken meanwhile by
another process: the full test suite run by two users at once, say, where the other run's
silent server took the port and a refused connection became a timeout
(test_endpoint_unreachable.py's "answered once" test, at `c866573`). A socket bound and never
listening keeps the port and refuses connections (ECONNREFUSED), so these are held, not released.
"""

from __future__ import annotations

import socket

#: Held for the process's life: each one's port refuses.
_HELD: list[socket.socket] = []


def refusing_port() -> int:
    """A port nothing listens on, held so that nothing else can."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    _HELD.append(s)
    return s.getsockname()[1]


def refusing_url() -> str:
    return f"http://127.0.0.1:{refusing_port()}/v1"


def hold_port_of(url: str) -> None:
    """Keep the port of ``url``, whose server the test has just closed, refusing. SO_REUSEADDR:
    the closed server's connections linger in TIME_WAIT."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(url.rsplit(":", 1)[1].split("/")[0])))
    _HELD.append(s)
