// transpose / rung 02 — shared-memory tiled.
//
// What changed: the block loads a TILE x TILE patch into shared memory with coalesced row reads,
//   synchronizes, then writes the transposed patch with coalesced row writes, reading shared
//   memory down a column.
// Why: both global directions are now coalesced. But the column read of a float[32][32] tile hits
//   the same bank 32 times (row stride 32 words = 0 mod 32 banks): a 32-way bank conflict.
// Prediction: well above rung 01 (global writes are full sectors now), still short of the copy
//   ceiling because every shared-memory read is replayed 32 times.
// Measured (H200): ~0.43x of the device copy; Nsight counts ~65 M shared-load bank conflicts at
//   8192x8192, ~200x rung 03's.
// Tails: threads outside the matrix neither load nor store; the tile's stale entries are never
//   written out. Requires: any shape, sm_75+. Knobs: TILE (32), BLOCK_ROWS (8).
#ifndef TILE
#define TILE 32
#endif
#ifndef BLOCK_ROWS
#define BLOCK_ROWS 8
#endif

extern "C" __global__ void transpose_smem_tiled(const float* __restrict__ in, float* __restrict__ out, int rows,
                                                int cols) {
    // BEGIN SOLUTION: stage the block's patch in a TILE x TILE shared tile, sync, write it out transposed, coalesced.
    __shared__ float tile[TILE][TILE];
    int c = blockIdx.x * TILE + threadIdx.x;
    int r = blockIdx.y * TILE + threadIdx.y;
#pragma unroll
    for (int k = 0; k < TILE; k += BLOCK_ROWS)
        if (c < cols && r + k < rows) tile[threadIdx.y + k][threadIdx.x] = in[(long long)(r + k) * cols + c];
    __syncthreads();
    // The block's output patch: output row = input column.
    c = blockIdx.y * TILE + threadIdx.x;  // output column = input row
    r = blockIdx.x * TILE + threadIdx.y;  // output row = input column
#pragma unroll
    for (int k = 0; k < TILE; k += BLOCK_ROWS)
        if (c < rows && r + k < cols) out[(long long)(r + k) * rows + c] = tile[threadIdx.x][threadIdx.y + k];
    // END SOLUTION
}
