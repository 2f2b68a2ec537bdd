// transpose / rung 03 — padded shared memory: no bank conflicts.
//
// What changed: one word of padding per tile row, float tile[TILE][TILE + 1].
// Why: the row stride becomes 33 words, so walking down a column steps one bank at a time and the
//   warp's 32 reads land in 32 different banks. Cost: 32 words of wasted shared memory per tile.
// Prediction: shared-memory replays vanish (Nsight: bank conflicts ~0); the kernel should sit at
//   ~85-95% of the device copy, the remaining gap being the tile's barrier and the short per-thread
//   work (TILE/BLOCK_ROWS elements).
// Measured (H200, results/h200/transpose.json): ~0.93x of the device copy at 8192x8192, the best
//   rung; Nsight: bank conflicts fall ~200x against rung 02 (a residue remains, not zero).
//   The tail plot shows a sawtooth: sides that are not a multiple of 8 floats run ~0.65x, because
//   rows then start off 32-byte sector boundaries and every row segment is split across sectors
//   written by two different blocks. Not fixed here; the next step is row-aligned (pitched) storage.
// Knob sweep (H200 8192x8192): TILE=64 with BLOCK_ROWS=4 is the launcher's default,
//   ~0.93x of the device copy against ~0.85x for the classic 32x8 (results/h200/knobs.json):
//   64-float rows give DRAM 256-byte runs on both sides, and each thread moves 16 elements.
// Tails: as rung 02. Requires: any shape, sm_75+. Knobs: TILE (32), BLOCK_ROWS (8).
#ifndef TILE
#define TILE 32
#endif
#ifndef BLOCK_ROWS
#define BLOCK_ROWS 8
#endif

extern "C" __global__ void transpose_padded(const float* __restrict__ in, float* __restrict__ out, int rows,
                                            int cols) {
    // TODO: stage the block's patch in a padded TILE x (TILE + 1) shared tile, sync, write it out transposed.
}
