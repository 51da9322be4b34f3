"""The pins: for each benchmark, where its real files live, the revision each is pinned to, and
what each must be (sha256, size, record count).

Why these pins (each names its upstream source):

- **ToolHop**: Hugging Face dataset ``bytedance-research/ToolHop``, ``data/ToolHop.json`` at
  ``b439d7279af359fda46e8117ae4f0245b75f5c6b``, the revision GitHub ``local-bench/local-bench`` @
  ``f0ce8cf`` pinned (``suite/v1/itemsets.lock.json``). The sha256 is the LFS oid of
  ``data/ToolHop.json`` in the upstream code mirror (``MananDesai54/llm-benchmarking``), i.e. the
  file upstream's evaluation used; two independent third-party projects record that same sha256, one
  for this revision and one for ``main`` (so the dataset repo's later "update data" commit left
  this file as it is, or came before this revision; which commit holds which bytes could not be
  read from here). Both pins therefore apply: the revision, and sha256 + size + 995 records, so
  whatever the history, a run on another file is refused.
- **ToolBeHonest**: ``Joelzhang/ToolBeHonest`` at ``524ef5422f63899e7c1a97c791197c37ace0e051``
  (``main``; the JSON last changed in ``436aefb``). ``test_en.json``'s sha256 and size come from
  a third party's download script, not from upstream: a mismatch warns
  (``sha256_confirmed=False``). ``test_zh.json`` has no published checksum: its sha256 is
  recorded, not checked. 350 records per language (7 subtasks x 50, paper Table 1).
- **FamilyTool**: GitHub ``yxzwang/FamilyTool`` at ``c3c5fc7e2496df3db4ffa045f0dbf34114c27802``
  (repository HEAD, "extending Familytool"), the commit the shared copies come from; sha256, size
  and record count (non-blank lines) of each file measured on those copies.
- **Meta-Bench**: nothing released (GitHub ``qinshengqian/Meta-Tool`` holds a README only): the
  data is this project's reconstruction (``data/metabench``), nothing to fetch; ``--data-dir`` takes real files if they appear.

``TOOLBENCH_DATA_REGISTRY=FILE`` replaces these pins with a JSON file of the same shape
(:class:`Registry`): for a mirror that holds other files, and for the tests.

A benchmark installed from another package pins its own real files the same way, with no edit of
this one: an entry point in the ``pytest_toolbench.data`` group, named as the benchmark, pointing
at its :class:`BenchmarkData` (or a dict of that shape). Its files are then fetched, verified,
cached and reported as the built-in benchmarks' are (``--data real``, ``--data-revision``,
``toolbench data list|fetch|verify``). A registry file replaces the built-in pins only: an
installed benchmark it does not name keeps its own.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Literal

from pydantic import Field

from pytest_toolbench.deferred_model import DeferredModel

#: A JSON registry file that replaces the built-in pins (tests, mirrors with other files).
REGISTRY_ENV = "TOOLBENCH_DATA_REGISTRY"

Host = Literal["huggingface", "github", "none"]


class PinnedFile(DeferredModel):
    """One file of a benchmark's real data."""

    #: The name the loader reads in ``DIR/<benchmark>/`` (``--data-dir`` layout).
    name: str
    #: The file's path in the upstream repository.
    path: str
    #: None: no published checksum (recorded, not checked).
    sha256: str | None = None
    #: False: the checksum is a third party's, not upstream's: a mismatch warns instead of refusing.
    sha256_confirmed: bool = True
    size: int | None = None
    records: int | None = None
    #: How records are counted: the length of the JSON array, or the non-blank lines.
    counting: Literal["json-array", "lines"] = "json-array"


class BenchmarkData(DeferredModel):
    """Where one benchmark's real files live and what they must be."""

    benchmark: str
    #: ``none``: nothing released; the data is this project's reconstruction (bundled).
    host: Host
    #: ``owner/name`` of the Hugging Face dataset or GitHub repository.
    repo: str | None = None
    #: The pinned revision: a full commit hash.
    revision: str | None = None
    files: list[PinnedFile] = Field(default_factory=list)
    #: Why this pin (shown by ``toolbench data list``).
    note: str = ""
    #: Where this pin came from, where not from its registry's origin (an installed package's).
    origin: str | None = None

    @property
    def source(self) -> str:
        """``huggingface:owner/name``, ``github:owner/name``, or the reconstruction's words."""
        if self.host == "none":
            return "this project's reconstruction"
        return f"{self.host}:{self.repo}"


class Registry(DeferredModel):
    benchmarks: list[BenchmarkData]
    #: Where the pins came from: "built-in" or the registry file's path.
    origin: str = "built-in"

    def get(self, name: str) -> BenchmarkData | None:
        return next((b for b in self.benchmarks if b.benchmark == name), None)

    def names(self) -> list[str]:
        return [b.benchmark for b in self.benchmarks]

    def origin_of(self, name: str) -> str:
        """Where benchmark ``name``'s pin came from (the report's ``registry`` of its files)."""
        spec = self.get(name)
        return spec.origin if spec is not None and spec.origin else self.origin


BUILTIN = Registry(benchmarks=[
    BenchmarkData(
        benchmark="toolhop", host="huggingface", repo="bytedance-research/ToolHop",
        revision="b439d7279af359fda46e8117ae4f0245b75f5c6b",
        files=[PinnedFile(
            name="ToolHop.json", path="data/ToolHop.json",
            sha256="0a51f71a44b7025645e452123af3caf2e348301922af91778e268db0188a7fab",
            size=19_720_396, records=995)],
        note="revision as local-bench pinned it; sha256 = the LFS oid in upstream's code repository "
             "(the file upstream's evaluation used)",
    ),
    BenchmarkData(
        benchmark="toolbehonest", host="huggingface", repo="Joelzhang/ToolBeHonest",
        revision="524ef5422f63899e7c1a97c791197c37ace0e051",
        files=[
            PinnedFile(name="test_en.json", path="test_en.json",
                       sha256="51495dc14e5403ccc56d7430253cf41a1e5aa30ce7e35ae9b207fce667ea7a2a",
                       sha256_confirmed=False, size=1_078_934, records=350),
            PinnedFile(name="test_zh.json", path="test_zh.json", records=350),
        ],
        note="main when pinned; test_en.json's sha256 is a third party's (a mismatch warns), "
             "test_zh.json has none published",
    ),
    BenchmarkData(
        benchmark="familytool", host="github", repo="yxzwang/FamilyTool",
        revision="c3c5fc7e2496df3db4ffa045f0dbf34114c27802",
        files=[
            PinnedFile(name="familytool-b.jsonl", path="datasets/familytool-b.jsonl",
                       sha256="fe036758285e7f5dfab272a05bb34970fea33a435808b94941e300a2fab969e8",
                       size=3_872_306, records=483, counting="lines"),
            PinnedFile(name="familytool-e.jsonl", path="datasets/familytool-e.jsonl",
                       sha256="ad81a53f62a0163c57f0a3669d1f4670a5ee17f5b93408f2987e99602dcc8dbb",
                       size=3_533_815, records=455, counting="lines"),
            PinnedFile(name="familykg-b.txt", path="KG/familykg-b.txt",
                       sha256="546daa7fe96f3b45bcdb79fc98edcc335fcd12c19b13c954cf3a2cd270f41e9e",
                       size=7_088, records=154, counting="lines"),
            PinnedFile(name="familykg-e.txt", path="KG/familykg-e.txt",
                       sha256="732ec34b012bc0a2ec73e50514492aa4a0556e40baafd91a8520896958897e3b",
                       size=24_568, records=491, counting="lines"),
        ],
        note="repository HEAD (2025-05-26), the commit the shared copies come from",
    ),
    BenchmarkData(
        benchmark="metabench", host="none",
        note="nothing released (qinshengqian/Meta-Tool holds a README only): data/metabench is this "
             "project's reconstruction",
    ),
])


def load_registry() -> Registry:
    """The pins in force: ``$TOOLBENCH_DATA_REGISTRY`` (a JSON :class:`Registry`) if set, else the
    built-in ones; then the installed benchmarks' own (:func:`installed_pins`) for every
    benchmark those do not name. A registry file or an installed pin that cannot be read is a
    ValueError (one line)."""
    path = os.environ.get(REGISTRY_ENV)
    if not path:
        base = BUILTIN
    else:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            base = Registry.model_validate({**data, "origin": str(path)})
        except (OSError, ValueError) as exc:
            raise ValueError(f"${REGISTRY_ENV} {path}: not a data registry ({_first_line(exc)})") from None
    named = set(base.names())
    installed = [pin for pin in installed_pins() if pin.benchmark not in named]
    if not installed:
        return base
    return Registry(benchmarks=[*base.benchmarks, *installed], origin=base.origin)


#: The entry point group through which an installed package pins its benchmark's real files.
DATA_ENTRY_POINT_GROUP = "pytest_toolbench.data"


@functools.cache
def installed_pins() -> tuple[BenchmarkData, ...]:
    """The pins of the ``pytest_toolbench.data`` entry points, read once per process. A pin for
    a built-in benchmark, whose ``benchmark`` is not its entry point's name, or that does not
    load is left out with its reason, as a benchmark entry point is (entry_points.load_group):
    a pin names the files of the benchmark of that name, and one package's broken pin must not
    stop the runs of the others' benchmarks. A run that needs it is told why it is missing
    (:func:`refused_pin`)."""
    from pytest_toolbench.entry_points import load_group

    def pin_of_its_name(point, loaded) -> BenchmarkData:
        try:
            pin = loaded if isinstance(loaded, BenchmarkData) else BenchmarkData.model_validate(loaded)
        except ValueError as exc:  # pydantic's ValidationError: a bad shape
            raise ValueError(f"not a data pin ({_first_line(exc)})") from None
        if pin.benchmark != point.name:
            raise ValueError(f"it pins {pin.benchmark!r}, not {point.name!r}")
        package = point.dist.name if point.dist is not None else point.value.split(":")[0]
        return pin.model_copy(update={"origin": f"installed ({package}, entry point)"})

    return tuple(load_group(DATA_ENTRY_POINT_GROUP, "data pin", taken=BUILTIN.names(),
                            check=pin_of_its_name).values())


def refused_pin(name: str) -> str | None:
    """Why benchmark ``name``'s installed pin was left out (one line), if it was."""
    from pytest_toolbench.entry_points import left_out_named

    installed_pins()
    refused = left_out_named(DATA_ENTRY_POINT_GROUP, name)
    return refused.text() if refused is not None else None


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def has_real_files(name: str) -> bool:
    """Whether benchmark ``name`` has pinned files to fetch (not Meta-Bench, not third-party)."""
    try:
        spec = load_registry().get(name)
    except ValueError:
        return False
    return spec is not None and spec.host != "none" and bool(spec.files)
