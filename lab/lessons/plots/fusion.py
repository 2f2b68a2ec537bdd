"""Fusion (notebooks 06 and 07): a fused epilogue against the plain GEMM and the library paths, the optimization
checklist's levels, the row ladders and their tails."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from lab.lessons.plots.style import (
    BASELINE_COLOR,
    CEILING_COLOR,
    RUNG_COLORS,
    figure_title,
    legend_outside,
    plain_ticks,
    save,
    series_style,
    tail_step,
)
from lab.measure.records import RecordSet, describe_params, tail_key

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
        plain_ticks(ax, "y")
    axes[0][0].set_ylim(0, top * 1.15)
    axes[0][0].set_ylabel(f"median time / {ceiling} time (cold L2)")
    legend_outside(axes[0][-1])
    fig.suptitle(figure_title(family, f"each path's time over {ceiling}'s (same run; lower is faster)",
                              source=rs.label()), fontsize=10)
    fig.tight_layout()
    return save(fig, path)


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
        tops = {ax_t: [1.0], ax_b: [size["min_dram_bytes"] / 1e6]}  # the tallest bar per panel: room for its label
        colors = [CEILING_COLOR if n == "gemm" else RUNG_COLORS[i % len(RUNG_COLORS)] for i, n in enumerate(names)]
        for i, (name, entry) in enumerate(entries):
            ok = entry.get("status") == "ok" and entry.get("x_gemm") is not None
            if ok:
                ax_t.bar(i, entry["x_gemm"], color="white" if name == "gemm" else colors[i], edgecolor=colors[i],
                         hatch="//" if name == "gemm" else None)
                ax_t.text(i, entry["x_gemm"], f"{entry['x_gemm']:.2f}x", ha="center", va="bottom", fontsize=7)
                tops[ax_t].append(entry["x_gemm"])
            else:
                ax_t.text(i, 0.02, "not timed", ha="center", va="bottom", fontsize=7, rotation=90)
            moved = (entry.get("dram") or {}).get("bytes") if ok else None
            if moved:
                ax_b.bar(i, moved / 1e6, color=colors[i])
                ax_b.text(i, moved / 1e6, f"{moved / size['min_dram_bytes']:.2f}x", ha="center", va="bottom",
                          fontsize=7)
                tops[ax_b].append(moved / 1e6)
        minimum = size["min_dram_bytes"]
        ax_b.axhline(minimum / 1e6, color=CEILING_COLOR, ls="--", lw=1, label=f"minimum {minimum / 1e6:.0f} MB")
        shape = f"{size['M']}x{size['N']}x{size['K']}"
        for ax, what in ((ax_t, "time / plain GEMM time (cold L2)"), (ax_b, "DRAM MB per call (10^6 B)")):
            ax.set_xticks(range(len(names)), names, rotation=20, fontsize=8)
            ax.set_ylabel(what, fontsize=8)
            ax.set_title(shape, fontsize=9)
            ax.grid(axis="y", alpha=0.3)
            ax.set_ylim(0, max(tops[ax]) * 1.15)
            plain_ticks(ax, "y")
        legend_outside(ax_b)
    source = f"REPLAYED from {record['provenance'].get('device', '?')}" if record.get("replayed") else "measured"
    fig.suptitle(figure_title("checklist", record.get("operation", "the optimization checklist"),
                              source=f"{source}, {str(record['provenance'].get('date', '?'))[:10]}"), fontsize=9)
    fig.tight_layout()
    return save(fig, path)


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
                ax.text(left, rec.ratio, f"{rec.ratio:.2f}", ha="center", va="bottom", fontsize=7, rotation=90)
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
        plain_ticks(ax, "y")
    axes[0][0].set_ylabel(f"fraction of {ceiling} (same run)")
    legend_outside(axes[0][-1])
    fig.suptitle(figure_title(family, f"headline row lengths ({recs[0].l2} L2) against {ceiling}", source=rs.label()),
                 fontsize=10)
    fig.tight_layout()
    return save(fig, path)


def _clusters(values: list[int]) -> list[list[int]]:
    """Sorted values split where a gap is more than twice the smallest step: the runs of lengths around each
    boundary a tail sweep steps across."""
    values = sorted(set(values))
    step = tail_step(values)
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
        plain_ticks(ax)
    axes[0][0].set_ylabel(f"fraction of {recs[0].ceiling} (same run)")
    legend_outside(axes[0][-1])
    dtypes = sorted({str(r.params.get("dtype", "")) for r in recs} - {""})
    fig.suptitle(figure_title(family, f"tail: {key} stepping by {tail_step(sorted({r.params[key] for r in recs}))}"
                              + (f" ({', '.join(dtypes)})" if dtypes else "") + ", powers of two dotted",
                              source=rs.label()), fontsize=10)
    fig.tight_layout()
    return save(fig, path)
