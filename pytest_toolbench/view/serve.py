"""``toolbench view --serve``: the built site over http on localhost, for convenience only (the
site itself needs no server)."""

from __future__ import annotations

import functools
import http.server
from pathlib import Path


def serve(folder: Path, port: int) -> None:
    """Serve ``folder`` on 127.0.0.1 (never on every interface: a run's transcripts are private)
    until Ctrl-C."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as httpd:
        host, real_port = httpd.server_address[:2]
        print(f"serving {folder} on http://{host}:{real_port}/ (Ctrl-C stops)", flush=True)
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            print("stopped")
