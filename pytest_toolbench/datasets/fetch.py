"""One pinned file: its URL, its place in the cache, fetching it (Hugging Face files with
``huggingface_hub.hf_hub_download``, GitHub files with :mod:`.download`), and checking it against
its pin (sha256, size, record count).

Everything raises :class:`DataRefused` with one line that names the file, what was tried and
what to do; nothing here prints except the download progress.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from pytest_toolbench.datasets import cache
from pytest_toolbench.datasets.download import (
    ChecksumMismatch,
    DownloadFailed,
    Progress,
    ProgressFactory,
    download,
    lock_for,
    network_cause,
)
from pytest_toolbench.datasets.registry import BenchmarkData, PinnedFile
from pytest_toolbench.secret_args import masked_url

COMMIT = re.compile(r"[0-9a-f]{40}")


class DataRefused(Exception):
    """The real data cannot be used: one line (file, URL or path, cause, ways out)."""


def ways_out(name: str) -> str:
    return (f"ways out: run 'toolbench data fetch {name}' on a connected machine and copy its "
            f"cache ({cache.cache_roots_text()}) here; or --data-dir DIR with the files "
            f"(DIR/{name}/...); or --data sample (the bundled sample, not the benchmark)")


@dataclass(frozen=True)
class Choice:
    """The revision a run takes of one benchmark's data: the pin, or ``--data-revision``'s."""

    spec: BenchmarkData
    revision: str

    @property
    def pinned(self) -> bool:
        return self.revision == self.spec.revision


def file_url(spec: BenchmarkData, file: PinnedFile, revision: str) -> str:
    rev = quote(revision, safe="")
    if spec.host == "huggingface":
        return f"{cache.hf_endpoint()}/datasets/{spec.repo}/resolve/{rev}/{file.path}"
    return f"{cache.github_raw_base()}/{spec.repo}/{rev}/{file.path}"


def github_cache_path(spec: BenchmarkData, file: PinnedFile, revision: str) -> Path:
    """``<assets>/github/<owner>--<repo>/<revision>/<path in the repository>``."""
    return cache.assets_cache() / "github" / str(spec.repo).replace("/", "--") / revision / file.path


def plain_mirror_path(spec: BenchmarkData, file: PinnedFile, revision: str) -> Path:
    """Where a Hub file fetched from a plain mirror (a static server under ``HF_ENDPOINT`` that
    does not speak the Hub's headers) is kept: beside the GitHub files, never in the hub cache."""
    return cache.assets_cache() / "huggingface" / str(spec.repo).replace("/", "--") / revision / file.path


def cached_path(spec: BenchmarkData, file: PinnedFile, revision: str) -> Path | None:
    """The file's copy in the cache, if there is one (no network)."""
    if spec.host == "github":
        path = github_cache_path(spec, file, revision)
        return path if path.is_file() else None
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(str(spec.repo), file.path, cache_dir=str(cache.hub_cache()),
                                   revision=revision, repo_type="dataset")
    if isinstance(found, str) and Path(found).is_file():
        return Path(found)
    plain = plain_mirror_path(spec, file, revision)
    return plain if plain.is_file() else None


@dataclass
class Fetched:
    path: Path
    #: The commit the file was read at (a Hub snapshot's; for GitHub the revision as given).
    commit: str | None
    downloaded: bool


def fetch(choice: Choice, file: PinnedFile, *, progress: ProgressFactory | None = None,
          force: bool = False, on_wait=None) -> Fetched:
    """The file in the cache, downloaded first if it is not there. Offline (``HF_HUB_OFFLINE``)
    only the cache is read. Raises :class:`DataRefused`."""
    spec, revision = choice.spec, choice.revision
    url = file_url(spec, file, revision)
    shown = masked_url(url)  # a mirror's password ($HF_ENDPOINT) stays out of the error line
    name = spec.benchmark
    moving = not COMMIT.fullmatch(revision)  # a branch or tag: look for a newer commit when online
    if not force and (cache.offline() or not moving):
        found = cached_path(spec, file, revision)
        if found is not None:
            return Fetched(found, _commit_of(spec, found, revision), downloaded=False)
    if cache.offline():
        raise DataRefused(f"cannot get the real {name} data: {file.path} is not in the cache and "
                          f"{cache.offline_variable()} is set (offline), so {shown} was not tried; "
                          + ways_out(name))
    try:
        if spec.host == "huggingface":
            return _fetch_hub(choice, file, url, progress, force)
        # a branch or tag on GitHub is fetched again (raw files carry no version to compare)
        return _fetch_github(choice, file, url, progress, force or moving, on_wait)
    except (DownloadFailed, _HubFailed) as exc:
        if moving and not force:  # a branch that cannot be refreshed: its last copy, said so
            found = cached_path(spec, file, revision)
            if found is not None:
                return Fetched(found, _commit_of(spec, found, revision), downloaded=False)
        raise DataRefused(f"cannot get the real {name} data: {file.path} from {shown}: {exc}; "
                          + ways_out(name)) from None
    except ChecksumMismatch as exc:
        raise DataRefused(mismatch_line(name, file, exc.what, exc.expected, exc.actual,
                                        f"downloaded from {shown}, not kept")) from None


class _HubFailed(Exception):
    pass


def _commit_of(spec: BenchmarkData, path: Path, revision: str) -> str | None:
    if spec.host == "huggingface":
        parts = path.parts
        if "snapshots" in parts:
            i = parts.index("snapshots")
            if i + 1 < len(parts) and COMMIT.fullmatch(parts[i + 1]):
                return parts[i + 1]
        return None
    return revision if COMMIT.fullmatch(revision) else None


def _fetch_github(choice: Choice, file: PinnedFile, url: str, progress: ProgressFactory | None,
                  force: bool, on_wait) -> Fetched:
    spec, revision = choice.spec, choice.revision
    dest = github_cache_path(spec, file, revision)
    root = cache.assets_cache()
    relative = str(dest.relative_to(root))
    # Only a confirmed pin keeps a wrong download out of the cache; other files are checked after.
    sha = file.sha256 if choice.pinned and file.sha256_confirmed else None
    size = file.size if choice.pinned else None
    downloaded = download(url, dest, lock=lock_for(root, relative), label=f"{spec.benchmark} {file.path}",
                          expected_size=size, expected_sha256=sha, progress=progress, force=force,
                          on_wait=on_wait)
    return Fetched(dest, revision if COMMIT.fullmatch(revision) else None, downloaded)


def _fetch_hub(choice: Choice, file: PinnedFile, url: str, progress: ProgressFactory | None,
               force: bool) -> Fetched:
    """``hf_hub_download`` into the hub cache (its own lock, temporary file and rename), after
    one HEAD without retries: an unreachable hub is reported at once, not after the library's
    backoff (about 25 s)."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_download

    spec, revision = choice.spec, choice.revision
    endpoint = cache.hf_endpoint()
    try:
        meta = get_hf_file_metadata(url, timeout=10, endpoint=endpoint)
    except Exception as exc:  # noqa: BLE001 - any failure of the HEAD is reported as its cause
        if getattr(getattr(exc, "response", None), "status_code", None) in (405, 501):
            return _fetch_plain_mirror(choice, file, url, progress, force)  # a mirror without HEAD
        raise _HubFailed(_hub_cause(exc)) from None
    if meta.commit_hash is None or meta.etag is None:
        # A plain static mirror (no X-Repo-Commit / ETag): huggingface_hub refuses it, but the
        # pins identify the file, so it is fetched like a GitHub file and checked the same way.
        return _fetch_plain_mirror(choice, file, url, progress, force)
    kwargs: dict = {}
    if progress is not None:
        kwargs["tqdm_class"] = _progress_bar_class(progress, f"{spec.benchmark} {file.path}", meta.size)
    before = cached_path(spec, file, revision) if not force else None
    try:
        found = hf_hub_download(str(spec.repo), file.path, repo_type="dataset", revision=revision,
                                cache_dir=str(cache.hub_cache()), endpoint=endpoint,
                                force_download=force, **kwargs)
    except Exception as exc:  # noqa: BLE001
        raise _HubFailed(_hub_cause(exc)) from None
    path = Path(found)
    return Fetched(path, _commit_of(spec, path, revision) or meta.commit_hash, downloaded=before is None)


def _fetch_plain_mirror(choice: Choice, file: PinnedFile, url: str,
                        progress: ProgressFactory | None, force: bool) -> Fetched:
    spec, revision = choice.spec, choice.revision
    dest = plain_mirror_path(spec, file, revision)
    root = cache.assets_cache()
    sha = file.sha256 if choice.pinned and file.sha256_confirmed else None
    downloaded = download(url, dest, lock=lock_for(root, str(dest.relative_to(root))),
                          label=f"{spec.benchmark} {file.path}", expected_size=file.size if choice.pinned else None,
                          expected_sha256=sha, progress=progress, force=force)
    return Fetched(dest, revision if COMMIT.fullmatch(revision) else None, downloaded)


def _hub_cause(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if status is not None:
        hint = {401: " (a gated or private repository: set HF_TOKEN)",
                403: " (a gated or private repository: set HF_TOKEN)",
                404: " (no such repository, revision or file)"}.get(status, "")
        return f"HTTP {status}{hint}"
    if "Consistency check failed" in str(exc):
        return "the transfer was cut short (" + str(exc).split("(")[0].strip().rstrip(":") + ")"
    return network_cause(exc)


def _progress_bar_class(progress: ProgressFactory, label: str, size: int | None):
    """A tqdm stand-in for huggingface_hub that draws our progress line instead of its bar."""

    class Bar:
        def __init__(self, *args, total=None, initial=0, **kwargs):
            self._p: Progress = progress(label, total or size)
            self.n = initial
            if initial:
                self._p.update(initial)

        def update(self, n: int = 1) -> None:
            self.n += n
            self._p.update(n)

        def close(self) -> None:
            if self._p is not None:
                self._p.finish()
                self._p = None  # type: ignore[assignment]

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            if self._p is not None:
                self._p.finish(ok=exc[0] is None)
                self._p = None  # type: ignore[assignment]

        def __getattr__(self, _name: str):  # set_description, refresh, update_transfer...
            return lambda *a, **k: None

    return Bar


# --- checking a file against its pin -----------------------------------------------------------


@dataclass
class Checked:
    sha256: str
    size: int
    records: int | None
    #: Refusals (a pinned file that is not the pinned one).
    problems: list[str] = field(default_factory=list)
    #: Said, not refused (an unconfirmed checksum, a revision chosen with --data-revision).
    warnings: list[str] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        return not self.problems and not self.warnings


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def measured(path: Path, counting: str) -> tuple[str, int | None]:
    """(sha256, records) of ``path``, remembered in the cache per file version
    (``fileio.file_version``: path, mtime, ctime, size, inode, device): a later run over an
    unchanged file neither hashes nor parses it again (a 20 MB JSON costs a quarter of a second);
    any change to the file measures it anew."""
    from pytest_toolbench.fileio import atomic_write_text, file_version

    version = file_version(path)
    real = version[0]
    memo = cache.assets_cache() / "verified" / (hashlib.sha256(
        f"{real}\0{counting}".encode()).hexdigest()[:32] + ".json")
    try:
        known = json.loads(memo.read_text(encoding="utf-8"))
        if known.get("version") == list(version[1:]) and known.get("counting") == counting:
            return str(known["sha256"]), known.get("records")
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    sha, records = file_sha256(real), count_records(real, counting)
    try:
        atomic_write_text(memo, json.dumps({"path": version[0], "version": list(version[1:]),
                                            "counting": counting, "sha256": sha, "records": records}))
    except OSError:  # a read-only cache: measured again next time
        pass
    return sha, records


def count_records(path: str | Path, counting: str) -> int | None:
    """Records as the pin counts them; None if the file cannot be read that way."""
    try:
        if counting == "lines":
            return sum(1 for line in Path(path).read_bytes().splitlines() if line.strip())
        data = json.loads(Path(path).read_bytes())
    except (OSError, ValueError):
        return None
    return len(data) if isinstance(data, list) else None


def mismatch_line(name: str, file: PinnedFile, what: str, expected: object, actual: object,
                  where: str) -> str:
    return (f"the real {name} data is not the pinned file: {file.path}: {what} expected {expected}, "
            f"got {actual} ({where}); refused: remove it and run 'toolbench data fetch {name} "
            f"--force', or choose another revision knowingly with --data-revision {name}=REV")


def check(choice: Choice, file: PinnedFile, path: Path) -> Checked:
    """``path`` against the pin. With the pinned revision a difference is refused, except an
    unconfirmed checksum (warned); with a revision chosen by ``--data-revision`` the pins do not
    apply and every difference is warned."""
    name = choice.spec.benchmark
    sha, records = measured(path, file.counting)
    size = path.stat().st_size
    out = Checked(sha256=sha, size=size, records=records)
    where = f"file {path}"
    differences: list[tuple[str, str, bool]] = []  # (what, line, hard)
    if file.sha256 is not None and sha != file.sha256:
        differences.append(("sha256", mismatch_line(name, file, "sha256", file.sha256, sha, where),
                            file.sha256_confirmed))
    elif file.sha256 is None and file.size is not None and size != file.size:
        differences.append(("size", mismatch_line(name, file, "size", file.size, size, where), True))
    if file.records is not None and records != file.records:
        shown = records if records is not None else f"unreadable as {file.counting}"
        differences.append(("records", mismatch_line(name, file, "records", file.records, shown, where),
                            True))
    for what, line, hard in differences:
        if choice.pinned and hard:
            out.problems.append(line)
        elif not choice.pinned:
            out.warnings.append(f"{name} {file.path} at --data-revision {choice.revision} (not the "
                                f"pinned {str(choice.spec.revision)[:12]}): {what} differs from the "
                                f"pin, {_short(line)}; the pins do not apply to it")
        else:
            out.warnings.append(f"{name} {file.path}: {what} {sha} differs from the unconfirmed pin "
                                f"{file.sha256} (a third party's value, not upstream's; file {path})")
    return out


def _short(line: str) -> str:
    m = re.search(r"(\w+ expected .*?, got [^ ]+)", line)
    return m.group(1) if m else line
