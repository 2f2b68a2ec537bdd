"""Shapes that do not fill the GPU (notebook 05): split-K against its factor, decode against M, grouped GEMM per
case and per expert."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.ticker import NullLocator

from lab.lessons.plots.style import (
    BASELINE_COLOR,
    CEILING_COLOR,
    READ_COLOR,
    WRITE_COLOR,
    figure_title,
    legend_outside,
    log_if_decades,
    payload_source,
    plain_ticks,
    save,
    series_style,
    shape_key,
    shape_panels,
    shape_text,
)
from lab.measure.records import RecordSet, format_bytes

# ----------------------------------------------------------------------------------------------
# Shapes that do not fill the GPU (notebook 05): split-K against its factor, decode against M, grouped GEMM per
# case, and a routing's tokens per expert against the tile rows they fill. Each reads a payload or RecordSet
# (live, or replayed); the expert figure is drawn from the groups alone.
# ----------------------------------------------------------------------------------------------

def _mnk(key: tuple[int, int, int]) -> str:
    """'256x256x65536': the key the lessons give predictions and reference times by."""
    return "x".join(map(str, key))


def ticks_inside(ax, which: str = "xy") -> None:
    """Keep only the tick marks inside the axes' limits: the tick labels matplotlib lays out past an axis's end are
    not drawn, but they still sit on the figure as texts (where a legibility check finds them over a title)."""
    for name in which:
        axis = ax.xaxis if name == "x" else ax.yaxis
        lo, hi = sorted(ax.get_xlim() if name == "x" else ax.get_ylim())
        span = (hi - lo) * 1e-9
        axis.set_ticks([v for v in axis.get_ticklocs() if lo - span <= v <= hi + span])


SPLIT_COLORS = ("#1f77b4", "#2ca02c", "#d62728", "#17becf", "#bcbd22", "#9467bd", "#8c564b", "#e377c2")


def split_factors(payload: dict, predicted: dict | None = None, path: Path | None = None):
    """TFLOP/s against the split factor S (log scale), one panel per shape, one line per split rung or knob variant
    (the payload's "factor" rows; the atomic mode dashed); cuBLAS (dashed black) and rung 06 (dotted grey) from the
    unpadded "auto" rows of the same run; `predicted` ({'MxNxK': [{"S", "tflops": (lo, hi)}, ...]}) as a grey band.
    Reads a lab.studies.split_k payload."""
    rows = [r for r in payload.get("rows") or [] if r.get("kind") == "factor"]
    if not rows:
        return None
    keys, fig, axes = shape_panels(rows)
    names = list(dict.fromkeys(k for r in rows for k in r["tflops"]))
    auto = {shape_key(r): r for r in payload.get("rows", []) if r.get("kind") == "auto" and not r.get("pad")}
    for ax, key in zip(axes.ravel(), keys, strict=False):
        mine = sorted((r for r in rows if shape_key(r) == key), key=lambda r: r["splits"])
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
        ax.set_title(shape_text(key), fontsize=9)
        ax.grid(alpha=0.3)
        plain_ticks(ax, "y")
        ticks_inside(ax)
    for ax in axes.ravel()[len(keys):]:
        ax.set_visible(False)
    legend_outside(axes[0][-1])
    what = (f"TFLOP/s against the split factor ({payload.get('l2', '?')} L2, {payload.get('dtype', '')} "
            f"{payload.get('layout', '')})")
    fig.suptitle(figure_title("gemm_split_k", what, source=payload_source(payload)), fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return save(fig, path)


def split_kernel_times(launches: list[dict], cublas_us: dict | None = None, source: str = "",
                       path: Path | None = None):
    """Nsight Compute's durations per shape and reduction mode: the split kernel and the reduction kernel stacked,
    cuBLAS's timed GEMM (`cublas_us`, {'MxNxK': us}) as a black tick where given. Reads
    lab.lessons.underfill.ncu_launches."""
    if not launches:
        return None
    labels = [f"{shape_text(shape_key(r))}\n{r['mode']}" for r in launches]
    fig, ax = plt.subplots(figsize=(8.0, 0.45 * len(launches) + 1.4))
    ys = range(len(launches))
    ax.barh(ys, [r["split_us"] for r in launches], color=READ_COLOR, label="split kernel (mainloop + slice stores)")
    ax.barh(ys, [r["reduce_us"] for r in launches], left=[r["split_us"] for r in launches], color=WRITE_COLOR,
            label="reduction kernel")
    marked = False
    for y, r in zip(ys, launches, strict=True):
        us = (cublas_us or {}).get(_mnk(shape_key(r)))
        if us:
            ax.plot([us, us], [y - 0.4, y + 0.4], color=CEILING_COLOR, lw=2,
                    label=None if marked else "cuBLAS (its events-timed GEMM, same device)")
            marked = True
    ax.set_yticks(list(ys))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("microseconds (Nsight Compute, caches flushed before each kernel)")
    ax.grid(axis="x", alpha=0.3)
    plain_ticks(ax, "x")
    ticks_inside(ax, "x")
    legend_outside(ax)
    ax.set_title(figure_title("gemm_split_k", "where the time goes", source=source), fontsize=10)
    fig.tight_layout()
    return save(fig, path)


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
        tokens = sorted({r.params["M"] for r in mine})
        ax.set_xticks(tokens, [str(m) for m in tokens])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("M (tokens)")
        ax.set_ylabel("GB/s of W")
        ax.set_ylim(bottom=0)
        ax.set_title(f"N = K = {n}, W = {format_bytes(2 * n * n)}", fontsize=9)
        ax.grid(alpha=0.3)
        plain_ticks(ax, "y")
        ticks_inside(ax, "y")
    legend_outside(axes[0][-1])
    fig.suptitle(figure_title("decode", f"reading the weight, {dtype}, cold L2", source=rs.label()), fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return save(fig, path)


LOOP_COLOR = "#c7c7c7"  # the loop of library calls: a baseline, not an upper bound, so not the ceilings' black
GROUPED_LABELS = {"cupy_loop": "cupy_loop: a Python loop of cuBLAS calls (baseline)",
                  "cublas_batched": "cublas_batched: cuBLAS strided-batched (baseline)"}


def grouped_cases(rs: RecordSet, path: Path | None = None):
    """TFLOP/s per headline case and type of the grouped records: every kernel, the loop of cuBLAS calls (the
    baseline the family is timed against) and cuBLAS batched where timed; each kernel bar labelled with its speed
    over the loop."""
    recs = [r for r in rs.records if r.kind == "headline"]
    if not recs:
        return None
    problems = list(dict.fromkeys((r.params.get("case", "?"), r.params.get("dtype", "")) for r in recs))
    names = list(dict.fromkeys(r.rung for r in recs))
    fig, ax = plt.subplots(figsize=(max(1.6 * len(problems) + 3.0, 8.0), 4.0))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        for j, (case, dtype) in enumerate(problems):
            rec = next((r for r in recs if r.rung == name and r.params.get("case", "?") == case
                        and r.params.get("dtype", "") == dtype), None)
            if rec is None:
                continue
            color = LOOP_COLOR if name == rec.ceiling else series_style(name)["color"]
            label = GROUPED_LABELS.get(name, name)
            bar = ax.bar(j + (i - (len(names) - 1) / 2) * width, rec.value, width, color=color,
                         edgecolor="0.3" if name == rec.ceiling else None, lw=0.6,
                         label=label if label not in ax.get_legend_handles_labels()[1] else None)
            if name != rec.ceiling and rec.ceiling_value:
                ax.text(bar[0].get_x() + width / 2, rec.value, f"{rec.ratio:.1f}x", ha="center", va="bottom",
                        fontsize=7)
    ax.set_xticks(range(len(problems)))
    ax.set_xticklabels([f"{c}\n{d}" for c, d in problems], fontsize=8)
    ax.set_ylabel("TFLOP/s (useful work)")
    ax.margins(y=0.1)
    plain_ticks(ax, "y")
    ticks_inside(ax, "y")
    legend_outside(ax)
    ax.set_title(figure_title("grouped_gemm", "one launch against a loop of cuBLAS calls\nbar labels: times the loop's "
                              "speed", source=rs.label()), fontsize=10)
    fig.tight_layout()
    return save(fig, path)


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
    log_if_decades(ax, [float(m) for m in ms])
    ticks_inside(ax, "y")
    legend_outside(ax)
    ax.set_title(figure_title("grouped_gemm", title or f"{len(ms)} groups, {sum(ms)} tokens"), fontsize=10)
    fig.tight_layout()
    return save(fig, path)
