"""Secret values on a command line, masked before the command is written anywhere.

Reports travel (CI artifacts, Allure, a shared runs folder): a key given as ``--api-key X`` must
not travel with them. A secret can also ride inside a pass-through option, whose values form a
command line of their own (the vLLM server's): ``--vllm-arg=--hf-token=X``, or the flag and its
value in two of them, ``--vllm-arg=--api-key --vllm-arg=X``. Those are masked as that command
line's own, wherever the arguments are recorded (the reported pytest command line, the run's
``vllm.extra_args`` setting).
"""

from __future__ import annotations

from collections.abc import Iterable

#: An option whose name ends so takes a secret value.
SECRET_SUFFIXES = ("-key", "-token", "-secret", "-password")
#: Options whose values are another program's arguments (``--vllm-arg=--max-model-len=4096``).
PASS_THROUGH = ("--vllm-arg",)
MASK = "***"


def is_secret_flag(name: str) -> bool:
    """``--api-key``, ``--hf-token``...: an option whose value is a secret."""
    return name.startswith("--") and name.lower().endswith(SECRET_SUFFIXES)


def _redact_stream(args: list[str]) -> list[str]:
    """One command line: ``--x-key=V`` and the argument after a bare ``--x-key`` masked."""
    out: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next:
            out.append(MASK)
            hide_next = False
            continue
        name, eq, _ = arg.partition("=")
        if is_secret_flag(name):
            out.append(f"{name}={MASK}" if eq else arg)
            hide_next = not eq
        else:
            out.append(arg)
    return out


def redact_secret_args(args: Iterable[object]) -> list[str]:
    """The arguments as they may be reported: every secret option's value masked, among the
    arguments and among the pass-through options' values."""
    out = [str(a) for a in args]
    own: list[int] = []  # where the command's own arguments are
    passed: list[tuple[int, str]] = []  # where each pass-through value is, and its "name="
    i = 0
    while i < len(out):
        name, eq, _ = out[i].partition("=")
        if name in PASS_THROUGH and eq:
            passed.append((i, f"{name}="))
        elif name in PASS_THROUGH and i + 1 < len(out):
            own.append(i)
            i += 1
            passed.append((i, ""))
        else:
            own.append(i)
        i += 1
    for i, masked in zip(own, _redact_stream([out[i] for i in own])):
        out[i] = masked
    values = [out[i][len(prefix):] for i, prefix in passed]
    for (i, prefix), masked in zip(passed, _redact_stream(values)):
        out[i] = prefix + masked
    return out
