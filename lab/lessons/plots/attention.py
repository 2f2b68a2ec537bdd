"""Notebook 09's figures, from attention records only (lab.lessons.attention reads them by kind): the ladder against
PyTorch SDPA per headline problem, the head-dimension comparison, the decode step's time, the sequence-length sweep and
the tail. Each returns None when its records hold nothing to draw."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from lab.lessons.plots.style import (
    CEILING_COLOR,
    figure_title,
    legend_outside,
    log_if_decades,
    plain_log_ticks,
    plain_ticks,
    save,
    series_style,
)
from lab.measure.records import RecordSet

FAMILY = "attention"
BASELINE = "torch_sdpa"


def _targets(rs: RecordSet) -> list[str]:
    from lab.lessons.attention import targets

    return targets(rs)


def _problems(rs: RecordSet, keep) -> list[dict]:
    from lab.lessons.attention import problems

    return [p for p in problems(rs) if keep(p)]


_DTYPE_SHORT = {"float16": "fp16", "bfloat16": "bf16"}


def _short(params: dict, groups: list[dict], skip: tuple[str, ...] = ()) -> str:
    """A bar group's label: only what differs among `groups` (the rest is in the title), on up to two lines."""
    parts = []
    for key in ("B", "S_k", "D", "dtype", "H", "causal"):
        if key in skip or len({str(g.get(key)) for g in groups}) < 2:
            continue
        value = params.get(key)
        if key == "dtype":
            parts.append(_DTYPE_SHORT.get(value, value))
        elif key == "causal":
            parts.append("causal" if value else "full")
        elif key == "H":
            parts.append(f"H={value}" + (f"/{params['H_kv']}" if params.get("H_kv", value) != value else ""))
        else:
            parts.append(f"{'S' if key == 'S_k' else key}={value}")  # B, S, D
    if not parts:
        return f"S={params['S_k']} D={params['D']}"
    half = -(-len(parts) // 2)
    return " ".join(parts[:half]) + ("\n" + " ".join(parts[half:]) if parts[half:] else "")


def _common(groups: list[dict]) -> dict:
    """What every group shares (for the title)."""
    return {k: v for k, v in groups[0].items() if all(g.get(k) == v for g in groups)}


def _color(name: str) -> dict:
    style = series_style(name, BASELINE)
    return {"color": "white" if name == BASELINE else style["color"], "edgecolor": CEILING_COLOR, "lw": 0.6,
            "hatch": "//" if name == BASELINE else None}


def _grouped_bars(ax, rs: RecordSet, groups: list[dict], value) -> list[float]:
    """One group of bars per problem, one bar per target (the baseline hatched); returns the values drawn."""
    names = _targets(rs)
    width = 0.8 / len(names)
    drawn = []
    for i, name in enumerate(names):
        xs, ys = [], []
        for g, params in enumerate(groups):
            rec = next(iter(rs.where(rung=name, params=params)), None)
            if rec is not None:
                xs.append(g - 0.4 + width * (i + 0.5))
                ys.append(value(rec))
        if xs:
            ax.bar(xs, ys, width, label=name, **_color(name))
            drawn += ys
    ax.set_xticks(range(len(groups)), [_short(p, groups) for p in groups], fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    return drawn


def ladder_vs_sdpa(rs: RecordSet, path: Path | None = None):
    """TFLOP/s of every rung and of SDPA per headline prefill problem (log axis: rung 01 is decades below)."""
    groups = _problems(rs, lambda p: p.get("S_q") != 1)
    if not groups:
        return None
    fig, ax = plt.subplots(figsize=(max(6.0, 1.25 * len(groups) + 2.5), 3.8))
    drawn = _grouped_bars(ax, rs, groups, lambda r: r.value)
    if log_if_decades(ax, drawn):
        plain_log_ticks(ax)
    else:
        plain_ticks(ax, "y")
    ax.set_ylabel("TFLOP/s (cold L2, median)")
    legend_outside(ax)
    shared = {k: v for k, v in _common(groups).items() if k in ("B", "H", "S_k")}
    ax.set_title(figure_title(FAMILY, f"the ladder against {BASELINE}, headline problems", shared, rs.label()),
                 fontsize=9)
    fig.tight_layout()
    return save(fig, path)


def head_dims(rs: RecordSet, path: Path | None = None):
    """Each rung's share of SDPA (same run) at D = 64 (light, dotted hatch) beside D = 128 (solid), per otherwise
    equal prefill problem: does a rung keep its share when a tile carries half the work? Rungs under 1% of SDPA
    everywhere (the definition) would be invisible bars and are left out."""
    groups = [p for p in _problems(rs, lambda p: p.get("S_q") != 1 and p["D"] == 128)
              if rs.where(params=dict(p, D=64))]
    shares = {n: max((r.ratio for r in rs.where(rung=n) if r.params.get("S_q") != 1), default=0.0)
              for n in _targets(rs) if n != BASELINE}
    names = [n for n, share in shares.items() if share >= 0.01]
    if not groups or not names:
        return None
    fig, ax = plt.subplots(figsize=(max(6.0, 1.5 * len(groups) + 2.5), 3.8))
    width = 0.8 / (2 * len(names))
    for i, name in enumerate(names):
        for j, d in enumerate((64, 128)):
            xs, ys = [], []
            for g, params in enumerate(groups):
                rec = next(iter(rs.where(rung=name, params=dict(params, D=d))), None)
                if rec is not None:
                    xs.append(g - 0.4 + width * (2 * i + j + 0.5))
                    ys.append(rec.ratio)
            if xs:
                color = series_style(name, BASELINE)["color"]
                ax.bar(xs, ys, width, label=f"{name}, D={d}", color=color, alpha=0.45 if d == 64 else 1.0,
                       edgecolor=CEILING_COLOR, lw=0.6, hatch=".." if d == 64 else None)
    ax.axhline(1.0, color=CEILING_COLOR, ls="--", lw=1.2, label=f"{BASELINE} (1)")
    ax.set_xticks(range(len(groups)), [_short(p, groups, skip=("D",)) for p in groups], fontsize=7)
    ax.set_ylabel(f"TFLOP/s / {BASELINE}'s (same run)")
    ax.grid(axis="y", alpha=0.3)
    plain_ticks(ax, "y")
    legend_outside(ax)
    shared = {k: v for k, v in _common(groups).items() if k in ("B", "H", "S_k")}
    ax.set_title(figure_title(FAMILY, "each rung's share of SDPA, D = 64 and D = 128", shared, rs.label()),
                 fontsize=9)
    fig.tight_layout()
    return save(fig, path)


def decode_times(rs: RecordSet, path: Path | None = None):
    """The decode step (S_q = 1): each target's median time per decode problem (lower is faster)."""
    groups = _problems(rs, lambda p: p.get("S_q") == 1)
    if not groups:
        return None
    fig, ax = plt.subplots(figsize=(max(5.0, 1.6 * len(groups) + 2.5), 3.6))
    drawn = _grouped_bars(ax, rs, groups, lambda r: r.median_ms)
    if log_if_decades(ax, drawn):
        plain_log_ticks(ax)
    else:
        plain_ticks(ax, "y")
    ax.set_ylabel("median time, ms (lower is faster)")
    legend_outside(ax)
    shared = {k: v for k, v in _common(groups).items() if k in ("B", "H", "H_kv", "S_k", "D")}
    ax.set_title(figure_title(FAMILY, "one decode step (S_q = 1)", shared, rs.label()), fontsize=9)
    fig.tight_layout()
    return save(fig, path)


def _lines(rs: RecordSet, what: str, path: Path | None, log_x: bool):
    names = _targets(rs)
    if not rs.records:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for name in names:
        recs = sorted((r for r in rs.records if r.rung == name), key=lambda r: r.params["S_k"])
        if recs:
            style = series_style(name, BASELINE)
            ax.plot([r.params["S_k"] for r in recs], [r.value for r in recs], marker="o", ms=3, label=name, **style)
    if log_x:
        ax.set_xscale("log", base=2)
        plain_log_ticks(ax, "x")
    else:
        plain_ticks(ax, "x")
    plain_ticks(ax, "y")
    ax.set_xlabel("sequence length S (S_q = S_k)")
    ax.set_ylabel("TFLOP/s (median)")
    ax.grid(alpha=0.3)
    legend_outside(ax)
    ax.set_title(figure_title(FAMILY, what, source=rs.label()), fontsize=9)
    fig.tight_layout()
    return save(fig, path)


def sequence_sweep(rs: RecordSet, path: Path | None = None):
    """TFLOP/s against the sequence length, every rung and SDPA (log-2 axis of lengths)."""
    return _lines(rs, "TFLOP/s against sequence length", path, log_x=True)


def tail(rs: RecordSet, path: Path | None = None):
    """TFLOP/s at lengths stepping by one across a multiple of the tiles."""
    return _lines(rs, "lengths stepping by one", path, log_x=False)


def sdpa_backends(study: dict, path: Path | None = None):
    """Per shape of lab.studies.attention_study: TFLOP/s of each of SDPA's backends (grey, hatched) and of the rungs
    at their default knobs (their rung colours); rung 03's other tile settings are in the table, not here."""
    from lab.lessons.attention import study_label

    rows = [s for s in study.get("summary", []) if s["method"].startswith("sdpa_") or s["method"][:2].isdigit()
            and " " not in s["method"]]
    if not rows:
        return None
    shapes = list({json_key(s["shape"]): s["shape"] for s in rows}.values())
    methods = list(dict.fromkeys(s["method"] for s in rows))
    hatches = {"sdpa_cudnn": "//", "sdpa_flash": "..", "sdpa_efficient": "xx"}
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(shapes) + 2.5), 3.8))
    width = 0.8 / len(methods)
    for i, method in enumerate(methods):
        xs, ys = [], []
        for g, shape in enumerate(shapes):
            row = next((s for s in rows if s["method"] == method and s["shape"] == shape), None)
            if row is not None:
                xs.append(g - 0.4 + width * (i + 0.5))
                ys.append(row["TFLOP/s"])
        backend = method.startswith("sdpa_")
        color = "white" if backend else series_style(method)["color"]
        ax.bar(xs, ys, width, label=method, color=color, edgecolor=CEILING_COLOR, lw=0.6,
               hatch=hatches.get(method, "--") if backend else None)
    as_params = [{"B": s["B"], "H": s["H"], "S_k": s["S"], "D": s["D"], "dtype": s["dtype"], "causal": s["causal"]}
                 for s in shapes]
    labels = [_short(p, as_params) for p in as_params]
    ax.set_xticks(range(len(shapes)), labels, fontsize=7)
    ax.set_ylabel("TFLOP/s (median over rounds)")
    ax.grid(axis="y", alpha=0.3)
    plain_ticks(ax, "y")
    legend_outside(ax)
    ax.set_title(figure_title(FAMILY, "the ladder beside each of SDPA's backends", source=study_label(study)),
                 fontsize=9)
    fig.tight_layout()
    return save(fig, path)


def json_key(shape: dict) -> str:
    return ",".join(f"{k}={shape[k]}" for k in sorted(shape))


def decode_bandwidth(rs: RecordSet, path: Path | None = None):
    """The decode-attention ladder: GB/s (Q, K, V and O once) of each target per fp16 decode step on a contiguous
    cache (the type changes nothing a memory-bound step does; the paged cache is in the text), the baseline hatched."""
    groups = _problems(rs, lambda p: p.get("dtype") == "float16" and not p.get("page_size"))
    if not groups:
        return None
    fig, ax = plt.subplots(figsize=(max(5.5, 1.3 * len(groups) + 2.5), 3.6))
    drawn = _grouped_bars(ax, rs, groups, lambda r: r.value)
    if log_if_decades(ax, drawn):
        plain_log_ticks(ax)
    else:
        plain_ticks(ax, "y")
    ax.set_ylabel("GB/s (median, higher is faster)")
    legend_outside(ax)
    shared = {k: v for k, v in _common(groups).items() if k in ("H", "H_kv", "S_q", "D", "dtype")}
    ax.set_title(figure_title("attention_decode", "one decode step, contiguous cache", shared, rs.label()), fontsize=9)
    fig.tight_layout()
    return save(fig, path)
