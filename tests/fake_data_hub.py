"""A local HTTP server that plays the Hugging Face Hub (``HF_ENDPOINT``) and the GitHub raw host
(``TOOLBENCH_GITHUB_RAW_BASE``) for the real-data tests: nothing reaches the internet.

The Hub side answers what ``huggingface_hub.hf_hub_download`` asks (file_download.py): ``HEAD`` and
``GET /datasets/<owner>/<name>/resolve/<revision>/<path>``, with the ``X-Repo-Commit`` header (the
commit a branch name stands for), an ``ETag`` (the file's sha256, as the Hub gives for LFS files)
and ``Content-Length``; a missing file is 404 with ``X-Error-Code: EntryNotFound``. The GitHub side
serves ``GET /<owner>/<name>/<revision>/<path>``.

Faults, per served path (the part after the host): ``cut[path] = n`` sends the full
``Content-Length`` but only ``n`` bytes, then closes (a transfer cut short); ``short[path] = n``
sends ``n`` bytes with a matching ``Content-Length`` while HEAD announces the whole file (a proxy
that truncated it); ``delay_s`` sleeps before every GET body (downloads that overlap).
``gets`` counts the GETs of each path; ``log`` lists every (method, path).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeDataHub:
    def __init__(self) -> None:
        self.hub: dict[tuple[str, str, str], bytes] = {}  # (repo, commit, path) -> bytes
        self.refs: dict[tuple[str, str], str] = {}  # (repo, branch) -> commit
        self.github: dict[tuple[str, str, str], bytes] = {}
        self.cut: dict[str, int] = {}
        self.short: dict[str, int] = {}
        self.delay_s = 0.0
        self.gets: Counter[str] = Counter()
        self.log: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None
        self.port: int | None = None

    # --- content ------------------------------------------------------------------------------
    def add_hub_file(self, repo: str, commit: str, path: str, data: bytes, *, branch: str | None = None) -> None:
        self.hub[(repo, commit, path)] = data
        if branch:
            self.refs[(repo, branch)] = commit

    def add_github_file(self, repo: str, revision: str, path: str, data: bytes) -> None:
        self.github[(repo, revision, path)] = data

    # --- serving ------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, port: int = 0) -> "FakeDataHub":
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:
                hub._answer(self, head=True)

            def do_GET(self) -> None:
                hub._answer(self, head=False)

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def __enter__(self) -> "FakeDataHub":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _find(self, path: str) -> tuple[bytes | None, dict[str, str]]:
        parts = path.lstrip("/").split("/")
        if len(parts) >= 6 and parts[0] == "datasets" and parts[3] == "resolve":
            repo, rev, file = f"{parts[1]}/{parts[2]}", parts[4], "/".join(parts[5:])
            commit = self.refs.get((repo, rev), rev)
            data = self.hub.get((repo, commit, file))
            headers = {"X-Repo-Commit": commit}
            if data is None:
                headers["X-Error-Code"] = "EntryNotFound"
            return data, headers
        if len(parts) >= 4:
            repo, rev, file = f"{parts[0]}/{parts[1]}", parts[2], "/".join(parts[3:])
            return self.github.get((repo, rev, file)), {}
        return None, {}

    def _answer(self, h: BaseHTTPRequestHandler, *, head: bool) -> None:
        path = h.path.split("?")[0]
        with self._lock:
            self.log.append(("HEAD" if head else "GET", path))
            if not head:
                self.gets[path] += 1
        data, headers = self._find(path)
        if data is None:
            h.send_response(404)
            for k, v in headers.items():
                h.send_header(k, v)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        body = data
        if not head and path in self.short:
            body = data[: self.short[path]]
        h.send_response(200)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        h.send_header("Content-Length", str(len(body)))
        h.send_header("Content-Type", "application/octet-stream")
        h.end_headers()
        if head:
            return
        if self.delay_s:
            time.sleep(self.delay_s)
        if path in self.cut:
            h.wfile.write(body[: self.cut[path]])
            h.wfile.flush()
            h.close_connection = True
            return
        h.wfile.write(body)
