"""Matplotlib figures drawn from Records (never from literals): regimes, tails, ladder bars, profiles.

Every figure goes through the same few helpers, so they agree with each other: a title written by
`figure_title` (a params dict is described, never printed raw), a fixed colour and line style per
series (`series_style`: a rung keeps its colour in every figure, a ceiling is always dashed black),
plain tick numbers (no offset notation), legends outside the axes, and a log scale where the values
span decades.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.ticker import ScalarFormatter

from lab.measure.records import RecordSet, describe_params, format_bytes, format_value, tail_key

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


def _plain_ticks(ax, which: str = "xy") -> None:
    """Tick labels of the numeric axes (`which`) as plain numbers: no '+4.09e3' offset above the axis, no
    scientific notation. A bar chart's category axis is left alone."""
    for name, axis, scale in (("x", ax.xaxis, ax.get_xscale()), ("y", ax.yaxis, ax.get_yscale())):
        if name in which and scale == "linear":
            formatter = ScalarFormatter(useOffset=False)
            formatter.set_scientific(False)
            axis.set_major_formatter(formatter)


def _legend_outside(ax, **kwargs) -> None:
    """The legend to the right of the axes, where it can cover no data."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=7, **kwargs)


def _log_if_decades(ax, values: list[float], axis: str = "y") -> bool:
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


def _series(rs: RecordSet, kind: str, rung: str, l2: str):
    recs = sorted(rs.where(kind=kind, rung=rung, l2=l2), key=lambda r: r.bytes_moved)
    return [r.bytes_moved for r in recs], [r.value for r in recs]


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
            x, y = _series(rs, "sweep", rung, l2_mode)
            ax.plot(x, y, marker="o", ms=3, label=f"{rung} ({l2_mode} L2)", alpha=alpha,
                    **(series_style(rung, ceiling) | {"ls": ls}))
            cx, cy = _series(rs, "sweep", ceiling, l2_mode)
            ax.plot(cx, cy, label=f"{ceiling} ({l2_mode} L2)", alpha=0.6 * alpha,
                    **(series_style(ceiling, ceiling) | {"ls": "--" if l2_mode == "cold" else ":", "lw": 1.2}))
        if l2:
            ax.axvline(l2, color=BASELINE_COLOR, lw=1, ls="-.")
            ax.text(l2, 0.02, f" L2 {format_bytes(l2)}", fontsize=7, transform=ax.get_xaxis_transform())
        ax.set_xscale("log", base=2)
        ax.set_xlabel("bytes moved (read + write)")
        ax.set_title(rung, fontsize=10)
        ax.grid(alpha=0.3)
        _plain_ticks(ax)
        ax.legend(fontsize=6, loc="lower right")  # bottom right: past the HBM plateau, under the curves
    for ax in axes.flat[len(rungs):]:
        ax.set_visible(False)
    axes[0][0].set_ylabel("GB/s")
    fig.suptitle(figure_title(family, "bandwidth vs size: launch-bound (left), L2-resident, HBM plateau (right)",
                              source=rs.label()), fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def _tail_step(values: list[int]) -> int:
    steps = sorted({b - a for a, b in zip(values, values[1:], strict=False) if b > a})
    return steps[0] if steps else 1


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
    step = _tail_step(sorted({r.params[key] for r in recs}))
    ax.set_title(figure_title(family, f"tail behaviour, {key} stepping by {step}", source=rs.label()), fontsize=10)
    ax.grid(alpha=0.3)
    _plain_ticks(ax)
    _legend_outside(ax)
    fig.tight_layout()
    return _save(fig, path)


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
    ax.tick_params(axis="x", rotation=20, labelsize=8)
    _plain_ticks(ax, "y")
    _legend_outside(ax)
    fig.tight_layout()
    return _save(fig, path)


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
        _plain_ticks(a)
    ax.set_ylabel(sweep[0].metric)
    rel.set_ylabel(f"fraction of {ceiling} (same run)")
    ax.set_title(figure_title(family, f"{sweep[0].metric} against size ({l2} L2)"), fontsize=9)
    rel.set_title(f"against {ceiling}, size by size", fontsize=9)
    handles, labels = ax.get_legend_handles_labels()  # every series, the ceiling and the peak: one legend
    rel.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=7)
    fig.suptitle(rs.label(), fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


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
        a.set_xticks(range(len(labels)), labels, rotation=15, fontsize=7)
        a.grid(alpha=0.3)
        _plain_ticks(a, "y")
    ax.set_ylabel(recs[0].metric)
    rel.set_ylabel(f"fraction of its own figure at {labels[0]}")
    ax.set_title(figure_title(family, f"headline sizes ({recs[0].l2} L2)"), fontsize=9)
    rel.set_title("each target against itself at the first size", fontsize=9)
    _legend_outside(rel)
    fig.suptitle(rs.label(), fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


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
            if not is_ceiling:  # the rung's fraction of the ceiling timed on the same problem
                ax.text(left, rec.value, f"{rec.ratio:.2f}", ha="center", va="bottom", fontsize=6, rotation=90)
    ax.set_xticks(range(len(sizes)), [_size_label(p, drop) for p in sizes], fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    _plain_ticks(ax, "y")


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
    axes[0][0].set_ylim(0, max(r.value for r in recs) * 1.15)  # room for the ratio labels (the y axis is shared)
    _legend_outside(axes[0][-1])
    fig.suptitle(figure_title(family, f"headline sizes ({recs[0].l2} L2) against {ceiling}; "
                              f"labels: fraction of {ceiling} in the same run", source=rs.label()), fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def profile_bars(rows: list[dict], metric: str, family: str, params: dict | None = None, source: str = "",
                 path: Path | None = None):
    """Bars of one Nsight Compute metric per rung (e.g. shared-memory bank conflicts), each labelled with
    its value; a log axis when the rungs span decades, so a small count is not drawn as nothing."""
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(8, 3.8))
    values = [float(r.get(metric, 0)) for r in rows]
    names = [r["rung"] for r in rows]
    bars = ax.bar(names, values, color=[series_style(n)["color"] for n in names])
    for bar, v in zip(bars, values, strict=True):
        ax.text(bar.get_x() + bar.get_width() / 2, max(v, 0), f"{v:.3g}", ha="center", va="bottom", fontsize=7)
    log = _log_if_decades(ax, values)
    ax.set_ylabel(metric + (" (log scale)" if log else ""), fontsize=8)
    ax.set_title(figure_title(family, f"{metric} per rung (Nsight Compute)", params, source), fontsize=9)
    ax.tick_params(axis="x", rotation=20, labelsize=8)
    if not log:
        _plain_ticks(ax, "y")
    fig.tight_layout()
    return _save(fig, path)


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
    log = _log_if_decades(ax, [r["total"] for r in rows] + ([minimum] if minimum else []))
    ax.set_ylabel("MB (1 MB = 10^6 B)" + (", log scale" if log else ""))
    ax.set_title(figure_title(family, "DRAM bytes per rung against the minimum (Nsight Compute)", params, source),
                 fontsize=9)
    ax.tick_params(axis="x", rotation=20, labelsize=8)
    if not log:
        _plain_ticks(ax, "y")
    _legend_outside(ax)
    fig.tight_layout()
    return _save(fig, path)


def _save(fig, path: Path | None):
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110, bbox_inches="tight")  # "tight": keeps the legends outside the axes
        plt.close(fig)
        return Path(path)
    return fig


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
    _plain_ticks(ax, "y")
    ax.set_title(figure_title(family, "L2-resident bandwidth, fixed launch cost amortized", source=rs.label()),
                 fontsize=10)
    _legend_outside(ax)
    fig.tight_layout()
    return _save(fig, path)


def small_items(payload: dict, path: Path | None = None):
    """Microseconds per item against bytes per item, both log, one line per way of running N small items
    (lab.families.work_queue): per-item launches, their CUDA graph, one batched launch, the persistent queue, and one
    item alone (dashed grey). Skewed mixes of lengths are single markers at their mean size. Reads a payload
    of `lab study items` (live, or replayed through lab.families.work_queue.load_payload)."""
    from lab.families import work_queue

    rows = payload.get("rows") or []
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(8.5, 4.4))
    uniform = sorted((r for r in rows if r["mix"] == "uniform"), key=lambda r: r["bytes_per_item"])
    other = [r for r in rows if r["mix"] != "uniform"]
    series = [(p, RUNG_COLORS[i], "-") for i, p in enumerate(work_queue.PATHS)] + [("alone", BASELINE_COLOR, "--")]
    for name, color, ls in series:
        ax.plot([r["bytes_per_item"] for r in uniform], [r[f"{name}_us"] for r in uniform], ls=ls, color=color,
                marker="o", ms=3.5, lw=1.5, label=work_queue.PATH_LABELS[name])
        for r in other:
            ax.plot([r["bytes_per_item"]], [r[f"{name}_us"]], ls="none", marker="x", ms=7, color=color)
    for mix in sorted({r["mix"] for r in other}):
        ax.plot([], [], ls="none", marker="x", ms=7, color=CEILING_COLOR,
                label=f"x: a {mix} mix of lengths, at its mean size")
    ax.set_xscale("log")
    ax.set_yscale("log")
    sizes = sorted({r["bytes_per_item"] for r in rows})
    ax.set_xticks(sizes)
    ax.set_xticklabels([format_bytes(b) for b in sizes], fontsize=8)
    ax.minorticks_off()
    ax.set_xlabel("bytes per item (x and w read, y written; fp32), log scale")
    ax.set_ylabel("microseconds per item, log scale")
    n_items = sorted({r["n_items"] for r in rows})
    what = "time per item, N small RMSNorm items run four ways" + (
        f" (N = {n_items[0]})" if len(n_items) == 1 else f" (N = {n_items[0]}..{n_items[-1]})")
    ax.set_title(figure_title("persistent", what, source=work_queue.payload_label(payload)), fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    _legend_outside(ax)
    fig.tight_layout()
    return _save(fig, path)


# ----------------------------------------------------------------------------------------------
# Scheduling (notebook 04): tile orders, their DRAM traffic, stream-K against the waves. Each reads a payload of
# lab.studies.scheduling (live, or replayed with "replayed": True); the tile maps are drawn from lab.core.tile_order
# alone.
# ----------------------------------------------------------------------------------------------

ORDER_COLORS = {"row": BASELINE_COLOR, "column": RUNG_COLORS[1], "grouped": RUNG_COLORS[2], "snake": RUNG_COLORS[4]}
WAVE0_COLOR = RUNG_COLORS[3]
KIND_COLORS = {"wave-quantized": RUNG_COLORS[3], "well-quantized": RUNG_COLORS[0], "square": BASELINE_COLOR}


def setting_label(order: str, group_m: int) -> str:
    """'row', 'column', 'grouped 8', 'snake 16': a tile order and its GROUP_M where it has one."""
    return f"{order} {group_m}" if order in ("grouped", "snake") else order


def _payload_source(payload: dict) -> str:
    from lab.families import work_queue

    return work_queue.payload_label(payload)


def _shape_key(row: dict) -> tuple[int, int, int]:
    return row["M"], row["N"], row["K"]


def _shape_text(key: tuple[int, int, int]) -> str:
    return "M={}, N={}, K={}".format(*key)


def _tile_map(ax, visits, workers: int, label: str, numbers: bool) -> None:
    """One order's picture: each tile shaded by when it is visited, the first `workers` (wave 0) highlighted."""
    import numpy as np
    from matplotlib.colors import ListedColormap

    tiles_m, tiles_n = visits.shape
    ax.imshow(visits, cmap="Greys", vmin=-0.3 * visits.max(), vmax=1.6 * visits.max(), interpolation="nearest",
              aspect="equal")
    first = np.ma.masked_where(visits >= workers, np.ones_like(visits))
    ax.imshow(first, cmap=ListedColormap([WAVE0_COLOR]), alpha=0.85, interpolation="nearest", aspect="equal")
    if numbers:
        for (i, j), v in np.ndenumerate(visits):
            ax.text(j, i, str(v), ha="center", va="center", fontsize=6,
                    color="white" if v < workers else CEILING_COLOR)
    rows = int(np.count_nonzero((visits < workers).any(axis=1)))
    cols = int(np.count_nonzero((visits < workers).any(axis=0)))
    ax.set_title(f"{label}: wave 0 reads {rows} A panels, {cols} B panels", fontsize=8)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlabel(f"tile_n (0..{tiles_n - 1})", fontsize=7)
    ax.set_ylabel(f"tile_m (0..{tiles_m - 1})", fontsize=7)


def tile_orders(tiles_m: int, tiles_n: int, settings, workers: int, numbers: bool | None = None,
                path: Path | None = None):
    """The visit order of a tiles_m x tiles_n grid of output tiles in each (order, group_m) of `settings`
    (lab.core.tile_order.visit_order: the kernels' own arithmetic), the first `workers` tiles (the first wave)
    highlighted.
    Tile indices are written in the tiles when the grid is small (`numbers` None: up to 256 tiles)."""
    from lab.core import tile_order

    settings = list(settings)
    if not settings:
        return None
    numbers = tiles_m * tiles_n <= 256 if numbers is None else numbers
    wide = tiles_n >= 2 * tiles_m
    shape = (len(settings), 1) if wide else (1, len(settings))
    size = (11, 1.2 + len(settings) * 11 * tiles_m / tiles_n) if wide else (3.2 * len(settings), 3.6)
    fig, axes = plt.subplots(*shape, figsize=size, squeeze=False)
    for ax, (order, group) in zip(axes.ravel(), settings, strict=True):
        _tile_map(ax, tile_order.visit_order(tiles_m, tiles_n, order, group), workers, setting_label(order, group),
                  numbers)
    fig.suptitle(figure_title("schedule", f"visit order of {tiles_m} x {tiles_n} tiles; the first {workers} (one "
                              "wave) highlighted, later tiles darker",
                              source="computed from lab.core.tile_order (no measurement)"), fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


def _shape_panels(rows: list[dict]):
    """One panel per shape of `rows` (in order of first appearance), two columns: (shape keys, figure, axes)."""
    keys = list(dict.fromkeys(map(_shape_key, rows)))
    cols = min(2, len(keys))
    fig, axes = plt.subplots(-(-len(keys) // cols), cols, figsize=(5.2 * cols, 3.4 * -(-len(keys) // cols)),
                             squeeze=False)
    return keys, fig, axes


def order_speeds(payload: dict, path: Path | None = None):
    """TFLOP/s of one rung in each tile order, one panel per shape, cuBLAS in the same run dashed black; each bar
    labelled with its speed over the row order. Reads a lab.studies.scheduling.time_orders payload."""
    rows = payload.get("rows") or []
    if not rows:
        return None
    keys, fig, axes = _shape_panels(rows)
    for ax, key in zip(axes.ravel(), keys, strict=False):
        mine = [r for r in rows if _shape_key(r) == key]
        names = [setting_label(r["order"], r["group_m"]) for r in mine]
        bars = ax.bar(names, [r["tflops"] for r in mine], color=[ORDER_COLORS.get(r["order"], BASELINE_COLOR)
                                                                for r in mine])
        for bar, r in zip(bars, mine, strict=True):
            if r.get("x_row"):
                ax.text(bar.get_x() + bar.get_width() / 2, r["tflops"], f"{r['x_row']:.2f}x", ha="center",
                        va="bottom", fontsize=7)
        cublas = [r["tflops"] / r["x_cublas"] for r in mine if r.get("x_cublas")]
        if cublas:
            ax.axhline(sorted(cublas)[len(cublas) // 2], color=CEILING_COLOR, ls="--", lw=1.2, label="cuBLAS")
        ax.set_ylim(0, max([r["tflops"] for r in mine] + cublas) * 1.18)
        ax.set_title(_shape_text(key), fontsize=9)
        ax.set_ylabel("TFLOP/s")
        ax.tick_params(axis="x", rotation=30, labelsize=7)
        _plain_ticks(ax, "y")
    for ax in axes.ravel()[len(keys):]:
        ax.set_visible(False)
    _legend_outside(axes[0][-1])
    fig.suptitle(figure_title(payload.get("family", "?"), f"rung {payload.get('rung', '?')}: TFLOP/s per tile order "
                              f"({payload.get('l2', '?')} L2); labels: speed over the row order",
                              source=_payload_source(payload)), fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def _dram_panel(ax, mine: list[dict]) -> None:
    names = [setting_label(r["order"], r["group_m"]) for r in mine]
    reads = [r["dram_read_bytes"] / 1e9 for r in mine]
    ax.bar(names, reads, color=READ_COLOR, label="DRAM read")
    ax.bar(names, [r["dram_write_bytes"] / 1e9 for r in mine], bottom=reads, color=WRITE_COLOR, label="DRAM write")
    for i, r in enumerate(mine):
        total = (r["dram_read_bytes"] + r["dram_write_bytes"]) / 1e9
        ax.text(i, total, f"L2 hit\n{r['l2_hit_rate_pct']:.0f}%", ha="center", va="bottom", fontsize=6)
    ax.set_ylim(0, max((r["dram_read_bytes"] + r["dram_write_bytes"]) / 1e9 for r in mine) * 1.25)
    ax.set_ylabel("GB (1 GB = 10^9 B)")
    ax.tick_params(axis="x", rotation=30, labelsize=7)
    _plain_ticks(ax, "y")


def order_dram(payload: dict, path: Path | None = None):
    """Nsight Compute's DRAM bytes (read and written, stacked) per tile order, one panel per shape, each bar
    labelled with the L2 hit rate. Reads a lab.studies.scheduling.order_counters payload."""
    rows = payload.get("rows") or []
    if not rows:
        return None
    keys, fig, axes = _shape_panels(rows)
    for ax, key in zip(axes.ravel(), keys, strict=False):
        _dram_panel(ax, [r for r in rows if _shape_key(r) == key])
        ax.set_title(_shape_text(key), fontsize=9)
    for ax in axes.ravel()[len(keys):]:
        ax.set_visible(False)
    _legend_outside(axes[0][-1])
    fig.suptitle(figure_title(payload.get("family", "?"), f"rung {payload.get('rung', '?')}: DRAM bytes per tile "
                              "order, one launch each (Nsight Compute)", source=_payload_source(payload)), fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def order_traffic(payload: dict, shape: dict, workers: int, tile: tuple[int, int], path: Path | None = None):
    """At one shape: the first wave's tiles in the row order and in the order that read the fewest DRAM bytes
    (lab.core.tile_order.visit_order, `workers` tiles per wave, `tile` = (bm, bn)), beside Nsight Compute's DRAM bytes
    per order. Reads a lab.studies.scheduling.order_counters payload."""
    from lab.core import tile_order

    key = _shape_key(shape)
    mine = [r for r in payload.get("rows") or [] if _shape_key(r) == key]
    if not mine:
        return None
    fewest = min(mine, key=lambda r: r["dram_read_bytes"])
    shown = [("row", 0)] + ([(fewest["order"], fewest["group_m"])] if fewest["order"] != "row" else [])
    tiles_m, tiles_n = -(-key[0] // tile[0]), -(-key[1] // tile[1])
    fig = plt.figure(figsize=(14, 4.6))
    grid = fig.add_gridspec(len(shown), 2, width_ratios=(1.5, 1.0))
    for i, (order, group) in enumerate(shown):
        _tile_map(fig.add_subplot(grid[i, 0]), tile_order.visit_order(tiles_m, tiles_n, order, group), workers,
                  setting_label(order, group) + (" (fewest DRAM bytes)" if i else ""), numbers=False)
    ax = fig.add_subplot(grid[:, 1])
    _dram_panel(ax, mine)
    _legend_outside(ax)
    ax.set_title("DRAM bytes per order (Nsight Compute)", fontsize=9)
    fig.suptitle(figure_title(payload.get("family", "?"), f"rung {payload.get('rung', '?')}: where wave 0 runs "
                              f"({tiles_m} x {tiles_n} tiles of {tile[0]} x {tile[1]}, {workers} at once) and the "
                              "DRAM traffic that follows", params=dict(zip("MNK", key, strict=True)),
                              source=_payload_source(payload)), fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def _wave_lines(ax, payload: dict, n: int, lo: float, hi: float) -> None:
    """Dotted verticals at the M where the tile count reaches each multiple of the SM count."""
    sm_count = payload.get("sm_count") or payload.get("provenance", {}).get("sm_count")
    tile = payload.get("tile")
    if not sm_count or not tile:
        return
    bm, bn = tile
    step = sm_count * bm / -(-n // bn)  # M per wave of tiles
    label = f"tiles = a multiple of {sm_count} (SMs)"
    j = max(1, int(lo // step))
    while j * step <= hi:
        if j * step >= lo:
            ax.axvline(j * step, color=BASELINE_COLOR, ls=":", lw=1, label=label)
            label = None
        j += 1


def stream_k_sawtooth(payload: dict, predicted: list[dict] | None = None, path: Path | None = None):
    """TFLOP/s against M (N and K fixed) for the data-parallel persistent rung, stream-K and cuBLAS (the payload's
    "sweep" rows; the median over rounds), dotted lines where the tile count crosses a multiple of the SM count;
    beside it, `predicted` (lab.lessons.scheduling.sawtooth_prediction): the share of the SMs' time each schedule
    keeps busy, from lab.core.tile_order alone."""
    import statistics

    rows = payload.get("sweep") or []
    if not rows:
        return None
    ms = sorted({r["M"] for r in rows})
    targets = list(dict.fromkeys(k for r in rows for k in r["tflops"]))
    panels = 2 if predicted else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 4.0), squeeze=False)
    ax = axes[0][0]
    for name in targets:
        ys = [statistics.median(r["tflops"][name] for r in rows if r["M"] == m and name in r["tflops"]) for m in ms]
        style = series_style(name, ceiling="cublas")
        if name.endswith("forced_split"):  # the same rung as 07 with its model off: same colour family, dashed
            style = dict(style, ls="--", color="0.45")
        ax.plot(ms, ys, marker="o", ms=2.5, label="cuBLAS" if name == "cublas" else name, **style)
    n = rows[0]["N"]
    _wave_lines(ax, payload, n, ms[0], ms[-1])
    ax.set_xlabel("M")
    ax.set_ylabel("TFLOP/s")
    ax.set_ylim(bottom=0)
    ax.set_title(f"measured, N={n}, K={rows[0]['K']}", fontsize=9)
    _plain_ticks(ax)
    _legend_outside(ax)
    if predicted:
        ax = axes[0][1]
        pm = [p["M"] for p in predicted]
        ax.plot(pm, [p["dp_efficiency"] for p in predicted], color=series_style("06")["color"], lw=1.3,
                label="data-parallel: tiles / (SMs x ceil(tiles / SMs))")
        ax.plot(pm, [p["sk_efficiency"] for p in predicted], color=series_style("07")["color"], lw=1.3,
                label="stream-K: tiles / (SMs x busiest block's tile-times)")
        _wave_lines(ax, payload, n, pm[0], pm[-1])
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("M")
        ax.set_ylabel("share of the SMs' time doing tiles")
        ax.set_title("predicted from lab.core.tile_order (no fix-up, no measurement)", fontsize=9)
        _plain_ticks(ax)
        _legend_outside(ax)
    fig.suptitle(figure_title("gemm_tc", f"the wave sawtooth ({payload.get('l2', '?')} L2)",
                              source=_payload_source(payload)), fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def stream_k_named(payload: dict, predicted: dict | None = None, targets: dict | None = None,
                   path: Path | None = None):
    """Stream-K over the data-parallel rung on each named shape (the median over its rounds), coloured by kind;
    `predicted` ({'MxNxK': ratio}) as black ticks, `targets` ({kind: ratio}) as dashed lines in the kind's colour."""
    import statistics

    rows = [r for r in payload.get("named") or [] if r.get("kind") != "square"
            and "06_persistent_ms" in r and "07_stream_k_ms" in r]
    if not rows:
        return None
    keys = list(dict.fromkeys(map(_shape_key, rows)))
    labels = ["{}x{}x{}".format(*k) for k in keys]
    kinds = [next(r["kind"] for r in rows if _shape_key(r) == k) for k in keys]
    ratios = [statistics.median(r["06_persistent_ms"] / r["07_stream_k_ms"] for r in rows if _shape_key(r) == k)
              for k in keys]
    fig, ax = plt.subplots(figsize=(9, 3.8))
    for kind in dict.fromkeys(kinds):
        xs = [i for i, k in enumerate(kinds) if k == kind]
        ax.bar(xs, [ratios[i] for i in xs], color=KIND_COLORS.get(kind, BASELINE_COLOR), label=kind)
    for i, v in enumerate(ratios):
        ax.text(i, 0.97 * v, f"{v:.2f}x", ha="center", va="top", fontsize=7, color="white")
    ax.set_xticks(range(len(labels)), labels)
    for kind in dict.fromkeys(kinds):
        if targets and kind in targets:
            ax.axhline(targets[kind], color=KIND_COLORS.get(kind, BASELINE_COLOR), ls="--", lw=1,
                       label=f"target, {kind}: {targets[kind]}x")
    if predicted:
        xs = [i for i, label in enumerate(labels) if label in predicted]
        ax.plot(xs, [predicted[labels[i]] for i in xs], ls="none", marker="_", ms=22, mew=2, color=CEILING_COLOR,
                label="predicted (rounds, no fix-up)")
    ax.axhline(1.0, color=CEILING_COLOR, lw=0.8)
    ax.set_ylabel("07_stream_k speed / 06_persistent speed")
    ax.set_ylim(0, max(ratios + list((predicted or {}).values())) * 1.15)
    ax.tick_params(axis="x", rotation=25, labelsize=7)
    _plain_ticks(ax, "y")
    _legend_outside(ax)
    ax.set_title(figure_title("gemm_tc", "stream-K over data-parallel on the named shapes (median over rounds)",
                              source=_payload_source(payload)), fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


# ----------------------------------------------------------------------------------------------
# Fusion (notebooks 06 and 07): a fused epilogue against the plain GEMM and the library paths, the optimization
# checklist's levels, and the memory-bound row ladders against the device copy.
# ----------------------------------------------------------------------------------------------

def _epilogue_title(params: dict) -> str:
    side = params["M"] if params.get("M") == params.get("N") == params.get("K") else None
    shape = f"{side}^3" if side else f"{params['M']}x{params['N']}x{params['K']}"
    out = params.get("out", "same")
    tail = "" if out == "same" else f" -> {out}" + ("/row" if params.get("q_per_row") else "")
    return f"{shape} {params.get('dtype', 'float32')}\n{params.get('epilogue', 'none')}{tail}"


def epilogue_times(rs: RecordSet, family: str, target: float | None = None, path: Path | None = None):
    """Per headline problem (one panel each): the median time of every target over the plain GEMM's (the ceiling,
    the same rung without the epilogue, timed in the same run), so the plain GEMM is 1 and lower is faster; the
    fused rung in its rung colour, the library paths grey; `target` (a ratio to the plain time) dashed."""
    recs = [r for r in rs.records if r.family == family and r.kind == "headline"]
    if not recs:
        return None
    ceiling = recs[0].ceiling
    problems = list({describe_params(r.params): r.params for r in recs}.values())
    fig, axes = plt.subplots(1, len(problems), figsize=(2.9 * len(problems) + 1.6, 3.9), sharey=True,
                             squeeze=False)
    top = 1.0
    for ax, params in zip(axes[0], problems, strict=True):
        mine = [r for r in recs if r.params == params]
        plain = next((r for r in mine if r.rung == ceiling), None)
        if plain is None:
            ax.set_visible(False)
            continue
        order = [plain] + [r for r in mine if r.rung[:2].isdigit()] + [r for r in mine if r is not plain
                                                                        and not r.rung[:2].isdigit()]
        ratios = [r.median_ms / plain.median_ms for r in order]
        top = max([top, *ratios])
        colors = ["white" if r.rung == ceiling else series_style(r.rung, ceiling)["color"] for r in order]
        bars = ax.bar(range(len(order)), ratios, color=colors, edgecolor=CEILING_COLOR, lw=0.6)
        for bar, r, x in zip(bars, order, ratios, strict=True):
            if r.rung == ceiling:
                bar.set_hatch("//")
            ax.text(bar.get_x() + bar.get_width() / 2, x, f"{x:.2f}x", ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(order)), [r.rung for r in order], rotation=30, ha="right", fontsize=7)
        if target:
            ax.axhline(target, color=CEILING_COLOR, ls="--", lw=1, label=f"target: fused <= {target:g}x plain")
        ax.set_title(_epilogue_title(params), fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        _plain_ticks(ax, "y")
    axes[0][0].set_ylim(0, top * 1.15)
    axes[0][0].set_ylabel(f"median time / {ceiling} time (cold L2)")
    _legend_outside(axes[0][-1])
    fig.suptitle(figure_title(family, f"each path's time over {ceiling}'s (same run; lower is faster)",
                              source=rs.label()), fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def _checklist_entries(size: dict) -> list[tuple[str, dict]]:
    return [("gemm", size["gemm"] | {"status": "ok", "x_gemm": 1.0}), *size["levels"].items()]


def checklist_levels(record: dict, path: Path | None = None):
    """The optimization checklist (lab.studies.checklist's record), one row of panels per size: left, each level's
    median
    time over the plain GEMM's (same run); right, the DRAM bytes of one call (Nsight Compute) against the
    operation's minimum (dashed), each bar labelled with its multiple of the minimum. A level that was not timed,
    or whose bytes were not measured, keeps its place with no bar."""
    sizes = record.get("sizes") or []
    if not any(e.get("status") == "ok" for s in sizes for _, e in _checklist_entries(s)[1:]):
        return None
    fig, axes = plt.subplots(len(sizes), 2, figsize=(12, 3.4 * len(sizes)), squeeze=False)
    for (ax_t, ax_b), size in zip(axes, sizes, strict=True):
        entries = _checklist_entries(size)
        names = [n for n, _ in entries]
        colors = [CEILING_COLOR if n == "gemm" else RUNG_COLORS[i % len(RUNG_COLORS)] for i, n in enumerate(names)]
        for i, (name, entry) in enumerate(entries):
            ok = entry.get("status") == "ok" and entry.get("x_gemm") is not None
            if ok:
                ax_t.bar(i, entry["x_gemm"], color="white" if name == "gemm" else colors[i], edgecolor=colors[i],
                         hatch="//" if name == "gemm" else None)
                ax_t.text(i, entry["x_gemm"], f"{entry['x_gemm']:.2f}x", ha="center", va="bottom", fontsize=7)
            else:
                ax_t.text(i, 0.02, "not timed", ha="center", va="bottom", fontsize=7, rotation=90)
            moved = (entry.get("dram") or {}).get("bytes") if ok else None
            if moved:
                ax_b.bar(i, moved / 1e6, color=colors[i])
                ax_b.text(i, moved / 1e6, f"{moved / size['min_dram_bytes']:.2f}x", ha="center", va="bottom",
                          fontsize=7)
        minimum = size["min_dram_bytes"]
        ax_b.axhline(minimum / 1e6, color=CEILING_COLOR, ls="--", lw=1, label=f"minimum {minimum / 1e6:.0f} MB")
        shape = f"{size['M']}x{size['N']}x{size['K']}"
        for ax, what in ((ax_t, "time / plain GEMM time (cold L2)"), (ax_b, "DRAM MB per call (10^6 B)")):
            ax.set_xticks(range(len(names)), names, rotation=20, fontsize=8)
            ax.set_ylabel(what, fontsize=8)
            ax.set_title(shape, fontsize=9)
            ax.grid(axis="y", alpha=0.3)
            ax.set_ylim(bottom=0)
            ax.margins(y=0.15)
            _plain_ticks(ax, "y")
        _legend_outside(ax_b)
    source = f"REPLAYED from {record['provenance'].get('device', '?')}" if record.get("replayed") else "measured"
    fig.suptitle(figure_title("checklist", record.get("operation", "the optimization checklist"),
                              source=f"{source}, {str(record['provenance'].get('date', '?'))[:10]}"), fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


def row_ladder(rs: RecordSet, family: str, target: float | None = None, min_n: int | None = None,
               path: Path | None = None):
    """A memory-bound row ladder at its headline problems, one panel per dtype: the row lengths as groups of bars,
    each rung (its colour) and library baseline (grey, hatched) as its fraction of the device copy timed on the
    same problem; `target` dashed over the row lengths n >= `min_n` it is stated for."""
    recs = [r for r in rs.records if r.family == family and r.kind == "headline" and r.rung != r.ceiling]
    if not recs:
        return None
    ceiling = recs[0].ceiling
    dtypes = list(dict.fromkeys(r.params.get("dtype", "") for r in recs))
    targets = list(dict.fromkeys(r.rung for r in sorted(recs, key=lambda r: (not r.rung[:2].isdigit(), r.rung))))
    fig, axes = plt.subplots(1, len(dtypes), figsize=(6.2 * len(dtypes) + 1.5, 3.8), sharey=True, squeeze=False)
    width = 0.8 / len(targets)
    for ax, dtype in zip(axes[0], dtypes, strict=True):
        ns = sorted({r.params["n"] for r in recs if r.params.get("dtype", "") == dtype})
        for t, name in enumerate(targets):
            style = series_style(name, ceiling)
            for x, n in enumerate(ns):
                rec = next((r for r in recs if r.rung == name and r.params["n"] == n
                            and r.params.get("dtype", "") == dtype), None)
                if rec is None:
                    continue
                left = x - 0.4 + width * (t + 0.5)
                digit = name[:2].isdigit()
                ax.bar(left, rec.ratio, width, color=style["color"] if digit else "white", edgecolor=style["color"],
                       hatch=None if digit else "//", label=name if x == 0 else None)
                ax.text(left, rec.ratio, f"{rec.ratio:.2f}", ha="center", va="bottom", fontsize=6, rotation=90)
        if target:
            covered = [x for x, n in enumerate(ns) if min_n is None or n >= min_n]
            if covered:
                ax.hlines(target, covered[0] - 0.45, covered[-1] + 0.45, color=CEILING_COLOR, ls="--", lw=1,
                          label=f"target {target:g} (n >= {min_n})" if min_n else f"target {target:g}")
        ax.axhline(1.0, color=CEILING_COLOR, lw=0.8)
        ax.set_xticks(range(len(ns)), [f"n={n}" for n in ns], fontsize=8)
        ax.set_title(dtype or family, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
        ax.set_ylim(0, 1.25)
        _plain_ticks(ax, "y")
    axes[0][0].set_ylabel(f"fraction of {ceiling} (same run)")
    _legend_outside(axes[0][-1])
    fig.suptitle(figure_title(family, f"headline row lengths ({recs[0].l2} L2) against {ceiling}", source=rs.label()),
                 fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def _clusters(values: list[int]) -> list[list[int]]:
    """Sorted values split where a gap is more than twice the smallest step: the runs of lengths around each
    boundary a tail sweep steps across."""
    values = sorted(set(values))
    step = _tail_step(values)
    out = [[values[0]]] if values else []
    for v in values[1:]:
        if v - out[-1][-1] <= 2 * step:
            out[-1].append(v)
        else:
            out.append([v])
    return out


def tail_by_base(rs: RecordSet, family: str, path: Path | None = None):
    """The tail records as a fraction of the device copy timed on the same problem, one panel per run of row
    lengths (around 1024, 2048, 4096, ...), each power of two dotted: a sawtooth with a vector's period shows
    where the scalar heads and tails cost."""
    recs = [r for r in rs.records if r.family == family and r.kind == "tail" and r.rung != r.ceiling]
    if not recs:
        return None
    key = tail_key(recs)
    groups = _clusters([r.params[key] for r in recs])
    fig, axes = plt.subplots(1, len(groups), figsize=(4.2 * len(groups) + 1.5, 3.6), sharey=True, squeeze=False)
    for ax, group in zip(axes[0], groups, strict=True):
        lo, hi = group[0], group[-1]
        for name in dict.fromkeys(r.rung for r in recs):
            pts = sorted((r.params[key], r.ratio) for r in recs if r.rung == name and lo <= r.params[key] <= hi)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", ms=3, label=name,
                    **series_style(name, recs[0].ceiling))
        power = 1 << (hi.bit_length() - 1)
        if lo <= power <= hi:
            ax.axvline(power, color=BASELINE_COLOR, ls=":", lw=1)
        ax.set_xlabel(key)
        ax.set_title(f"{key} = {lo}..{hi}", fontsize=9)
        ax.grid(alpha=0.3)
        _plain_ticks(ax)
    axes[0][0].set_ylabel(f"fraction of {recs[0].ceiling} (same run)")
    _legend_outside(axes[0][-1])
    dtypes = sorted({str(r.params.get("dtype", "")) for r in recs} - {""})
    fig.suptitle(figure_title(family, f"tail: {key} stepping by {_tail_step(sorted({r.params[key] for r in recs}))}"
                              + (f" ({', '.join(dtypes)})" if dtypes else "") + ", powers of two dotted",
                              source=rs.label()), fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


# ----------------------------------------------------------------------------------------------
# Shapes that do not fill the GPU (notebook 05): split-K against its factor, decode against M, grouped GEMM per
# case, and a routing's tokens per expert against the tile rows they fill. Each reads a payload or RecordSet
# (live, or replayed); the expert figure is drawn from the groups alone.
# ----------------------------------------------------------------------------------------------

def _mnk(key: tuple[int, int, int]) -> str:
    """'256x256x65536': the key the lessons give predictions and reference times by."""
    return "x".join(map(str, key))


SPLIT_COLORS = ("#1f77b4", "#2ca02c", "#d62728", "#17becf", "#bcbd22", "#9467bd", "#8c564b", "#e377c2")


def split_factors(payload: dict, predicted: dict | None = None, path: Path | None = None):
    """TFLOP/s against the split factor S (log scale), one panel per shape, one line per split rung or knob variant
    (the payload's "factor" rows; the atomic mode dashed); cuBLAS (dashed black) and rung 06 (dotted grey) from the
    unpadded "auto" rows of the same run; `predicted` ({'MxNxK': [{"S", "tflops": (lo, hi)}, ...]}) as a grey band.
    Reads a lab.studies.split_k payload."""
    rows = [r for r in payload.get("rows") or [] if r.get("kind") == "factor"]
    if not rows:
        return None
    keys, fig, axes = _shape_panels(rows)
    names = list(dict.fromkeys(k for r in rows for k in r["tflops"]))
    auto = {_shape_key(r): r for r in payload.get("rows", []) if r.get("kind") == "auto" and not r.get("pad")}
    for ax, key in zip(axes.ravel(), keys, strict=False):
        mine = sorted((r for r in rows if _shape_key(r) == key), key=lambda r: r["splits"])
        for i, name in enumerate(names):
            pts = [(r["splits"], r["tflops"][name]) for r in mine if name in r["tflops"]]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, lw=1.3,
                    ls="--" if name.endswith("atomic") else "-", color=SPLIT_COLORS[i % len(SPLIT_COLORS)], label=name)
        ref = auto.get(key, {}).get("tflops", {})
        if "cublas" in ref:
            ax.axhline(ref["cublas"], color=CEILING_COLOR, ls="--", lw=1.5, label="cuBLAS (same run)")
        if "06_persistent" in ref:
            ax.axhline(ref["06_persistent"], color=BASELINE_COLOR, ls=":", lw=1.5, label="rung 06 (S = 1)")
        band = (predicted or {}).get(_mnk(key))
        if band:
            ax.fill_between([p["S"] for p in band], [p["tflops"][0] for p in band], [p["tflops"][1] for p in band],
                            color="0.85", label="predicted (compute / bytes bound)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("split factor S")
        ax.set_ylabel("TFLOP/s")
        ax.set_ylim(bottom=0)
        ax.set_title(_shape_text(key), fontsize=9)
        ax.grid(alpha=0.3)
        _plain_ticks(ax, "y")
    for ax in axes.ravel()[len(keys):]:
        ax.set_visible(False)
    _legend_outside(axes[0][-1])
    what = (f"TFLOP/s against the split factor ({payload.get('l2', '?')} L2, {payload.get('dtype', '')} "
            f"{payload.get('layout', '')})")
    fig.suptitle(figure_title("gemm_split_k", what, source=_payload_source(payload)), fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def split_kernel_times(launches: list[dict], cublas_us: dict | None = None, source: str = "",
                       path: Path | None = None):
    """Nsight Compute's durations per shape and reduction mode: the split kernel and the reduction kernel stacked,
    cuBLAS's timed GEMM (`cublas_us`, {'MxNxK': us}) as a black tick where given. Reads
    lab.lessons.underfill.ncu_launches."""
    if not launches:
        return None
    labels = [f"{_shape_text(_shape_key(r))}\n{r['mode']}" for r in launches]
    fig, ax = plt.subplots(figsize=(8.0, 0.45 * len(launches) + 1.4))
    ys = range(len(launches))
    ax.barh(ys, [r["split_us"] for r in launches], color=READ_COLOR, label="split kernel (mainloop + slice stores)")
    ax.barh(ys, [r["reduce_us"] for r in launches], left=[r["split_us"] for r in launches], color=WRITE_COLOR,
            label="reduction kernel")
    marked = False
    for y, r in zip(ys, launches, strict=True):
        us = (cublas_us or {}).get(_mnk(_shape_key(r)))
        if us:
            ax.plot([us, us], [y - 0.4, y + 0.4], color=CEILING_COLOR, lw=2,
                    label=None if marked else "cuBLAS (its events-timed GEMM, same device)")
            marked = True
    ax.set_yticks(list(ys))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("microseconds (Nsight Compute, caches flushed before each kernel)")
    ax.grid(axis="x", alpha=0.3)
    _plain_ticks(ax, "x")
    _legend_outside(ax)
    ax.set_title(figure_title("gemm_split_k", "where the time goes", source=source), fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def decode_bandwidth(rs: RecordSet, dtype: str = "float16", target: float | None = None, path: Path | None = None):
    """GB/s of W (2 N K bytes over the median time) against M (log scale), one panel per N = K, for every kernel of
    the decode records and cuBLAS; the device copy's own GB/s for the same bytes, same run, dashed black, and
    `target` times it dotted. Reads `lab bench decode` records."""
    recs = [r for r in rs.records if r.kind == "headline" and r.params.get("dtype") == dtype]
    if not recs:
        return None
    sides = sorted({r.params["N"] for r in recs})
    fig, axes = plt.subplots(1, len(sides), figsize=(5.0 * len(sides) + 1.5, 3.8), squeeze=False)
    ceiling = recs[0].ceiling
    for ax, n in zip(axes[0], sides, strict=True):
        mine = [r for r in recs if r.params["N"] == n]
        for name in dict.fromkeys(r.rung for r in mine):
            pts = sorted((r.params["M"], r) for r in mine if r.rung == name)
            ms = [m for m, _ in pts]
            if name == ceiling:
                ys = [r.value for _, r in pts]
            else:
                ys = [2 * r.params["N"] * r.params["K"] / (r.median_ms * 1e6) for _, r in pts]
            ax.plot(ms, ys, marker="o", ms=3, label=f"{name} (its own bytes)" if name == ceiling else name,
                    **series_style(name, ceiling))
            if name == ceiling and target:
                ax.plot(ms, [target * y for y in ys], color=CEILING_COLOR, ls=":", lw=1,
                        label=f"target: {target:g} x the copy")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("M (tokens)")
        ax.set_ylabel("GB/s of W")
        ax.set_ylim(bottom=0)
        ax.set_title(f"N = K = {n}, W = {format_bytes(2 * n * n)}", fontsize=9)
        ax.grid(alpha=0.3)
        _plain_ticks(ax)
    _legend_outside(axes[0][-1])
    fig.suptitle(figure_title("decode", f"reading the weight, {dtype}, cold L2", source=rs.label()), fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def grouped_cases(rs: RecordSet, path: Path | None = None):
    """TFLOP/s per headline case and type of the grouped records: every kernel, the loop of calls (the ceiling)
    and cuBLAS batched where timed; each kernel bar labelled with its speed over the loop."""
    recs = [r for r in rs.records if r.kind == "headline"]
    if not recs:
        return None
    problems = list(dict.fromkeys((r.params.get("case", "?"), r.params.get("dtype", "")) for r in recs))
    names = list(dict.fromkeys(r.rung for r in recs))
    fig, ax = plt.subplots(figsize=(1.6 * len(problems) + 3.0, 3.8))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        for j, (case, dtype) in enumerate(problems):
            rec = next((r for r in recs if r.rung == name and r.params.get("case", "?") == case
                        and r.params.get("dtype", "") == dtype), None)
            if rec is None:
                continue
            style = series_style(name, rec.ceiling)
            bar = ax.bar(j + (i - (len(names) - 1) / 2) * width, rec.value, width, color=style["color"],
                         label=name if j == 0 or name not in ax.get_legend_handles_labels()[1] else None)
            if name != rec.ceiling and rec.ceiling_value:
                ax.text(bar[0].get_x() + width / 2, rec.value, f"{rec.ratio:.1f}x", ha="center", va="bottom",
                        fontsize=7)
    ax.set_xticks(range(len(problems)))
    ax.set_xticklabels([f"{c}\n{d}" for c, d in problems], fontsize=8)
    ax.set_ylabel("TFLOP/s (useful work)")
    _plain_ticks(ax, "y")
    _legend_outside(ax)
    ax.set_title(figure_title("grouped_gemm", "one launch against a loop of calls; labels: x the loop",
                              source=rs.label()), fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def expert_rows(groups, bm: int = 128, title: str = "", path: Path | None = None):
    """Tokens per group, largest first, as bars, and the rows their tiles compute (M rounded up to `bm`) as an
    outline: the padding a grouped kernel pays for uneven experts. Drawn from the groups alone."""
    ms = sorted((g[0] for g in groups), reverse=True)
    if not ms:
        return None
    fig, ax = plt.subplots(figsize=(8.0, 3.2))
    xs = range(len(ms))
    ax.bar(xs, [-(-m // bm) * bm for m in ms], color="none", edgecolor=BASELINE_COLOR, lw=0.8,
           label=f"rows computed (tiles of {bm} rows)")
    ax.bar(xs, ms, color=READ_COLOR, label="tokens")
    ax.set_xlabel("group (largest first)")
    ax.set_ylabel("rows")
    _log_if_decades(ax, [float(m) for m in ms])
    _legend_outside(ax)
    ax.set_title(figure_title("grouped_gemm", title or f"{len(ms)} groups, {sum(ms)} tokens"), fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


# ----------------------------------------------------------------------------------------------
# The compile cache (lab.studies.compile_study): compile time and cache size as kernel variants multiply. Each reads a
# record
# of lab.studies.compile_study (live, or replayed through lab.studies.compile_study.load); compile times are host CPU
# times.
# ----------------------------------------------------------------------------------------------

HIT_COLOR = BASELINE_COLOR


def _axes_or_new(ax, figsize: tuple[float, float]):
    """(figure, axes, whether this call made the figure): the given axes, else a new figure's."""
    if ax is not None:
        return ax.figure, ax, False
    fig, ax = plt.subplots(figsize=figsize)
    return fig, ax, True


def compile_growth(record: dict, ax=None, path: Path | None = None):
    """Total compile seconds (solid, left axis) and cache size in MB (dashed, right axis) against the number of
    variants, one colour per rung, each point labelled with the axis just multiplied in ("x tiles", "x stages", ...).
    Every point is a sum of measured compiles, never an extrapolation."""
    steps = record.get("growth") or []
    if not steps:
        return None
    fig, ax, own = _axes_or_new(ax, (8.5, 4.4))
    right = ax.twinx()
    for i, series in enumerate(dict.fromkeys(s["series"] for s in steps)):
        mine = [s for s in steps if s["series"] == series]
        color = series_style(series)["color"]
        xs = [s["variants"] for s in mine]
        ax.plot(xs, [s["compile_s"] for s in mine], color=color, marker="o", ms=4, lw=1.5,
                label=f"{series}: compile seconds (left)")
        right.plot(xs, [s["cache_bytes"] / 1e6 for s in mine], color=color, ls="--", marker="s", ms=3, lw=1.0,
                   label=f"{series}: cache MB (right)")
        for s in mine:
            # one series' labels above its points, the next one's below, so that they do not overprint
            ax.annotate(s["step"], (s["variants"], s["compile_s"]), textcoords="offset points",
                        xytext=(4, 5 if i % 2 == 0 else -11), fontsize=7, color=color)
    ax.margins(x=0.12)  # room for the last point's label before the right-hand axis
    if _log_if_decades(ax, [float(s["variants"]) for s in steps], axis="x"):
        counts = sorted({s["variants"] for s in steps})
        ax.set_xticks(counts, [str(c) for c in counts], fontsize=8)
        ax.minorticks_off()
    ax.set_xlabel("variants built (each a cubin in the cache)" + (", log scale" if ax.get_xscale() != "linear" else ""))
    ax.set_ylabel("total compile seconds (host CPU)")
    right.set_ylabel("cache size, MB (1 MB = 10^6 B; cubins + .json)")
    ax.set_ylim(bottom=0)
    right.set_ylim(bottom=0)
    _plain_ticks(ax, "y")
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    more, more_labels = right.get_legend_handles_labels()
    ax.legend(handles + more, labels + more_labels, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2,
              fontsize=7)
    ax.set_title(figure_title("gemm_tc", "compile time and cache size as variants multiply",
                              source=_payload_source(record)), fontsize=10)
    if own:
        fig.tight_layout()
    return _save(fig, path)


def compile_time_per_variant(record: dict, ax=None, path: Path | None = None):
    """Seconds per variant, one strip per rung and target (sm_90a, sm_80, ...): each dot one variant's cache miss
    (key, NVRTC compile, write), the black bar their median, the grey crosses the same variants' cache hits."""
    rows = record.get("rows") or []
    if not rows:
        return None
    groups = list(dict.fromkeys((r["rung"], r["target"]) for r in rows))
    fig, ax, own = _axes_or_new(ax, (max(5.0, 1.3 * len(groups) + 2.5), 4.2))
    for x, (rung, target) in enumerate(groups):
        mine = sorted((r for r in rows if (r["rung"], r["target"]) == (rung, target)), key=lambda r: r["compile_s"])
        spread = [0.0] if len(mine) == 1 else [-0.25 + 0.5 * i / (len(mine) - 1) for i in range(len(mine))]
        color = series_style(rung)["color"]
        ax.scatter([x + d for d in spread], [r["compile_s"] for r in mine], s=14, color=color, alpha=0.8,
                   label=rung if rung not in ax.get_legend_handles_labels()[1] else None)
        seconds = sorted(r["compile_s"] for r in mine)
        median = (seconds[(len(seconds) - 1) // 2] + seconds[len(seconds) // 2]) / 2
        ax.plot([x - 0.32, x + 0.32], [median, median], color=CEILING_COLOR, lw=2,
                label="median miss" if x == 0 else None)
        hits = [r["hit_s"] for r in mine if "hit_s" in r]
        if hits:
            ax.scatter([x + d for d in spread[:len(hits)]], hits, marker="x", s=12, color=HIT_COLOR, lw=0.8,
                       label="cache hit (lookup, same variant)" if x == 0 else None)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"rung {rung.split('_', 1)[0]}\n{target}" for rung, target in groups], fontsize=8)
    values = [r["compile_s"] for r in rows] + [r["hit_s"] for r in rows if "hit_s" in r]
    log = _log_if_decades(ax, values)
    ax.set_ylabel("seconds per variant (host CPU)" + (", log scale" if log else ""))
    if not log:
        ax.set_ylim(bottom=0)
        _plain_ticks(ax, "y")
    ax.grid(axis="y", alpha=0.3)
    _legend_outside(ax)
    ax.set_title(figure_title("gemm_tc", "seconds per variant: a cache miss (compile) and a hit",
                              source=_payload_source(record)), fontsize=10)
    if own:
        fig.tight_layout()
    return _save(fig, path)


# ----------------------------------------------------------------------------------------------
# lab.ops on the serving trace (notebook 08): shapes, autotune, latency, speedups, the decode boundary, overhead.
# Each takes the plain rows lab.lessons.ops shapes from the lab.studies.ops_study records, and a `source` line
# (lab.lessons.ops.label) saying where the numbers come from.
# ----------------------------------------------------------------------------------------------

# One colour per lab.ops path (and per method of the trace), the same in every figure of the notebook.
OPS_COLORS = {"decode": RUNG_COLORS[1], "split_k": RUNG_COLORS[4], "persistent": RUNG_COLORS[5],
              "stream_k": RUNG_COLORS[6], "generic": RUNG_COLORS[2], "cublas": BASELINE_COLOR,
              "lab_ops": RUNG_COLORS[0], "hot_forced": RUNG_COLORS[3]}
STEP_MARKERS = {"decode": "o", "prefill": "s"}


def _ops_color(name: str) -> str:
    return OPS_COLORS.get(name.split(" ", 1)[0], CEILING_COLOR)


def _log2_m_axis(ax, ms: list[int], axis: str = "x", most: int = 8) -> None:
    """A log-2 axis for M with powers of two from the data's range as plain tick labels (every other one, or every
    fourth, when there would be more than `most`)."""
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log", base=2)
    lo, hi = max(1, min(ms)), max(ms)
    ticks = [1 << i for i in range((lo - 1).bit_length(), hi.bit_length() + 1) if lo <= 1 << i <= hi] or [lo]
    step = 1
    while len(ticks[::step]) > most:
        step *= 2
    ticks = ticks[::step]
    (ax.set_xticks if axis == "x" else ax.set_yticks)(ticks, [str(t) for t in ticks], fontsize=8)
    ax.minorticks_off()


def _plain_log_ticks(ax, which: str = "y", minor: bool = False) -> None:
    """Plain numbers ('1.5', '20') on a log axis instead of powers of ten; the minor ticks labelled too when
    `minor` (an axis spanning less than a decade has no major tick to read)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    axis = ax.yaxis if which == "y" else ax.xaxis
    fmt = FuncFormatter(lambda v, _pos: f"{v:g}")
    axis.set_major_formatter(fmt)
    axis.set_minor_formatter(fmt if minor else NullFormatter())


def trace_shapes(rows: list[dict], buckets: list[dict] | None = None, source: str = "", path: Path | None = None):
    """The trace's M distribution: steps per M (decode and prefill apart, log-2 M axis); and, with `buckets`
    (lab.lessons.ops.bucket_times), each M bucket's share of the steps beside its share of lab.ops's GPU time."""
    if not rows:
        return None
    panels = 2 if buckets else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.0 * panels, 4.0), squeeze=False)
    ax = axes[0][0]
    for kind, color in (("decode", OPS_COLORS["decode"]), ("prefill", OPS_COLORS["persistent"])):
        mine = [r for r in rows if r["kind"] == kind]
        if mine:
            ax.vlines([r["M"] for r in mine], 0, [r["steps"] for r in mine], color=color, lw=1.2)
            ax.scatter([r["M"] for r in mine], [r["steps"] for r in mine], color=color, s=10,
                       marker=STEP_MARKERS[kind], label=f"{kind} steps")
    _log2_m_axis(ax, [r["M"] for r in rows])
    ax.set_xlabel("M (tokens in the step), log scale")
    ax.set_ylabel("steps of the trace")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"steps per M ({sum(r['steps'] for r in rows)} steps)", fontsize=10)
    if buckets:
        ax = axes[0][1]
        total_steps = sum(b["decode_steps"] + b["prefill_steps"] for b in buckets) or 1
        xs = range(len(buckets))
        ax.bar([x - 0.2 for x in xs], [100 * (b["decode_steps"] + b["prefill_steps"]) / total_steps for b in buckets],
               width=0.4, color=BASELINE_COLOR, label="share of the steps")
        ax.bar([x + 0.2 for x in xs], [100 * b["share"] for b in buckets], width=0.4, color=OPS_COLORS["lab_ops"],
               label="share of lab.ops's GPU time")
        ax.set_xticks(list(xs), [f"<={b['bucket']}" for b in buckets], fontsize=7, rotation=45)
        ax.set_xlabel("M bucket (M rounded up to a power of two)")
        ax.set_ylabel("% of the trace")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title("where the steps are, where the time goes", fontsize=10)
    fig.suptitle(figure_title("lab.ops", "the serving trace's shapes", source=source), fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def autotune_candidates(rows: list[dict], source: str = "", path: Path | None = None):
    """One panel per GEMM of the layer: each candidate's time over the bucket's winner against the M bucket (1 is
    the winner; log scale). Rejected candidates have no point: lab.lessons.ops.tune_table says why."""
    if not rows:
        return None
    gemms = list(dict.fromkeys(r["gemm"] for r in rows))
    cols = min(3, len(gemms))
    nrows = -(-len(gemms) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.4 * cols, 3.4 * nrows), squeeze=False, sharey=True)
    labels = list(dict.fromkeys(c for r in rows for c in r["candidates"]))
    styles = ["-", "--", ":", "-."]
    for i, gemm in enumerate(gemms):
        ax = axes[i // cols][i % cols]
        mine = sorted((r for r in rows if r["gemm"] == gemm), key=lambda r: r["m_bucket"])
        for cand in labels:
            pts = [(r["m_bucket"], r["candidates"][cand] / r["winner_us"]) for r in mine
                   if cand in r["candidates"] and r["winner_us"]]
            if pts:
                same_path = [c for c in labels if c.split(" ", 1)[0] == cand.split(" ", 1)[0]]
                ax.plot(*zip(*pts, strict=True), marker="o", ms=3, lw=1.2, color=_ops_color(cand),
                        ls=styles[same_path.index(cand) % len(styles)], label=cand)
        _log2_m_axis(ax, [r["m_bucket"] for r in mine])
        ax.set_yscale("log")
        _plain_log_ticks(ax, minor=True)
        ax.tick_params(axis="y", which="both", labelsize=7)
        ax.axhline(1.0, color=CEILING_COLOR, lw=0.8)
        ax.set_title(f"{gemm} (N={mine[0]['N']}, K={mine[0]['K']}, {mine[0]['epilogue']})", fontsize=9)
        ax.set_xlabel("M bucket (the bucket's largest M)", fontsize=8)
        if i % cols == 0:
            ax.set_ylabel("time / winner's time (log)", fontsize=8)
        ax.grid(alpha=0.3)
    for j in range(len(gemms), nrows * cols):
        axes[j // cols][j % cols].set_visible(False)
    handles, names = [], []
    for row in axes:
        for ax in row:
            for h, n in zip(*ax.get_legend_handles_labels(), strict=True):
                if n not in names:
                    handles.append(h)
                    names.append(n)
    fig.legend(handles, names, loc="lower center", ncol=min(4, len(names)), fontsize=8, bbox_to_anchor=(0.5, -0.02))
    fig.suptitle(figure_title("lab.ops", "autotune: every candidate against the bucket's winner", source=source),
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return _save(fig, path)


def first_request_latency(rows: list[dict], target_ms: float | None = None, source: str = "",
                          path: Path | None = None):
    """Per scenario (empty caches, warm caches, a warm-up manifest): the first request, the median and the 99th
    percentile in ms (log scale), the target for the first request as a dashed line."""
    rows = [r for r in rows if "error" not in r]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.0))
    stats = (("first_ms", "first request", RUNG_COLORS[3]), ("p50_ms", "median", RUNG_COLORS[0]),
             ("p99_ms", "99th percentile", RUNG_COLORS[1]))
    width = 0.8 / len(stats)
    for j, (key, name, color) in enumerate(stats):
        xs = [i + (j - 1) * width for i in range(len(rows))]
        bars = ax.bar(xs, [r[key] for r in rows], width=width, color=color, label=name)
        ax.bar_label(bars, [f"{r[key]:.0f}" if r[key] >= 100 else f"{r[key]:.3g}" for r in rows], fontsize=7)
    ax.set_xticks(range(len(rows)), [f"{r['scenario'].replace('_', ' ')}\n{r['compiled']} compiles" for r in rows],
                  fontsize=8)
    ax.set_yscale("log")
    _plain_log_ticks(ax)
    if target_ms is not None:
        ax.axhline(target_ms, color=CEILING_COLOR, ls="--", lw=1.2,
                   label=f"target for the first request, warm ({target_ms:g} ms)")
    ax.set_ylabel("ms per request (one layer), log scale")
    ax.grid(axis="y", alpha=0.3)
    _legend_outside(ax)
    ax.set_title(figure_title("lab.ops", "first-request latency of a fresh process", source=source), fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def trace_speedups(rows: list[dict], source: str = "", path: Path | None = None):
    """lab.ops's speedup per distinct step of the trace against M: over cuBLAS, over rung 03 (generic) and over
    rung 06 (persistent); decode steps as circles, prefill steps as squares; 1 (no gain) as a black line."""
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(8.0, 4.2))
    for base in ("cublas", "generic", "persistent"):
        for kind, marker in STEP_MARKERS.items():
            pts = [(r["M"], r[f"over_{base}"]) for r in rows if r["kind"] == kind and f"over_{base}" in r]
            if pts:
                ax.scatter(*zip(*pts, strict=True), marker=marker, s=16 if kind == "decode" else 30,
                           facecolors=_ops_color(base) if kind == "decode" else "none", edgecolors=_ops_color(base),
                           label=f"over {base}, {kind} steps")
    ax.axhline(1.0, color=CEILING_COLOR, lw=1.0)
    _log2_m_axis(ax, [r["M"] for r in rows])
    values = [r[k] for r in rows for k in r if k.startswith("over_")]
    if _log_if_decades(ax, values):
        _plain_log_ticks(ax)
        ax.set_ylabel("time of the other / time of lab.ops, log scale")
    else:
        ax.set_ylabel("time of the other / time of lab.ops")
        _plain_ticks(ax, "y")
    ax.set_xlabel("M of the step, log scale")
    ax.grid(alpha=0.3)
    _legend_outside(ax)
    ax.set_title(figure_title("lab.ops", "speedup per step of the trace (above 1: lab.ops is faster)", source=source),
                 fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def decode_boundary(boundary: dict, rule_max_m: int | None = None, source: str = "", path: Path | None = None):
    """One GEMM as M grows, each path forced (decode GEMV, rung 06, split-K, cuBLAS): us per call against M, the
    dispatch table's decode limit as a dotted line. A path that could not serve an M has no point there."""
    ms, us = boundary.get("M") or [], boundary.get("us") or {}
    if not ms or not us:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for name, values in us.items():
        pts = [(m, v) for m, v in zip(ms, values, strict=False) if v is not None]
        if pts:
            style = series_style(name)
            ax.plot(*zip(*pts, strict=True), marker="o", ms=4, color=_ops_color(name),
                    ls="--" if name == "cublas" else "-", lw=style["lw"], label=name)
    if rule_max_m is not None:
        ax.axvline(rule_max_m, color=CEILING_COLOR, ls=":", lw=1.0, label=f"table: decode up to M={rule_max_m}")
    _log2_m_axis(ax, ms)
    ax.set_xlabel("M, log scale")
    ax.set_ylabel("us per call (cold L2)")
    ax.set_ylim(bottom=0)
    _plain_ticks(ax, "y")
    ax.grid(alpha=0.3)
    _legend_outside(ax)
    what = f"where decode stops paying: {boundary.get('gemm', '?')} N={boundary.get('N')} K={boundary.get('K')}"
    ax.set_title(figure_title("lab.ops", what, source=source), fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def dispatch_overhead(rows: list[dict], target_us: float | None = None, source: str = "", path: Path | None = None):
    """Host us per call per path: the same launches replayed raw, lab.ops with an output given and with one
    allocated, and cupy.matmul; min-max as error bars."""
    columns = ("raw_replay", "lab_ops", "lab_ops_alloc", "cupy_matmul")
    rows = [r for r in rows if any(c in r for c in columns)]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.0))
    colors = {"raw_replay": BASELINE_COLOR, "lab_ops": OPS_COLORS["lab_ops"], "lab_ops_alloc": RUNG_COLORS[8],
              "cupy_matmul": CEILING_COLOR}
    width = 0.8 / len(columns)
    for j, col in enumerate(columns):
        xs = [i + (j - 1.5) * width for i, r in enumerate(rows) if col in r]
        mine = [r for r in rows if col in r]
        err = [[r[col] - r["spread"][col][0] for r in mine], [r["spread"][col][1] - r[col] for r in mine]]
        ax.bar(xs, [r[col] for r in mine], width=width, color=colors[col], yerr=err, capsize=2, label=col)
    if target_us is not None:
        for i, r in enumerate(rows):
            if "raw_replay" in r:
                ax.plot([i - 0.4, i + 0.4], [r["raw_replay"] + target_us] * 2, color=RUNG_COLORS[3], ls="--", lw=1.0,
                        label=f"raw replay + {target_us:g} us (target)" if i == 0 else None)
    ax.set_xticks(range(len(rows)), [f"{r['path']}\n{r['launches']} launch(es)" for r in rows], fontsize=8)
    ax.set_ylabel("host us per call")
    ax.set_ylim(bottom=0)
    _plain_ticks(ax, "y")
    ax.grid(axis="y", alpha=0.3)
    _legend_outside(ax)
    ax.set_title(figure_title("lab.ops", "dispatch overhead per call (host time)", source=source), fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


RATIO_LOG_SPAN = 2.0  # ratios whose largest is more than this many times their smallest get a log axis
_RATIO_TICKS = (0.25, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)


def ops_torch_ratios(rows: list[dict], source: str = "", path: Path | None = None):
    """lab.ops under the sweep's table against PyTorch, one point per sample grouped by shape class: PyTorch's time
    over lab.ops's (median of the rounds, cold L2), the bar its min-max over the rounds, the colour lab.ops's path, an
    open marker where PyTorch's result left the error bound; 1 (a tie) as a black line; a log axis when the ratios
    span more than RATIO_LOG_SPAN. `rows`: lab.lessons.ops_torch.ratio_rows."""
    import statistics

    rows = [r for r in rows if r.get("ratios")]
    if not rows:
        return None
    classes = list(dict.fromkeys(r["class"] for r in rows))
    fig, ax = plt.subplots(figsize=(10.0, 4.4))
    x, centres, seen, outsides = 0.0, [], set(), False
    for i, cls in enumerate(classes):
        mine = [r for r in rows if r["class"] == cls]
        start = x
        for r in mine:
            med = statistics.median(r["ratios"])
            lo, hi = min(r["ratios"]), max(r["ratios"])
            path_name = str(r.get("path") or "lab_ops").split(" ", 1)[0]
            color = _ops_color(path_name) if path_name in OPS_COLORS else OPS_COLORS["lab_ops"]
            ax.vlines(x, lo, hi, color=color, lw=1.2)
            outside = bool(r.get("torch_outside"))
            ax.scatter([x], [med], s=22, marker="o", facecolors="none" if outside else color, edgecolors=color,
                       zorder=3)
            if path_name not in seen:  # the legend: one filled marker per path
                ax.scatter([], [], s=22, marker="o", color=color, label=f"lab.ops path: {path_name}")
                seen.add(path_name)
            outsides = outsides or outside
            x += 1.0
        centres.append((start + x - 1.0) / 2)
        if i < len(classes) - 1:
            ax.axvline(x, color=BASELINE_COLOR, lw=0.5, alpha=0.5)
            x += 1.0
    if outsides:
        ax.scatter([], [], s=22, marker="o", facecolors="none", edgecolors=CEILING_COLOR,
                   label="open: PyTorch's result outside\nthe fp32-accumulation bound")
    ax.axhline(1.0, color=CEILING_COLOR, lw=1.0, label="1: a tie")
    ax.set_xticks(centres, classes, fontsize=8, rotation=30, ha="right")
    ax.set_xlim(-1.0, x)
    values = [v for r in rows for v in r["ratios"] if v > 0]
    lo, hi = min(values + [1.0]), max(values + [1.0])
    if hi > RATIO_LOG_SPAN * lo:
        ax.set_yscale("log")
        ax.set_ylim(lo / 1.08, hi * 1.08)
        ticks = [t for t in _RATIO_TICKS if lo / 1.08 <= t <= hi * 1.08]
        ax.set_yticks(ticks, [f"{t:g}" for t in ticks], fontsize=8)
        ax.minorticks_off()
        ax.set_ylabel("PyTorch time / lab.ops time, log scale")
    else:
        ax.set_ylabel("PyTorch time / lab.ops time")
        _plain_ticks(ax, "y")
    ax.set_xlabel("shape class (one point per sample; bar: min-max over the rounds)")
    ax.grid(axis="y", alpha=0.3)
    _legend_outside(ax)
    ax.set_title(figure_title("lab.ops", "against PyTorch per sample (above 1: lab.ops is faster)", source=source),
                 fontsize=10)
    fig.tight_layout()
    return _save(fig, path)
