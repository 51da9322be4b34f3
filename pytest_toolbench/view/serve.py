"""``toolbench view --serve``: the built site over http on localhost, for convenience only (the
site itself needs no server)."""

from __future__ import annotations

import functools
import http.server
from pathlib import Path


def bind(folder: Path, port: int) -> http.server.ThreadingHTTPServer:
    """A server for ``folder`` bound to 127.0.0.1:``port`` (never to every interface: a run's
    transcripts are private; 0: any free port). Bound before the site is built, so a port in
    use is said at once, not after the build; OSError when it cannot be bound."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    return http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)


def serve(httpd: http.server.ThreadingHTTPServer, folder: Path) -> None:
    """Serve what :func:`bind` bound until Ctrl-C."""
    with httpd:
        host, real_port = httpd.server_address[:2]
        print(f"serving {folder} on http://{host}:{real_port}/ (Ctrl-C stops)", flush=True)
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            print("stopped")
