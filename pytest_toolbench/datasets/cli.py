"""``toolbench data list | fetch | verify`` (registered by the ``toolbench`` dispatcher, cli.py).

- ``list``: every benchmark's files: source, revision, sha256, size, whether the cache has them
  and where (or the URL they come from), at 80 columns; ``--json`` for scripts.
- ``fetch [NAME ...]``: download (once) and verify the pinned files, e.g. on a connected machine
  before copying ``$HF_HOME`` to an air-gapped CI runner; exit 4 with the same one line a run
  prints when a file cannot be had or is not the pinned one.
- ``verify [NAME ...]``: check the cached files against their pins without any network; exit 0
  when every file is cached and matches, 1 otherwise (each file's state is printed).

A NAME no benchmark has exits 2 (a bad command line, as in ``toolbench list NAME``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pytest_toolbench.datasets import cache
from pytest_toolbench.datasets.download import Progress, human_bytes
from pytest_toolbench.datasets.fetch import Choice, DataRefused, cached_path, check, file_url
from pytest_toolbench.datasets.registry import Registry, load_registry, refused_pin
from pytest_toolbench.datasets.resolve import choices_for, parse_revisions, resolve
from pytest_toolbench.package_data import BUNDLED_DATA_DIR
from pytest_toolbench.secret_args import masked_url
from pytest_toolbench.word_wrap import wrap_words

#: Exit status for data that cannot be had or a pin that did not load: what a run exits with
#: for the same refusal (pytest's usage error).
USAGE_ERROR = 4
#: Exit status for a bad command line (a NAME no benchmark has): argparse's, and what
#: ``toolbench list NAME`` and ``toolbench init --benchmark NAME`` exit with.
COMMAND_LINE_ERROR = 2


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    data = subparsers.add_parser(
        "data", help="the benchmarks' real data: list, fetch, verify",
        description="The real data of each benchmark: pinned to a revision, fetched once into the "
                    "Hugging Face cache ($HF_HOME; HF_ENDPOINT, HF_TOKEN and HF_HUB_OFFLINE apply; "
                    "$TOOLBENCH_GITHUB_RAW_BASE is a mirror of raw.githubusercontent.com) and "
                    "verified (sha256, records).")
    sub = data.add_subparsers(dest="data_command", metavar="ACTION")
    listing = sub.add_parser("list", help="each benchmark's files: source, revision, sha256, size, "
                                          "cached or not, where")
    listing.add_argument("--json", action="store_true", help="print the rows as JSON")
    listing.set_defaults(func=cmd_list)
    fetch = sub.add_parser("fetch", help="download and verify the pinned files (all benchmarks, "
                                         "or the NAMEs given)")
    fetch.add_argument("names", nargs="*", metavar="NAME")
    fetch.add_argument("--revision", action="append", default=[], metavar="NAME=REV",
                       help="another revision of NAME (as the plugin's --data-revision)")
    fetch.add_argument("--force", action="store_true",
                       help="download again even if the cache has the file (e.g. after a mismatch)")
    fetch.set_defaults(func=cmd_fetch)
    verify = sub.add_parser("verify", help="check the cached files against their pins (no network)")
    verify.add_argument("names", nargs="*", metavar="NAME")
    verify.set_defaults(func=cmd_verify)
    data.set_defaults(func=lambda args: (data.print_help(), 2)[1])


def _registry_or_exit() -> Registry | None:
    try:
        return load_registry()
    except ValueError as exc:
        print(f"toolbench data: {exc}", file=sys.stderr)
        return None


def _unknown_name(registry: Registry, given: list[str]) -> int:
    """0 when every NAME has pins; else say why on stderr and return the exit status: 4 for
    a pin that did not load (its data cannot be had, as for a run), 2 for a name no benchmark
    has (a mistyped command line, as ``toolbench list`` and ``init`` treat it)."""
    unknown = [n for n in given if registry.get(n) is None]
    if not unknown:
        return 0
    why = refused_pin(unknown[0])
    print(f"toolbench data: unknown benchmark {unknown[0]!r} " + (
        f"(its {why})" if why else f"(one of {', '.join(registry.names())})"), file=sys.stderr)
    return USAGE_ERROR if why else COMMAND_LINE_ERROR


def rows(registry: Registry) -> list[dict[str, Any]]:
    out = []
    for spec in registry.benchmarks:
        if spec.host == "none" or not spec.files:
            out.append({"benchmark": spec.benchmark, "source": spec.source, "revision": "-",
                        "file": "-", "sha256": "-", "size": None, "cached": None,
                        "where": f"bundled ({BUNDLED_DATA_DIR / spec.benchmark})", "note": spec.note})
            continue
        for file in spec.files:
            found = cached_path(spec, file, str(spec.revision))
            sha = file.sha256 or "(none published)"
            if file.sha256 and not file.sha256_confirmed:
                sha += " (unconfirmed)"
            out.append({"benchmark": spec.benchmark, "source": spec.source,
                        "revision": spec.revision, "file": file.path, "sha256": sha,
                        "size": file.size, "records": file.records, "cached": found is not None,
                        "where": str(found) if found else masked_url(file_url(spec, file, str(spec.revision))),
                        "note": spec.note})
    return out


def cmd_list(args: argparse.Namespace) -> int:
    registry = _registry_or_exit()
    if registry is None:
        return USAGE_ERROR
    table = rows(registry)
    if args.json:
        print(json.dumps(table, indent=2))
        return 0
    origins = dict.fromkeys([registry.origin, *(registry.origin_of(n) for n in registry.names())])
    footer = [f"cache: {cache.hub_cache()} (Hugging Face files),",
              f"    {cache.assets_cache()} (others)", f"pins: {'; '.join(origins)}"]
    wrapped = [line for f in footer for line in wrap_words(f, LIST_WIDTH)]
    print("\n".join([*listing_lines(table), "", *wrapped]))
    return 0


#: The listing's width: what ``toolbench list`` prints at, and any terminal shows whole.
LIST_WIDTH = 80


def listing_lines(table: list[dict[str, Any]]) -> list[str]:
    """One block per benchmark: its source and revision, then each file (size, sha256, cached
    or not) with where it is, or the URL it comes from, alone on the next line. A table of
    those eight columns was 147-267 characters wide, the URL its widest cell."""
    lines: list[str] = []
    for benchmark in dict.fromkeys(r["benchmark"] for r in table):
        own = [r for r in table if r["benchmark"] == benchmark]
        revision = "" if own[0]["revision"] == "-" else f", revision {str(own[0]['revision'])[:12]}"
        lines += wrap_words(f"{benchmark}: {own[0]['source']}{revision}", LIST_WIDTH)
        for row in own:
            lines += _file_lines(row)
    return lines


def _file_lines(row: dict[str, Any]) -> list[str]:
    """A file's line and its place's; a benchmark with no file (bundled) has only the place."""
    if row["file"] == "-":
        return wrap_words(f"  {row['where']}", LIST_WIDTH)
    sha = row["sha256"]
    if not sha.startswith("("):
        sha = sha[:12] + (" (unconfirmed)" if "unconfirmed" in sha else "")
    size = human_bytes(row["size"]) if row["size"] else "size unknown"
    state = "cached at:" if row["cached"] else "not cached; from:"
    return [*wrap_words(f"  {row['file']}  {size}  sha256 {sha}  {state}", LIST_WIDTH, "      "),
            f"      {row['where']}"]


def cmd_fetch(args: argparse.Namespace) -> int:
    registry = _registry_or_exit()
    if registry is None:
        return USAGE_ERROR
    status = _unknown_name(registry, args.names)
    if status:
        return status
    names = list(args.names) or registry.names()
    try:
        revisions = parse_revisions(args.revision, registry)
        resolution = resolve(names, revisions, progress=Progress, force=args.force,
                             on_wait=lambda: print("toolbench data: another process is downloading "
                                                   "the same file; waiting", file=sys.stderr))
    except (DataRefused, ValueError) as exc:
        print(f"toolbench data: {exc}", file=sys.stderr)
        return USAGE_ERROR
    for warning in dict.fromkeys(resolution.warnings):
        print(f"toolbench data: warning: {warning}", file=sys.stderr)
    for f in resolution.files:
        state = "verified" if f.verified else ("not the pinned revision" if f.pinned is False else
                                               "recorded (no published sha256)")
        print(f"{f.benchmark}  {f.upstream_path}  {f.records} records  sha256 {f.fingerprint}  "
              f"{state}  {f.path}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    registry = _registry_or_exit()
    if registry is None:
        return USAGE_ERROR
    status = _unknown_name(registry, args.names)
    if status:
        return status
    names = list(args.names) or registry.names()
    ok = True
    for choice in choices_for(names, {}, registry):
        ok &= _verify_one(choice)
    return 0 if ok else 1


def _verify_one(choice: Choice) -> bool:
    ok = True
    for file in choice.spec.files:
        path = cached_path(choice.spec, file, choice.revision)
        label = f"{choice.spec.benchmark}  {file.path}"
        if path is None:
            print(f"{label}  not cached (toolbench data fetch {choice.spec.benchmark})")
            ok = False
            continue
        checked = check(choice, file, path)
        if checked.problems:
            print(f"{label}  MISMATCH: {checked.problems[0]}")
            ok = False
        elif checked.warnings:
            print(f"{label}  ok, with a warning: {checked.warnings[0]}")
        else:
            state = "ok" if file.sha256 else "ok (records; no published sha256)"
            print(f"{label}  {state}: {checked.records} records, sha256 {checked.sha256[:12]}  {path}")
    return ok
