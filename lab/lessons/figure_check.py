"""Legibility of a figure, checked where it is drawn: no text under MIN_POINTS and no two labels on top of each other.

`problems(fig)` lists what is wrong with one figure. `install()` makes every figure that is rendered (shown inline in a
notebook, or saved) pass that check first, and raise a FigureProblem naming the texts otherwise; the notebook tests
turn it on for every notebook they execute (LAB_CHECK_FIGURES=1), so a figure that a reader could not read fails CI.
"""

from __future__ import annotations

import os
from itertools import combinations

MIN_POINTS = 7.0
# Two texts overlap when their boxes share more than this part of the smaller one's area: boxes that only touch
# (adjacent tick labels, a title above its axes) are fine.
OVERLAP_SHARE = 0.15
ENV = "LAB_CHECK_FIGURES"


class FigureProblem(AssertionError):
    """A figure a reader could not read."""


def _undrawn_tick_labels(fig) -> set[int]:
    """Tick labels matplotlib keeps but does not draw: those of ticks outside the axis's view (a log axis keeps
    stale minor ticks there)."""
    hidden = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            span = (hi - lo) or 1.0
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                loc = tick.get_loc()
                if loc is None or not lo - 1e-9 * span <= loc <= hi + 1e-9 * span:
                    hidden |= {id(tick.label1), id(tick.label2)}
    return hidden


def _texts(fig):
    from matplotlib.text import Text

    hidden = _undrawn_tick_labels(fig)
    for text in fig.findobj(Text):
        if id(text) not in hidden and text.get_visible() and text.get_text().strip() and text.get_alpha() != 0:
            yield text


def _shown(text) -> str:
    s = " ".join(text.get_text().split())
    return repr(s if len(s) <= 40 else s[:37] + "...")


def _overlap_share(a, b) -> float:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    if w <= 0 or h <= 0:
        return 0.0
    smaller = min(a.width * a.height, b.width * b.height)
    return w * h / smaller if smaller > 0 else 0.0


def problems(fig) -> list[str]:
    """What a reader could not read in `fig`: texts smaller than MIN_POINTS, and pairs of texts drawn over each other
    (each as one sentence naming the texts)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    found, boxes = [], []
    for text in _texts(fig):
        if text.get_fontsize() < MIN_POINTS:
            found.append(f"text {_shown(text)} is {text.get_fontsize():.1f} pt, under {MIN_POINTS:g} pt")
        box = text.get_window_extent(renderer)
        if box.width > 0 and box.height > 0:
            boxes.append((text, box))
    for (a, box_a), (b, box_b) in combinations(boxes, 2):
        if _overlap_share(box_a, box_b) > OVERLAP_SHARE:
            found.append(f"texts {_shown(a)} and {_shown(b)} overlap")
    return found


def check(fig) -> None:
    """Raise FigureProblem when `fig` has a problem; the title says which figure."""
    found = problems(fig)
    if found:
        title = fig.texts[0].get_text() if fig.texts else next(
            (ax.get_title() for ax in fig.axes if ax.get_title()), "untitled figure")
        raise FigureProblem(f"figure {title.splitlines()[0]!r} is not legible: " + "; ".join(found[:8])
                            + (f" (and {len(found) - 8} more)" if len(found) > 8 else ""))


_installed = False


def install() -> None:
    """Check every figure before it is rendered to an image (inline display in Jupyter, savefig). Idempotent."""
    global _installed
    if _installed:
        return
    from matplotlib.backend_bases import FigureCanvasBase

    original = FigureCanvasBase.print_figure

    def print_figure(self, *args, **kwargs):
        check(self.figure)
        return original(self, *args, **kwargs)

    FigureCanvasBase.print_figure = print_figure
    _installed = True


def install_if_asked() -> None:
    """install() where LAB_CHECK_FIGURES=1 (the notebook tests set it)."""
    if os.environ.get(ENV) == "1":
        install()
