"""The installed packages' entry points, read once per process, and loaded one by one.

``importlib.metadata.entry_points(group=...)`` reads every installed distribution's metadata
again on each call (~15-20 ms with this project's dependencies); the benchmark registry and the
model providers each asked for their own group, so every pytest process (each xdist worker too)
paid that scan twice at start-up.

:func:`load_group` guards against one broken package stopping every run: an entry point that
does not load (an import error, a bad object) or that its group refuses (a name clash) is left
out and remembered (:func:`left_out`), not raised. The runs that do not need it go on, with a
warning naming it; a run that asks for that name is told why it is missing."""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any


@functools.cache
def _installed() -> importlib.metadata.EntryPoints:
    return importlib.metadata.entry_points()


def entry_points_of(group: str) -> importlib.metadata.EntryPoints:
    """The entry points of ``group`` (one scan of the installed packages per process)."""
    return _installed().select(group=group)


class EntryPointWarning(UserWarning):
    """An installed package's entry point was left out (``-W error::...EntryPointWarning``
    makes that stop the run)."""


@dataclass(frozen=True)
class LeftOut:
    """An installed entry point that was not loaded, and why (one line)."""

    kind: str  # what the group registers: "benchmark", "data pin", "model provider"
    name: str
    value: str
    package: str | None
    reason: str

    def text(self) -> str:
        origin = f"{self.value}, from {self.package}" if self.package else self.value
        return f"{self.kind} entry point {self.name!r} ({origin}) was left out: {self.reason}"


#: (group, name) -> why that entry point was left out, for this process's life.
_LEFT_OUT: dict[tuple[str, str], LeftOut] = {}


def load_group(group: str, kind: str, *, taken: Collection[str] = (),
               shadowed: Collection[str] = (),
               check: Callable[[importlib.metadata.EntryPoint, Any], Any] | None = None,
               ) -> dict[str, Any]:
    """Every loadable entry point of ``group`` by name: ``{name: object}``, in name order.

    A name in ``taken`` (a built-in of the same name) or seen twice, an entry point whose
    ``load()`` raises, and one that ``check(point, loaded)`` refuses with an exception are left
    out with their reason; ``check`` returns the object to keep. A name in ``shadowed`` (already
    provided another way, as the group allows) is skipped without a word."""
    for key in [k for k in _LEFT_OUT if k[0] == group]:  # this load's verdicts replace the last
        del _LEFT_OUT[key]
    found: dict[str, Any] = {}
    for point in sorted(entry_points_of(group), key=lambda p: p.name):
        if point.name in shadowed:
            continue
        try:
            if point.name in taken:
                raise ValueError(f"the built-in {kind} of that name comes first")
            if point.name in found:
                raise ValueError(f"another package's {kind} entry point of that name came first")
            loaded = point.load()
            found[point.name] = check(point, loaded) if check is not None else loaded
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - whatever a package's import
            # raises, a sys.exit() at its top level too: one line, not the end of every command
            package = point.dist.name if point.dist is not None else None
            _LEFT_OUT[(group, point.name)] = LeftOut(kind, point.name, point.value, package,
                                                     _first_line(exc))
    return found


#: the (group, name) of those a command has already named in an error (:func:`left_out_named`)
_TOLD: set[tuple[str, str]] = set()


def left_out(group: str | None = None) -> list[LeftOut]:
    """The entry points left out so far in this process (of ``group``, or of every group) that
    no error has named yet: what a warning at the end still has to say."""
    return [v for (g, n), v in sorted(_LEFT_OUT.items())
            if (group is None or g == group) and (g, n) not in _TOLD]


def left_out_named(group: str, name: str) -> LeftOut | None:
    """Why ``name`` of ``group`` was left out, if it was: what to say when a command asks for
    it (which then says it, so the end's warning does not say it again)."""
    found = _LEFT_OUT.get((group, name))
    if found is not None:
        _TOLD.add((group, name))
    return found


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    if isinstance(exc, ValueError) and first:
        return first  # a refusal's own sentence
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
