"""Make a matplotlib chart readable at a glance: no clipped title, no overlapping tick label.

matplotlib's ``tight_layout`` makes room for labels but never shortens a title that is wider than
the figure (it is cut at both edges) nor separates x tick labels that run into each other. These helpers measure the drawn text and change the layout until it fits:

* :func:`fit_title` wraps a title onto as many lines as it needs;
* :func:`fit_xticklabels` tries the labels horizontal, then wrapped between words (``_`` and
  ``-`` count as word ends), then vertical, then widens the figure;
* :func:`layout_problems` lists what is still wrong (tests call it on every chart written).
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

#: Pixels of slack when comparing boxes (anti-aliasing, rounding).
_SLACK = 1.0


def _renderer(fig: Any) -> Any:
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _inside(box: Any, outer: Any) -> bool:
    return (box.x0 >= outer.x0 - _SLACK and box.y0 >= outer.y0 - _SLACK
            and box.x1 <= outer.x1 + _SLACK and box.y1 <= outer.y1 + _SLACK)


#: Neighbouring tick labels closer than this (pixels) read as one word.
MIN_GAP = 4.0


def _overlap(a: Any, b: Any, gap: float = -_SLACK) -> bool:
    """Whether two boxes overlap, or (``gap`` > 0) come closer than ``gap`` pixels."""
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > -gap
            and min(a.y1, b.y1) - max(a.y0, b.y0) > -gap)


def _tick_labels(ax: Any, which: str = "x") -> list[Any]:
    """The tick labels drawn: with text, visible, and at a tick inside the view limits."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    lo, hi = sorted(ax.get_xlim() if which == "x" else ax.get_ylim())
    return [tick.label1 for tick in axis.get_major_ticks()
            if tick.label1.get_text() and tick.label1.get_visible()
            and lo - 1e-9 <= tick.get_loc() <= hi + 1e-9]


def layout_problems(fig: Any) -> list[str]:
    """Texts outside the figure (clipped) and x tick labels that overlap, as readable lines."""
    renderer = _renderer(fig)
    outer = fig.bbox
    problems = []
    for ax in fig.axes:
        texts = [ax.title, ax.xaxis.label, ax.yaxis.label, *_tick_labels(ax),
                 *_tick_labels(ax, "y")]
        legend = ax.get_legend()
        if legend is not None:
            texts.append(legend)
        for text in texts:
            if hasattr(text, "get_text") and not text.get_text():
                continue
            if not _inside(text.get_window_extent(renderer), outer):
                name = text.get_text() if hasattr(text, "get_text") else "legend"
                problems.append(f"clipped: {name!r}")
        framing = [(name, t.get_window_extent(renderer)) for name, t in
                   (("title", ax.title), ("legend", legend), ("x label", ax.xaxis.label))
                   if t is not None and (not hasattr(t, "get_text") or t.get_text())]
        for i, (na, a) in enumerate(framing):
            for nb, b in framing[i + 1:]:
                if _overlap(a, b):
                    problems.append(f"{na} overlaps {nb}")
        boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in _tick_labels(ax)]
        for (ta, a), (tb, b) in zip(boxes, boxes[1:]):
            if _overlap(a, b, MIN_GAP):
                problems.append(f"overlapping x labels: {ta!r} and {tb!r}")
    return problems


def fit_title(fig: Any, ax: Any, text: str, *, fontsize: float = 9, pad: float | None = None) -> None:
    """Set the axes title, wrapped onto more lines until it fits the figure: it is centred on
    the axes, so the room is twice the distance from the axes' centre to the nearer edge.
    Call it once the layout is final (after ``tight_layout``), and lay out again after."""
    lines = text.split("\n")
    for _ in range(8):
        ax.set_title("\n".join(lines), fontsize=fontsize, pad=pad)
        renderer = _renderer(fig)
        centre = (ax.get_window_extent(renderer).x0 + ax.get_window_extent(renderer).x1) / 2
        room = 2 * min(centre - fig.bbox.x0, fig.bbox.x1 - centre) * 0.96
        box = ax.title.get_window_extent(renderer)
        if box.width <= room:
            return
        chars = max(12, int(max(len(ln) for ln in lines) * room / box.width) - 1)
        lines = [w for ln in lines for w in textwrap.wrap(ln, chars, break_on_hyphens=False) or [""]]


def settle(fig: Any, ax: Any, title: str, *, fontsize: float = 9, pad: float | None = None) -> None:
    """Lay out, fit the title to the result, and lay out again until the title stays inside
    (a wrapped title is taller, which moves the axes, which moves the title's centre)."""
    for _ in range(3):
        fig.tight_layout()
        fit_title(fig, ax, title, fontsize=fontsize, pad=pad)
        fig.tight_layout()
        if _inside(ax.title.get_window_extent(_renderer(fig)), fig.bbox):
            return


def wrap_label(label: str, chars: int) -> str:
    """A label on several lines of at most ``chars`` (where it can: after ``_``, ``-``, ``/`` or
    a space)."""
    return _wrap_label(label, chars)


def _wrap_label(label: str, chars: int) -> str:
    spaced = re.sub(r"([_\-/])", r"\1 ", label)  # may break after _ - /
    lines = textwrap.wrap(spaced, chars, break_long_words=False, break_on_hyphens=False)
    return "\n".join(re.sub(r"([_\-/]) ", r"\1", ln) for ln in lines) if lines else label


def _labels_overlap(fig: Any, ax: Any) -> bool:
    renderer = _renderer(fig)
    boxes = [t.get_window_extent(renderer) for t in _tick_labels(ax)]
    return any(_overlap(a, b, MIN_GAP) for a, b in zip(boxes, boxes[1:]))


def fit_xticklabels(fig: Any, ax: Any, labels: list[str], *, fontsize: float = 8,
                    max_width: float = 16.0) -> None:
    """Tick labels that do not overlap: horizontal, else wrapped, else the same on a wider
    figure (up to ``max_width`` inches), else vertical on a taller figure."""
    longest = max((len(x) for x in labels), default=0)
    attempts = [labels] + [[_wrap_label(x, chars) for x in labels]
                           for chars in (14, 9) if longest > chars]

    def show(texts: list[str], rotation: int) -> bool:
        ax.set_xticks(range(len(texts)))
        ax.set_xticklabels(texts, rotation=rotation, fontsize=fontsize,
                           ha="center", va="top", multialignment="center")
        fig.tight_layout()
        return not _labels_overlap(fig, ax)

    while True:
        if any(show(texts, 0) for texts in attempts):
            return
        w, h = fig.get_size_inches()
        if w >= max_width:
            break
        fig.set_size_inches(min(max_width, w * 1.3), h)
    w, h = fig.get_size_inches()
    show(labels, 90)
    renderer = _renderer(fig)
    tall = max((t.get_window_extent(renderer).height for t in _tick_labels(ax)), default=0.0)
    fig.set_size_inches(w, h + tall / fig.dpi)  # the plot keeps its height
    fig.tight_layout()
