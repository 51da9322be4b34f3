"""Per-benchmark options: a benchmark declares a pydantic model, the plugin derives its flags.

Why: the core (``config.py``, ``plugin.py``, ``options.py``) must never name a benchmark. Each
benchmark owns an options model whose fields carry their help text (``Field(description=...)``);
every field becomes ``--<benchmark>-<field-with-dashes>`` unless it says otherwise through
``json_schema_extra``:

- ``{"flag": "--toolhop-tool-timeout"}``: another spelling;
- ``{"cli": False}``: not a flag (set only from code, e.g. a fixed upstream constant);
- ``{"repeatable": True}``: for list/tuple fields, ``--flag A --flag B`` or ``--flag A,B``.

Types map the obvious way: ``bool`` -> ``store_true``, ``Literal[...]`` -> ``choices``,
``int``/``float``/``str``/``Path`` -> typed values, ``X | None`` -> optional (default None).
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo


def flag_name(benchmark: str, field: str, info: FieldInfo) -> str | None:
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    if extra.get("cli") is False:
        return None
    return str(extra.get("flag") or f"--{benchmark}-{field.replace('_', '-')}")


def _unwrap_optional(annotation: Any) -> Any:
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return rest[0] if len(rest) == 1 else annotation
    return annotation


def _argparse_spec(info: FieldInfo) -> dict[str, Any]:
    annotation = _unwrap_optional(info.annotation)
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    default = info.get_default(call_default_factory=True)
    spec: dict[str, Any] = {"help": info.description or "", "default": None}
    origin = typing.get_origin(annotation)
    if annotation is bool:
        spec.update(action="store_true")
    elif origin is Literal:
        spec.update(choices=[str(a) for a in typing.get_args(annotation)])
    elif origin in (list, tuple) or extra.get("repeatable"):
        spec.update(action="append", metavar="VALUE")
    elif annotation in (int, float):
        spec.update(type=annotation, metavar=annotation.__name__.upper())
    elif annotation is Path:
        spec.update(type=str, metavar="PATH")
    else:
        spec.update(metavar="VALUE")
    if default not in (None, False, (), []):
        spec["help"] = f"{spec['help']} (default: {default})".strip()
    return spec


def add_benchmark_options(parser: Any, benchmark: str, title: str, model: type[BaseModel]) -> None:
    """Declare the flags of one benchmark's options model in its own option group."""
    from pytest_toolbench.option_sources import ToolbenchGroup  # defaults in --help, ini keys

    group = ToolbenchGroup(parser, parser.getgroup(f"toolbench-{benchmark}", f"pytest-toolbench: {title}"))
    for field, info in model.model_fields.items():
        flag = flag_name(benchmark, field, info)
        if flag is not None:
            group.addoption(flag, dest=f"toolbench_{benchmark}_{field}", **_argparse_spec(info))


def benchmark_options_from(
    getoption: Callable[[str], Any], benchmark: str, model: type[BaseModel]
) -> BaseModel:
    """Build the options model from parsed flags; flags left unset keep the model's defaults.
    A value outside its field's constraints is one ValueError line naming the flag and the
    allowed range (``--toolhop-max-turns 0: must be at least 1``), never pydantic's report."""
    from pytest_toolbench.option_sources import check_value

    values: dict[str, Any] = {}
    flags: dict[str, str] = {}
    for field, info in model.model_fields.items():
        flag = flag_name(benchmark, field, info)
        if flag is None:
            continue
        value = getoption(f"toolbench_{benchmark}_{field}")
        if value is None or value is False:
            continue
        check_value(flag, value, info)
        if isinstance(value, list):  # repeatable: also accept comma-separated values
            value = [v.strip() for item in value for v in str(item).split(",") if v.strip()]
        values[field] = value
        flags[field] = flag
    try:
        return model.model_validate(values)
    except ValidationError as exc:  # a field validator's own rule: still one line
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else ""
        shown = f"{flags[field]} {values[field]}" if field in flags else benchmark
        raise ValueError(f"{shown}: {err['msg']}") from None
