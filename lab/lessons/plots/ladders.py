"""The ladders' figures (notebooks 00-03 and the tour): bandwidth against bytes, tails, ladder bars, throughput
against size, the ladder grid, Nsight Compute profiles and DRAM bytes, the L2 sweep."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.ticker import FixedLocator, ScalarFormatter

from lab.lessons.plots.style import (
    BASELINE_COLOR,
    CEILING_COLOR,
    CEILING_NAMES,
    READ_COLOR,
    RUNG_COLORS,
    WRITE_COLOR,
    figure_title,
    legend_outside,
    log_if_decades,
    plain_ticks,
    save,
    series,
    series_style,
    tail_step,
)
from lab.measure.records import RecordSet, describe_params, format_bytes, format_value, tail_key


def bandwidth_vs_bytes(rs: RecordSet, family: str, path: Path | None = None):
    """One panel per rung: cold (solid) and warm (dashed) L2 curves in the rung's colour, the ceiling's
    in black, the L2 size marked."""
    sweep = [r for r in rs.records if r.family == family and r.kind == "sweep"]
    if not sweep:
        return None
    ceiling = sweep[0].ceiling
    rungs = [k for k in dict.fromkeys(r.rung for r in sweep) if k != ceiling]
    cols = min(3, len(rungs))
    rows = (len(rungs) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.6 * cols, 3.8 * rows), sharey=True, squeeze=False)
    l2 = rs.provenance.get("l2_bytes", 0)
    for ax, rung in zip(axes.flat, rungs, strict=False):
        for l2_mode, ls, alpha in (("cold", "-", 1.0), ("warm", "--", 0.8)):
            x, y = series(rs, "sweep", rung, l2_mode)
            ax.plot(x, y, marker="o", ms=3, label=f"{rung} ({l2_mode} L2)", alpha=alpha,
                    **(series_style(rung, ceiling) | {"ls": ls}))
            cx, cy = series(rs, "sweep", ceiling, l2_mode)
            ax.plot(cx, cy, label=f"{ceiling} ({l2_mode} L2)", alpha=0.6 * alpha,
                    **(series_style(ceiling, ceiling) | {"ls": "--" if l2_mode == "cold" else ":", "lw": 1.2}))
        if l2:
            ax.axvline(l2, color=BASELINE_COLOR, lw=1, ls="-.")
            ax.text(l2, 0.02, f" L2 {format_bytes(l2)}", fontsize=7, transform=ax.get_xaxis_transform())
        ax.set_xscale("log", base=2)
        ax.set_xlabel("bytes moved (read + write)")
        ax.set_title(rung, fontsize=10)
        ax.grid(alpha=0.3)
        plain_ticks(ax)
        ax.legend(fontsize=7, loc="upper left")  # top left: above the launch-bound sizes, clear of the L2 mark
    for ax in axes.flat[len(rungs):]:
        ax.set_visible(False)
    axes[0][0].set_ylabel("GB/s")
    fig.suptitle(figure_title(family, "bandwidth vs size: launch-bound (left), L2-resident, HBM plateau (right)",
                              source=rs.label()), fontsize=10)
    fig.tight_layout()
    _tidy(fig)
    return save(fig, path)


def tail(rs: RecordSet, family: str, path: Path | None = None):
    """Throughput against a size stepping across vector and tile boundaries: a sawtooth shows where tails
    or alignment cost. The title states the step the records actually took."""
    recs = [r for r in rs.records if r.family == family and r.kind == "tail"]
    if not recs:
        return None
    key = tail_key(recs)
    ceiling = recs[0].ceiling
    fig, ax = plt.subplots(figsize=(9.5, 4))
    for rung in dict.fromkeys(r.rung for r in recs):
        pts = sorted((r.params[key], r.value) for r in recs if r.rung == rung)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", ms=3, label=rung,
                **series_style(rung, ceiling))
    fixed = {k: v for k, v in recs[0].params.items() if k != key}
    ax.set_xlabel({"n": "n", "cols": "matrix side n (n x n)"}.get(key, f"{key} ({describe_params(fixed)})"))
    ax.set_ylabel(recs[0].metric)
    step = tail_step(sorted({r.params[key] for r in recs}))
    ax.set_title(figure_title(family, f"tail behaviour, {key} stepping by {step}", source=rs.label()), fontsize=10)
    ax.grid(alpha=0.3)
    plain_ticks(ax)
    legend_outside(ax)
    fig.tight_layout()
    _tidy(fig)
    return save(fig, path)


def ladder_bars(rs: RecordSet, family: str, path: Path | None = None, params: dict | None = None,
                peak: float | None = None, peak_label: str = "peak"):
    """Headline throughput per rung, in the rungs' colours, with the ceiling from the same run as a
    dashed black line (and a peak, if given, dotted)."""
    recs = [r for r in rs.records if r.family == family and r.kind == "headline"]
    if not recs:
        return None
    params = params or recs[0].params
    recs = [r for r in recs if r.params == params]
    ceiling = next(r for r in recs if r.rung == r.ceiling)
    fig, ax = plt.subplots(figsize=(9, 4))
    names = [r.rung for r in recs]
    bars = ax.bar(names, [r.value for r in recs], color=[series_style(r.rung, r.ceiling)["color"] for r in recs])
    for bar, r in zip(bars, recs, strict=True):
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(),
                f"{format_value(r.value, r.metric)}\n{r.ratio:.2f}x", ha="center", va="bottom", fontsize=7)
    ax.axhline(ceiling.value, color=CEILING_COLOR, ls="--", lw=1, label=f"{ceiling.rung} (same run)")
    if peak:
        ax.axhline(peak, color=CEILING_COLOR, ls=":", lw=1,
                   label=f"{peak_label} {format_value(peak, recs[0].metric)} {recs[0].metric}")
    top = max([r.value for r in recs] + [peak or 0])
    ax.set_ylim(0, top * 1.18)  # room for the value labels above the tallest bar
    ax.set_ylabel(recs[0].metric)
    ax.set_title(figure_title(family, f"ladder ({recs[0].l2} L2) against {ceiling.rung}", params, rs.label()),
                 fontsize=9)
    _slanted_names(ax)
    plain_ticks(ax, "y")
    legend_outside(ax)
    fig.tight_layout()
    _tidy(fig)
    return save(fig, path)


def throughput_vs_size(rs: RecordSet, family: str, path: Path | None = None, l2: str = "cold",
                       peak: float | None = None, peak_label: str = "peak"):
    """Throughput against problem size for every target (left), and as a fraction of the ceiling (right).
    For square problems (M = N = K, or n): the x axis is the side; a compute-bound ladder's sweep."""
    sweep = [r for r in rs.records if r.family == family and r.kind == "sweep" and r.l2 == l2]
    if not sweep:
        return None
    key = next((k for k in ("M", "n", "rows") if k in sweep[0].params), next(iter(sweep[0].params)))
    ceiling = sweep[0].ceiling
    fig, (ax, rel) = plt.subplots(1, 2, figsize=(13, 4.4))
    for rung in dict.fromkeys(r.rung for r in sweep):
        pts = sorted((r.params[key], r.value, r.ratio) for r in sweep if r.rung == rung)
        x = [p[0] for p in pts]
        style = series_style(rung, ceiling)
        marker = "s" if rung == ceiling else "o"
        ax.plot(x, [p[1] for p in pts], marker=marker, ms=4 if rung == ceiling else 3, label=rung, **style)
        if rung != ceiling:
            rel.plot(x, [p[2] for p in pts], marker=marker, ms=3, label=rung, **style)
    if peak:
        ax.axhline(peak, color=CEILING_COLOR, ls=":", lw=1,
                   label=f"{peak_label} {format_value(peak, sweep[0].metric)} {sweep[0].metric}")
    rel.axhline(1.0, label=f"{ceiling} = 1", **(series_style(ceiling, ceiling) | {"lw": 1.2}))
    side = "M = N = K" if key == "M" else key
    for a in (ax, rel):
        a.set_xscale("log", base=2)
        a.set_xlabel(side)
        a.grid(alpha=0.3)
        plain_ticks(a)
    ax.set_ylabel(sweep[0].metric)
    rel.set_ylabel(f"fraction of {ceiling} (same run)")
    ax.set_title(figure_title(family, f"{sweep[0].metric} against size ({l2} L2)", source=rs.label()), fontsize=9)
    rel.set_title(f"against {ceiling}, size by size", fontsize=9)
    handles, labels = ax.get_legend_handles_labels()  # every series, the ceiling and the peak: one legend
    rel.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=7)
    fig.tight_layout()
    _tidy(fig)
    return save(fig, path)


def headline_by_size(rs: RecordSet, family: str, path: Path | None = None):
    """Every target across the headline sizes (left: throughput; right: as a fraction of the same target's
    figure at the first headline size), one line per target in its own colour: what a size one off a
    tile multiple, or a larger size, does to each rung and to the ceiling."""
    recs = [r for r in rs.records if r.family == family and r.kind == "headline"]
    sizes = list({describe_params(r.params): r.params for r in recs}.values())
    if len(sizes) < 2:
        return None
    labels = [describe_params(p) for p in sizes]
    ceiling = recs[0].ceiling
    fig, (ax, rel) = plt.subplots(1, 2, figsize=(13, 4.4))
    for rung in dict.fromkeys(r.rung for r in recs):
        by_size = {describe_params(r.params): r.value for r in recs if r.rung == rung}
        xs = [i for i, lab in enumerate(labels) if lab in by_size]
        ys = [by_size[labels[i]] for i in xs]
        style = series_style(rung, ceiling)
        ax.plot(xs, ys, marker="o", ms=4, label=rung, **style)
        if labels[0] in by_size:
            rel.plot(xs, [y / by_size[labels[0]] for y in ys], marker="o", ms=4, label=rung, **style)
    for a in (ax, rel):
        a.set_xticks(range(len(labels)), labels, fontsize=7, rotation=90 if len(labels) > 3 else 0)
        a.grid(alpha=0.3)
        plain_ticks(a, "y")
    ax.set_ylabel(recs[0].metric)
    rel.set_ylabel("fraction of its own figure\nat the first size")
    ax.set_title(figure_title(family, f"headline sizes ({recs[0].l2} L2)", source=rs.label()), fontsize=9)
    rel.set_title(f"each rung and baseline against itself at {labels[0]}", fontsize=9)
    legend_outside(rel)
    fig.tight_layout()
    _tidy(fig)
    return save(fig, path)


def _size_label(params: dict, drop: tuple[str, ...]) -> str:
    """A headline size on a bar chart's axis: "4096^3" for a cube, else the params without the panel keys."""
    if all(k in params for k in ("M", "N", "K")) and params["M"] == params["N"] == params["K"]:
        rest = describe_params({k: v for k, v in params.items() if k not in ("M", "N", "K", *drop)})
        return f"{params['M']}^3" + (f"\n{rest}" if rest else "")
    return describe_params({k: v for k, v in params.items() if k not in drop})


def _grid_panel(ax, recs: list, targets: list[str], ceiling: str, drop: tuple[str, ...]) -> None:
    """One panel of ladder_grid: the headline sizes as groups of bars, one bar per target."""
    sizes = list({describe_params(r.params): r.params for r in recs}.values())
    width = 0.8 / len(targets)
    for t, target in enumerate(targets):
        is_ceiling = target == ceiling
        color = series_style(target, ceiling)["color"]
        for x, params in enumerate(sizes):
            rec = next((r for r in recs if r.rung == target and r.params == params), None)
            if rec is None:
                continue
            left = x - 0.4 + width * (t + 0.5)
            ax.bar(left, rec.value, width, color="white" if is_ceiling else color, edgecolor=color,
                   hatch="//" if is_ceiling else None, label=target if x == 0 else None)
            if not is_ceiling:  # the rung's fraction of the ceiling timed on the same problem (dropped if it won't fit)
                ax.text(left, rec.value, f"{rec.ratio:.2f}", ha="center", va="bottom", fontsize=BAR_LABEL_POINTS,
                        rotation=90, gid=BAR_LABEL)
    ax.set_xticks(range(len(sizes)), [_size_label(p, drop) for p in sizes], fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    plain_ticks(ax, "y")


def ladder_grid(rs: RecordSet, family: str, path: Path | None = None,
                panel_keys: tuple[str, str] = ("dtype", "layout")):
    """Headline throughput of every target in a grid of panels, one per combination of the two `panel_keys`
    (gemm_tc: fp16/bf16 x TN/NN), the headline sizes as groups of bars in each: the ceiling's bar hatched
    black, each rung's in its colour and labelled with its fraction of the ceiling from the same run."""
    recs = [r for r in rs.records if r.family == family and r.kind == "headline"]
    if not recs or not all(k in recs[0].params for k in panel_keys):
        return None
    rows_of = list(dict.fromkeys(r.params[panel_keys[0]] for r in recs))
    cols_of = list(dict.fromkeys(r.params[panel_keys[1]] for r in recs))
    ceiling = recs[0].ceiling
    targets = [ceiling] + [t for t in dict.fromkeys(r.rung for r in recs) if t != ceiling]
    fig, axes = plt.subplots(len(rows_of), len(cols_of), figsize=(6.5 * len(cols_of), 3.6 * len(rows_of)),
                             sharey=True, squeeze=False)
    for i, row_value in enumerate(rows_of):
        for j, col_value in enumerate(cols_of):
            mine = [r for r in recs if r.params[panel_keys[0]] == row_value and r.params[panel_keys[1]] == col_value]
            _grid_panel(axes[i][j], mine, targets, ceiling, panel_keys)
            axes[i][j].set_title(f"{panel_keys[0]}={row_value}, {panel_keys[1]}={col_value}", fontsize=9)
        axes[i][0].set_ylabel(recs[0].metric)
    axes[0][0].set_ylim(0, max(r.value for r in recs) * 1.2)  # room for the ratio labels (the y axis is shared)
    legend_outside(axes[0][-1])
    fig.suptitle(figure_title(family, f"headline sizes ({recs[0].l2} L2) against {ceiling}; "
                              f"labels: fraction of {ceiling} in the same run", source=rs.label()), fontsize=10)
    fig.tight_layout()
    _drop_labels_that_do_not_fit(fig)
    _tidy(fig)
    return save(fig, path)


def all_zero(rows: list[dict], metric: str) -> bool:
    """Whether every row counts 0 of `metric` (a row without it counts 0): a figure of it would be bars of height
    zero on a meaningless axis, so profile_bars draws none and the caller says it in a sentence."""
    return bool(rows) and not any(float(r.get(metric, 0) or 0) for r in rows)


def profile_bars(rows: list[dict], metric: str, family: str, params: dict | None = None, source: str = "",
                 path: Path | None = None):
    """Bars of one Nsight Compute metric per rung (e.g. shared-memory bank conflicts), each labelled with
    its value; a log axis when the rungs span decades, so a small count is not drawn as nothing. None when
    there are no rows, or when every rung counted zero (`all_zero`: say that in a sentence instead)."""
    if not rows or all_zero(rows, metric):
        return None
    fig, ax = plt.subplots(figsize=(8, 3.8))
    values = [float(r.get(metric, 0) or 0) for r in rows]
    names = [r["rung"] for r in rows]
    bars = ax.bar(names, values, color=[series_style(n)["color"] for n in names])
    for bar, v in zip(bars, values, strict=True):
        ax.text(bar.get_x() + bar.get_width() / 2, max(v, 0), f"{v:,.0f}" if 1 <= v < 1e6 else f"{v:.3g}", ha="center",
                va="bottom", fontsize=7)
    log = log_if_decades(ax, values)
    if not log:
        ax.set_ylim(0, max(values) * 1.15)  # room for the value labels above the tallest bar
    ax.set_ylabel(metric + (" (log scale)" if log else ""), fontsize=8)
    ax.set_title(figure_title(family, f"{metric} per rung (Nsight Compute)", params, source), fontsize=9)
    _slanted_names(ax)
    if not log:
        plain_ticks(ax, "y")
    fig.tight_layout()
    _tidy(fig)
    return save(fig, path)


def dram_bars(rows: list[dict], minimum: int | None, family: str, params: dict | None = None, source: str = "",
              path: Path | None = None):
    """DRAM bytes per rung (read and write stacked, from lab.studies.profile.dram_rows), the minimum dashed black,
    each bar labelled with its multiple of the minimum; a log axis when the rungs span decades."""
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(9, 3.8))
    names = [r["rung"] for r in rows]
    reads = [r["read"] / 1e6 for r in rows]
    ax.bar(names, reads, color=READ_COLOR, label="DRAM read")
    ax.bar(names, [r["write"] / 1e6 for r in rows], bottom=reads, color=WRITE_COLOR, label="DRAM write")
    if minimum:
        ax.axhline(minimum / 1e6, color=CEILING_COLOR, ls="--", lw=1, label=f"minimum {minimum / 1e6:.0f} MB")
        for i, r in enumerate(rows):
            ax.text(i, r["total"] / 1e6, f"{r['over_minimum']:.2f}x", ha="center", va="bottom", fontsize=7)
    log = log_if_decades(ax, [r["total"] for r in rows] + ([minimum] if minimum else []))
    ax.set_ylabel("MB (1 MB = 10^6 B)" + (", log scale" if log else ""))
    ax.set_title(figure_title(family, "DRAM bytes per rung against the minimum (Nsight Compute)", params, source),
                 fontsize=9)
    _slanted_names(ax)
    if not log:
        plain_ticks(ax, "y")
    legend_outside(ax)
    fig.tight_layout()
    _tidy(fig)
    return save(fig, path)


def l2_sweep(rs: RecordSet, family: str = "copy", path: Path | None = None):
    """Bandwidth against working set around the L2 (lab.studies.l2 records): graph-timed warm (solid), one launch per
    event pair warm (dashed) and cold (dotted), per target; the HBM plateau, the L2 size and the knee marked."""
    from lab.studies import l2

    rows = rs.where(kind="l2")
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(9, 4.2))
    styles = {("graph", "warm"): ("-", "graph of many launches, warm"),
              ("events", "warm"): ("--", "one launch per event pair, warm"),
              ("events", "cold"): (":", "one launch per event pair, cold")}
    for i, rung in enumerate(l2.TARGETS):
        color = CEILING_COLOR if rung in CEILING_NAMES else RUNG_COLORS[i % len(RUNG_COLORS)]
        for (method, mode), (ls, label) in styles.items():
            recs = l2.series(rs, rung, method, mode)
            if recs:
                ax.plot([r.bytes_moved / l2.MIB for r in recs], [r.value for r in recs], ls=ls, color=color,
                        marker="o" if method == "graph" else None, ms=3, lw=1.4, label=f"{rung}: {label}")
    hbm = l2.hbm_plateau(rs)
    ax.axhline(hbm, color=BASELINE_COLOR, lw=1, label=f"HBM plateau {format_value(hbm, 'GB/s')} GB/s")
    if l2.l2_bytes(rs):
        ax.axvline(l2.l2_bytes(rs) / l2.MIB, color="purple", ls="-.", lw=1,
                   label=f"L2 size {l2.l2_bytes(rs) / l2.MIB:.0f} MiB (device attribute)")
    knee = l2.knee(l2.series(rs, l2.TARGETS[-1], "graph"), hbm)
    if knee:
        ax.axvspan(knee[0] / l2.MIB, knee[1] / l2.MIB, color="grey", alpha=0.15,
                   label=f"knee ({l2.TARGETS[-1]}): {knee[0] // l2.MIB}-{knee[1] // l2.MIB} MiB")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.set_xlabel("working set, input + output (MiB = 2^20 B), log scale")
    ax.set_ylabel("GB/s (10^9 B/s)")
    plain_ticks(ax, "y")
    ax.set_title(figure_title(family, "L2-resident bandwidth, fixed launch cost amortized", source=rs.label()),
                 fontsize=10)
    legend_outside(ax)
    fig.tight_layout()
    _tidy(fig)
    return save(fig, path)


# ----------------------------------------------------------------------------------------------
# Legibility (what lab.lessons.figure_check holds every figure to): no text under 7 pt, no two labels on top of
# each other. A label that does not fit is dropped or moved, never shrunk.
# ----------------------------------------------------------------------------------------------

BAR_LABEL_POINTS = 7.0  # the smallest text a figure carries
BAR_LABEL = "bar label"  # the gid of a bar's value label that may be dropped where it does not fit


SLANTED = "slanted names"  # the gid of a bar chart's x axis whose names _tidy stands upright if they collide


def _slanted_names(ax) -> None:
    """A bar chart's category names slanted and anchored at their right end under their bar, so long rung names
    do not run into each other (`_tidy` stands them upright where even slanted they would)."""
    ax.xaxis.set_gid(SLANTED)
    for label in ax.get_xticklabels():
        label.set_rotation(45)
        label.set_horizontalalignment("right")
        label.set_rotation_mode("anchor")
        label.set_fontsize(8)


def _upright_if_crowded(fig) -> bool:
    """Slanted bar names (SLANTED) that still overlap each other are set vertical; whether any were."""
    from itertools import pairwise

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    changed = False
    for ax in fig.axes:
        if ax.xaxis.get_gid() != SLANTED:
            continue
        labels = [t for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
        boxes = [t.get_window_extent(renderer) for t in labels]
        if any(_overlap_share(a, b) > CROWDED_SHARE for a, b in pairwise(boxes)):
            for t in labels:
                t.set_rotation(90)
                t.set_horizontalalignment("center")
                t.set_rotation_mode("default")
            changed = True
    return changed


CROWDED_SHARE = 0.1  # slanted names whose boxes share more than this part of the smaller one stand upright


def _overlap_share(a, b) -> float:
    """The part of the smaller of two boxes that lies inside the other (a slanted label's box is its bounding box)."""
    w, h = min(a.x1, b.x1) - max(a.x0, b.x0), min(a.y1, b.y1) - max(a.y0, b.y0)
    smaller = min(a.width * a.height, b.width * b.height)
    return w * h / smaller if w > 0 and h > 0 and smaller > 0 else 0.0


def _boxes_overlap(a, b) -> bool:
    return min(a.x1, b.x1) > max(a.x0, b.x0) and min(a.y1, b.y1) > max(a.y0, b.y0)


def _drop_labels_that_do_not_fit(fig) -> None:
    """Remove each bar label (gid BAR_LABEL) that is wider than its bar, runs past the top of its axes, or overlaps
    a label already kept: the figure says less rather than print text nobody can read."""
    from matplotlib.patches import Rectangle

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        frame = ax.get_window_extent(renderer)
        bars = [p.get_window_extent(renderer) for p in ax.patches if isinstance(p, Rectangle)]
        kept = []
        for text in [t for t in ax.texts if t.get_gid() == BAR_LABEL]:
            box = text.get_window_extent(renderer)
            x = (box.x0 + box.x1) / 2
            under = [b for b in bars if b.x0 <= x <= b.x1]
            narrow = bool(under) and box.width > min(b.width for b in under) * 1.05
            if narrow or box.y1 > frame.y1 or any(_boxes_overlap(box, k) for k in kept):
                text.remove()
            else:
                kept.append(box)


def _tidy(fig) -> None:
    """Tick labels only where ticks are drawn (inside each axis's limits: matplotlib keeps labels for ticks past the
    limits, undrawn, which a legibility check would count), and no y tick label over an x tick label in a corner."""
    for ax in fig.axes:
        for axis, (lo, hi) in ((ax.xaxis, sorted(ax.get_xlim())), (ax.yaxis, sorted(ax.get_ylim()))):
            if isinstance(axis.get_major_locator(), FixedLocator):  # placed by hand, labels with them: leave alone
                continue
            inside = [t for t in axis.get_majorticklocs() if lo - 1e-9 * abs(hi - lo) <= t <= hi + 1e-9 * abs(hi - lo)]
            axis.set_major_locator(FixedLocator(inside))
    if _upright_if_crowded(fig):
        fig.tight_layout()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        xs = [t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
        for label in ax.get_yticklabels():
            if label.get_visible() and label.get_text() and any(
                    _boxes_overlap(label.get_window_extent(renderer), b) for b in xs):
                label.set_visible(False)
