// Tile orders (threadblock swizzle / raster order): which output tile a linear work index computes.
//
// Blocks start roughly in index order and about one wave (SMs x blocks per SM) runs at once, so the order
// decides which A row-panels and B column-panels are live in L2 together. lab/core/tile_order.py restates every
// order in Python (tile_of) so lessons can draw them and tests can prove each is a permutation of the tiles.
//
// TILE_ORDER (the RASTER knob of the rungs that include this):
//   LAB_RASTER_ROW      0  tile_n fastest: one wave spans about SMs / tiles_n tile-rows, but every B panel
//   LAB_RASTER_COLUMN   1  tile_m fastest: the mirror image (every A panel, few B panels)
//   LAB_RASTER_GROUPED  2  TILE_GROUP tile-rows at a time, column by column inside a group; the last group takes
//                          the rows left (Triton's "grouped ordering", a CUTLASS-style block swizzle)
//   LAB_RASTER_SNAKE    3  grouped, but every other group walks its columns right to left, so the B panels the
//                          last group finished with are the first the next group needs (a boustrophedon,
//                          the simplest space-filling walk over the groups)
// TILE_GROUP < 1 falls back to the row order, so a knob probe can pass GROUP_M = 0.
#pragma once

#define LAB_RASTER_ROW 0
#define LAB_RASTER_COLUMN 1
#define LAB_RASTER_GROUPED 2
#define LAB_RASTER_SNAKE 3

template <int TILE_ORDER, int TILE_GROUP>  // named apart from the knob macros (RASTER, GROUP_M, ORDER)
__device__ __forceinline__ void lab_tile_coords(int index, int tiles_m, int tiles_n, int& tile_m, int& tile_n) {
    static_assert(TILE_ORDER >= LAB_RASTER_ROW && TILE_ORDER <= LAB_RASTER_SNAKE, "RASTER is 0 (row), 1 (column), 2 "
                  "(grouped) or 3 (snake)");
    if constexpr (TILE_ORDER == LAB_RASTER_COLUMN) {
        tile_m = index % tiles_m;
        tile_n = index / tiles_m;
    } else if constexpr ((TILE_ORDER == LAB_RASTER_GROUPED || TILE_ORDER == LAB_RASTER_SNAKE) && TILE_GROUP >= 1) {
        const int per_group = TILE_GROUP * tiles_n, group = index / per_group, in_group = index % per_group;
        const int first = group * TILE_GROUP, rows = min(tiles_m - first, TILE_GROUP);
        tile_m = first + in_group % rows;
        tile_n = in_group / rows;
        if constexpr (TILE_ORDER == LAB_RASTER_SNAKE)
            if (group & 1) tile_n = tiles_n - 1 - tile_n;
    } else {
        tile_m = index / tiles_n;
        tile_n = index % tiles_n;
    }
}

// The origin (row0, col0) of block `rank`'s TILE_M x TILE_N part of cluster tile `index`, for clusters of SIZE blocks
// stacked along M (a cluster tile is SIZE * TILE_M x TILE_N, its tiles in TILE_ORDER over cluster_rows x tiles_n).
template <int TILE_ORDER, int TILE_GROUP, int SIZE, int TILE_M, int TILE_N>
__device__ __forceinline__ void lab_cluster_tile_origin(int index, int cluster_rows, int tiles_n, unsigned rank,
                                                        int& row0, int& col0) {
    int cluster_m, tile_n;
    lab_tile_coords<TILE_ORDER, TILE_GROUP>(index, cluster_rows, tiles_n, cluster_m, tile_n);
    row0 = (SIZE * cluster_m + static_cast<int>(rank)) * TILE_M;
    col0 = tile_n * TILE_N;
}
