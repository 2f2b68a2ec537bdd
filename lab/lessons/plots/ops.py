"""The compile cache and lab.ops on the serving trace (notebook 08): compile time as variants multiply, shapes,
autotune, first-request latency, speedups, the decode boundary, dispatch overhead, lab.ops against PyTorch."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from lab.lessons.plots.style import (
    BASELINE_COLOR,
    CEILING_COLOR,
    RUNG_COLORS,
    axes_or_new,
    figure_title,
    legend_outside,
    log_if_decades,
    payload_source,
    plain_log_ticks,
    plain_ticks,
    save,
    series_style,
)

# ----------------------------------------------------------------------------------------------
# The compile cache (lab.studies.compile_study): compile time and cache size as kernel variants multiply. Each reads a
# record
# of lab.studies.compile_study (live, or replayed through lab.studies.compile_study.load); compile times are host CPU
# times.
# ----------------------------------------------------------------------------------------------

HIT_COLOR = BASELINE_COLOR


def compile_growth(record: dict, ax=None, path: Path | None = None):
    """Total compile seconds (solid, left axis) and cache size in MB (dashed, right axis) against the number of
    variants, one colour per rung, each point labelled with the axis just multiplied in ("x tiles", "x stages", ...).
    Every point is a sum of measured compiles, never an extrapolation."""
    steps = record.get("growth") or []
    if not steps:
        return None
    fig, ax, own = axes_or_new(ax, (8.5, 4.4))
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
    if log_if_decades(ax, [float(s["variants"]) for s in steps], axis="x"):
        counts = sorted({s["variants"] for s in steps})
        ax.set_xticks(counts, [str(c) for c in counts], fontsize=8)
        ax.minorticks_off()
    ax.set_xlabel("variants built (each a cubin in the cache)" + (", log scale" if ax.get_xscale() != "linear" else ""))
    ax.set_ylabel("total compile seconds (host CPU)")
    right.set_ylabel("cache size, MB (1 MB = 10^6 B; cubins + .json)")
    ax.set_ylim(bottom=0)
    right.set_ylim(bottom=0)
    plain_ticks(ax, "y")
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    more, more_labels = right.get_legend_handles_labels()
    ax.legend(handles + more, labels + more_labels, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2,
              fontsize=7)
    ax.set_title(figure_title("gemm_tc", "compile time and cache size as variants multiply",
                              source=payload_source(record)), fontsize=10)
    if own:
        fig.tight_layout()
    return save(fig, path)


def compile_time_per_variant(record: dict, ax=None, path: Path | None = None):
    """Seconds per variant, one strip per rung and target (sm_90a, sm_80, ...): each dot one variant's cache miss
    (key, NVRTC compile, write), the black bar their median, the grey crosses the same variants' cache hits."""
    rows = record.get("rows") or []
    if not rows:
        return None
    groups = list(dict.fromkeys((r["rung"], r["target"]) for r in rows))
    fig, ax, own = axes_or_new(ax, (max(5.0, 1.3 * len(groups) + 2.5), 4.2))
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
    log = log_if_decades(ax, values)
    ax.set_ylabel("seconds per variant (host CPU)" + (", log scale" if log else ""))
    if not log:
        ax.set_ylim(bottom=0)
        plain_ticks(ax, "y")
    ax.grid(axis="y", alpha=0.3)
    legend_outside(ax)
    ax.set_title(figure_title("gemm_tc", "seconds per variant: a cache miss (compile) and a hit",
                              source=payload_source(record)), fontsize=10)
    if own:
        fig.tight_layout()
    return save(fig, path)


# ----------------------------------------------------------------------------------------------
# lab.ops on the serving trace (notebook 08): shapes, autotune, latency, speedups, the decode boundary, overhead.
# Each takes the plain rows lab.lessons.ops shapes from the lab.studies.ops_study records, and a `source` line
# (lab.lessons.ops.label) saying where the numbers come from.
# ----------------------------------------------------------------------------------------------

# One colour per lab.ops path (and per method of the trace), the same in every figure of the notebook.
OPS_COLORS = {"decode": RUNG_COLORS[1], "split_k": RUNG_COLORS[4], "persistent": RUNG_COLORS[5],
              "hopper": RUNG_COLORS[7], "stream_k": RUNG_COLORS[6], "generic": RUNG_COLORS[2],
              "cublas": BASELINE_COLOR,
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
    return save(fig, path)


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
        ax.tick_params(axis="y", which="both", labelsize=7)
        ax.axhline(1.0, color=CEILING_COLOR, lw=0.8)
        ax.set_title(f"{gemm} (N={mine[0]['N']}, K={mine[0]['K']}, {mine[0]['epilogue']})", fontsize=9)
        ax.set_xlabel("M bucket (the bucket's largest M)", fontsize=8)
        if i % cols == 0:
            ax.set_ylabel("time / winner's time (log)", fontsize=8)
        ax.grid(alpha=0.3)
    # Fixed plain ticks inside the ratios' range (the panels share the axis): no unlabelled decade, and no tick
    # label left outside the view for a reader's eye (or the legibility check) to trip on.
    ratios = [v / r["winner_us"] for r in rows if r["winner_us"] for v in r["candidates"].values()] or [1.0]
    lo, hi = min(ratios + [1.0]) / 1.05, max(ratios + [1.0]) * 1.05
    ticks = [t for t in _RATIO_TICKS if lo <= t <= hi]
    axes[0][0].set_ylim(lo, hi)
    axes[0][0].set_yticks(ticks, [f"{t:g}" for t in ticks])
    for row in axes:
        for ax in row:
            ax.minorticks_off()
    for j in range(len(gemms), nrows * cols):
        axes[j // cols][j % cols].remove()  # an empty panel would still carry its tick labels
    handles, names = [], []
    for ax in fig.axes:
        for h, n in zip(*ax.get_legend_handles_labels(), strict=True):
            if n not in names:
                handles.append(h)
                names.append(n)
    fig.legend(handles, names, loc="lower center", ncol=min(4, len(names)), fontsize=8, bbox_to_anchor=(0.5, -0.02))
    fig.suptitle(figure_title("lab.ops", "autotune: every candidate against the bucket's winner", source=source),
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return save(fig, path)


def scenario_label(scenario: str, width: int = 13) -> str:
    """A latency scenario's name wrapped onto short lines ('empty caches\nwith manifest'), so that the names of
    neighbouring bar groups do not run into each other."""
    import textwrap

    return "\n".join(textwrap.wrap(scenario.replace("_", " "), width)) or scenario


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
        # a white box under each label, so that the target's dashed line never runs through one
        ax.bar_label(bars, [f"{r[key]:.0f}" if r[key] >= 100 else f"{r[key]:.3g}" for r in rows], fontsize=7,
                     bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.4}, zorder=4)
    ax.set_xticks(range(len(rows)), [f"{scenario_label(r['scenario'])}\n{r['compiled']} compiles" for r in rows],
                  fontsize=8)
    ax.set_yscale("log")
    plain_log_ticks(ax)
    if target_ms is not None:
        ax.axhline(target_ms, color=CEILING_COLOR, ls="--", lw=1.2,
                   label=f"target for the first request, warm ({target_ms:g} ms)")
    ax.set_ylabel("ms per request (one layer), log scale")
    ax.grid(axis="y", alpha=0.3)
    legend_outside(ax)
    ax.set_title(figure_title("lab.ops", "first-request latency of a fresh process", source=source), fontsize=10)
    fig.tight_layout()
    return save(fig, path)


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
    if log_if_decades(ax, values):
        plain_log_ticks(ax)
        ax.set_ylabel("time of the other / time of lab.ops, log scale")
    else:
        ax.set_ylabel("time of the other / time of lab.ops")
        plain_ticks(ax, "y")
    ax.set_xlabel("M of the step, log scale")
    ax.grid(alpha=0.3)
    legend_outside(ax)
    ax.set_title(figure_title("lab.ops", "speedup per step of the trace (above 1: lab.ops is faster)", source=source),
                 fontsize=10)
    fig.tight_layout()
    return save(fig, path)


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
    plain_ticks(ax, "y")
    ax.grid(alpha=0.3)
    legend_outside(ax)
    what = f"where decode stops paying: {boundary.get('gemm', '?')} N={boundary.get('N')} K={boundary.get('K')}"
    ax.set_title(figure_title("lab.ops", what, source=source), fontsize=10)
    fig.tight_layout()
    return save(fig, path)


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
    plain_ticks(ax, "y")
    ax.grid(axis="y", alpha=0.3)
    legend_outside(ax)
    ax.set_title(figure_title("lab.ops", "dispatch overhead per call (host time)", source=source), fontsize=10)
    fig.tight_layout()
    return save(fig, path)


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
        plain_ticks(ax, "y")
    ax.set_xlabel("shape class (one point per sample; bar: min-max over the rounds)")
    ax.grid(axis="y", alpha=0.3)
    legend_outside(ax)
    ax.set_title(figure_title("lab.ops", "against PyTorch per sample (above 1: lab.ops is faster)", source=source),
                 fontsize=10)
    fig.tight_layout()
    return save(fig, path)
