"""Figures drawn from index formulas, not from records (lab.lessons.plots draws records): the mma.sync fragment
layout, ldmatrix's address and receiver lanes, shared-memory bank groups of unpadded / padded / swizzled
tile rows, a cp.async pipeline's k-tiles in flight, and a schematic warp-specialized timeline. Every cell
is computed by lab.lessons.layouts; each function returns a matplotlib Figure (lessons.figure shows it)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch, Rectangle

from lab.lessons import layouts

GROUP_COLORS = plt.get_cmap("tab10").colors[:8]  # one colour per groupID g = lane / 4 (8 groups of 4 lanes)
STAGE_COLORS = plt.get_cmap("Set2").colors
IDLE = "#eeeeee"
MIN_POINTS = 7.0  # no text in these figures is smaller (lab.lessons.figure_check holds every figure to it)


def _grid(ax, shape: tuple[int, int], xlabel: str, ylabel: str, title: str) -> None:
    rows, cols = shape
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)  # row 0 at the top, as a matrix is written
    ax.set_xticks(np.arange(cols) + 0.5, [str(c) for c in range(cols)], fontsize=MIN_POINTS)
    ax.set_yticks(np.arange(rows) + 0.5, [str(r) for r in range(rows)], fontsize=MIN_POINTS)
    ax.tick_params(length=0)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.set_aspect("equal")


def _cell(ax, row: int, col: int, color, text: str = "", fontsize: float = 7.0, edge: str = "white") -> None:
    ax.add_patch(Rectangle((col, row), 1, 1, facecolor=color, edgecolor=edge, lw=0.6))
    if text:
        ax.text(col + 0.5, row + 0.5, text, ha="center", va="center", fontsize=fontsize)


def fragment_figure():
    """A (16x16), B (16x8) and C (16x8) of mma.sync.m16n8k16: each element's lane and register, coloured by
    the lane's group g = lane / 4 (lab_mma.cuh's table)."""
    fig, axes = plt.subplots(1, 3, figsize=(17, 8.2), gridspec_kw={"width_ratios": [16, 8, 8]})
    what = {"A": ("k", "row m", "A: 16 x 16 (row-major), 4 x .b32 a0..a3"),
            "B": ("column n", "k", "B: 16 x 8 (column-major), 2 x .b32 b0, b1"),
            "C": ("column n", "row m", "C/D: 16 x 8 fp32, 4 registers c0..c3")}
    for ax, operand in zip(axes, "ABC", strict=True):
        lanes, regs = layouts.mma_fragment(operand)
        xlabel, ylabel, title = what[operand]
        _grid(ax, lanes.shape, xlabel, ylabel, title)
        prefix = operand.lower()
        for (r, c), lane in np.ndenumerate(lanes):
            _cell(ax, r, c, GROUP_COLORS[lane // 4], f"{lane}\n{prefix}{regs[r, c]}")
    handles = [Patch(color=GROUP_COLORS[g], label=f"g={g}: lanes {4 * g}-{4 * g + 3}") for g in range(8)]
    fig.legend(handles=handles, loc="lower center", ncol=8, fontsize=7, frameon=False)
    fig.suptitle("mma.sync.m16n8k16: which lane holds which element (cell: lane, register); "
                 "from the layout formulas in kernels/common/lab_mma.cuh", fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 0.95))
    return fig


def ldmatrix_figure():
    """ldmatrix.x4 over a 16x16 A tile: which lane gives each 16-byte row address (coloured by the 8x8 matrix
    it belongs to, i.e. the register it fills), then which lane receives each element of one 8x8 matrix
    without and with .trans."""
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.8), gridspec_kw={"width_ratios": [16, 8, 8]})
    givers = layouts.ldmatrix_x4_a_addresses()
    ax = axes[0]
    _grid(ax, (16, 16), "k", "row m", "ldmatrix.x4: the lane giving each row piece's address")
    for (row, half), lane in np.ndenumerate(givers):  # one 16-byte row piece: 8 halves, one address
        ax.add_patch(Rectangle((8 * half, row), 8, 1, facecolor=STAGE_COLORS[lane // 8], edgecolor="white", lw=0.8))
        ax.text(8 * half + 4, row + 0.5, f"lane {lane}", ha="center", va="center", fontsize=MIN_POINTS)
    ax.legend(handles=[Patch(color=STAGE_COLORS[m], label=f"matrix {m} -> register {m}") for m in range(4)],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=MIN_POINTS, frameon=False)
    for ax, trans in zip(axes[1:], (False, True), strict=True):
        receivers = layouts.ldmatrix_receivers(trans)
        _grid(ax, (8, 8), "column", "row", f"one 8x8 matrix{', .trans' if trans else ''}: receiving lane")
        for (r, c), lane in np.ndenumerate(receivers):
            _cell(ax, r, c, GROUP_COLORS[lane // 4], str(lane))
    fig.suptitle("ldmatrix: lanes 8i..8i+7 point at the 8 rows of matrix i; register i of every lane receives "
                 "matrix i in the mma fragment's order", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    return fig


def bank_figure(row_bytes: tuple[int, ...] = (64, 256), pad_bytes: int = 16, chunk: int = 0):
    """For each row length (a tile row of BK = 32 halves is 64 bytes; NN's B rows of BN = 128 halves, 256)
    and each layout (unpadded, padded by `pad_bytes`, XOR-swizzled): the logical 16-byte chunks of tile rows
    0-7 in each of a line's 8 bank groups, with the chunk one ldmatrix matrix reads (`chunk`) coloured by
    row. The title counts the wavefronts that read needs (1 = conflict-free)."""
    fig, axes = plt.subplots(len(row_bytes), len(layouts.LAYOUTS), figsize=(13, 3.6 * len(row_bytes)),
                             squeeze=False)
    row_colors = plt.get_cmap("tab10").colors
    for i, nbytes in enumerate(row_bytes):
        for j, layout in enumerate(layouts.LAYOUTS):
            ax = axes[i][j]
            groups = layouts.ldmatrix_groups(nbytes, layout, chunk, pad_bytes)
            waves = layouts.wavefronts(groups)
            pad = f" (+{pad_bytes} B)" if layout == "padded" else ""
            _grid(ax, (8, layouts.BANK_GROUPS), "bank group (4 banks = 16 bytes)", "tile row",
                  f"{layout}{pad}, {nbytes}-byte rows: {waves} wavefront{'s' if waves > 1 else ''}")
            for r, cells in enumerate(layouts.row_bank_map(nbytes, layout, pad_bytes)):
                for g, chunks in enumerate(cells):
                    hit = chunk in chunks
                    text = ",".join(str(c) for c in chunks)
                    _cell(ax, r, g, row_colors[r] if hit else IDLE, text)
    fig.suptitle(f"One ldmatrix matrix reads logical chunk {chunk} of 8 consecutive tile rows (coloured): "
                 "it takes as many shared-memory wavefronts as the most rows in one bank group", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return fig


def pipeline_figure(k_tiles: int = 8, stages: int = 4):
    """Rung 03's pipeline: for each k-tile (a row), when its cp.async copies are issued, in flight (hatched)
    and computed (solid), in the colour of the shared-memory stage it occupies; x is the main-loop iteration,
    the prologue at -1."""
    schedule = layouts.pipeline_schedule(k_tiles, stages)
    fig, ax = plt.subplots(figsize=(10, 0.42 * k_tiles + 1.6))
    for life in schedule:
        color = STAGE_COLORS[life.stage % len(STAGE_COLORS)]
        y = life.tile
        ax.barh(y, life.computed - life.issued, left=life.issued, height=0.6, color=color, alpha=0.35,
                hatch="///", edgecolor="grey", lw=0.5)
        ax.barh(y, 1, left=life.computed, height=0.6, color=color, edgecolor="black", lw=0.6)
        ax.text(life.computed + 0.5, y, f"stage {life.stage}", ha="center", va="center", fontsize=7)
    ax.set_xticks(range(-1, k_tiles + 1), ["prologue"] + [str(i) for i in range(k_tiles)] + [""], fontsize=7)
    ax.set_yticks(range(k_tiles), [f"k-tile {t}" for t in range(k_tiles)], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(-1, k_tiles)
    ax.set_xlabel("main-loop iteration (each computes one k-tile)")
    ax.grid(axis="x", alpha=0.3)
    depth = max(len(layouts.in_flight(schedule, i)) for i in range(k_tiles))
    ax.set_title(f"STAGES = {stages}: while one k-tile is computed, up to {depth} more are in flight "
                 f"(hatched: issued, not yet waited for; solid: computed)", fontsize=9)
    fig.tight_layout()
    return fig


def roles_figure(k_tiles: int = 8, stages: int = 4, load_time: float = 3.0, mma_time: float = 1.0,
                 consumers: int = 2):
    """A warp-specialized mainloop as a timeline of roles (lab.lessons.layouts.specialized_timeline): the
    producer warp's TMA issues and waits on "empty" barriers, each k-tile in flight, and the consumer
    warpgroups' wgmma and waits on "full" barriers, in the stage's colour. Schematic: the durations are
    assumed, not measured."""
    spans = layouts.specialized_timeline(k_tiles, stages, load_time, mma_time, consumers)
    roles = ["producer"] + [f"consumer {c}" for c in range(consumers)]
    fig, (ax, lanes_ax) = plt.subplots(2, 1, figsize=(12, 4.6), sharex=True,
                                       gridspec_kw={"height_ratios": [len(roles), min(stages, k_tiles)]})
    for span in spans:
        color = STAGE_COLORS[span.stage % len(STAGE_COLORS)]
        if span.role == "in flight":
            lanes_ax.barh(span.stage, span.end - span.start, left=span.start, height=0.6, color=color, alpha=0.45,
                          hatch="///", edgecolor="grey", lw=0.5)
            lanes_ax.text((span.start + span.end) / 2, span.stage, f"k{span.tile}", ha="center", va="center",
                          fontsize=MIN_POINTS)
            continue
        y = roles.index(span.role)
        waiting = span.what.startswith("wait")
        ax.barh(y, span.end - span.start, left=span.start, height=0.6, color=IDLE if waiting else color,
                edgecolor="grey" if waiting else "black", lw=0.5)
        if not waiting and span.end - span.start >= 0.5:
            ax.text((span.start + span.end) / 2, y, f"k{span.tile}", ha="center", va="center", fontsize=MIN_POINTS)
    ax.set_yticks(range(len(roles)), ["producer warp (TMA)"] + [f"consumer warpgroup {c} (wgmma)"
                                                                  for c in range(consumers)], fontsize=7)
    ax.invert_yaxis()
    lanes_ax.set_yticks(range(min(stages, k_tiles)), [f"stage {s} in flight" for s in range(min(stages, k_tiles))],
                        fontsize=7)
    lanes_ax.invert_yaxis()
    lanes_ax.set_xlabel("time (arbitrary units: schematic, not measured)")
    for a in (ax, lanes_ax):
        a.grid(axis="x", alpha=0.3)
    ax.set_title(f"Warp specialization, {stages} stages, a copy taking {load_time:g}x the math of one k-tile: "
                 "grey = waiting on a barrier (empty[s] for the producer, full[s] for consumers)", fontsize=9)
    fig.tight_layout()
    return fig
