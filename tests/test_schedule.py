"""CPU: the tile orders of lab.core.tile_order (the kernels' raster orders restated): each visits every tile exactly
once for any grid, the grouped order's limits are the row- and column-major orders, and a wave's footprint
counts the panels its tiles read."""

import numpy as np
import pytest

from lab.core import tile_order

GRIDS = [(1, 1), (1, 7), (7, 1), (3, 5), (8, 8), (9, 32), (33, 17), (64, 32), (17, 64)]


@pytest.mark.parametrize("order", tile_order.ORDERS)
@pytest.mark.parametrize("group_m", [1, 3, 8, 16, 64])
@pytest.mark.parametrize("grid", GRIDS, ids=lambda g: f"{g[0]}x{g[1]}")
def test_every_order_visits_every_tile_exactly_once(order, group_m, grid):
    visits = tile_order.visit_order(*grid, order=order, group_m=group_m)
    assert sorted(visits.ravel().tolist()) == list(range(grid[0] * grid[1]))


@pytest.mark.parametrize("grid", GRIDS, ids=lambda g: f"{g[0]}x{g[1]}")
def test_grouped_order_spans_row_major_to_column_major(grid):
    tiles_m, tiles_n = grid
    row, column = tile_order.visit_order(*grid, order="row"), tile_order.visit_order(*grid, order="column")
    assert np.array_equal(tile_order.visit_order(*grid, order="grouped", group_m=1), row)
    assert np.array_equal(tile_order.visit_order(*grid, order="grouped", group_m=tiles_m), column)
    assert np.array_equal(row, np.arange(tiles_m * tiles_n).reshape(tiles_m, tiles_n))


def test_grouped_order_walks_a_group_column_by_column_and_the_last_group_is_short():
    visits = tile_order.visit_order(5, 3, order="grouped", group_m=2)
    assert visits.tolist() == [[0, 2, 4], [1, 3, 5], [6, 8, 10], [7, 9, 11], [12, 13, 14]]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="outside"):
        tile_order.tile_of(6, 2, 3)
    with pytest.raises(ValueError, match="order must be"):
        tile_order.tile_of(0, 2, 3, order="hilbert")
    with pytest.raises(ValueError, match="group_m"):
        tile_order.tile_of(0, 2, 3, order="grouped", group_m=0)


def test_a_wave_footprint_counts_the_panels_its_tiles_read():
    """8192^3 in 128 x 256 tiles (64 x 32 of them) on 132 workers: the first row-major wave covers 4 whole rows
    and 4 tiles of a fifth, so 5 A panels and all 32 B panels; grouped by 8 rows it covers 16 whole columns of 8
    tiles and 4 of a 17th, so 8 A panels and 17 B panels."""
    M = N = K = 8192
    row = tile_order.wave_footprints(M, N, K, 128, 256, 132, order="row")[0]
    grouped = tile_order.wave_footprints(M, N, K, 128, 256, 132, order="grouped", group_m=8)[0]
    assert (row.tiles, row.a_panels, row.b_panels) == (132, 5, 32)
    assert (grouped.tiles, grouped.a_panels, grouped.b_panels) == (132, 8, 17)
    assert row.bytes == 2 * K * (5 * 128 + 32 * 256) and grouped.bytes == 2 * K * (8 * 128 + 17 * 256)
    waves = tile_order.wave_footprints(M, N, K, 128, 256, 132)
    assert len(waves) == -(-64 * 32 // 132) and sum(w.tiles for w in waves) == 64 * 32


def test_the_snake_order_reverses_every_other_group():
    visits = tile_order.visit_order(5, 3, order="snake", group_m=2)
    assert visits.tolist() == [[0, 2, 4], [1, 3, 5], [10, 8, 6], [11, 9, 7], [12, 13, 14]]


def test_the_raster_codes_match_the_kernel_header():
    """lab_tile_order.cuh numbers the orders in the same sequence as ORDERS (the kernels' RASTER knob)."""
    from lab.core.build import REPO_ROOT

    header = (REPO_ROOT / "kernels/common/lab_tile_order.cuh").read_text()
    for order, code in tile_order.RASTER.items():
        assert f"#define LAB_RASTER_{order.upper()} {code}" in header


SK_CASES = [(1, 1, 1), (1, 64, 132), (3, 100, 132), (144, 64, 132), (512, 64, 132), (264, 64, 132), (133, 7, 132),
            (7, 3, 5), (11, 1, 4), (5, 2, 16), (300, 17, 132)]


@pytest.mark.parametrize("tiles,k_tiles,blocks", SK_CASES)
@pytest.mark.parametrize("sk_waves", [0, 1, 2])
@pytest.mark.parametrize("min_gain", [0, tile_order.SK_MIN_GAIN])
def test_stream_k_covers_every_k_tile_of_every_tile_exactly_once(tiles, k_tiles, blocks, sk_waves, min_gain):
    pieces = tile_order.stream_k_pieces(tiles, k_tiles, blocks, sk_waves, min_gain)
    covered = np.zeros((tiles, k_tiles), dtype=int)
    for block in pieces:
        for p in block:
            assert 0 <= p.k0 < p.k1 <= k_tiles
            covered[p.tile, p.k0:p.k1] += 1
    assert (covered == 1).all()


@pytest.mark.parametrize("tiles,k_tiles,blocks", SK_CASES)
def test_stream_k_fix_up_has_one_owner_per_tile_one_slot_per_block_and_waits_only_downward(tiles, k_tiles, blocks):
    """What the kernel's fix-up relies on: each tile has exactly one owner (the piece that ends it); a block makes
    at most one contribution, and as its first piece (so it is written before the block waits for anyone);
    every contributor to a tile has a lower block number than the tile's owner (no wait cycle)."""
    pieces = tile_order.stream_k_pieces(tiles, k_tiles, blocks, min_gain=0)
    owners = {}
    for block in pieces:
        contributions = [i for i, p in enumerate(block) if not p.owner]
        assert contributions in ([], [0])
        for p in block:
            if p.owner:
                assert p.tile not in owners
                owners[p.tile] = p.block
    assert sorted(owners) == list(range(tiles))
    for block in pieces:
        for p in block:
            if not p.owner:
                assert p.block < owners[p.tile]


def test_stream_k_blocks_walk_k_almost_in_step():
    """A wave and 12 tiles (the first wave-quantized shape): every block does the head of one tile, then the tail
    of the previous one, so at each step all blocks read k-tiles within a small window of each other (the
    stream-K share beyond a whole tile), not spread over all of K as in range order."""
    k_tiles = 128
    steps = tile_order.k_offsets(tile_order.stream_k_pieces(144, k_tiles, 132, min_gain=0))
    length = min(len(s) for s in steps)
    spread = max(max(s[t] for s in steps) - min(s[t] for s in steps) for t in range(length))
    assert spread <= -(-12 * k_tiles // 132) + 1


def test_stream_k_leaves_whole_waves_data_parallel_and_balances_the_rest():
    assert tile_order.stream_k_split(264, 132) == 0  # two whole waves: rung 06's schedule
    assert tile_order.stream_k_split(144, 132) == 144  # one wave and 12 tiles: all of it (12 + one wave)
    assert tile_order.stream_k_split(512, 132, min_gain=0) == 116 + 132
    assert tile_order.stream_k_split(512, 132) == 0  # the last wave is 88% full: the model keeps it data-parallel
    assert tile_order.stream_k_split(1, 132, k_tiles=1024) == 1  # one tile, a long K: split over every SM
    assert tile_order.stream_k_split(144, 132, k_tiles=2) == 0  # short tiles: the fix-up would cost more than a wave
    assert tile_order.stream_k_rounds(144, 64, 132) == pytest.approx(144 / 132, abs=1 / 64)
    assert tile_order.stream_k_rounds(264, 64, 132) == 2
    with pytest.raises(ValueError, match="tiles, k_tiles, blocks"):
        tile_order.stream_k_pieces(0, 1, 1)
