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
import math
import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from pytest_toolbench.secret_args import is_secret_flag

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
    """An option whose value must not be written into a config file (secret_args.py)."""
    return is_secret_flag(flag)


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


# --- flags declared by settings fields (config.option) --------------------------------------------


@dataclass(frozen=True)
class SettingFlag:
    """One settings field that is a flag: where it sits (``("sandbox", "workers")``) and its
    declaration (``config.option``)."""

    flag: str
    path: tuple[str, ...]
    info: FieldInfo

    @property
    def extra(self) -> dict[str, Any]:
        extra = self.info.json_schema_extra
        return extra if isinstance(extra, dict) else {}

    @property
    def kind(self) -> Any:
        """The field's type without ``| None``."""
        annotation = self.info.annotation
        if typing.get_origin(annotation) in (typing.Union, types.UnionType):
            rest = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(rest) == 1:
                return rest[0]
        return annotation

    def flag_default(self) -> Any:
        """The flag's default: the declared ``flag_default``, else the field's own (a path as
        text, a list for a repeatable flag, off for a ``--no-...`` switch)."""
        if "flag_default" in self.extra:
            return copy.copy(self.extra["flag_default"])
        if self.extra.get("negate"):
            return False
        default = self.info.get_default(call_default_factory=True)
        if isinstance(default, Path):
            return str(default)
        if isinstance(default, tuple):
            return list(default)
        return default

    def argparse_attrs(self, default: Any) -> dict[str, Any]:
        """What :meth:`ToolbenchGroup.addoption` is given for this flag."""
        attrs: dict[str, Any] = {}
        kind = self.kind
        if kind is bool:
            attrs["action"] = "store_true"
        elif self.extra.get("repeatable"):
            attrs["action"] = "append"
        elif typing.get_origin(kind) is Literal:
            attrs["choices"] = [str(c) for c in typing.get_args(kind)]
        elif kind in (int, float):
            attrs["type"] = kind
        attrs["default"] = default
        if self.extra.get("metavar"):
            attrs["metavar"] = self.extra["metavar"]
        if self.info.description:
            attrs["help"] = self.info.description
        return attrs

    def check(self, value: Any) -> None:
        """A value against the field's constraints: ValueError ``--limit 0: must be at least 1``."""
        check_value(self.flag, value, self.info)

    def setting(self, value: Any, path: Callable[[str], Path]) -> Any:
        """The setting for the flag's resolved value (``_UNSET``: keep the field's default).
        ``path`` turns a path given as text into the one the setting holds."""
        extra = self.extra
        if extra.get("negate"):
            return not value
        if value is None:
            return _UNSET
        if extra.get("split"):
            items = value if isinstance(value, list) else [value]
            value = [v.strip() for item in items for v in str(item).split(",") if v.strip()]
            if not value:
                return _UNSET
        kind = self.kind
        origin = typing.get_origin(kind)
        if origin is tuple:
            return tuple(value)
        if origin is list:
            return list(value)
        if kind is Path:  # an optional path left empty is no path; a required one is resolved
            return path(value) if value or kind is self.info.annotation else _UNSET
        return value


_UNSET: Any = object()


def _range(ge: Any, gt: Any, le: Any) -> str | None:
    """The allowed range in words ("between 0 and 1", "at least 1", "positive"), if any."""
    if ge is not None and le is not None:
        return f"between {ge:g} and {le:g}"
    if ge is not None:
        low: str | None = "0 or more" if ge == 0 else f"at least {ge:g}"
    elif gt is not None:
        low = "positive" if gt == 0 else f"more than {gt:g}"
    else:
        low = None
    if le is None:
        return low
    return f"{low} and at most {le:g}" if low else f"at most {le:g}"


def check_value(flag: str, value: Any, info: FieldInfo) -> None:
    """``value`` of ``flag`` against the constraints its field declares, as one ValueError line
    naming the flag, the value and what is allowed (``--repeats 0: must be between 1 and 1000``).

    Guards against values that parse but cannot work: a number outside its range, ``inf`` or
    ``nan`` (a timeout that never fires or overflows, a temperature no API takes: every float
    flag is refused them unless its field allows them), an empty text where one is needed
    (``--model=``, ``--scenario=``)."""
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    why = f" {extra['why']}" if extra.get("why") else ""
    meta = {type(m).__name__: m for m in info.metadata}
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, (str, list, tuple)):
        least = getattr(meta.get("MinLen"), "min_length", 0)
        items = [value] if isinstance(value, str) else [str(v) for v in value]
        if extra.get("split"):
            items = [v for item in items for v in item.split(",")]
        if least and len([v for v in items if v.strip()]) < least:
            shown = ",".join(str(v) for v in ([value] if isinstance(value, str) else value))
            raise ValueError(f"{flag} {shown!r}: must not be empty{why}")
        return
    ge, gt, le = (getattr(meta.get(k), k.lower(), None) for k in ("Ge", "Gt", "Le"))
    allowed = _range(ge, gt, le)
    if isinstance(value, float) and not math.isfinite(value):
        if getattr(meta.get("AllowInfNan"), "allow_inf_nan", False):
            return
        rule = "must be a finite number" + (f", {allowed}" if allowed else "")
        raise ValueError(f"{flag} {value}: {rule}{why}")
    ok = ((ge is None or value >= ge) and (gt is None or value > gt)
          and (le is None or value <= le))
    if not ok:
        raise ValueError(f"{flag} {value}: must be {allowed}{why}")


def setting_flags(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> list[SettingFlag]:
    """Every flag a settings model declares, nested models' in place, in declaration order."""
    flags: list[SettingFlag] = []
    for name, info in model.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        if extra.get("flag"):
            flags.append(SettingFlag(str(extra["flag"]), (*prefix, name), info))
        elif isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            flags += setting_flags(info.annotation, (*prefix, name))
    return flags


def add_setting_flags(group: ToolbenchGroup, model: type[BaseModel],
                      defaults: dict[str, Any] | None = None) -> None:
    """Add the flags ``model`` declares; ``defaults`` (flag -> value) replaces a flag's default
    where it is only known at run time (e.g. from the environment)."""
    for setting in setting_flags(model):
        default = (defaults or {}).get(setting.flag, _UNSET)
        default = setting.flag_default() if default is _UNSET else default
        group.addoption(setting.flag, **setting.argparse_attrs(default))


def settings_values(model: type[BaseModel], getoption: Callable[[str], Any],
                    path: Callable[[str], Path]) -> dict[str, Any]:
    """The resolved flags of ``model`` as the nested values to build it from, each checked
    against its constraints (ValueError: one line naming the flag). Flags left unset leave the
    field's default."""
    values: dict[str, Any] = {}
    for setting in setting_flags(model):
        raw = getoption(setting.flag)
        setting.check(raw)
        value = setting.setting(raw, path)
        if value is _UNSET:
            continue
        target = values
        for part in setting.path[:-1]:
            target = target.setdefault(part, {})
        target[setting.path[-1]] = value
    return values
