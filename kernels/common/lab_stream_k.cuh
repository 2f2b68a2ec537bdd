// Stream-K's split of the work (gemm_tc rungs 07 and 12): which tiles are spread along K and which piece of which
// tile each worker does, in what order. A worker is a block (rung 07) or a cluster of CLUSTER_SIZE blocks that
// walk the same pieces of a pair tile together (rung 12): P = gridDim.x / CLUSTER_SIZE workers. The rungs' headers
// say why the pieces come in this order; the knobs arrive as template parameters (named apart from the SK_* -D
// options that set them).
#pragma once

// WAVES: full waves added to the stream-K region besides the last partial one; FIXUP_COST: the fix-up's cost in
// hundredths of a tile-time at 64 k-tiles (scaled by 64 / k_tiles); MIN_GAIN: split only where the model predicts
// at least this speed-up, in percent (0: whenever the tiles are not a multiple of P).
template <int CLUSTER_SIZE, int WAVES, int FIXUP_COST, int MIN_GAIN>
struct LabStreamK {
    int tiles, k_tiles, sk_tiles;
    long long sk_iters;

    __device__ static unsigned workers() { return gridDim.x / CLUSTER_SIZE; }

    __device__ LabStreamK(int tiles_, int k_tiles_) : tiles(tiles_), k_tiles(k_tiles_) {
        const int p = static_cast<int>(workers());
        // The model, in hundredths of a tile-time: data-parallel takes ceil(T / P) rounds, stream-K T / P plus the
        // fix-up (written once, read once per cut tile: a fixed cost, so a smaller share of a longer tile).
        const long long dp = 100LL * ((tiles + p - 1) / p);
        const long long sk = 100LL * tiles / p + 64LL * FIXUP_COST / k_tiles;
        const bool split = tiles % p != 0 && 100 * dp >= MIN_GAIN * sk;
        sk_tiles = split ? min(tiles, tiles % p + WAVES * p) : 0;
        sk_iters = static_cast<long long>(sk_tiles) * k_tiles;
    }
    // The first k-tile (over the stream-K region's tiles, in order) of worker w's range; w's range ends at begin(w + 1).
    __device__ long long begin(int w) const { return sk_iters * w / workers(); }

    // f(tile, k0, k1) for each piece of worker w's work, in the order the worker does it: the contribution (the
    // range's last piece, when it ends inside a tile), the whole tiles of the range, the piece the range starts
    // inside (the tail of a tile, whose owner this worker is), then the worker's data-parallel tiles. Every piece
    // has k1 > k0. One call site for f (a lambda that holds the whole main loop): the pieces are numbered and
    // decoded in one loop, since each extra call site is another inlined copy of the main loop and its registers.
    template <class F>
    __device__ void for_each_piece(int w, F&& f) const {
        long long lo = begin(w), hi = begin(w + 1);
        int contrib_tile = 0, contrib_k0 = 0, contrib_k1 = 0;
        if (hi > lo) {
            const int tile = static_cast<int>((hi - 1) / k_tiles);
            const long long tile_start = static_cast<long long>(tile) * k_tiles;
            if (hi - tile_start < k_tiles) {
                const long long from = max(lo, tile_start);
                contrib_tile = tile;
                contrib_k0 = static_cast<int>(from - tile_start);
                contrib_k1 = static_cast<int>(hi - tile_start);
                hi = from;
            }
        }
        const int tail_tile = static_cast<int>(lo / k_tiles), tail_k0 = static_cast<int>(lo % k_tiles);
        const int tail = hi > lo && tail_k0 > 0;  // it then runs to the end of its tile: hi is a tile boundary
        const int first_whole = static_cast<int>((lo + k_tiles - 1) / k_tiles);
        const int whole = max(static_cast<int>(hi / k_tiles) - first_whole, 0);
        const int contrib = contrib_k1 > 0, dp = sk_tiles + w < tiles ? (tiles - 1 - sk_tiles - w) / workers() + 1 : 0;
        for (int i = 0, n = contrib + whole + tail + dp; i < n; ++i) {
            int tile = 0, k0 = 0, k1 = k_tiles, j = i;
            if (j < contrib) {
                tile = contrib_tile, k0 = contrib_k0, k1 = contrib_k1;
            } else if ((j -= contrib) < whole) {
                tile = first_whole + j;
            } else if ((j -= whole) < tail) {
                tile = tail_tile, k0 = tail_k0;
            } else {
                tile = sk_tiles + w + (j - tail) * static_cast<int>(workers());
            }
            f(tile, k0, k1);
        }
    }
};
