"""Matplotlib figures drawn from Records (never from literals): regimes, tails, ladder bars."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from lab.records import RecordSet, describe_params, format_value, tail_key

COLD, WARM, CEIL = "#1f77b4", "#ff7f0e", "#444444"


def _fmt_bytes(b: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if b < 1024:
            return f"{b:.0f} {unit}"
        b /= 1024
    return f"{b:.0f} PB"


def _series(rs: RecordSet, kind: str, rung: str, l2: str):
    recs = sorted(rs.where(kind=kind, rung=rung, l2=l2), key=lambda r: r.bytes_moved)
    return [r.bytes_moved for r in recs], [r.value for r in recs]


def bandwidth_vs_bytes(rs: RecordSet, family: str, path: Path | None = None):
    """One panel per rung: cold and warm L2 curves, the device-copy ceiling, the L2 size marked."""
    sweep = [r for r in rs.records if r.family == family and r.kind == "sweep"]
    if not sweep:
        return None
    ceiling = sweep[0].ceiling
    rungs = [k for k in dict.fromkeys(r.rung for r in sweep) if k != ceiling]
    cols = min(3, len(rungs))
    rows = (len(rungs) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.8 * rows), sharey=True, squeeze=False)
    l2 = rs.provenance.get("l2_bytes", 0)
    for ax, rung in zip(axes.flat, rungs, strict=False):
        for l2_mode, color in (("cold", COLD), ("warm", WARM)):
            x, y = _series(rs, "sweep", rung, l2_mode)
            ax.plot(x, y, "o-", ms=3, color=color, label=f"{rung} ({l2_mode} L2)")
            cx, cy = _series(rs, "sweep", ceiling, l2_mode)
            ax.plot(cx, cy, ":", color=color, alpha=0.6, label=f"device copy ({l2_mode})")
        if l2:
            ax.axvline(l2, color=CEIL, lw=1, ls="--")
            ax.text(l2, 0.02, f" L2 {_fmt_bytes(l2)}", fontsize=7, transform=ax.get_xaxis_transform())
        ax.set_xscale("log", base=2)
        ax.set_xlabel("bytes moved (read + write)")
        ax.set_title(rung, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc="upper left")
    for ax in axes.flat[len(rungs):]:
        ax.set_visible(False)
    axes[0][0].set_ylabel("GB/s")
    fig.suptitle(f"{family}: bandwidth vs size — launch-bound (left), L2-resident, HBM plateau (right)\n"
                 f"{rs.label()}", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def tail(rs: RecordSet, family: str, path: Path | None = None):
    """Bandwidth against a size stepping by 1: a sawtooth shows where tails or alignment cost."""
    recs = [r for r in rs.records if r.family == family and r.kind == "tail"]
    if not recs:
        return None
    key = tail_key(recs)
    fig, ax = plt.subplots(figsize=(8, 4))
    for rung in dict.fromkeys(r.rung for r in recs):
        pts = sorted((r.params[key], r.value) for r in recs if r.rung == rung)
        style = ":" if rung == recs[0].ceiling else "-"
        ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker=".", ms=3, label=rung)
    fixed = {k: v for k, v in recs[0].params.items() if k != key}
    ax.set_xlabel({"n": "n", "cols": "matrix side n (n x n)"}.get(key, f"{key} ({describe_params(fixed)})"))
    ax.set_ylabel(recs[0].metric)
    ax.set_title(f"{family}: tail behaviour, size stepping by 1\n{rs.label()}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return _save(fig, path)


def ladder_bars(rs: RecordSet, family: str, path: Path | None = None, params: dict | None = None,
                peak: float | None = None, peak_label: str = "peak"):
    """Headline throughput per rung, with the ceiling from the same run as a line (and a peak, if given)."""
    recs = [r for r in rs.records if r.family == family and r.kind == "headline"]
    if not recs:
        return None
    params = params or recs[0].params
    recs = [r for r in recs if r.params == params]
    ceiling = next(r for r in recs if r.rung == r.ceiling)
    fig, ax = plt.subplots(figsize=(8, 4))
    names = [r.rung for r in recs]
    bars = ax.bar(names, [r.value for r in recs], color=[CEIL if r.rung == r.ceiling else COLD for r in recs])
    for bar, r in zip(bars, recs, strict=True):
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(),
                f"{format_value(r.value, r.metric)}\n{r.ratio:.2f}x", ha="center", va="bottom", fontsize=7)
    ax.axhline(ceiling.value, color=CEIL, ls="--", lw=1)
    if peak:
        ax.axhline(peak, color=CEIL, ls=":", lw=1)
        ax.text(0, peak, f" {peak_label} {format_value(peak, recs[0].metric)} {recs[0].metric}", fontsize=7,
                va="bottom", transform=ax.get_yaxis_transform())
    ax.set_ylabel(recs[0].metric)
    ax.set_title(f"{family} ladder at {describe_params(params)} ({recs[0].l2} L2) vs {ceiling.rung}\n{rs.label()}",
                 fontsize=9)
    ax.tick_params(axis="x", rotation=20, labelsize=8)
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
    fig, (ax, rel) = plt.subplots(1, 2, figsize=(12, 4.2))
    for rung in dict.fromkeys(r.rung for r in sweep):
        pts = sorted((r.params[key], r.value, r.ratio) for r in sweep if r.rung == rung)
        x = [p[0] for p in pts]
        style = dict(color=CEIL, ls="--", lw=2) if rung == ceiling else dict(ls="-")
        ax.plot(x, [p[1] for p in pts], marker="o", ms=3, label=rung, **style)
        if rung != ceiling:
            rel.plot(x, [p[2] for p in pts], marker="o", ms=3, label=rung)
    if peak:
        ax.axhline(peak, color=CEIL, ls=":", lw=1)
        ax.text(0, peak, f" {peak_label} {format_value(peak, sweep[0].metric)} {sweep[0].metric}", fontsize=7,
                va="bottom", transform=ax.get_yaxis_transform())
    rel.axhline(1.0, color=CEIL, ls="--", lw=1)
    side = "M = N = K" if key == "M" else key
    for a in (ax, rel):
        a.set_xscale("log", base=2)
        a.set_xlabel(side)
        a.grid(alpha=0.3)
    ax.set_ylabel(sweep[0].metric)
    rel.set_ylabel(f"fraction of {ceiling} (same run)")
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(5, len(labels)), fontsize=7)
    ax.set_title(f"{family}: {sweep[0].metric} against size ({l2} L2)", fontsize=9)
    rel.set_title(f"against {ceiling}, size by size", fontsize=9)
    fig.suptitle(rs.label(), fontsize=9)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return _save(fig, path)


def profile_bars(rows: list[dict], metric: str, title: str, path: Path | None = None):
    """Bars of one Nsight Compute metric per rung (e.g. shared-memory bank conflicts)."""
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.bar([r["rung"] for r in rows], [r.get(metric, 0) for r in rows], color=COLD)
    ax.set_ylabel(metric, fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.tick_params(axis="x", rotation=20, labelsize=8)
    fig.tight_layout()
    return _save(fig, path)


def dram_bars(rows: list[dict], minimum: int | None, title: str, path: Path | None = None):
    """DRAM bytes per rung (read and write stacked, from lab.profile.dram_rows), the minimum dashed."""
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(8, 3.8))
    names = [r["rung"] for r in rows]
    reads = [r["read"] / 1e6 for r in rows]
    ax.bar(names, reads, color=COLD, label="DRAM read")
    ax.bar(names, [r["write"] / 1e6 for r in rows], bottom=reads, color=WARM, label="DRAM write")
    if minimum:
        ax.axhline(minimum / 1e6, color=CEIL, ls="--", lw=1, label=f"minimum {minimum / 1e6:.0f} MB")
        for i, r in enumerate(rows):
            ax.text(i, r["total"] / 1e6, f"{r['over_minimum']:.2f}x", ha="center", va="bottom", fontsize=7)
    totals = [r["total"] for r in rows] + ([minimum] if minimum else [])
    if max(totals) > 20 * max(min(totals), 1):  # a naive rung can move 10-100x the minimum
        ax.set_yscale("log")
    ax.set_ylabel("MB" + (" (log scale)" if ax.get_yscale() == "log" else ""))
    ax.set_title(title, fontsize=9)
    ax.tick_params(axis="x", rotation=20, labelsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)


def _save(fig, path: Path | None):
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return Path(path)
    return fig
