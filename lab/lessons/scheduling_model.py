"""The scheduling lesson's L2 model of the tile orders (notebook 04, before anything is measured): which panels of A
and B a wave of tiles reads (lab.core.tile_order.wave_footprints), and the DRAM reads a least-recently-used L2 of whole
panels predicts for the whole GEMM, to hold Nsight Compute's counters against."""

from __future__ import annotations

import statistics
from collections import OrderedDict
from collections.abc import Iterable

from lab.core import tile_order
from lab.lessons.plots.scheduling import setting_label
from lab.lessons.scheduling import EXPECTED, Gpu, Tile, min_reads, shape_label


def wave_zero(shape: dict, settings: Iterable[tuple[str, int]], tile: Tile, gpu: Gpu) -> str:
    """Which panels the first wave of tiles (one per SM) reads in each order, and their bytes (fp16)."""
    lines = [f"{shape_label(shape)} in {tile.bm} x {tile.bn} tiles: {' x '.join(map(str, tile.grid(shape)))} = "
             f"{tile.tiles(shape)} tiles, {gpu.sm_count} in flight at once (one persistent block per SM)",
             f"  {'order':12s} {'A panels':>9s} {'B panels':>9s} {'wave 0 reads':>14s} {'x L2':>6s}"]
    for order, group in settings:
        w = tile_order.wave_footprints(shape["M"], shape["N"], shape["K"], tile.bm, tile.bn, gpu.sm_count, order,
                                     group)[0]
        lines.append(f"  {setting_label(order, group):12s} {w.a_panels:9d} {w.b_panels:9d} "
                     f"{w.bytes / 1e6:11.0f} MB {w.bytes / gpu.l2_bytes:6.2f}")
    return "\n".join(lines)


def _wave_panels(shape: dict, tile: Tile, workers: int, order: str, group: int) -> list[tuple[set, set]]:
    tiles_m, tiles_n = tile.grid(shape)
    total = tiles_m * tiles_n
    waves = []
    for start in range(0, total, workers):
        stop = min(start + workers, total)
        coords = [tile_order.tile_of(i, tiles_m, tiles_n, order, group) for i in range(start, stop)]
        waves.append(({m for m, _ in coords}, {n for _, n in coords}))
    return waves


def predicted_reads(shape: dict, tile: Tile, gpu: Gpu, order: str, group: int, element_bytes: int = 2) -> float:
    """A model of DRAM bytes read: the L2 as a least-recently-used store of whole panels (A: bm x K, B: K x bn).
    Wave by wave, every panel the wave needs that the store lacks is read from DRAM; then the wave's panels become
    the most recent, the oldest leaving when the store is full. Panels are coarse (a wave reads them k-slice by
    k-slice) and blocks drift apart in time, so this is a prediction to hold the counters against, not a
    measurement."""
    sizes = {"A": element_bytes * tile.bm * shape["K"], "B": element_bytes * tile.bn * shape["K"]}
    store: OrderedDict[tuple[str, int], int] = OrderedDict()
    held = total = 0
    for a, b in _wave_panels(shape, tile, gpu.sm_count, order, group):
        wanted = [("A", m) for m in sorted(a)] + [("B", n) for n in sorted(b)]
        total += sum(sizes[p[0]] for p in wanted if p not in store)
        for panel in wanted:
            if panel in store:
                store.move_to_end(panel)
            else:
                store[panel] = sizes[panel[0]]
                held += sizes[panel[0]]
            while held > gpu.l2_bytes:
                held -= store.popitem(last=False)[1]
    return total


def footprint_table(shapes: Iterable[dict], settings: Iterable[tuple[str, int]], tile: Tile, gpu: Gpu) -> str:
    """Per shape and order: the median wave's footprint against the L2, and the modelled DRAM reads against the
    minimum (predicted_reads)."""
    settings = tuple(settings)
    lines = [f"L2: {gpu.l2_bytes / 1e6:.1f} MB. Per wave of {gpu.sm_count} tiles: the panels it reads (MB, and as a "
             "multiple of L2); modelled DRAM reads of the whole GEMM as a multiple of the minimum (A and B once)."]
    for shape in shapes:
        lines.append(f"{shape_label(shape)}: minimum reads {min_reads(shape) / 1e6:.0f} MB")
        lines.append(f"  {'order':12s} {'wave MB':>9s} {'x L2':>6s} {'reads x min':>12s}")
        for order, group in settings:
            waves = tile_order.wave_footprints(shape["M"], shape["N"], shape["K"], tile.bm, tile.bn, gpu.sm_count,
                                             order, group)
            typical = statistics.median(w.bytes for w in waves)
            reads = predicted_reads(shape, tile, gpu, order, group)
            lines.append(f"  {setting_label(order, group):12s} {typical / 1e6:9.0f} {typical / gpu.l2_bytes:6.2f} "
                         f"{reads / min_reads(shape):12.2f}")
    return "\n".join(lines)


def predicted_order_ratio(shape: dict, tile: Tile, gpu: Gpu, settings: Iterable[tuple[str, int]]) -> str:
    """The order the model expects to read least at `shape`, and its reads against the row order's."""
    reads = {s: predicted_reads(shape, tile, gpu, *s) for s in settings}
    best = min(reads, key=reads.get)
    row = reads.get(("row", 0)) or predicted_reads(shape, tile, gpu, "row", 0)
    return (f"model at {shape_label(shape)}: fewest DRAM reads in order {setting_label(*best)}, "
            f"{reads[best] / row:.2f} of the row order's (the lesson expects the measured "
            f"bytes to fall to <= {EXPECTED['order_dram']} of the row order's)")
