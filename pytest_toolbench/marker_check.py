"""``-m`` terms that can match no case, said before the run instead of a silent empty selection.

pytest compares a marker expression's keyword values with ``==``, so ``-m "hops(n='3')"`` never
matches a case labelled ``hops(n=3)`` (an int), and ``scenario(name='mandatry')`` never matches
anything: the run would select nothing and say only "no case ran". Before any model call
the controller looks at each ``name(key=value)`` term (and each bare marker name) of ``-m`` against
the marks the selected cases will carry:

* a term that matches no case is *dead*; its message names the marker, the values that exist,
  and the likely fix (the other type, or the closest spelling);
* if the whole expression then selects no case, that is a usage error; if it still selects some
  (``hops(n=3) or hops(n='4')``), a warning, so a correct selection is never refused.

The expression is read with pytest's own lexer and evaluated with pytest's own matcher rule, so
values are typed exactly as pytest types them. Anything unexpected skips the check.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

#: At most this many existing values are listed in a message.
MAX_VALUES = 15


@dataclass(frozen=True)
class Term:
    text: str  # as written, e.g. "hops(n='3')"
    name: str
    kwargs: tuple[tuple[str, Any], ...]  # typed as pytest types them (int, str, bool, None)


def parse_terms(markexpr: str) -> list[Term]:
    """Every ``name`` and ``name(k=v, ...)`` term of a marker expression."""
    from _pytest.mark.expression import Expression, Scanner, TokenType

    tokens = [t for t in Scanner.__new__(Scanner).lex(markexpr)]
    terms: list[Term] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.type is not TokenType.IDENT:
            i += 1
            continue
        if i + 1 < len(tokens) and tokens[i + 1].type is TokenType.LPAREN and _is_call(tokens, i):
            end = next(j for j in range(i + 2, len(tokens)) if tokens[j].type is TokenType.RPAREN)
            text = markexpr[tok.pos: tokens[end].pos + 1]
            seen: list[tuple[str, tuple[tuple[str, Any], ...]]] = []

            def record(name: str, /, **kwargs: Any) -> bool:
                seen.append((name, tuple(sorted(kwargs.items()))))
                return False

            Expression.compile(text).evaluate(record)
            terms.append(Term(text, seen[0][0], seen[0][1]))
            i = end + 1
        else:
            terms.append(Term(tok.value, tok.value, ()))
            i += 1
    return terms


def _is_call(tokens: Sequence[Any], i: int) -> bool:
    """``name(`` starts keyword arguments only when an ``IDENT =`` follows (else it is a group)."""
    from _pytest.mark.expression import TokenType

    return (i + 3 < len(tokens) and tokens[i + 2].type is TokenType.IDENT
            and tokens[i + 3].type is TokenType.EQUAL)


def _matches(marks: Iterable[Any], name: str, kwargs: dict[str, Any]) -> bool:
    """pytest's MarkMatcher rule: some mark of that name has every keyword equal."""
    missing = object()
    return any(m.name == name and all(m.kwargs.get(k, missing) == v for k, v in kwargs.items())
               for m in marks)


def _values_text(values: set[Any]) -> str:
    shown = sorted(values, key=lambda v: (type(v).__name__, v))
    text = ", ".join(repr(v) for v in shown[:MAX_VALUES])
    return text + (f", ... ({len(shown)} in all)" if len(shown) > MAX_VALUES else "")


def _fix(term: Term, key: str, wanted: Any, values: set[Any]) -> str:
    same_text = [v for v in values if str(v) == str(wanted) and type(v) is not type(wanted)]
    if same_text:
        kind = "numbers" if isinstance(same_text[0], int) else "strings"
        return f" ({kind}: write {term.name}({key}={same_text[0]!r}))"
    close = difflib.get_close_matches(str(wanted), [str(v) for v in values], n=1, cutoff=0.6)
    if close:
        value = next(v for v in values if str(v) == close[0])
        return f" (did you mean {term.name}({key}={value!r})?)"
    return ""


def dead_terms(terms: Sequence[Term], case_marks: Sequence[Sequence[Any]],
               registered: set[str]) -> list[str]:
    """A message per term that matches no case (see the module docstring)."""
    names = {m.name for marks in case_marks for m in marks}
    out = []
    for term in terms:
        if not term.kwargs:
            close = difflib.get_close_matches(term.name, sorted(names), n=1, cutoff=0.75)
            if term.name not in names and term.name not in registered and close:
                out.append(f"{term.text} is no marker of any selected case (did you mean "
                           f"{close[0]}? their markers: {', '.join(sorted(names))})")
            continue
        kwargs = dict(term.kwargs)
        if any(_matches(marks, term.name, kwargs) for marks in case_marks):
            continue
        if term.name not in names:
            close = difflib.get_close_matches(term.name, sorted(names), n=1, cutoff=0.75)
            hint = f"did you mean {close[0]}? " if close else ""
            out.append(f"{term.text} matches no case: no selected case has a {term.name} marker "
                       f"({hint}their markers: {', '.join(sorted(names))})")
            continue
        parts = []
        for key, wanted in kwargs.items():
            values = {m.kwargs[key] for marks in case_marks for m in marks
                      if m.name == term.name and key in m.kwargs}
            if wanted in values:
                continue
            if not values:
                parts.append(f"no {term.name} marker has a {key!r} keyword")
                continue
            parts.append(f"the {term.name} {key} values of the selected cases are "
                         f"{_values_text(values)}{_fix(term, key, wanted, values)}")
        reason = "; ".join(parts) or "no case has all of these values together"
        out.append(f"{term.text} matches no case: {reason}")
    return out


def selects_any(markexpr: str, case_marks: Sequence[Sequence[Any]]) -> bool:
    """Whether the expression selects at least one of these cases (by their own marks)."""
    from _pytest.mark import MarkMatcher
    from _pytest.mark.expression import Expression

    expr = Expression.compile(markexpr)
    return any(expr.evaluate(MarkMatcher.from_markers(marks)) for marks in case_marks)


def check_markexpr(markexpr: str, case_marks: Sequence[Sequence[Any]],
                   registered: set[str]) -> tuple[list[str], bool]:
    """(messages for the dead terms, whether the expression still selects some case)."""
    try:
        terms = parse_terms(markexpr)
        return dead_terms(terms, case_marks, registered), selects_any(markexpr, case_marks)
    except Exception:  # noqa: BLE001 - pytest reports a malformed -m itself; never block a run
        return [], True
