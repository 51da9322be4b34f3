"""The one downloader for data files that are not on the Hugging Face Hub (GitHub raw files),
and the progress line every download shows.

A download takes a file lock beside the cache (``.locks/``), so xdist workers and runs started
together download a file once: whoever comes second waits, then finds the file there. Bytes go to
a temporary file in the target's folder, are counted and hashed as they arrive, and only a
complete transfer of the expected size (and, where the pin is confirmed, the expected sha256) is
renamed into place: an interrupted or cut-short download never leaves a file a later run reads.

Why not pooch: it would add a dependency for four small files, keep them in its own cache layout
(``pooch.os_cache``) rather than under the Hugging Face cache root that the Hub files share, and
its checks are per file only (no record counts, no one-line refusals naming the ways out). What
is needed here (httpx, already a dependency, and filelock) is this module.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
import uuid
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable

from pytest_toolbench.secret_args import masked_urls_in

if TYPE_CHECKING:
    import filelock

#: Seconds to wait for a server to accept the connection / between two reads.
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 60.0


class DownloadFailed(Exception):
    """The transfer did not complete; ``cause`` says why in a few words."""

    def __init__(self, cause: str):
        super().__init__(cause)
        self.cause = cause


class ChecksumMismatch(Exception):
    """A downloaded file is not the pinned one (kept out of the cache): ``what`` (sha256 or
    size) differs."""

    def __init__(self, what: str, expected: object, actual: object):
        super().__init__(f"{what} expected {expected}, got {actual}")
        self.what = what
        self.expected = expected
        self.actual = actual


def human_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


class Progress:
    """One download's bytes and elapsed time on the terminal (stderr): on a terminal one line
    redrawn at most four times a second; elsewhere (CI logs) a line when it starts and one when
    it ends."""

    def __init__(self, label: str, total: int | None, stream: IO[str] | None = None):
        self.label = label
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.done = 0
        self.started = time.monotonic()
        self._drawn = 0.0
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        if not self._tty:
            self._write(f"toolbench data: downloading {label}"
                        + (f" ({human_bytes(total)})" if total else "") + "\n")

    def update(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if self._tty and now - self._drawn >= 0.25:
            self._drawn = now
            of = f" of {human_bytes(self.total)}" if self.total else ""
            self._write(f"\rtoolbench data: downloading {self.label}: {human_bytes(self.done)}{of}, "
                        f"{now - self.started:.1f} s\x1b[K")

    def finish(self, ok: bool = True) -> None:
        elapsed = time.monotonic() - self.started
        head = "\r" if self._tty else ""
        verb = "downloaded" if ok else "download failed:"
        self._write(f"{head}toolbench data: {verb} {self.label}: {human_bytes(self.done)} in "
                    f"{elapsed:.1f} s" + ("\x1b[K" if self._tty else "") + "\n")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stream never stops a download
            pass


ProgressFactory = Callable[[str, "int | None"], Progress]


def network_cause(exc: BaseException) -> str:
    """A network failure in a few words (connection refused, DNS, timeout, cut short...),
    for httpx and for huggingface_hub's own HTTP stack alike (read by class name and message).
    A URL the message quotes has its password masked (a mirror's, a proxy's)."""
    return masked_urls_in(_network_cause(exc))


def _network_cause(exc: BaseException) -> str:
    seen: set[int] = set()
    chain: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        chain.append(e)
        e = e.__cause__ or e.__context__
    text = " ".join(str(x) for x in chain).lower()
    names = {type(x).__name__ for x in chain}
    if "OfflineModeIsEnabled" in names:
        return "offline mode is on"
    if any(t in text for t in ("name or service not known", "name resolution", "nodename nor servname",
                               "getaddrinfo", "no address associated")):
        return "cannot resolve the host name (DNS)"
    if "connection refused" in text:
        return "connection refused"
    if "network is unreachable" in text:
        return "network unreachable"
    if names & {"ConnectTimeout"}:
        return f"no connection within {CONNECT_TIMEOUT_S:g} s"
    if names & {"ReadTimeout", "TimeoutException", "WriteTimeout", "PoolTimeout"} or "timed out" in text:
        return "the server stopped answering (timed out)"
    if names & {"RemoteProtocolError"} or "peer closed" in text or "incomplete" in text:
        return "the transfer was cut short"
    if names & {"ProxyError"}:
        return f"proxy error: {chain[-1]}"
    if "ssl" in text or "certificate" in text:
        return "TLS failure: " + str(chain[-1]).splitlines()[0][:120]
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return first[:200]


def lock_for(root: Path, relative: str) -> "filelock.FileLock":
    import filelock

    path = root / ".locks" / f"{relative}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    return filelock.FileLock(str(path))


def download(url: str, dest: Path, *, lock: "filelock.FileLock", label: str,
             expected_size: int | None = None, expected_sha256: str | None = None,
             progress: ProgressFactory | None = None, force: bool = False,
             on_wait: Callable[[], None] | None = None) -> bool:
    """Fetch ``url`` into ``dest`` once (True: downloaded now; False: it was there).

    Raises :class:`DownloadFailed` (network error, HTTP status, a transfer shorter than
    announced) or :class:`ChecksumMismatch` (``expected_sha256`` or ``expected_size`` given and
    not met); in both cases ``dest`` is left as it was."""
    import filelock
    import httpx

    try:
        lock.acquire(timeout=0.5)
    except filelock.Timeout:
        if on_wait is not None:
            on_wait()
        lock.acquire()
    try:
        if dest.is_file() and not force:
            return False
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.incomplete")
        bar: Progress | None = None
        digest = hashlib.sha256()
        got = 0
        try:
            timeout = httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
            with httpx.stream("GET", url, follow_redirects=True, timeout=timeout,
                              headers={"User-Agent": "pytest-toolbench", "Accept-Encoding": "identity"}) as r:
                if r.status_code != 200:
                    raise DownloadFailed(f"HTTP {r.status_code}"
                                         + (" (no such file or revision)" if r.status_code == 404 else ""))
                announced = _int(r.headers.get("Content-Length"))
                total = expected_size or announced
                bar = progress(label, total) if progress else None
                with open(tmp, "wb") as f:
                    for chunk in r.iter_bytes(1 << 20):
                        f.write(chunk)
                        digest.update(chunk)
                        got += len(chunk)
                        if bar is not None:
                            bar.update(len(chunk))
                    f.flush()
                    os.fsync(f.fileno())
            if announced is not None and got != announced:
                raise DownloadFailed(f"the transfer was cut short: {got} of {announced} bytes")
            actual = digest.hexdigest()
            if expected_sha256 is not None and actual != expected_sha256:
                raise ChecksumMismatch("sha256", expected_sha256, actual)
            if expected_size is not None and got != expected_size:
                raise ChecksumMismatch("size", expected_size, got)
            os.replace(tmp, dest)
        except (DownloadFailed, ChecksumMismatch):
            if bar is not None:
                bar.finish(ok=False)
            raise
        except httpx.HTTPError as exc:
            if bar is not None:
                bar.finish(ok=False)
            cause = network_cause(exc)
            if cause == "the transfer was cut short" and got:
                cause += f" after {got} bytes"
            raise DownloadFailed(cause) from None
        except OSError as exc:
            if bar is not None:
                bar.finish(ok=False)
            raise DownloadFailed(f"cannot write {dest}: {exc.strerror or exc}") from None
        finally:
            tmp.unlink(missing_ok=True)
        if bar is not None:
            bar.finish()
        return True
    finally:
        lock.release()


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None
