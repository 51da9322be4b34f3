"""Where a toolbench option's value comes from: the command line, the ini file, or its default.

Why: pytest users keep settings in ``pyproject.toml`` (``[tool.pytest.ini_options]``) or
``pytest.ini`` and read every default in ``pytest --help``. Both are done here, once, for every
option: the core flags (``options.py``) and each benchmark's (``benchmarks/options.py``) are added
through :class:`ToolbenchGroup`, which

- appends ``(default: X)`` to the help text unless it already speaks of its default;
- registers an ini key named after the flag (:func:`ini_name`: ``--concurrency`` ->
  ``toolbench_concurrency``, ``--familytool-k`` -> ``toolbench_familytool_k``,
  ``--toolbench-json`` -> ``toolbench_json``); secrets (``--api-key``) get none, so that no key
  ends up committed in a config file;
- hands argparse ``None`` as the default, so that "not on the command line" can be told apart.

:func:`resolve_option_sources` then fills every option left off the command line from its ini key,
else from its default: command line > ini > default. An unreadable ini value is a one-line
``ValueError`` naming the file and the key.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any, Callable

import pytest

#: Option names whose values must not be written into config files (see plugin.redact_secret_args).
_SECRET_SUFFIXES = ("-key", "-token", "-secret", "-password")
_RESOLVED_KEY = pytest.StashKey[frozenset[str]]()
_TRUE = {"1", "true", "yes", "on", "y", "t"}
_FALSE = {"0", "false", "no", "off", "n", "f", ""}


@dataclass(frozen=True)
class OptionSource:
    """What :func:`resolve_option_sources` needs to know about one option."""

    flag: str
    dest: str
    ini: str | None
    default: Any
    action: str | None
    convert: Callable[[str], Any] | None
    choices: tuple[str, ...] | None


#: dest -> source. Keyed by dest, so a second registration (pytester runs in one process)
#: replaces the first with the same definition.
_SOURCES: dict[str, OptionSource] = {}


def ini_name(flag: str) -> str:
    """``--cache-dir`` -> ``toolbench_cache_dir``; a flag already named toolbench-* keeps one prefix."""
    name = flag.lstrip("-").replace("-", "_")
    return name if name.startswith("toolbench_") else f"toolbench_{name}"


def is_secret(flag: str) -> bool:
    return flag.lower().endswith(_SECRET_SUFFIXES)


def describe_default(default: Any, action: str | None) -> str:
    if action == "store_true":
        return "on" if default else "off"
    if default is None or default == [] or default == ():
        return "none"
    if isinstance(default, (list, tuple)):
        return ",".join(str(v) for v in default)
    return str(default)


def help_with_default(help_text: str, default: Any, action: str | None) -> str:
    """The help text, ending in ``(default: X)`` unless it already names its default."""
    if re.search(r"\bdefault", help_text, flags=re.IGNORECASE):
        return help_text
    shown = describe_default(default, action).replace("%", "%%")  # argparse formats help with %
    return f"{help_text} (default: {shown})".strip()


class ToolbenchGroup:
    """A pytest option group whose options show their default and can be set from the ini file."""

    def __init__(self, parser: pytest.Parser, group: Any):
        self.parser = parser
        self.group = group

    def addoption(self, *names: str, **attrs: Any) -> None:
        flag = next(n for n in names if n.startswith("--"))
        action = attrs.get("action")
        default = attrs.get("default", False if action == "store_true" else None)
        attrs["help"] = help_with_default(attrs.get("help", ""), default, action)
        attrs["default"] = None  # None = "not on the command line"; resolved later
        self.group.addoption(*names, **attrs)
        dest = self.group.options[-1].dest
        ini = None if is_secret(flag) else ini_name(flag)
        if ini is not None:
            self.parser.addini(ini, f"same as {flag}", type="args" if action == "append" else "string")
        convert = attrs.get("type")
        _SOURCES[dest] = OptionSource(
            flag=flag, dest=dest, ini=ini, default=default, action=action,
            convert=convert if convert in (int, float) else None,
            choices=tuple(str(c) for c in attrs["choices"]) if attrs.get("choices") else None,
        )


def _ini_value(source: OptionSource, raw: Any, where: str) -> Any:
    """One ini value, converted as the flag would convert it (ValueError: one line)."""
    prefix = f"{where}: {source.ini} = {raw!r}"
    if source.action == "append":
        items = [raw] if isinstance(raw, str) else list(raw)
        values = [str(v).strip() for v in items if str(v).strip()]
        if source.choices:
            bad = [v for c in values for v in c.split(",") if v.strip() and v.strip() not in source.choices]
            if bad:
                raise ValueError(f"{prefix}: {bad[0]!r} is not one of {', '.join(source.choices)}")
        return values
    text = str(raw).strip()
    if source.action == "store_true":
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ValueError(f"{prefix}: expected true or false")
    if source.convert is not None:
        try:
            return source.convert(text)
        except ValueError:
            kind = "an integer" if source.convert is int else "a number"
            raise ValueError(f"{prefix}: expected {kind}") from None
    if source.choices and text not in source.choices:
        raise ValueError(f"{prefix}: expected one of {', '.join(source.choices)}")
    return text


def resolve_option_sources(config: pytest.Config) -> None:
    """Fill every toolbench option left off the command line: its ini key, else its default.

    Idempotent (the first call records which options the command line gave). Raises ValueError
    with one line naming the config file and key for a value that cannot be read.
    """
    if _RESOLVED_KEY in config.stash:
        return
    where = str(config.inipath) if config.inipath else "ini"
    given: set[str] = set()
    for source in _SOURCES.values():
        if not hasattr(config.option, source.dest):
            continue
        value = getattr(config.option, source.dest)
        if value is not None:
            given.add(source.dest)
            continue
        raw = config.getini(source.ini) if source.ini else None
        if raw not in (None, "", []):
            value = _ini_value(source, raw, where)
        else:
            value = copy.copy(source.default)
        setattr(config.option, source.dest, value)
    config.stash[_RESOLVED_KEY] = frozenset(given)


def from_command_line(config: pytest.Config, flag: str) -> bool:
    """Whether ``flag`` was given on the command line (not taken from the ini file or default)."""
    dest = next((s.dest for s in _SOURCES.values() if s.flag == flag), flag.lstrip("-").replace("-", "_"))
    given = config.stash.get(_RESOLVED_KEY, None)
    if given is None:
        return bool(getattr(config.option, dest, None))
    return dest in given


def early_value(config: pytest.Config, flag: str) -> Any:
    """``flag``'s value before options are resolved (``pytest_load_initial_conftests``): the
    command line, else the ini key, else the default; an unreadable ini value reads as the default
    here (``resolve_option_sources`` reports it later)."""
    source = next((s for s in _SOURCES.values() if s.flag == flag), None)
    if source is None:
        raise KeyError(flag)
    value = getattr(config.known_args_namespace, source.dest, None)
    if value is not None:
        return value
    raw = config.getini(source.ini) if source.ini else None
    if raw not in (None, "", []):
        try:
            return _ini_value(source, raw, "ini")
        except ValueError:
            pass
    return copy.copy(source.default)
