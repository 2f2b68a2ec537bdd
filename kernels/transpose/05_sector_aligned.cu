// transpose / rung 05 — sector-aligned writes: every 32-byte output sector is written by one block.
//
// What changed (from rung 03's padded tile): the block's output patch is no longer a TILE x TILE square
//   of the matrix but, in each output row, the TILE elements that start at the first 32-byte boundary
//   of its column range. When the output's rows are not a multiple of 8 floats long, each output row
//   starts at a different offset within a sector, so the patch's left edge is ragged (shifted left by
//   0-7 elements per row); the block stages TILE + HALO input rows (HALO = 8) to cover it, and the last
//   block of a row writes up to its end (at most TILE + 7 elements). Aligned outputs take HALO = 0: the
//   same work as rung 03.
// Why: with a square patch and misaligned rows, the sector at each patch edge is written half by one
//   block and half by its neighbour, at different times. L2 must then merge partial sectors, and a
//   sector that reaches DRAM partly written can cost a read before the write (with ECC on, as on the
//   H200, a partial write is a read-modify-write). Rung 03 runs sides that are not a multiple of 8 well
//   under its aligned speed, in a sawtooth with the row alignment. Here every sector is whole when written.
// Prediction: misaligned sides close most of the gap to aligned ones: ~0.85-0.9x of the device copy
//   (rung 03 runs ~0.65-0.8 of it there), the rest being the halo's extra input rows (8 of 72, mostly L2
//   hits: its neighbour reads them too) and the input side, whose rows stay misaligned (reads of partial
//   sectors cost L2 bandwidth, not a DRAM read-modify-write). Aligned sides: as rung 03, within noise.
// Requires: any shape, sm_75+; `out_shift` = (output address / 4) mod 8, from the launcher, so that
//   alignment is judged on the real address (the checks place outputs off 32-byte boundaries).
// Knobs: TILE (64), BLOCK_ROWS (4).
#ifndef TILE
#define TILE 64
#endif
#ifndef BLOCK_ROWS
#define BLOCK_ROWS 4
#endif
#define HALO 8  // a 32-byte sector holds 8 floats: the ragged edge is at most 7 elements

// One block's work with H extra input rows staged (0: aligned output rows, the square patch of rung 03;
// HALO: the ragged patch). A template, so both loops keep compile-time trip counts and unroll fully.
template <int H>
__device__ __forceinline__ void transpose_block(const float* __restrict__ in, float* __restrict__ out, int rows,
                                                int cols, int out_shift, float (*tile)[TILE + 1]) {
    const int r0 = blockIdx.y * TILE;  // the block's input rows = output columns, before the ragged shift
    const int c0 = blockIdx.x * TILE;  // the block's input columns = output rows
    const int c = c0 + threadIdx.x;
#pragma unroll
    for (int k = 0; k < TILE + H; k += BLOCK_ROWS) {
        const int r = r0 - H + threadIdx.y + k;
        if (c < cols && r >= 0 && r < rows) tile[threadIdx.y + k][threadIdx.x] = in[(long long)r * cols + c];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; k += BLOCK_ROWS) {
        const int orow = c0 + threadIdx.y + k;  // output row = input column
        // This block writes [begin, end) of the output row: from the first sector boundary at or after r0 - 7
        // to the one at or after r0 + TILE - 7 (the next block's begin), or the row's end for the last block.
        // The row's start in floats past a 32-byte boundary, mod 8 (exact in 32-bit arithmetic).
        const int phase = ((orow & 7) * (rows & 7) + out_shift) & 7;
        const int begin = (H == 0 || r0 == 0) ? r0 : r0 - ((phase + r0) & 7);
        const int end = r0 + TILE >= rows ? rows : (H == 0 ? r0 + TILE : r0 + TILE - ((phase + r0 + TILE) & 7));
        if (orow < cols) {
#pragma unroll
            for (int pass = 0; pass < (H == 0 ? 1 : 2); ++pass) {  // at most TILE + 7 elements: two passes
                const int r = begin + threadIdx.x + pass * TILE;
                if (r < end) out[(long long)orow * rows + r] = tile[r - r0 + H][threadIdx.y + k];
            }
        }
    }
}

extern "C" __global__ void transpose_sector_aligned(const float* __restrict__ in, float* __restrict__ out, int rows,
                                                    int cols, int out_shift) {
    // BEGIN SOLUTION: stage TILE (+ HALO) input rows in a padded tile, sync, write each output row's sector-aligned run.
    __shared__ float tile[TILE + HALO][TILE + 1];
    if (((rows | out_shift) & 7) == 0)  // every output row starts on a sector boundary: rung 03's square patch
        transpose_block<0>(in, out, rows, cols, out_shift, tile);
    else
        transpose_block<HALO>(in, out, rows, cols, out_shift, tile);
    // END SOLUTION
}
