"""Secret values on a command line, masked before the command is written anywhere.

Reports travel (CI artifacts, Allure, a shared runs folder): a key given as ``--api-key X`` must
not travel with them. A secret can also ride inside a pass-through option, whose values form a
command line of their own (the vLLM server's): ``--vllm-arg=--hf-token=X``, or the flag and its
value in two of them, ``--vllm-arg=--api-key --vllm-arg=X``. Those are masked as that command
line's own, wherever the arguments are recorded (the reported pytest command line, the run's
``vllm.extra_args`` setting). A URL's password (a data mirror's, a proxy's) is masked wherever the
URL is named.
"""

from __future__ import annotations

import re
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


def masked_url(url: str) -> str:
    """``url`` as it may be shown or recorded: the password of its user info masked
    (``https://user:***@mirror/hf``), everything else as given. A URL may carry one (a mirror
    behind basic auth as ``$HF_ENDPOINT``), and where it is named (an error line, a run's data
    provenance) travels with the reports.

    No URL parser decides where the user info ends: a URL too broken to parse (a ``/``, ``?`` or
    ``#`` in the password) is still masked, from the first ``:`` after the scheme to the last
    ``@``. A path or query holding an ``@`` after a port is masked with it: a shown URL may lose
    a little, a password may not show."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    if "@" not in rest:
        return url
    userinfo = rest.rpartition("@")[0]
    after = rest[len(userinfo) + 1:]
    user, colon, _ = userinfo.partition(":")
    return f"{scheme}{sep}{user}{':' + MASK if colon else ''}@{after}"


#: ``scheme://user:password@`` anywhere in a text (an exception's message quoting a URL).
_URL_PASSWORD = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://[^\s/?#@:]*):[^\s@]*@")


def masked_urls_in(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@`` in it masked: the message
    of an HTTP library's exception quotes the URL (or the proxy's) it failed on, as given."""
    return _URL_PASSWORD.sub(rf"\1:{MASK}@", text)
