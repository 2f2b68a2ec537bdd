"""What every figure shares, so they agree with each other: a title written by `figure_title` (a params dict is
described, never printed raw), a fixed colour and line style per series (`series_style`: a rung keeps its colour in
every figure, a ceiling is always dashed black), plain tick numbers (no offset notation), legends outside the axes,
a log scale where the values span decades, and `save`."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.ticker import ScalarFormatter

from lab.measure.records import RecordSet, describe_params

CEILING_COLOR = "black"
BASELINE_COLOR = "#7f7f7f"
READ_COLOR, WRITE_COLOR = "#1f77b4", "#ff7f0e"  # DRAM bytes read / written (stacked bars)
# Rung NN takes colour NN-1 of this cycle (matplotlib's tab10 without its grey, which is the baselines').
RUNG_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22",
               "#17becf")
CEILING_NAMES = frozenset({"cupy_device_copy", "cublas_sgemm"})
DECADES_FOR_LOG = 20  # values whose largest is this many times their smallest get a log axis


def figure_title(family: str, what: str, params: dict | None = None, source: str = "") -> str:
    """'family: what at M=4096, N=4096, K=4096' and, on a second line, where the numbers come from."""
    head = f"{family}: {what}" + (f" at {describe_params(params)}" if params else "")
    return head + (f"\n{source}" if source else "")


def series_style(name: str, ceiling: str | None = None) -> dict:
    """Colour, line style and width of one series, the same in every figure: a rung ('08_multistage')
    by its number, the ceiling dashed black and thicker, anything else (a library baseline) dotted grey."""
    if name == ceiling or name in CEILING_NAMES:
        return {"color": CEILING_COLOR, "ls": "--", "lw": 2.0}
    head = name.split("_", 1)[0]
    if head.isdigit():
        return {"color": RUNG_COLORS[(int(head) - 1) % len(RUNG_COLORS)], "ls": "-", "lw": 1.3}
    return {"color": BASELINE_COLOR, "ls": ":", "lw": 1.5}


def plain_ticks(ax, which: str = "xy") -> None:
    """Tick labels of the numeric axes (`which`) as plain numbers: no '+4.09e3' offset above the axis, no
    scientific notation. A bar chart's category axis is left alone."""
    for name, axis, scale in (("x", ax.xaxis, ax.get_xscale()), ("y", ax.yaxis, ax.get_yscale())):
        if name in which and scale == "linear":
            formatter = ScalarFormatter(useOffset=False)
            formatter.set_scientific(False)
            axis.set_major_formatter(formatter)


def legend_outside(ax, **kwargs) -> None:
    """The legend to the right of the axes, where it can cover no data."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=7, **kwargs)


def log_if_decades(ax, values: list[float], axis: str = "y") -> bool:
    """A log axis when the positive values span more than DECADES_FOR_LOG; symlog when some are zero, so
    a zero bar stays visible at the foot of the axis instead of disappearing."""
    positive = [v for v in values if v > 0]
    if not positive or max(positive) <= DECADES_FOR_LOG * min(positive):
        return False
    scale = (ax.set_yscale if axis == "y" else ax.set_xscale)
    if len(positive) < len(values):
        scale("symlog", linthresh=1.0)
    else:
        scale("log")
    return True


def series(rs: RecordSet, kind: str, rung: str, l2: str):
    recs = sorted(rs.where(kind=kind, rung=rung, l2=l2), key=lambda r: r.bytes_moved)
    return [r.bytes_moved for r in recs], [r.value for r in recs]


def save(fig, path: Path | None):
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110, bbox_inches="tight")  # "tight": keeps the legends outside the axes
        plt.close(fig)
        return Path(path)
    return fig


def axes_or_new(ax, figsize: tuple[float, float]):
    """(figure, axes, whether this call made the figure): the given axes, else a new figure's."""
    if ax is not None:
        return ax.figure, ax, False
    fig, ax = plt.subplots(figsize=figsize)
    return fig, ax, True


def plain_log_ticks(ax, which: str = "y", minor: bool = False) -> None:
    """Plain numbers ('1.5', '20') on a log axis instead of powers of ten; the minor ticks labelled too when
    `minor` (an axis spanning less than a decade has no major tick to read)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    axis = ax.yaxis if which == "y" else ax.xaxis
    fmt = FuncFormatter(lambda v, _pos: f"{v:g}")
    axis.set_major_formatter(fmt)
    axis.set_minor_formatter(fmt if minor else NullFormatter())


def tail_step(values: list[int]) -> int:
    steps = sorted({b - a for a, b in zip(values, values[1:], strict=False) if b > a})
    return steps[0] if steps else 1


def payload_source(payload: dict) -> str:
    from lab.families import work_queue

    return work_queue.payload_label(payload)


def shape_key(row: dict) -> tuple[int, int, int]:
    return row["M"], row["N"], row["K"]


def shape_text(key: tuple[int, int, int]) -> str:
    return "M={}, N={}, K={}".format(*key)


def shape_panels(rows: list[dict]):
    """One panel per shape of `rows` (in order of first appearance), two columns: (shape keys, figure, axes)."""
    keys = list(dict.fromkeys(map(shape_key, rows)))
    cols = min(2, len(keys))
    fig, axes = plt.subplots(-(-len(keys) // cols), cols, figsize=(5.2 * cols, 3.4 * -(-len(keys) // cols)),
                             squeeze=False)
    return keys, fig, axes
