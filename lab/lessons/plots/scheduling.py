"""Scheduling (notebook 04): tile orders, their DRAM traffic, stream-K against the waves, small work items."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from lab.lessons.plots.style import (
    BASELINE_COLOR,
    CEILING_COLOR,
    READ_COLOR,
    RUNG_COLORS,
    WRITE_COLOR,
    figure_title,
    legend_outside,
    payload_source,
    plain_ticks,
    save,
    series_style,
    shape_key,
    shape_panels,
    shape_text,
)

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
            ax.text(j, i, str(v), ha="center", va="center", fontsize=7,
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
    return save(fig, path)


def order_speeds(payload: dict, path: Path | None = None):
    """TFLOP/s of one rung in each tile order, one panel per shape, cuBLAS in the same run dashed black; each bar
    labelled with its speed over the row order. Reads a lab.studies.scheduling.time_orders payload."""
    rows = payload.get("rows") or []
    if not rows:
        return None
    keys, fig, axes = shape_panels(rows)
    for ax, key in zip(axes.ravel(), keys, strict=False):
        mine = [r for r in rows if shape_key(r) == key]
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
        ax.set_title(shape_text(key), fontsize=9)
        ax.set_ylabel("TFLOP/s")
        ax.tick_params(axis="x", rotation=90, labelsize=7)
        plain_ticks(ax, "y")
    for ax in axes.ravel()[len(keys):]:
        ax.set_visible(False)
    legend_outside(axes[0][-1])
    fig.suptitle(figure_title(payload.get("family", "?"), f"rung {payload.get('rung', '?')}: TFLOP/s per tile order "
                              f"({payload.get('l2', '?')} L2); labels: speed over the row order",
                              source=payload_source(payload)), fontsize=10)
    _below_suptitle(fig)
    return save(fig, path)


def _below_suptitle(fig, inches: float = 0.55) -> None:
    """tight_layout with `inches` kept free at the top for a two-line suptitle, so no tick label runs into it."""
    fig.tight_layout(rect=(0, 0, 1, 1 - inches / fig.get_figheight()))


def _dram_panel(ax, mine: list[dict]) -> None:
    names = [setting_label(r["order"], r["group_m"]) for r in mine]
    reads = [r["dram_read_bytes"] / 1e9 for r in mine]
    ax.bar(names, reads, color=READ_COLOR, label="DRAM read")
    ax.bar(names, [r["dram_write_bytes"] / 1e9 for r in mine], bottom=reads, color=WRITE_COLOR, label="DRAM write")
    for i, r in enumerate(mine):
        total = (r["dram_read_bytes"] + r["dram_write_bytes"]) / 1e9
        ax.text(i, total, f"L2 hit\n{r['l2_hit_rate_pct']:.0f}%", ha="center", va="bottom", fontsize=7)
    ax.set_ylim(0, max((r["dram_read_bytes"] + r["dram_write_bytes"]) / 1e9 for r in mine) * 1.25)
    ax.set_ylabel("GB (1 GB = 10^9 B)")
    ax.tick_params(axis="x", rotation=90, labelsize=7)
    plain_ticks(ax, "y")


def order_dram(payload: dict, path: Path | None = None):
    """Nsight Compute's DRAM bytes (read and written, stacked) per tile order, one panel per shape, each bar
    labelled with the L2 hit rate. Reads a lab.studies.scheduling.order_counters payload."""
    rows = payload.get("rows") or []
    if not rows:
        return None
    keys, fig, axes = shape_panels(rows)
    for ax, key in zip(axes.ravel(), keys, strict=False):
        _dram_panel(ax, [r for r in rows if shape_key(r) == key])
        ax.set_title(shape_text(key), fontsize=9)
    for ax in axes.ravel()[len(keys):]:
        ax.set_visible(False)
    legend_outside(axes[0][-1])
    fig.suptitle(figure_title(payload.get("family", "?"), f"rung {payload.get('rung', '?')}: DRAM bytes per tile "
                              "order, one launch each (Nsight Compute)", source=payload_source(payload)), fontsize=10)
    _below_suptitle(fig)
    return save(fig, path)


def order_traffic(payload: dict, shape: dict, workers: int, tile: tuple[int, int], path: Path | None = None):
    """At one shape: the first wave's tiles in the row order and in the order that read the fewest DRAM bytes
    (lab.core.tile_order.visit_order, `workers` tiles per wave, `tile` = (bm, bn)), beside Nsight Compute's DRAM bytes
    per order. Reads a lab.studies.scheduling.order_counters payload."""
    from lab.core import tile_order

    key = shape_key(shape)
    mine = [r for r in payload.get("rows") or [] if shape_key(r) == key]
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
    legend_outside(ax)
    ax.set_title("DRAM bytes per order (Nsight Compute)", fontsize=9)
    fig.suptitle(figure_title(payload.get("family", "?"), f"rung {payload.get('rung', '?')}: where wave 0 runs "
                              f"({tiles_m} x {tiles_n} tiles of {tile[0]} x {tile[1]}, {workers} at once) and the "
                              "DRAM traffic that follows", params=dict(zip("MNK", key, strict=True)),
                              source=payload_source(payload)), fontsize=10)
    fig.tight_layout()
    return save(fig, path)


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
    plain_ticks(ax)
    legend_outside(ax)
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
        plain_ticks(ax)
        legend_outside(ax)
    fig.suptitle(figure_title("gemm_tc", f"the wave sawtooth ({payload.get('l2', '?')} L2)",
                              source=payload_source(payload)), fontsize=10)
    fig.tight_layout()
    return save(fig, path)


def stream_k_named(payload: dict, predicted: dict | None = None, expected: dict | None = None,
                   path: Path | None = None):
    """Stream-K over the data-parallel rung on each named shape (the median over its rounds), coloured by kind;
    `predicted` ({'MxNxK': ratio}) as black ticks, `expected` ({kind: ratio}: what the lesson expects at least) as
    dashed lines in the kind's colour."""
    import statistics

    rows = [r for r in payload.get("named") or [] if r.get("kind") != "square"
            and "06_persistent_ms" in r and "07_stream_k_ms" in r]
    if not rows:
        return None
    keys = list(dict.fromkeys(map(shape_key, rows)))
    labels = ["{}x{}x{}".format(*k) for k in keys]
    kinds = [next(r["kind"] for r in rows if shape_key(r) == k) for k in keys]
    ratios = [statistics.median(r["06_persistent_ms"] / r["07_stream_k_ms"] for r in rows if shape_key(r) == k)
              for k in keys]
    fig, ax = plt.subplots(figsize=(9, 3.8))
    for kind in dict.fromkeys(kinds):
        xs = [i for i, k in enumerate(kinds) if k == kind]
        ax.bar(xs, [ratios[i] for i in xs], color=KIND_COLORS.get(kind, BASELINE_COLOR), label=kind)
    for i, v in enumerate(ratios):
        ax.text(i, 0.97 * v, f"{v:.2f}x", ha="center", va="top", fontsize=7, color="white")
    ax.set_xticks(range(len(labels)), labels)
    for kind in dict.fromkeys(kinds):
        if expected and kind in expected:
            ax.axhline(expected[kind], color=KIND_COLORS.get(kind, BASELINE_COLOR), ls="--", lw=1,
                       label=f"expected, {kind}: >= {expected[kind]}x")
    if predicted:
        xs = [i for i, label in enumerate(labels) if label in predicted]
        ax.plot(xs, [predicted[labels[i]] for i in xs], ls="none", marker="_", ms=22, mew=2, color=CEILING_COLOR,
                label="predicted (rounds, no fix-up)")
    ax.axhline(1.0, color=CEILING_COLOR, lw=0.8)
    ax.set_ylabel("07_stream_k speed / 06_persistent speed")
    ax.set_ylim(0, max(ratios + list((predicted or {}).values())) * 1.15)
    ax.tick_params(axis="x", rotation=90, labelsize=7)
    plain_ticks(ax, "y")
    legend_outside(ax)
    ax.set_title(figure_title("gemm_tc", "stream-K over data-parallel on the named shapes (median over rounds)",
                              source=payload_source(payload)), fontsize=9)
    fig.tight_layout()
    return save(fig, path)


def small_items(payload: dict, path: Path | None = None):
    """Microseconds per item against bytes per item, both log, one line per way of running N small items
    (lab.families.work_queue): per-item launches, their CUDA graph, one batched launch, the persistent queue, and one
    item alone (dashed grey). Skewed mixes of lengths are single markers at their mean size; the ticks are the
    uniform sizes only, so a mix whose mean lands near one adds no second label on top of it. Reads a payload of
    `lab study items` (live, or replayed through lab.families.work_queue.load_payload)."""
    from lab.families import work_queue
    from lab.measure.records import format_bytes

    rows = payload.get("rows") or []
    uniform = sorted((r for r in rows if r["mix"] == "uniform"), key=lambda r: r["bytes_per_item"])
    if not uniform:
        return None
    other = [r for r in rows if r["mix"] != "uniform"]
    fig, ax = plt.subplots(figsize=(8.5, 4.4))
    lines = [(p, RUNG_COLORS[i], "-") for i, p in enumerate(work_queue.PATHS)] + [("alone", BASELINE_COLOR, "--")]
    for name, color, ls in lines:
        ax.plot([r["bytes_per_item"] for r in uniform], [r[f"{name}_us"] for r in uniform], ls=ls, color=color,
                marker="o", ms=3.5, lw=1.5, label=work_queue.PATH_LABELS[name])
        for r in other:
            ax.plot([r["bytes_per_item"]], [r[f"{name}_us"]], ls="none", marker="x", ms=7, color=color)
    for mix in sorted({r["mix"] for r in other}):
        ax.plot([], [], ls="none", marker="x", ms=7, color=CEILING_COLOR,
                label=f"x: a {mix} mix of lengths, at its mean size")
    ax.set_xscale("log")
    ax.set_yscale("log")
    sizes = [r["bytes_per_item"] for r in uniform]
    ax.set_xticks(sizes)
    ax.set_xticklabels([format_bytes(b) for b in sizes], fontsize=8)
    ax.minorticks_off()
    ax.set_xlabel("bytes per item (x and w read, y written; fp32), log scale")
    ax.set_ylabel("microseconds per item, log scale")
    n_items = sorted({r["n_items"] for r in rows})
    what = "time per item, N small RMSNorm items run four ways" + (
        f" (N = {n_items[0]})" if len(n_items) == 1 else f" (N = {n_items[0]}..{n_items[-1]})")
    # pad: a log axis's top tick label (10^k, with its superscript) reaches above the axes, into a default-padded title
    ax.set_title(figure_title("persistent", what, source=payload_source(payload)), fontsize=10, pad=12)
    ax.grid(True, which="major", alpha=0.3)
    legend_outside(ax)
    fig.tight_layout()
    return save(fig, path)
