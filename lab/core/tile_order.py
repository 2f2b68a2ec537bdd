"""Tile orders for a GEMM's output tiles (threadblock swizzle / raster order), in Python.

A GEMM kernel maps a linear work index (a block index, or a persistent block's k-th tile) to an output tile.
Blocks start roughly in index order and about one wave (the SM count times the blocks per SM) runs at once,
so the order decides which A row-panels and B column-panels are live in L2 together. These functions restate
the orders the kernels use (gemm_tc rungs 05 and 06: `tile_origin`, GROUP_M) so that lessons can draw them and
predict their L2 footprint, and tests can prove each is a permutation of the tiles for any grid.

Orders (kernels/common/lab_tile_order.cuh, the RASTER knob): "row" (row-major: tile_n fastest), "column"
(column-major), "grouped" (GROUP_M tile-rows at a time, column by column inside a group; the last group takes the
rows that are left), the order Triton's matmul tutorial calls grouped ordering and CUTLASS a swizzle of the
threadblock index, and "snake" (grouped, with every other group walking its columns right to left).

`stream_k_pieces` restates rung 07's stream-K decomposition (which block computes which k-range of which tile).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ORDERS = ("row", "column", "grouped", "snake")
RASTER = {order: code for code, order in enumerate(ORDERS)}  # the kernels' RASTER knob


def tile_of(index: int, tiles_m: int, tiles_n: int, order: str = "row", group_m: int = 8) -> tuple[int, int]:
    """(tile_m, tile_n) of linear work index `index` (0 .. tiles_m * tiles_n - 1) in `order`: the kernels'
    arithmetic, one index at a time."""
    if not 0 <= index < tiles_m * tiles_n:
        raise ValueError(f"index {index} outside the {tiles_m} x {tiles_n} tiles")
    if order == "row":
        return index // tiles_n, index % tiles_n
    if order == "column":
        return index % tiles_m, index // tiles_m
    if order in ("grouped", "snake"):
        if group_m < 1:
            raise ValueError(f"group_m must be >= 1, got {group_m}")
        per_group = group_m * tiles_n
        group, in_group = divmod(index, per_group)
        first = group * group_m
        rows = min(tiles_m - first, group_m)
        tile_n = in_group // rows
        if order == "snake" and group % 2:
            tile_n = tiles_n - 1 - tile_n
        return first + in_group % rows, tile_n
    raise ValueError(f"order must be one of {', '.join(ORDERS)}, not {order!r}")


def visit_order(tiles_m: int, tiles_n: int, order: str = "row", group_m: int = 8) -> np.ndarray:
    """The work index of every tile, as a tiles_m x tiles_n array (the picture of an order)."""
    grid = np.full((tiles_m, tiles_n), -1, dtype=np.int64)
    for index in range(tiles_m * tiles_n):
        grid[tile_of(index, tiles_m, tiles_n, order, group_m)] = index
    return grid


@dataclass(frozen=True)
class WaveFootprint:
    """What one wave of tiles touches: the distinct A row-panels and B column-panels, and their bytes."""

    wave: int
    tiles: int
    a_panels: int
    b_panels: int
    bytes: int


def wave_footprints(M: int, N: int, K: int, bm: int, bn: int, workers: int, order: str = "row", group_m: int = 8,
                    element_bytes: int = 2) -> list[WaveFootprint]:
    """For each wave of `workers` consecutive work indices: how many A panels (bm x K) and B panels (K x bn) its
    tiles read, and their total bytes. A wave whose panels fit in L2 reads each from DRAM about once; one whose
    panels do not fit re-reads them as later waves need them again. A prediction, not a measurement: blocks
    drift apart in time, and L2 keeps parts of panels."""
    tiles_m, tiles_n = -(-M // bm), -(-N // bn)
    total = tiles_m * tiles_n
    out = []
    for wave, start in enumerate(range(0, total, workers)):
        coords = [tile_of(i, tiles_m, tiles_n, order, group_m) for i in range(start, min(start + workers, total))]
        a_panels = len({m for m, _ in coords})
        b_panels = len({n for _, n in coords})
        out.append(WaveFootprint(wave, len(coords), a_panels, b_panels,
                                 element_bytes * K * (a_panels * bm + b_panels * bn)))
    return out


@dataclass(frozen=True)
class Piece:
    """One block's share of one tile: k-tiles [k0, k1). k1 == k_tiles: the block owns the tile (it adds what
    earlier blocks contributed and stores C); k1 < k_tiles: a contribution it parks in its workspace slot."""

    block: int
    tile: int
    k0: int
    k1: int
    k_tiles: int

    @property
    def owner(self) -> bool:
        return self.k1 == self.k_tiles


SK_FIXUP_COST = 50  # rung 07's knobs of the same names (its header says where they come from)
SK_MIN_GAIN = 105


def stream_k_split(tiles: int, blocks: int, k_tiles: int = 64, sk_waves: int = 1, fixup_cost: int = SK_FIXUP_COST,
                   min_gain: int = SK_MIN_GAIN) -> int:
    """How many tiles (the first, in the tile order) rung 07 spreads along K: none when the tiles fill whole
    waves or its model predicts less than `min_gain` percent (data-parallel: ceil(tiles / blocks) rounds;
    stream-K: tiles / blocks plus the fix-up, `fixup_cost` hundredths of a tile-time at 64 k-tiles), else the
    last partial wave plus `sk_waves` full ones (all tiles when there are fewer). Integer arithmetic as the
    kernel's."""
    dp = 100 * -(-tiles // blocks)
    sk = 100 * tiles // blocks + 64 * fixup_cost // k_tiles
    if tiles % blocks == 0 or 100 * dp < min_gain * sk:
        return 0
    return min(tiles, tiles % blocks + sk_waves * blocks)


def stream_k_pieces(tiles: int, k_tiles: int, blocks: int, sk_waves: int = 1, min_gain: int = SK_MIN_GAIN,
                    fixup_cost: int = SK_FIXUP_COST) -> list[list[Piece]]:
    """Rung 07's work, block by block in the order each block does it. Block b's range of the stream-K region's
    k-tiles is [sk * k_tiles * b // blocks, sk * k_tiles * (b + 1) // blocks), cut at tile boundaries; when the
    range ends inside a tile, that last piece (a contribution) comes first, then the range's whole tiles, then
    the piece it starts inside, then the block's data-parallel tiles round-robin. The kernel's StreamK struct,
    in Python."""
    if min(tiles, k_tiles, blocks) < 1 or sk_waves < 0:
        raise ValueError(f"need tiles, k_tiles, blocks >= 1 and sk_waves >= 0; got {tiles}, {k_tiles}, {blocks}, "
                         f"{sk_waves}")
    sk_tiles = stream_k_split(tiles, blocks, k_tiles, sk_waves, fixup_cost, min_gain)
    iters = sk_tiles * k_tiles
    out = []
    for b in range(blocks):
        pieces, lo, hi = [], iters * b // blocks, iters * (b + 1) // blocks
        if hi > lo:
            tile = (hi - 1) // k_tiles
            if hi - tile * k_tiles < k_tiles:  # the range ends inside a tile: that contribution comes first
                start = max(lo, tile * k_tiles)
                pieces.append(Piece(b, tile, start - tile * k_tiles, hi - tile * k_tiles, k_tiles))
                hi = start
        tail_tile, tail_k0 = divmod(lo, k_tiles)
        tail = hi > lo and tail_k0 > 0  # the piece the range starts inside comes last
        if tail:
            lo = (tail_tile + 1) * k_tiles
        pieces += [Piece(b, g // k_tiles, 0, k_tiles, k_tiles) for g in range(lo, hi, k_tiles)]
        if tail:
            pieces.append(Piece(b, tail_tile, tail_k0, k_tiles, k_tiles))
        pieces += [Piece(b, tile, 0, k_tiles, k_tiles) for tile in range(sk_tiles + b, tiles, blocks)]
        out.append(pieces)
    return out


def k_offsets(pieces: list[list[Piece]]) -> list[list[int]]:
    """For each block, the k-tile it reads at each step of its stream-K work (pieces walked in order, k rising
    inside a piece): how far apart in K the blocks are at the same moment, which decides whether the panels
    they share must stay in L2 whole or only a window of them."""
    return [[k for p in block for k in range(p.k0, p.k1)] for block in pieces]


def stream_k_rounds(tiles: int, k_tiles: int, blocks: int, sk_waves: int = 1, min_gain: int = 0) -> float:
    """The busiest block's work in tile-times (k_tiles k-tiles each), without the fix-up: what stream-K predicts
    against a data-parallel schedule's ceil(tiles / blocks) rounds (min_gain 0: split every partial wave)."""
    pieces = stream_k_pieces(tiles, k_tiles, blocks, sk_waves, min_gain)
    return max(sum(p.k1 - p.k0 for p in block) for block in pieces) / k_tiles
